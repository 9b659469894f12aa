"""Seed 003 §4, trade-offs under load: paced closed-loop clients, eventual against
consistent reads, over client groups, read ratios and repeats.

The paper ran 1 to 25 client machines of 100 clients each, every client sending one read or
write per second and waiting for its reply, at read ratios 99, 75 and 50 %, each load for
five minutes once an hour for a day. Here a *cell* is one paced load step (``LoadSpec.paced``)
at one (read ratio, consistency, groups, repeat); repeats use their own seeds, the same one
for eventual and consistent reads so that the two see the same arrivals. The figures and the
paper's observations come from :mod:`replicalab.checkers.tradeoff`.

Where cells run: on a simulated store each cell is a simulation in virtual time (all its
groups share the one simulated service, so its capacity is shared as SimpleDB's was), run as
independent jobs on ``workers`` local processes or a Ray cluster (``runtime/parallel.py``);
each client group is one simulated client machine with its own core (``clients_per_machine``
is set to the group size unless the URL sets it). On a real store cells run one after the
other in real time, each step's groups dealt out to ``workers`` local processes or Ray
actors (``workloads/distributed.py``), one per node, as the paper's groups were machines.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replicalab.checkers.tradeoff import SCHEMA_VERSION, observations, points
from replicalab.errors import ParameterError
from replicalab.history.rundir import Run, make_run_dir, save_results
from replicalab.runtime.parallel import JobFailed, Workers
from replicalab.stores import open_store
from replicalab.stores.base import redact_url
from replicalab.workloads.distributed import Pool, StepInterrupted
from replicalab.workloads.load import LoadSpec, run_worker
from replicalab.workloads.load_runner import merge_step

CONSISTENCIES = ("eventual", "consistent")
MAX_CELLS = 2000


@dataclass(frozen=True)
class TradeoffPlan:
    """The grid of seed 003 §4 (defaults: the paper's, three repeats of 30 s instead of 24
    of five minutes); times in s, rates per s."""

    store: str = "sim://simpledb"
    groups: tuple[int, ...] = (1, 5, 10, 15, 20, 25)
    clients_per_group: int = 100
    client_rate_per_s: float = 1.0
    read_ratios: tuple[float, ...] = (0.99, 0.75, 0.5)
    consistencies: tuple[str, ...] = CONSISTENCIES
    repeats: int = 3
    step_duration_s: float = 30.0
    keyspace: int = 1  # the paper read and wrote one attribute of one item
    timeout_ms: float = 10_000.0
    seed: int = 1

    def check(self) -> None:
        """Raise ParameterError naming the first invalid parameter (as ``tradeoff`` names
        it) and its fix."""
        if not self.groups or min(self.groups) < 1:
            raise ParameterError("groups", "must list client groups of at least 1, e.g. "
                                           "1,5,10")
        bad = [c for c in self.consistencies if c not in CONSISTENCIES]
        if bad or not self.consistencies:
            raise ParameterError("consistency", f"{','.join(bad) or '(none)'}: use "
                                                "eventual, consistent or both")
        if not self.read_ratios or not all(0 <= r <= 1 for r in self.read_ratios):
            raise ParameterError("read_ratios", "must be fractions in 0..1, e.g. "
                                                "0.99,0.75,0.5")
        if self.repeats < 1:
            raise ParameterError("repeats", f"{self.repeats} must be at least 1")
        if len(self.cells()) > MAX_CELLS:
            raise ValueError(f"the grid has {len(self.cells())} steps, more than {MAX_CELLS}; "
                             "list fewer groups, ratios or repeats")
        self.spec(self.read_ratios[0], self.consistencies[0], max(self.groups), 0).check()

    def cells(self) -> list[tuple[float, str, int, int]]:
        """Return every (read ratio, consistency, groups, repeat) of the grid, in run
        order."""
        return [(r, c, g, k) for k in range(self.repeats) for r in self.read_ratios
                for g in self.groups for c in self.consistencies]

    def spec(self, read_ratio: float, consistency: str, groups: int, repeat: int) -> LoadSpec:
        """Return the paced load of one cell."""
        return LoadSpec.paced(
            placed(self.store, self.clients_per_group), groups, self.clients_per_group,
            self.client_rate_per_s, duration_s=self.step_duration_s, read_ratio=read_ratio,
            keyspace=self.keyspace, consistency=consistency, timeout_ms=self.timeout_ms,
            drain_s=self.timeout_ms / 1000, seed=self.seed * 1000 + repeat)


def placed(url: str, clients_per_group: int) -> str:
    """Return ``url`` with each client group on a client machine of its own: for
    ``sim://simpledb`` (whose clients otherwise share one machine's core) add
    ``clients_per_machine`` unless the URL sets it; other URLs are returned as they are."""
    parts = urlsplit(url)
    if parts.scheme != "sim" or (parts.netloc or parts.path.lstrip("/")) != "simpledb":
        return url
    if "clients_per_machine" in parse_qs(parts.query):
        return url
    return url + ("&" if parts.query else "?") + f"clients_per_machine={clients_per_group}"


def run_cell(spec: LoadSpec) -> dict[str, Any]:
    """Run one simulated cell in this process and return its step summary (the history is
    not kept: a cell of 2,500 clients records 75,000 operations a step)."""
    result = run_worker(spec)
    step = merge_step([result], spec.rate_per_s, spec.duration_s)
    if result.error:
        raise RuntimeError(f"a step on {redact_url(spec.store)} failed: {result.error}")
    return step


def _cell(plan: TradeoffPlan, cell: tuple[float, str, int, int], step: dict[str, Any]
          ) -> dict[str, Any]:
    ratio, consistency, groups, repeat = cell
    return {"read_ratio": ratio, "consistency": consistency, "groups": groups,
            "repeat": repeat, "clients": groups * plan.clients_per_group, "step": step}


Progress = Callable[[float, str | None], None]


def run_tradeoff(plan: TradeoffPlan, out: Path, workers: int = 1,
                 ray_address: str | None = None,
                 progress: Callable[[], AbstractContextManager[Progress]] | None = None,
                 on_start: Callable[[int, str], None] | None = None) -> Run:
    """Run the grid of ``plan`` and save it under ``out`` (``results.json`` with every
    cell, the points and the observations); returns even when interrupted, with what was
    done (see Run). ValueError for bad input; ``on_start(pid, label)`` is told of every
    worker process started. ``progress()`` is entered once the worker processes are
    started (they are forked: before a progress bar's thread) and yields a callable
    told the fraction done and, at times, what runs."""
    plan.check()
    store = open_store(plan.store, plan.seed)  # fail fast on a bad URL
    virtual = store.runtime.virtual
    cells = plan.cells()
    # the workers first: Ray missing or out of reach is bad input, refused before a run
    # directory is made
    pool: Workers | Pool = (Workers(workers, ray_address, on_start=on_start) if virtual
                            else Pool(workers, ray_address))
    try:
        run_dir = make_run_dir(out, "tradeoff", plan.store)
    except BaseException:
        pool.close()
        raise
    done: dict[int, dict[str, Any]] = {}
    interrupted, error = False, ""
    wall0 = time.perf_counter()

    tick: Progress = lambda _f, _w: None  # noqa: E731
    opened = progress if progress is not None else contextlib.nullcontext

    def tell(i: int, step: dict[str, Any]) -> None:
        done[i] = _cell(plan, cells[i], step)
        tick(len(done) / len(cells), None)

    pool_info: dict[str, Any]
    try:
        if isinstance(pool, Workers):
            pool_info = pool.describe()
            try:
                pool.start(len(cells))
                with opened() as bar:
                    tick = bar or tick
                    tick(0.0, f"{len(cells)} steps, {pool.kind} x{pool.workers}")
                    pool.map(run_cell, [(plan.spec(*c),) for c in cells], tell)
            finally:
                pool.close()
        else:
            steps = pool
            pool_info = steps.describe()
            try:
                with opened() as bar:
                    tick = bar or tick
                    for i, c in enumerate(cells):
                        tick(i / len(cells), f"step {i + 1} of {len(cells)}: {c[2]} "
                             f"groups, {c[1]}, read ratio {c[0]:g}")
                        spec = plan.spec(*c)
                        results = steps.run_step(spec)
                        failed = [r.error for r in results if r.error]
                        if failed:
                            error = "; ".join(sorted(set(failed)))
                            break
                        tell(i, merge_step(results, spec.rate_per_s, spec.duration_s))
            finally:
                steps.close()
    except (KeyboardInterrupt, StepInterrupted):
        interrupted, error = True, "interrupted"
        pool_info = {}
    except JobFailed as err:  # a step failed: keep the ones done, say which and why
        error, pool_info = str(err).splitlines()[0], {}
    finished = [done[i] for i in sorted(done)]
    pts = points(finished)
    results = {
        "schema_version": SCHEMA_VERSION, "workload": "tradeoff",
        "store": redact_url(plan.store), "placed_store": redact_url(
            placed(plan.store, plan.clients_per_group)),
        "runtime": "virtual" if virtual else "real",
        "plan": {**asdict(plan), "store": redact_url(plan.store)}, "workers": pool_info,
        "wall_s": round(time.perf_counter() - wall0, 3),
        "cells": finished, "points": pts, "observations": observations(pts),
        "complete": len(finished) == len(cells), "error": error}
    save_results(results, run_dir)
    return Run(run_dir, results, interrupted, error)

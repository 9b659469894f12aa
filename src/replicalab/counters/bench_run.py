"""Plan and run a whole counter bench on freshly started data centres; save as it goes.

:func:`plan` turns a :class:`BenchSpec` into bounded points (see :mod:`bench`);
:func:`run_bench` starts one store per data centre (``topology.start``), deploys each
configuration in turn, runs its points and writes ``results.json`` after every point, so an
interrupted or failed run keeps everything measured so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from replicalab.cluster import datacentres as topology
from replicalab.counters.bench import (
    CONFIGS,
    EXPERIMENTS,
    MIDDLEWARES,
    SCHEMA_VERSION,
    PointSpec,
    run_point,
)
from replicalab.counters.bench_deploy import open_deployment
from replicalab.counters.faults import FAULTS, quiet_drivers
from replicalab.errors import ParameterError
from replicalab.regions import region_set

CONVERGE_S = 5.0
"""Base wait for the DCs to agree on every counter after the clients stop (s)."""


@dataclass(frozen=True)
class BenchSpec:
    """Everything that defines a bench run (saved in results.json)."""

    store: str = "redis"
    configs: tuple[str, ...] = CONFIGS
    experiments: tuple[str, ...] = EXPERIMENTS
    clients: tuple[int, ...] = (3, 15, 30)
    counters: tuple[int, ...] = (1, 100)
    duration_s: float = 20.0
    think_ms: float = 100.0
    inc_fraction: float = 0.2
    initial: int = 1_000_000
    low_load_clients: int = 15
    exhaust_initial: int = 6000
    exhaust_clients: int = 30
    exhaust_max_s: float = 120.0
    violation_initial: int = 100
    sync_ms: float = 200.0
    regions: str = "dc3"
    seed: int = 1
    fault_dc: str = ""  # the DC cut off or lost (default: the last one)
    fault_at_s: float = 1.0
    fault_for_s: float = 5.0
    fault_initial: int = 600

    def check(self) -> None:
        """Raise ParameterError naming the first invalid parameter (as ``counter_bench``
        names it) and its fix."""
        if self.store not in topology.KINDS:
            raise ParameterError("kind", f"{self.store!r}: use one of "
                                         f"{', '.join(topology.KINDS)}")
        for c in self.configs:
            if c not in CONFIGS:
                raise ParameterError("configs", f"{c!r}: unknown configuration; use some of "
                                                f"{', '.join(CONFIGS)}")
        for e in self.experiments:
            if e not in EXPERIMENTS:
                raise ParameterError("experiments", f"{e!r}: unknown experiment; use some of "
                                                    f"{', '.join(EXPERIMENTS)}")
        if not self.configs or not self.experiments:
            raise ValueError("give at least one configuration and one experiment")
        if not self.clients or any(c < 1 for c in self.clients):
            raise ParameterError("clients", f"{list(self.clients)}: give positive client "
                                            "counts, e.g. 3,15,30")
        if not self.counters or any(k < 1 for k in self.counters):
            raise ParameterError("counters", f"{list(self.counters)}: give positive counts, "
                                             "e.g. 1,100")
        for name, value in (("duration", self.duration_s), ("exhaust_max", self.exhaust_max_s),
                            ("sync_ms", self.sync_ms)):
            if not value > 0:
                raise ParameterError(name, f"{value:g} must be positive")
        if self.think_ms < 0 or not 0 <= self.inc_fraction <= 1:
            raise ParameterError("think_ms", "must not be negative and {inc_fraction} must "
                                             "be in [0, 1]", {"inc_fraction": "inc_fraction"})
        if min(self.low_load_clients, self.exhaust_clients) < 1:
            raise ParameterError("low_load_clients", "and {exhaust_clients} must be at least 1",
                                 {"exhaust_clients": "exhaust_clients"})
        if min(self.initial, self.exhaust_initial, self.violation_initial,
               self.fault_initial) < 1:
            raise ValueError("initial values must be at least 1")
        dcs = region_set(self.regions).regions
        faulted = [e for e in self.experiments if e in FAULTS]
        if faulted:
            if self.store == "cassandra":
                raise ParameterError("experiments", f"{','.join(faulted)}: faults between "
                                                    "data centres need one store per DC; use "
                                                    "{kind} redis, postgresql or sim",
                                     {"kind": "kind"})
            if not any(c in MIDDLEWARES for c in self.configs):
                raise ParameterError("experiments", f"{','.join(faulted)} fault the Bounded "
                                                    "Counter's middlewares: add one of "
                                                    f"{', '.join(MIDDLEWARES)} to {{configs}}",
                                     {"configs": "configs"})
            if self.fault_dc and self.fault_dc not in dcs:
                raise ParameterError("fault_dc", f"{self.fault_dc!r}: use one of "
                                                 f"{', '.join(dcs)}")
            if not (self.fault_at_s >= 0 and self.fault_for_s > 0):
                raise ParameterError("fault_at", "must not be negative and {fault_for} must "
                                                 "be positive", {"fault_for": "fault_for"})
            if self.fault_at_s + self.fault_for_s >= self.exhaust_max_s:
                raise ParameterError("fault_at", f"+ {{fault_for}} "
                                                 f"({self.fault_at_s + self.fault_for_s:g} s) "
                                                 "must end before {exhaust_max} "
                                                 f"({self.exhaust_max_s:g} s), which caps a "
                                                 "fault point",
                                     {"fault_for": "fault_for", "exhaust_max": "exhaust_max"})

    def server_settings(self) -> dict[str, str] | None:
        """Return the store settings the data centres need: with a ``dc-loss`` experiment a
        Redis DC writes an append-only file, so that its killed server restarts with every
        write it acknowledged (the seed's DC "never loses its state"; PostgreSQL keeps its
        WAL anyway)."""
        if "dc-loss" in self.experiments and self.store == "redis":
            return {"appendonly": "yes", "appendfsync": "no"}
        return None


def exhaust_config(spec: BenchSpec) -> str | None:
    """Return the configuration the exhaustion experiment runs (the seed's BCsrv)."""
    for c in ("server-based+batch", "server-based", "client-based"):
        if c in spec.configs:
            return c
    return None


def plan(spec: BenchSpec) -> list[PointSpec]:
    """Return the points of ``spec`` in run order (grouped by configuration)."""
    base = PointSpec("throughput", spec.configs[0], 1, think_ms=spec.think_ms,
                     inc_fraction=spec.inc_fraction, initial=spec.initial,
                     duration_s=spec.duration_s)
    points: list[PointSpec] = []
    for config in spec.configs:
        b = replace(base, config=config)
        if "throughput" in spec.experiments:
            points += [replace(b, clients=c, counters=k) for k in spec.counters
                       for c in spec.clients]
        if "regions" in spec.experiments:
            points.append(replace(b, experiment="regions", clients=spec.low_load_clients))
        if "violations" in spec.experiments:
            points += [replace(b, experiment="violations", clients=c, inc_fraction=0.0,
                               initial=spec.violation_initial, until_exhausted=True)
                       for c in spec.clients]
        if "exhaust" in spec.experiments and config == exhaust_config(spec):
            points.append(replace(b, experiment="exhaust", clients=spec.exhaust_clients,
                                  inc_fraction=0.0, initial=spec.exhaust_initial,
                                  duration_s=spec.exhaust_max_s, until_exhausted=True))
        if config in MIDDLEWARES:
            points += [replace(b, experiment=f, clients=spec.exhaust_clients, inc_fraction=0.0,
                               initial=spec.fault_initial, duration_s=spec.exhaust_max_s,
                               until_exhausted=True, fault=f, fault_dc=spec.fault_dc,
                               fault_at_s=spec.fault_at_s, fault_for_s=spec.fault_for_s)
                       for f in FAULTS if f in spec.experiments]
    return [replace(p, seed=spec.seed * 10_007 + i) for i, p in enumerate(points)]


def _rtt_to_home_ms(regions: str) -> dict[str, float]:
    rs = region_set(regions)
    home = rs.regions[0]
    return {dc: (0.0 if dc == home else rs.one_way_ms(dc, home)[0]
                 + rs.one_way_ms(home, dc)[0]) for dc in rs.regions}


@dataclass
class BenchRun:
    """Where a bench was saved and what it measured."""

    results: dict[str, Any]
    interrupted: bool = False
    error: str = ""
    points: list[dict[str, Any]] = field(default_factory=list)


def new_results(spec: BenchSpec) -> dict[str, Any]:
    """Return the results skeleton of a bench (filled point by point)."""
    rs = region_set(spec.regions)
    return {"schema_version": SCHEMA_VERSION, "kind": "counter-bench",
            "title": f"Bounded Counter bench on {spec.store} ({spec.regions})",
            "spec": asdict(spec), "dcs": list(rs.regions), "home": rs.regions[0],
            "rtt_to_home_ms": _rtt_to_home_ms(spec.regions),
            "exhaust_config": exhaust_config(spec),
            "points": [], "notes": [], "interrupted": False, "error": "", "wall_s": 0.0}


OVERHEAD_S = 3.0
"""Expected wall seconds a point spends beyond its duration (deploy, create, converge) until
the bench has measured its own; the progress estimate uses it."""


async def _run_all(spec: BenchSpec, topo: Any, points: list[PointSpec],
                   results: dict[str, Any], save: Callable[[], None],
                   progress: Callable[[float, str], None] | None) -> None:
    # progress is wall time done over wall time expected: points finished take what they
    # took, the rest their duration plus the mean overhead measured so far
    wall0 = time.monotonic()
    overheads: list[float] = []
    prefix = f"b{os.getpid()}x{int(time.time()) % 100_000}"
    for k, p in enumerate(points):
        # a fresh deployment per point: background sync and rights traffic of earlier
        # points' counters must not load this one
        t_point = time.monotonic()
        try:
            dep = await open_deployment(p.config, topo, sync_ms=spec.sync_ms, seed=p.seed)
        except (ValueError, OSError) as err:
            results["notes"].append(f"{p.label()}: not run, could not deploy ({err})")
            continue
        extra = sum(overheads) / len(overheads) if overheads else OVERHEAD_S
        rest = sum(q.duration_s + extra for q in points[k + 1:])
        what = f"point {k + 1}/{len(points)}: {p.label()}"

        def tick(frac: float, t_point: float = t_point, rest: float = rest,
                 w: float = p.duration_s + extra, what: str = what) -> None:
            if progress is not None:
                done_s = t_point - wall0 + frac * w
                progress(min(1.0, done_s / (t_point - wall0 + w + rest)), what)

        tick(0.0)
        with quiet_drivers(p.fault):
            try:
                r = await run_point(dep, topo.dcs, p, prefix,
                                    converge_s=CONVERGE_S + 10 * spec.sync_ms / 1000,
                                    tick=tick, topo=topo)
            finally:
                await dep.close()
        results["points"].append(r.to_json())
        save()
        if r.interrupted:  # saved: now stop as asked
            raise asyncio.CancelledError
        overheads.append(max(0.0, time.monotonic() - t_point - p.duration_s))


def run_bench(spec: BenchSpec, save: Callable[[dict[str, Any]], None],
              progress: Callable[[float, str], None] | None = None,
              root: Path | None = None) -> BenchRun:
    """Run ``spec`` on data centres started for it (stopped at the end whatever happens);
    ``save(results)`` is called after every point and at the end; ``progress(fraction,
    what)`` gets the estimated fraction of the wall time done and the point running. Returns
    even when interrupted or when a store fails mid-run (see BenchRun); ValueError when the
    options are invalid or the data centres cannot be started."""
    spec.check()
    points = plan(spec)
    results = new_results(spec)
    wall0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="replicalab-counter-bench-", dir=root))
    tmp.chmod(0o755)  # PostgreSQL runs as its own user and must reach its data directory
    name = f"cbench{os.getpid()}{int(time.time()) % 100_000}"
    interrupted, error = False, ""

    def saver() -> None:
        results["wall_s"] = round(time.perf_counter() - wall0, 3)
        save(results)

    try:
        topo = topology.start(spec.store, tmp, name, spec.regions, spec.server_settings())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        asyncio.run(_run_all(spec, topo, points, results, saver, progress))
    except KeyboardInterrupt:
        interrupted, error = True, "interrupted"
    except Exception as err:  # a store failed: keep what was measured, say why
        error = f"{type(err).__name__}: {err}"
        results["error_traceback"] = traceback.format_exc()
    finally:
        with contextlib.suppress(Exception):
            topo.down()
        shutil.rmtree(tmp, ignore_errors=True)
    results["interrupted"], results["error"] = interrupted, error
    if error:
        results["notes"].append(f"run cut short: {error}")
    saver()
    if progress is not None:
        progress(1.0, "stopping the data centres")
    return BenchRun(results, interrupted, error, results["points"])


__all__ = ["MIDDLEWARES", "BenchRun", "BenchSpec", "exhaust_config", "new_results", "plan",
           "run_bench"]

"""Batches of probe runs: ``--repeats N`` (one seed each) over a ``--sweep`` of parameter
values, each run an ordinary probe with its own run directory, run one after another or on
every core or a Ray cluster (``runtime.parallel``), then merged into figures with their
spread across runs (``checkers.spread``).

A batch directory ``<UTC time>-batch-<workload>-<store>/`` holds ``batch.json`` (the plan,
every run's figures and the merged figures: no wall-clock data, so the same batch gives the
same file wherever it ran), ``config.json`` (where and how long it ran), ``report.html``
and ``runs/<label>/``, one probe run directory per run (``replicalab report`` reads them).
Merged figures depend only on the runs' results: a batch and the same runs made one by one
with ``probe --seed`` merge to the same figures.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from replicalab.checkers.spread import common_figures, merge_figures
from replicalab.errors import ParameterError
from replicalab.history.rundir import Run, make_run_dir
from replicalab.runtime.virtual import stop_requested
from replicalab.workloads import registry
from replicalab.workloads.runner import ProbeSpec, run_probe

SCHEMA_VERSION = 1
MAX_RUNS = 100_000


@dataclass(frozen=True)
class Axis:
    """One ``--sweep key=v1,v2,...``: a parameter and the values it takes, as typed."""

    key: str
    values: tuple[str, ...]


def parse_axis(text: str) -> Axis:
    """Return the Axis of ``key=v1,v2,...`` (ValueError naming the expected form)."""
    key, sep, rest = text.partition("=")
    key = key.strip().removeprefix("--").replace("-", "_")
    values = tuple(v.strip() for v in rest.split(",") if v.strip())
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or not values:
        raise ParameterError("sweep", f"{text!r}: give KEY=V1,V2,..., e.g. read_rate=10,50 or "
                                      "flush_ms=300,500 (a probe option, a workload option or "
                                      "a parameter of the store URL)")
    if len(set(values)) != len(values):
        raise ParameterError("sweep", f"{text!r} repeats a value; give each once")
    return Axis(key, values)


@dataclass(frozen=True)
class PlannedRun:
    """One run of a batch: its directory name, its sweep point and seed, its probe."""

    label: str
    point: tuple[tuple[str, str], ...]
    seed: int
    spec: ProbeSpec


def _label(point: Sequence[tuple[str, str]], seed: int) -> str:
    parts = [f"{k}-{v}" for k, v in point] + [f"seed-{seed}"]
    return re.sub(r"[^A-Za-z0-9.=_-]+", "-", "_".join(parts))[:120]


def plan_runs(build: Callable[[dict[str, str]], ProbeSpec], axes: Sequence[Axis],
              repeats: int, seed: int) -> list[PlannedRun]:
    """Return every run of the batch: each point of the sweep (``build`` makes its probe
    from the point's values; ValueError names a bad one) with seeds ``seed`` ..
    ``seed + repeats - 1`` (the same seeds at every point)."""
    if repeats < 1:
        raise ParameterError("repeats", f"{repeats} must be at least 1")
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        raise ParameterError("sweep", "names a parameter twice; give each parameter once "
                                      "with all its values")
    points = list(itertools.product(*(a.values for a in axes)))
    if len(points) * repeats > MAX_RUNS:
        raise ValueError(f"the batch has {len(points) * repeats:,} runs; at most {MAX_RUNS:,}")
    runs = []
    for values in points:
        point = tuple(zip(keys, values, strict=True))
        base = build(dict(point))
        base.check()
        for r in range(repeats):
            s = seed + r
            runs.append(PlannedRun(_label(point, s), point, s,
                                   replace(base, options=replace(base.options, seed=s))))
    return runs


@dataclass
class RunOutcome:
    """What one run of a batch gave: where it was saved, its results, whether it was cut
    short; ``files`` carries its run directory back from a Ray node (relative path ->
    bytes), to be written by the command that started the batch."""

    label: str
    point: tuple[tuple[str, str], ...]
    seed: int
    run_dir: str
    results: dict[str, Any]
    interrupted: bool = False
    error: str = ""
    files: dict[str, bytes] | None = field(default=None, repr=False)
    stopped: bool = False
    """Ctrl-C reached the worker: the batch stops (the run may be whole, its report not
    rendered)."""


def run_planned(run: PlannedRun, runs_dir: str, pack: bool,
                render: Callable[[dict[str, Any], Path], Any] | None = None) -> RunOutcome:
    """Run one planned probe and return its outcome (a batch worker's job). It saves its
    run directory as ``runs_dir/<label>`` (with ``render(results, run_dir)``'s report, as
    ``replicalab probe`` writes one; not for a run cut short by Ctrl-C, which returns at
    once: ``replicalab report`` renders it), or, with ``pack`` (a Ray node that may not see
    this file system), returns the directory's files for the caller to write there."""
    target = Path(runs_dir) / run.label
    if not pack:
        probe = run_probe(run.spec, Path(runs_dir), name=run.label)
        if render is not None and not (probe.interrupted or stop_requested()):
            render(probe.results, probe.run_dir)
        return RunOutcome(run.label, run.point, run.seed, str(probe.run_dir), probe.results,
                          _cut_short(probe), probe.error, stopped=stop_requested())
    tmp = Path(tempfile.mkdtemp(prefix="replicalab-batch-"))
    try:
        probe = run_probe(run.spec, tmp, name=run.label)
        if render is not None and not (probe.interrupted or stop_requested()):
            render(probe.results, probe.run_dir)
        files = {str(p.relative_to(probe.run_dir)): p.read_bytes()
                 for p in sorted(probe.run_dir.rglob("*")) if p.is_file()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return RunOutcome(run.label, run.point, run.seed, str(target), probe.results,
                      _cut_short(probe), probe.error, files, stopped=stop_requested())


def _cut_short(probe: Run) -> bool:
    """Return whether the run was saved cut short: a Ctrl-C that came while a whole run was
    being saved stops the batch (``stopped``) but leaves that run whole."""
    return probe.interrupted and bool(probe.results.get("partial"))


def unpack(outcome: RunOutcome) -> None:
    """Write a packed run directory (from a Ray node) where the batch keeps it."""
    if outcome.files is None:
        return
    root = Path(outcome.run_dir).resolve()
    for rel, data in outcome.files.items():
        path = (root / rel).resolve()
        if root not in path.parents:
            raise ValueError(f"a packed run directory names a file outside it: {rel!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    outcome.files = None


def run_figures(results: dict[str, Any]) -> dict[str, Any]:
    """Return one run's figures: its workload's, then those every probe has."""
    wl = registry.get(results["workload"])
    own = wl.figures(results) if wl.figures is not None else {}
    return {**own, **common_figures(results)}


def run_series(results: dict[str, Any]) -> dict[str, list[float | None]]:
    """Return one run's per-period series (empty for workloads without any)."""
    wl = registry.get(results["workload"])
    return wl.series(results) if wl.series is not None else {}


def summarize(plan: Sequence[PlannedRun], outcomes: Sequence[RunOutcome],
              interrupted: bool = False) -> dict[str, Any]:
    """Return the batch's figures (pure: JSON-ready, no wall-clock data): per sweep point,
    in plan order, each run's figures and series and their merge across the point's runs.
    Runs that did not finish (an interrupted batch) are left out and counted."""
    by_label = {o.label: o for o in outcomes}
    points: list[dict[str, Any]] = []
    for point, group in itertools.groupby(plan, key=lambda r: r.point):
        runs = []
        for planned in group:
            o = by_label.get(planned.label)
            if o is None:
                continue
            runs.append({"label": o.label, "seed": o.seed, "interrupted": o.interrupted,
                         "error": o.error, "figures": _jsonable(run_figures(o.results)),
                         "series": run_series(o.results)})
        names: dict[str, None] = {}
        for r in runs:
            names.update(dict.fromkeys(r["series"]))
        points.append({
            "point": dict(point),
            "runs": runs,
            "merged": merge_figures([{k: tuple(v) if isinstance(v, list) else v
                                      for k, v in r["figures"].items()} for r in runs]),
            "series": {n: [r["series"].get(n, []) for r in runs] for n in names},
        })
    first = plan[0].spec if plan else None
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "batch",
        "workload": first.workload if first else "",
        "store": first.store if first else "",
        "duration_s": first.options.duration_s if first else 0,
        "seeds": sorted({r.seed for r in plan}),
        "sweep": {k: list(dict.fromkeys(v for r in plan for kk, v in r.point if kk == k))
                  for k in dict.fromkeys(k for r in plan for k, _ in r.point)},
        "runs_planned": len(plan),
        "runs_done": sum(len(p["runs"]) for p in points),
        "interrupted": interrupted,
        "points": points,
    }


def _jsonable(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in figures.items()}


def make_batch_dir(out: Path, workload: str, store: str) -> Path:
    """Create and return a fresh batch directory under ``out`` (with its ``runs/``)."""
    path = make_run_dir(out, f"batch-{workload}", store)
    (path / "runs").mkdir()
    return path


def save_batch(summary: dict[str, Any], config: dict[str, Any], batch_dir: Path) -> Path:
    """Write ``batch.json`` (sorted keys) and ``config.json``; return batch.json's path."""
    (batch_dir / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True) + "\n")
    path = batch_dir / "batch.json"
    path.write_text(json.dumps(summary, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return path


@dataclass
class BatchRun:
    """Where a batch was saved, its summary (batch.json) and whether it was cut short."""

    batch_dir: Path
    summary: dict[str, Any]
    outcomes: list[RunOutcome]
    interrupted: bool


def run_batch(plan: Sequence[PlannedRun], out: Path, pool: Any,
              progress: Callable[[float], None] | None = None,
              render: Callable[[dict[str, Any], Path], Any] | None = None) -> BatchRun:
    """Run every planned probe on ``pool`` (a ``runtime.parallel.Workers``), save each run
    under the batch directory (with ``render``'s report) and the merged figures in
    batch.json; return even when interrupted (Ctrl-C): the runs done so far, and those cut
    short, are kept."""
    first = plan[0].spec
    batch_dir = make_batch_dir(out, first.workload, first.store)
    runs_dir = batch_dir / "runs"
    pack = pool.kind == "ray"  # a Ray node may not see this file system
    done: dict[str, RunOutcome] = {}

    def finished(_index: int, outcome: RunOutcome) -> None:
        unpack(outcome)
        done[outcome.label] = outcome
        if progress is not None:
            progress(len(done) / len(plan))
        if outcome.interrupted or outcome.stopped:
            raise KeyboardInterrupt  # Ctrl-C reached this run: the batch stops here

    wall0 = time.perf_counter()
    interrupted = False
    try:
        pool.map(run_planned, [(r, str(runs_dir), pack, render) for r in plan], finished)
    except KeyboardInterrupt:
        interrupted = True
    outcomes = [done[r.label] for r in plan if r.label in done]
    summary = summarize(plan, outcomes, interrupted)
    config = {"kind": "batch", "workers": pool.describe(),
              "wall_s": round(time.perf_counter() - wall0, 3), "interrupted": interrupted,
              "runs": [{"label": r.label, "point": dict(r.point), "seed": r.seed,
                        "spec": r.spec.to_json()} for r in plan]}
    save_batch(summary, config, batch_dir)
    return BatchRun(batch_dir, summary, outcomes, interrupted)

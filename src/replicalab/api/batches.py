"""A batch of probes: one per seed and sweep point, on local processes or a Ray cluster,
their figures merged with their spread (``workloads/batch.py``), the batch directory and
its report written: :func:`probe_batch`, what ``replicalab probe --repeats N [--sweep
KEY=V1,V2 ...] [--workers W | --ray ADDRESS]`` runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, INTERRUPTED, Outcome, Table
from replicalab.api.progress import Progress, ticking
from replicalab.api.request import ProbeRequest
from replicalab.api.words import plural


def _value(entry: dict[str, Any]) -> tuple[str, str, str]:
    """Return (pooled, mean [95 % CI], min-max) of one merged figure, as text."""
    s, pool = entry["spread"], entry.get("pooled")
    fraction = pool is not None

    def fmt(x: float | None) -> str:
        if x is None:
            return "n/a"
        if fraction:
            return f"{100 * x:.2f}%"
        return f"{x:,.1f}" if abs(x) >= 100 else f"{x:,.3f}"

    pooled = "" if pool is None or pool["p"] is None else (
        f"{fmt(pool['p'])} ({pool['count']:,}/{pool['total']:,})")
    ci = "" if s["ci95"] is None else f" [{fmt(s['ci95'][0])}, {fmt(s['ci95'][1])}]"
    return pooled, f"{fmt(s['mean'])}{ci}", f"{fmt(s['min'])} - {fmt(s['max'])}"


def summary_tables(summary: dict[str, Any]) -> list[Table]:
    """Return one table per sweep point: each figure pooled over the runs (counted
    figures), the mean of the runs with its 95 % confidence interval, and the range."""
    tables = []
    for point in summary["points"]:
        where = ", ".join(f"{k}={v}" for k, v in point["point"].items())
        t = Table(f"{summary['workload']} on {summary['store']}"
                  f"{': ' + where if where else ''} ({plural(len(point['runs']), 'run')})",
                  ["figure", "pooled", "mean of runs [95% CI]", "min - max"],
                  right=(1, 2, 3))
        for name, entry in point["merged"].items():
            t.add(name, *_value(entry))
        tables.append(t)
    return tables


def probe_batch(request: ProbeRequest, repeats: int = 1, sweep: Sequence[str] = (),
                workers: int = 1, ray: str | None = None, out: str | Path = "runs",
                progress: Progress = None) -> Outcome:
    """Run ``request`` (:func:`~replicalab.api.runs.probe_request`) ``repeats`` times per
    point of ``sweep`` (``KEY=V1,V2``: a probe option, a workload option or a parameter of
    the store URL; every combination of several) with seeds seed, seed+1, ...; on
    ``workers`` local processes or a Ray cluster (``ray``: its address, or "local");
    return the :class:`Outcome`: the batch summary, its directory, report and tables.
    :class:`ParameterError` for a batch that cannot run so."""
    from replicalab.cluster import process
    from replicalab.runtime.parallel import JobFailed, RayMissing, Workers
    from replicalab.workloads.batch import parse_axis, plan_runs, run_batch

    if repeats == 1 and not sweep:
        raise ParameterError("workers", "and {ray} spread a batch of runs over processes; "
                                        "add {repeats} N or {sweep} KEY=V1,V2",
                             {"ray": "ray", "repeats": "repeats", "sweep": "sweep"})
    if (workers != 1 or ray is not None) and not request.store.startswith("sim://"):
        raise ParameterError("workers", "and {ray} run independent simulations; runs against "
                                        "one real store would share it: drop them (the "
                                        "batch then runs one run at a time)", {"ray": "ray"})
    # the report modules (matplotlib) load before the workers are forked: they inherit them
    from replicalab.report import render_report
    from replicalab.report.batch import render_batch_report

    plan = plan_runs(request.spec, [parse_axis(t) for t in sweep], repeats, request.seed)
    try:
        pool = Workers(workers, ray, on_start=process.track)
    except RayMissing as err:
        raise ParameterError(err.parameter, err.problem, err.mentions) from None
    pool.start(len(plan))  # before the progress bar's thread: workers are forked
    try:
        label = (f"{plural(len(plan), 'run')} of {plan[0].spec.workload} on "
                 f"{plan[0].spec.store}, "
                 f"{pool.kind} x{pool.workers if pool.kind != 'ray' else pool.ray_cpus}")
        with ticking(label, progress) as tick:
            batch = run_batch(plan, Path(out), pool, tick, render_report)
    except JobFailed as err:
        raise ValueError(f"a run of the batch failed: {err}") from None
    finally:
        pool.close()
    report = render_batch_report(batch.summary, batch.batch_dir)
    return Outcome(
        {**batch.summary, "batch_dir": str(batch.batch_dir), "report": str(report)}, None,
        None, summary_tables(batch.summary),
        [f"batch: {batch.batch_dir} ({plural(len(batch.outcomes), 'run')}); "
         f"report: {report}"],
        INTERRUPTED if batch.interrupted else DONE,
        f"interrupted after {len(batch.outcomes)} of {plural(len(plan), 'run')}; what was "
        f"done is in "
        f"{batch.batch_dir}" if batch.interrupted else "")

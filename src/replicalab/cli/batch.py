"""``replicalab probe --repeats N [--sweep KEY=V1,V2 ...] [--workers W | --ray ADDRESS]``:
a batch of probes, one per seed and sweep point, on every core or a Ray cluster; prints the
merged figures with their spread and writes the batch directory and its report."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.words import plural
from replicalab.cluster import process
from replicalab.runtime.parallel import JobFailed, RayMissing, Workers
from replicalab.workloads.batch import Axis, parse_axis, plan_runs, run_batch
from replicalab.workloads.runner import ProbeSpec


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


def summary_tables(summary: dict[str, Any]) -> list[TableData]:
    """Return one table per sweep point: each figure pooled over the runs (counted
    figures), the mean of the runs with its 95 % confidence interval, and the range."""
    tables = []
    for point in summary["points"]:
        where = ", ".join(f"{k}={v}" for k, v in point["point"].items())
        title = (f"{summary['workload']} on {summary['store']}"
                 f"{': ' + where if where else ''} ({plural(len(point['runs']), 'run')})")
        t = TableData(title, ["figure", "pooled", "mean of runs [95% CI]", "min - max"],
                      right=(1, 2, 3))
        for name, entry in point["merged"].items():
            t.add(name, *_value(entry))
        tables.append(t)
    return tables


def run_probe_batch(build: Callable[[dict[str, str]], ProbeSpec], sweep: Sequence[str],
                    repeats: int, seed: int, workers: int, ray: str | None, out: Path,
                    as_json: bool) -> None:
    """Plan, run and report a batch; exit 130 if interrupted (what was done is saved)."""
    # the report modules (matplotlib) load before the workers are forked: they inherit them
    from replicalab.report import render_report
    from replicalab.report.batch import render_batch_report

    try:
        axes: list[Axis] = [parse_axis(t) for t in sweep]
        plan = plan_runs(build, axes, repeats, seed)
        pool = Workers(workers, ray, on_start=process.track)
        pool.start(len(plan))  # before the progress bar's thread: workers are forked
    except RayMissing as err:
        fail(str(err))
    except ValueError as err:
        fail(str(err))
    try:
        label = (f"{plural(len(plan), 'run')} of {plan[0].spec.workload} on "
                 f"{plan[0].spec.store}, "
                 f"{pool.kind} x{pool.workers if pool.kind != 'ray' else pool.ray_cpus}")
        with progress_bar(label, not as_json) as tick:
            batch = run_batch(plan, out, pool, tick, render_report)
    except JobFailed as err:
        fail(f"a run of the batch failed: {err}")
    except ValueError as err:
        fail(str(err))
    finally:
        pool.close()
    report = render_batch_report(batch.summary, batch.batch_dir)
    tables = summary_tables(batch.summary)
    if as_json:
        sys.stdout.write(json.dumps({**batch.summary, "batch_dir": str(batch.batch_dir),
                                     "report": str(report),
                                     "tables": [t.to_json() for t in tables]},
                                    sort_keys=True) + "\n")
    else:
        for t in tables:
            show(t)
        say(f"batch: {batch.batch_dir} ({plural(len(batch.outcomes), 'run')}); "
            f"report: {report}")
    if batch.interrupted:
        fail(f"interrupted after {len(batch.outcomes)} of {plural(len(plan), 'run')}; "
             "what was done "
             f"is in {batch.batch_dir}", 130)

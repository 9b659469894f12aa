"""A saved run re-checked from what it recorded and its report drawn again: :func:`report`,
what ``replicalab report`` runs. A probe run is re-checked from its history by the
probe's own checks; a queue run by the deliveries checker over ``queue.parquet``; a
placement-live run for lost writes over ``history.parquet``; a load run's report is drawn
again from results.json (its figures come from the workers' histograms)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replicalab.api import runkind
from replicalab.api.outcome import Outcome
from replicalab.api.runkind import compare_results
from replicalab.history.rundir import load_results, save_results


def _saved(run_dir: Path) -> dict[str, Any] | None:
    try:
        return load_results(run_dir)
    except ValueError:  # missing or malformed: the caller says what to do
        return None


def report_queue(run_dir: Path) -> tuple[Path, str]:
    """Re-check a queue run's record (every delivery accounted for again) and re-render its
    report; return (report path, one line comparing with the saved results)."""
    from replicalab.checkers.deliveries import check_deliveries
    from replicalab.queues.record import load_log
    from replicalab.report.queues import render_queue_report

    saved = _saved(run_dir)
    if saved is None:
        raise ValueError(f"{run_dir / 'results.json'} is missing or malformed: the queue run "
                         "did not finish saving; its record exports with `replicalab export "
                         f"{run_dir}`")
    try:
        cols = load_log(run_dir)
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"{run_dir / 'queue.parquet'} cannot be read ({err}); re-run the "
                         "queue") from None
    cut_short = bool(saved.get("summary", {}).get("partial"))
    checked = check_deliveries(cols, saved.get("dead_letters", []), cut_short=cut_short)
    fresh = json.loads(json.dumps(saved))
    fresh["checker"] = checked
    fresh["summary"] = {**saved.get("summary", {}), **checked["summary"]}
    line = compare_results(saved, fresh)
    save_results(fresh, run_dir)
    return render_queue_report(fresh, run_dir), line


def report_placement_live(run_dir: Path) -> tuple[Path, str]:
    """Re-check a placement-live run's history for lost writes and re-render its report;
    return (report path, one line comparing with the saved results)."""
    from replicalab.history import load_history
    from replicalab.placement.live_check import lost_writes
    from replicalab.report.placement_live import render_placement_live_report

    saved = _saved(run_dir)
    h, _ = load_history(run_dir)
    check = lost_writes(h)
    if saved is None:
        raise ValueError(f"{run_dir} holds the history of a placement-live run cut short "
                         f"before its results ({len(h):,} operations; lost writes re-checked: "
                         f"{len(check.lost)}); `replicalab export {run_dir}` exports it")
    fresh = {**saved, "lost_writes": len(check.lost), "unknown_reads": len(check.unknown)}
    line = compare_results(saved, fresh)
    save_results(fresh, run_dir)
    return render_placement_live_report(fresh, run_dir), line


def report(run_dir: str | Path) -> Outcome:
    """Re-check the run saved in ``run_dir`` (a probe, load, queue or placement-live run)
    and write its report again; return the :class:`Outcome` (``report``: the page;
    ``remarks``: whether the re-check agrees with the saved results; ``results``: the
    re-checked results). ValueError naming what ``run_dir`` is when it is not such a
    run."""
    from replicalab.report import render_report
    from replicalab.workloads.runner import recheck

    path = Path(run_dir)
    what = runkind.kind(path, "report")
    if what in (runkind.QUEUE, runkind.PLACEMENT_LIVE):
        page, line = (report_queue if what == runkind.QUEUE else report_placement_live)(path)
        return Outcome(load_results(path), path, page, remarks=[line])
    if what == runkind.LOAD:
        from replicalab.report.load import render_load_report

        results = load_results(path)
        return Outcome(results, path, render_load_report(results, path), remarks=[
            "re-check: none for load runs (their figures come from the workers' "
            "histograms); the report was re-rendered from results.json"])
    saved = _saved(path)
    try:
        results = recheck(path)
    except OSError as err:
        raise ValueError(f"{path}: {err}") from None
    return Outcome(results, path, render_report(results, path),
                   remarks=[compare_results(saved, results)])

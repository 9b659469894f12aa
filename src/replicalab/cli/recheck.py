"""Re-checking the runs whose history is not a probe's: queue runs (the deliveries checker
over ``queue.parquet``) and placement-live runs (lost writes over ``history.parquet``).
``replicalab report`` uses these, then re-renders the run's report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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

"""Visibility-timeout queues (seed 000, SQS): duplicate deliveries and what each way of
processing every message once costs. :func:`queue_run` sends messages, consumes them in
parallel and accounts for every delivery; :func:`queue_compare` runs backends x strategies
x consumer counts side by side. What ``replicalab queue run|compare`` run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, INTERRUPTED, Outcome, Table
from replicalab.api.progress import Progress, cut_short, ticking


def queue_spec(queue: str = "sim://sqs", consumers: int = 8, strategy: str = "none",
               central: str | None = None, messages: int = 10000, producers: int = 2,
               readers: int = 0, batch: int = 10, visibility: str | float = "30s",
               process: str | float = "1s", process_sigma: float = 0.5,
               slow_fraction: float = 0.01, slow: str | float = "45s",
               faults: Sequence[str] = (), faults_file: str | Path | None = None,
               max_duration: str | float = "1h", seed: int = 1, processes: bool = False) -> Any:
    """Return the checked ``QueueSpec`` of a queue run (see :func:`queue_run`)."""
    from replicalab.faults.schedule import load_faults, parse_fault
    from replicalab.queues.spec import QueueSpec

    plan = tuple([parse_fault(t) for t in faults]
                 + (load_faults(Path(faults_file)) if faults_file else []))
    spec = QueueSpec(
        queue=queue, consumers=consumers, strategy=strategy, central=central,
        messages=messages, producers=producers, readers=readers, batch=batch,
        visibility_s=seconds(visibility, "visibility"),
        process_ms=1000 * seconds(process, "process"), process_sigma=process_sigma,
        slow_fraction=slow_fraction, slow_s=seconds(slow, "slow"),
        max_duration_s=seconds(max_duration, "max_duration"), seed=seed, faults=plan,
        processes=processes)
    spec.check()
    return spec


def run_table(results: dict[str, Any]) -> Table:
    """Return a queue run's summary as (measure, value) rows."""
    from replicalab.report.queues import summary_cells

    s = results["summary"]
    t = Table(f"queue {results['spec']['strategy']} on {results['queue']['url']} "
              f"({results['spec']['consumers']} consumers)"
              + (" - PARTIAL: the run was cut short" if s.get("partial") else ""),
              ["measure", "value"], right=(1,))
    for label, text in summary_cells(s):
        t.add(label, text)
    t.add(f"run time ({'virtual ' if s['clock'] == 'virtual' else ''}s)",
          f"{s['duration_s']:.1f}")
    return t


def compare_table(results: dict[str, Any]) -> Table:
    """Return one row per run of a queue comparison."""
    ratio = {(r["queue"], r["strategy"], r["consumers"]): r["ratio"]
             for r in results["ratios"]}
    t = Table("queue compare", ["queue", "strategy", "consumers", "dup deliveries",
                                "dup processing", "dup results", "fenced", "lost", "dead",
                                "dead, no commit", "store ops/msg", "msgs/s", "vs none"],
              wrap=(0,), right=tuple(range(2, 13)))
    for r in results["runs"]:
        s = r["summary"]
        x = ratio.get((r["queue"], r["strategy"], r["consumers"]))
        t.add(r["queue"], r["strategy"], r["consumers"], s["duplicate_deliveries"],
              s["duplicate_processing"], s["duplicate_results"], s.get("fenced_commits", 0),
              s["lost"], s["dead_lettered"], s.get("dead_lettered_without_commit", 0),
              f"{s['store_ops_per_message']:.2f}", f"{s['throughput_per_s']:.2f}",
              "n/a" if x is None else f"{x:.2f}")
    return t


def _outcome(run: Any, table: Table, report: Path) -> Outcome:
    return Outcome(run.results, run.run_dir, report, [table],
                   list(run.results.get("notes", [])),
                   INTERRUPTED if run.interrupted else DONE,
                   f"interrupted; what was recorded is in {run.run_dir}"
                   if run.interrupted else "")


def queue_run(queue: str = "sim://sqs", consumers: int = 8, strategy: str = "none",
              out: str | Path = "runs", progress: Progress = None, **options: Any) -> Outcome:
    """Send messages to ``queue`` (a URL: sim://sqs, sim://sqs?fifo=1, redis://...,
    postgresql://...), consume them with ``consumers`` in parallel under ``strategy``
    (none, tag, central, central-lease, central-detect) and account for every delivery.
    ``options`` are :func:`queue_spec`'s (messages, producers, readers, batch, visibility,
    process, process_sigma, slow_fraction, slow, central, faults, faults_file,
    max_duration, seed, processes). Returns the :class:`Outcome` with its summary table
    and report."""
    from replicalab.queues.run import run_queue
    from replicalab.report.queues import render_queue_report

    spec = queue_spec(queue, consumers, strategy, **options)
    from replicalab.api.catalog import redact_url

    with ticking(f"queue {strategy} on {redact_url(queue)}", progress) as tick:
        run = run_queue(spec, Path(out),
                        lambda f: tick(f, "messages finished") if tick else None)
        if run.interrupted:
            cut_short(tick, "interrupted")
    return _outcome(run, run_table(run.results), render_queue_report(run.results, run.run_dir))


def _counts(text: str | Sequence[int]) -> list[int]:
    if not isinstance(text, str):
        return [int(x) for x in text]
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ParameterError("consumers", f"{text!r} must be whole numbers separated by "
                                          "commas, e.g. 1,4,16") from None
    if not values or min(values) < 1:
        raise ParameterError("consumers", f"{text!r}: give consumer counts of at least 1, "
                                          "e.g. 1,4,16")
    return values


def queue_compare(queues: Sequence[str] = ("sim://sqs",), strategies: Sequence[str] = (),
                  consumers: str | Sequence[int] = "1,4,16", out: str | Path = "runs",
                  progress: Progress = None, **options: Any) -> Outcome:
    """Run every queue URL of ``queues`` x strategy (``strategies``, each may be
    comma-separated; default all) x consumer count side by side, under the same faults;
    throughput as a ratio of the none strategy on the same backend. ``options`` as for
    :func:`queue_run`."""
    from replicalab.queues.run import compare_queues
    from replicalab.queues.strategies import STRATEGIES
    from replicalab.report.queues import render_compare_report

    counts = _counts(consumers)
    chosen = [x.strip() for s in strategies for x in s.split(",") if x.strip()]
    queues = list(queues) or ["sim://sqs"]
    faulty = options.get("central") or options.get("faults") or options.get("faults_file")
    base = queue_spec(queues[0], counts[0], "central" if faulty else "none", **options)
    with ticking("queue compare", progress) as tick:
        run = compare_queues(base, queues, chosen or list(STRATEGIES), counts, Path(out),
                             lambda f: tick(f, "runs") if tick else None)
        if run.interrupted:
            cut_short(tick, "interrupted")
    return _outcome(run, compare_table(run.results),
                    render_compare_report(run.results, run.run_dir))

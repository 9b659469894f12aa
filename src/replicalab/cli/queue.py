"""``replicalab queue run|compare``: duplicate deliveries of visibility-timeout queues and
what each way of processing every message once costs (seed 000, SQS)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli.errors import UserError, fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.queues.registry import schemes
from replicalab.stores.base import redact_url

queue_app = typer.Typer(help="Visibility-timeout queues: duplicate deliveries and the "
                        "strategies that process each message once.", no_args_is_help=True)

Central = Annotated[str | None, typer.Option(
    help="Central store of the central strategies: any store with conditional writes "
         "(default sim://simpledb for sim://sqs; redis://, postgresql://, etcd://, zk://).")]
Messages = Annotated[int, typer.Option(help="Messages the producers send.")]
Producers = Annotated[int, typer.Option(help="Producers sending in parallel.")]
Readers = Annotated[int, typer.Option(
    help="Reader processes the consumers form (0: one per consumer; tag: one).")]
Batch = Annotated[int, typer.Option(help="Messages per receive (1-10).")]
Visibility = Annotated[str, typer.Option(help="Visibility timeout of each receive: 30s.")]
Process = Annotated[str, typer.Option(help="Median processing time per message: 1s, 200ms.")]
Sigma = Annotated[float, typer.Option(help="Spread of processing times (lognormal sigma).")]
SlowFraction = Annotated[float, typer.Option(help="Share of processings that take --slow.")]
Slow = Annotated[str, typer.Option(help="Duration of a slow processing (longer than the "
                                   "visibility timeout makes redeliveries).")]
FaultOpt = Annotated[list[str] | None, typer.Option(
    "--fault", help='A consumer or central-store fault (repeatable): "at=20s crash '
    'consumer=3 for=30s", "at=3s pause consumer=1 for=10s", "skew consumer=2 ms=3000", '
    '"at=5s errors store=central for=4s", "at=5s timeouts store=central for=4s ms=1000".')]
FaultsFile = Annotated[Path | None, typer.Option(
    "--faults", help="TOML file of [[fault]] tables (action, at, for, consumer or store, "
    "ms).")]
Strategy = Annotated[str, typer.Option(
    help="none | tag | central (fenced) | central-lease | central-detect.")]
MaxDuration = Annotated[str, typer.Option(help="Stop after this long (virtual time on "
                                          "sim://) even if messages remain.")]
Seed = Annotated[int, typer.Option(help="Seed of the simulator and processing times.")]
Out = Annotated[Path, typer.Option(help="Directory that receives the run directory.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _spec(**kw: Any) -> Any:
    from replicalab.faults.schedule import load_faults, parse_fault
    from replicalab.queues.spec import QueueSpec

    texts, path = kw.pop("fault") or [], kw.pop("faults_file")
    faults = tuple([parse_fault(t) for t in texts] + (load_faults(path) if path else []))
    spec = QueueSpec(
        queue=kw["queue"], consumers=kw["consumers"], strategy=kw["strategy"],
        central=kw["central"], messages=kw["messages"], producers=kw["producers"],
        readers=kw["readers"], batch=kw["batch"],
        visibility_s=parse_duration_s(kw["visibility"], "--visibility"),
        process_ms=1000 * parse_duration_s(kw["process"], "--process"),
        process_sigma=kw["process_sigma"], slow_fraction=kw["slow_fraction"],
        slow_s=parse_duration_s(kw["slow"], "--slow"),
        max_duration_s=parse_duration_s(kw["max_duration"], "--max-duration"),
        seed=kw["seed"], faults=faults, processes=kw.get("processes", False))
    spec.check()
    return spec


def summary_table(results: dict[str, Any]) -> TableData:
    """Return the run's summary as (measure, value) rows."""
    from replicalab.report.queues import summary_cells

    s = results["summary"]
    t = TableData(f"queue {results['spec']['strategy']} on {results['queue']['url']} "
                  f"({results['spec']['consumers']} consumers)"
                  + (" - PARTIAL: the run was cut short" if s.get("partial") else ""),
                  ["measure", "value"], right=(1,))
    for label, text in summary_cells(s):
        t.add(label, text)
    clock = "virtual " if s["clock"] == "virtual" else ""
    t.add(f"run time ({clock}s)", f"{s['duration_s']:.1f}")
    return t


def compare_table(results: dict[str, Any]) -> TableData:
    """Return one row per run of a comparison."""
    ratio = {(r["queue"], r["strategy"], r["consumers"]): r["ratio"]
             for r in results["ratios"]}
    t = TableData("queue compare", ["queue", "strategy", "consumers", "dup deliveries",
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


def _emit(run: Any, table: TableData, report: Path, as_json: bool) -> None:
    if as_json:
        doc = {**run.results, "run_dir": str(run.run_dir), "report": str(report),
               "tables": [table.to_json()]}
        sys.stdout.write(json.dumps(doc, sort_keys=True, default=str) + "\n")
    else:
        show(table)
        for note in run.results.get("notes", []):
            say(note)
        say(f"report: {report}")
    if run.interrupted:
        fail(f"interrupted; what was recorded is in {run.run_dir}", 130)


@queue_app.command("run")
def run_cmd(
    queue: Annotated[str, typer.Option(help="Queue URL: sim://sqs, sim://sqs?fifo=1, "
                                       "redis://..., postgresql://...; schemes: "
                                       + ", ".join(f"{s}://" for s in schemes()) + "."
                                       )] = "sim://sqs",
    consumers: Annotated[int, typer.Option(help="Consumers receiving in parallel.")] = 8,
    strategy: Strategy = "none",
    central: Central = None, messages: Messages = 10000, producers: Producers = 2,
    readers: Readers = 0, batch: Batch = 10, visibility: Visibility = "30s",
    process: Process = "1s", process_sigma: Sigma = 0.5, slow_fraction: SlowFraction = 0.01,
    slow: Slow = "45s", fault: FaultOpt = None, faults_file: FaultsFile = None,
    max_duration: MaxDuration = "1h", seed: Seed = 1,
    processes: Annotated[bool, typer.Option(
        "--processes", help="Real queues: each reader a process of its own, so a crash fault "
        "is a SIGKILL.")] = False,
    out: Out = Path("runs"), as_json: AsJson = False,
) -> None:
    """Send messages, consume them in parallel and account for every delivery.

    Example: replicalab queue run --queue sim://sqs --consumers 8 --strategy central
    --messages 2000 --visibility 4s --process 500ms --fault "at=3s pause consumer=1 for=10s"
    """
    from replicalab.queues.run import run_queue
    from replicalab.report.queues import render_queue_report

    try:
        spec = _spec(queue=queue, consumers=consumers, strategy=strategy, central=central,
                     messages=messages, producers=producers, readers=readers, batch=batch,
                     visibility=visibility, process=process, process_sigma=process_sigma,
                     slow_fraction=slow_fraction, slow=slow, fault=fault,
                     faults_file=faults_file, max_duration=max_duration, seed=seed,
                     processes=processes)
        with progress_bar(f"queue {strategy} on {redact_url(queue)}", not as_json) as tick:
            run = run_queue(spec, out, lambda f: tick(f, "messages finished"))
            if run.interrupted:
                tick.interrupted()
    except (ValueError, UserError) as err:
        fail(str(err))
    report = render_queue_report(run.results, run.run_dir)
    _emit(run, summary_table(run.results), report, as_json)


def _ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{flag} {text!r} must be whole numbers separated by commas, "
                         "e.g. 1,4,16") from None
    if not values or min(values) < 1:
        raise ValueError(f"{flag} {text!r}: give consumer counts of at least 1, e.g. 1,4,16")
    return values


@queue_app.command("compare")
def compare_cmd(
    queue: Annotated[list[str] | None, typer.Option(
        help="Queue URL (repeat for several backends); default sim://sqs.")] = None,
    strategy: Annotated[list[str] | None, typer.Option(
        help="Strategies, repeated or comma-separated (none,central); default all: none, tag, "
             "central, central-lease, central-detect.")] = None,
    consumers: Annotated[str, typer.Option(help="Consumer counts to sweep: 1,4,16.")] = "1,4,16",
    central: Central = None, messages: Messages = 2000, producers: Producers = 2,
    readers: Readers = 0, batch: Batch = 10, visibility: Visibility = "30s",
    process: Process = "1s", process_sigma: Sigma = 0.5, slow_fraction: SlowFraction = 0.01,
    slow: Slow = "45s", fault: FaultOpt = None, faults_file: FaultsFile = None,
    max_duration: MaxDuration = "1h", seed: Seed = 1,
    out: Out = Path("runs"), as_json: AsJson = False,
) -> None:
    """Run backends x strategies x consumer counts side by side, under the same faults;
    throughput as a ratio of the none strategy on the same backend.

    Example: replicalab queue compare --consumers 8 --strategy none,central-lease,central
    --visibility 4s --process 500ms --fault "at=2s pause consumer=1 for=6s"
    """
    from replicalab.queues.run import compare_queues
    from replicalab.queues.strategies import STRATEGIES
    from replicalab.report.queues import render_compare_report

    try:
        counts = _ints(consumers, "--consumers")
        # --strategy none,central reads as --consumers 1,4,16 does
        strategies = [x.strip() for s in strategy or () for x in s.split(",") if x.strip()]
        strategies = strategies or list(STRATEGIES)
        base = _spec(queue=(queue or ["sim://sqs"])[0], consumers=counts[0],
                     strategy="central" if central or fault or faults_file else "none",
                     central=central, messages=messages, producers=producers,
                     readers=readers, batch=batch, visibility=visibility, process=process,
                     process_sigma=process_sigma, slow_fraction=slow_fraction, slow=slow,
                     fault=fault, faults_file=faults_file, max_duration=max_duration,
                     seed=seed)
        with progress_bar("queue compare", not as_json) as tick:
            run = compare_queues(base, queue or ["sim://sqs"], strategies, counts, out,
                                 lambda f: tick(f, "runs"))
            if run.interrupted:
                tick.interrupted()
    except (ValueError, UserError) as err:
        fail(str(err))
    report = render_compare_report(run.results, run.run_dir)
    _emit(run, compare_table(run.results), report, as_json)


def register(app: typer.Typer) -> None:
    """Add ``replicalab queue run|compare`` to the root app."""
    app.add_typer(queue_app, name="queue")

"""``replicalab queue run|compare``: duplicate deliveries of visibility-timeout queues and
what each way of processing every message once costs (seed 000, SQS); the runs are
``replicalab.api.queueing``'s, printed here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import catalog, queueing
from replicalab.cli.output import outcome_of
from replicalab.cli.progress import Bars

queue_app = typer.Typer(help="Visibility-timeout queues: duplicate deliveries and the "
                        "strategies that process each message once.", no_args_is_help=True)
_FLAGS = {"faults": "--fault", "faults_file": "--faults", "queues": "--queue",
          "strategies": "--strategy"}

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



@queue_app.command("run")
def run_cmd(
    queue: Annotated[str, typer.Option(help="Queue URL: sim://sqs, sim://sqs?fifo=1, "
                                       "redis://..., postgresql://...; schemes: "
                                       + ", ".join(f"{s}://" for s in catalog.queue_schemes())
                                       + "."
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
    outcome_of(lambda: queueing.queue_run(
        queue, consumers, strategy, out, Bars(not as_json), central=central, messages=messages,
        producers=producers, readers=readers, batch=batch, visibility=visibility,
        process=process, process_sigma=process_sigma, slow_fraction=slow_fraction, slow=slow,
        faults=fault or [], faults_file=faults_file, max_duration=max_duration, seed=seed,
        processes=processes), as_json, _FLAGS)


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
    outcome_of(lambda: queueing.queue_compare(
        queue or ["sim://sqs"], strategy or [], consumers, out, Bars(not as_json),
        central=central, messages=messages, producers=producers, readers=readers, batch=batch,
        visibility=visibility, process=process, process_sigma=process_sigma,
        slow_fraction=slow_fraction, slow=slow, faults=fault or [], faults_file=faults_file,
        max_duration=max_duration, seed=seed), as_json, _FLAGS)


def register(app: typer.Typer) -> None:
    """Add ``replicalab queue run|compare`` to the root app."""
    app.add_typer(queue_app, name="queue")

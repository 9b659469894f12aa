"""``replicalab hlc ...``: hybrid logical clocks, trace alignment and its benchmark; the work
is ``replicalab.api.clocks``'s, printed here."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.api import clocks
from replicalab.cli import hlc_query
from replicalab.cli.errors import fail, said
from replicalab.cli.output import emit
from replicalab.cli.progress import Bars

hlc_app = typer.Typer(help="Hybrid logical clocks: align multi-node traces, reproduce seed 002.",
                      no_args_is_help=True)


def run(make: Callable[[], Any], as_json: bool, sort_keys: bool = True) -> None:
    """Print the outcome ``make()`` returns (bad input: one line, exit 2)."""
    try:
        outcome = make()
    except ValueError as err:
        fail(said(err))
    emit(outcome, as_json, sort_keys)


@hlc_app.command("align")
def align_cmd(
    logs: Annotated[list[Path], typer.Argument(help="One JSONL trace log per node.",
                                               show_default=False)],
    truth: Annotated[Path | None, typer.Option(
        help="truth.json with the true clock skews (written by `hlc synth`): show errors.")
                     ] = None,
    driver: Annotated[str | None, typer.Option(
        help="Align against this node instead of the detected HLC driver.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Recover per-node clock offsets from HLC-stamped trace logs, with error bounds.

    Example: replicalab hlc align traces/n1.jsonl traces/n2.jsonl traces/n3.jsonl
    --truth traces/truth.json
    """
    run(lambda: clocks.hlc_align(logs, truth, driver), as_json)


@hlc_app.command("synth")
def synth_cmd(
    out: Annotated[Path, typer.Option(help="Directory that receives n1.jsonl ... and "
                                           "truth.json.")],
    nodes: Annotated[int, typer.Option(help="Number of nodes.")] = 5,
    skew: Annotated[int, typer.Option(help="Largest clock skew in ticks (1 tick = 1 µs).")
                    ] = 50,
    latency: Annotated[str, typer.Option(help="Message latency range MIN..MAX in ticks.")
                       ] = "3..10",
    p_event: Annotated[float, typer.Option(help="Chance of a local event per node per tick.")
                       ] = 0.4,
    p_message: Annotated[float, typer.Option(help="Chance of a send per node per tick.")
                         ] = 0.05,
    length: Annotated[int, typer.Option(help="Trace length in ticks.")] = 400,
    seed: Annotated[int, typer.Option(help="Seed of skews and events.")] = 1,
) -> None:
    """Write a synthetic multi-node HLC trace with known clock skews.

    Example: replicalab hlc synth --out traces --nodes 5 --skew 50 --latency 3..10
    """
    run(lambda: clocks.hlc_synth(out, nodes, skew, latency, p_event, p_message, length, seed),
        False)


@hlc_app.command("bench")
def bench_cmd(
    reps: Annotated[int, typer.Option(help="Repetitions (seeds) per point.")] = 100,
    nodes: Annotated[int, typer.Option(help="Nodes per trace.")] = 5,
    seed: Annotated[int, typer.Option(help="First seed.")] = 1,
    quick: Annotated[bool, typer.Option(
        help="A coarser grid (4 lengths, 6 latencies) for a fast look.")] = False,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Reproduce seed 002's trace-sync figures: error vs log length and vs latency.

    Example: replicalab hlc bench --reps 100 --out runs
    """
    run(lambda: clocks.hlc_bench(reps, nodes, seed, quick, out, Bars(not as_json),
                                 shlex.join(["replicalab", "hlc", "bench", *sys.argv[3:]])),
        as_json)


def register(app: typer.Typer) -> None:
    """Add ``replicalab hlc ...`` to the root app."""
    hlc_query.add_commands(hlc_app)
    app.add_typer(hlc_app, name="hlc")

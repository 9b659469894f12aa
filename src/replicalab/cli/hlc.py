"""``replicalab hlc ...``: hybrid logical clocks, trace alignment and its benchmark, and
RQL-style queries over consistent cuts of trace logs (batch or following growing logs) with
their sonification as MIDI; the work is ``replicalab.api.clocks``'s, printed here."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import clocks
from replicalab.cli.output import attempt, emit, outcome_of, say
from replicalab.cli.progress import Bars

hlc_app = typer.Typer(help="Hybrid logical clocks: align multi-node traces, reproduce seed 002.",
                      no_args_is_help=True)


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
    outcome_of(lambda: clocks.hlc_align(logs, truth, driver), as_json)


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
    outcome_of(lambda: clocks.hlc_synth(out, nodes, skew, latency, p_event, p_message, length,
                                        seed), False)


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
    outcome_of(lambda: clocks.hlc_bench(reps, nodes, seed, quick, out, Bars(not as_json),
                                 shlex.join(["replicalab", "hlc", "bench", *sys.argv[3:]])),
        as_json)


QueryText = Annotated[str, typer.Argument(
    help="The query, e.g. 'SELECT x FROM log WHEN EXISTS v IN x : v >= 5'.")]
Logs = Annotated[list[Path], typer.Argument(help="One JSONL trace log per node.")]
Follow = Annotated[bool, typer.Option(
    "--follow", help="Stream: tail the logs as they grow and emit each cut once it is final.")]
MaxSeconds = Annotated[str, typer.Option(
    help="With --follow: stop after this long: 60s, 5m (a plain number is seconds).")]
IdleSeconds = Annotated[str, typer.Option(
    help="With --follow: once no log grew for this long (2s, 500ms), take the logs as "
         "complete and stop.")]
MaxMatches = Annotated[int | None, typer.Option(help="Stop after this many matches.")]



def query(
    text: QueryText,
    logs: Logs,
    follow_logs: Follow = False,
    max_seconds: MaxSeconds = "60s",
    idle_seconds: IdleSeconds = "2s",
    max_matches: MaxMatches = None,
    show: Annotated[int, typer.Option(help="Rows of the match table (--json prints all).")
                    ] = 20,
    severity: Annotated[str | None, typer.Option(
        help="Also evaluate this numeric expression on every match, e.g. 'MAX(x)'.")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print JSON (batch: one object; --follow: one line per match, then a "
        "summary line).")] = False,
) -> None:
    """Find the consistent cuts of HLC trace logs that satisfy an RQL-style query.

    Example: replicalab hlc query 'COMPUTE GLOBAL sum := SUM(x) WHEN sum > 5' n1.jsonl n2.jsonl
    """
    def said_match(m: object) -> None:
        say(json.dumps(m.to_json(), default=str) if as_json else clocks.match_line(m))

    outcome = attempt(lambda: clocks.hlc_query(text, logs, follow_logs, max_seconds,
                                               idle_seconds, max_matches, show, severity,
                                               said_match))
    if follow_logs and not as_json and "summary" in outcome.results:
        s = outcome.results["summary"]
        say(f"{s['matched']} matches, {s['cuts']} cuts, {s['events']} events in "
            f"{s['elapsed_s']} s (stopped: {s['stopped']})", err=True)
    emit(outcome, as_json, sort_keys=False)


def sonify(
    text: QueryText,
    logs: Logs,
    severity: Annotated[str, typer.Option(
        help="Numeric expression giving each match's severity; pitch grows with it.")],
    midi: Annotated[Path, typer.Option(help="MIDI file to write.")] = Path("sonify.mid"),
    speed: Annotated[float, typer.Option(
        help="Seconds of HLC time per second of sound (1 = real time).")] = 1.0,
    pitch_low: Annotated[int, typer.Option(help="MIDI pitch of the lowest severity.")] = 48,
    pitch_high: Annotated[int, typer.Option(help="MIDI pitch of the highest severity.")] = 84,
    note_ms: Annotated[float, typer.Option(help="Longest note (ms of sound).")] = 120.0,
    severity_range: Annotated[str | None, typer.Option(
        help="LO:HI severities mapped onto the pitch range (default: observed min:max).")
                              ] = None,
    program: Annotated[int, typer.Option(help="General MIDI instrument (0-127).")] = 0,
    voice: Annotated[list[str] | None, typer.Option(
        help="Another query played as its own voice: 'QUERY | SEVERITY' (repeatable); each "
        "gets its own channel and instrument.")] = None,
    follow_logs: Follow = False,
    max_seconds: MaxSeconds = "60s",
    idle_seconds: IdleSeconds = "2s",
    max_matches: MaxMatches = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Write a MIDI file in which every matching cut plays a note, higher for more severe.

    Example: replicalab hlc sonify 'SELECT lag WHEN MAX(lag) >= 2' n*.jsonl --severity 'MAX(lag)'
    --voice 'SELECT lag WHEN MAX(lag) >= 5 | MAX(lag)'
    """
    outcome_of(lambda: clocks.hlc_sonify(text, logs, severity, midi, speed, pitch_low,
                                         pitch_high, note_ms, severity_range, program,
                                         voice or [], follow_logs, max_seconds, idle_seconds,
                                         max_matches), as_json, {"voices": "--voice"}, False)


def add_commands(hlc_app: typer.Typer) -> None:
    """Add ``query`` and ``sonify`` to the ``replicalab hlc`` sub-app."""
    hlc_app.command("query")(query)
    hlc_app.command("sonify")(sonify)


def register(app: typer.Typer) -> None:
    """Add ``replicalab hlc ...`` to the root app."""
    add_commands(hlc_app)
    app.add_typer(hlc_app, name="hlc")

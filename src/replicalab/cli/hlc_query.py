"""``replicalab hlc query`` and ``replicalab hlc sonify``: RQL-style queries over consistent
cuts of HLC trace logs, in batch or streaming as the logs grow, and their sonification as
MIDI (``replicalab.api.clocks``), printed here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import clocks
from replicalab.cli.errors import fail, said
from replicalab.cli.output import emit, say
from replicalab.cli.timeparse import warnings_as_notes

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

    try:
        with warnings_as_notes():
            outcome = clocks.hlc_query(text, logs, follow_logs, max_seconds, idle_seconds,
                                       max_matches, show, severity, said_match)
    except ValueError as err:
        fail(said(err))
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
    try:
        with warnings_as_notes():
            outcome = clocks.hlc_sonify(text, logs, severity, midi, speed, pitch_low,
                                        pitch_high, note_ms, severity_range, program,
                                        voice or [], follow_logs, max_seconds, idle_seconds,
                                        max_matches)
    except ValueError as err:
        fail(said(err, {"voices": "--voice"}))
    emit(outcome, as_json, sort_keys=False)


def add_commands(hlc_app: typer.Typer) -> None:
    """Add ``query`` and ``sonify`` to the ``replicalab hlc`` sub-app."""
    hlc_app.command("query")(query)
    hlc_app.command("sonify")(sonify)

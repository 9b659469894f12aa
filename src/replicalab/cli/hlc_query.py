"""``replicalab hlc query`` and ``replicalab hlc sonify``: RQL-style queries over consistent cuts
of HLC trace logs, in batch or streaming as the logs grow, and their sonification as MIDI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say
from replicalab.cli.output import show as show_tables
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.hlc.trace import LogError

if TYPE_CHECKING:  # the query language (lark) and MIDI (mido) load when a command runs
    from replicalab.hlc.query import Match, Query
    from replicalab.hlc.stream import FollowStats, StreamQuery

# General MIDI programs of the extra voices (vibraphone, guitar, bass, strings, flute, ...)
_PALETTE = (11, 24, 33, 48, 73, 56, 13, 80)
_CHANNELS = [c for c in range(16) if c != 9]  # channel 10 (index 9) is percussion
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


def _batch(q: Query, logs: list[Path], max_matches: int | None, also: list[Query] | None = None
           ) -> tuple[list[Match], dict[str, Any], LogError | None]:
    """Return the matches over complete logs, run stats, and the first malformed-line error
    (the events before the bad line are used).  Matches of the ``also`` queries go to
    ``stats["also"]``, one list per query."""
    from replicalab.hlc.cuts import CutBuilder, load_logs, nodes_of

    events, log_error = load_logs(logs)
    if log_error is not None and log_error.line == 0:
        raise log_error  # a file that cannot be read at all: nothing to keep
    builder = CutBuilder(nodes_of(events))
    for node_events in events:
        for ev in node_events:
            builder.add(ev)
    also = also or []
    for one in (q, *also):
        one.check(builder.fields)
    also_matches: list[list[Match]] = [[] for _ in also]
    total = max(1, builder.pending())
    matches: list[Match] = []
    cuts = 0
    with progress_bar("matching cuts") as tick:
        for cut in builder.cuts():
            cuts += 1
            if cuts % 1000 == 0:
                tick(1 - builder.pending() / total)
            for one, found in zip(also, also_matches, strict=True):
                extra = one.match(cut)
                if extra is not None:
                    found.append(extra)
            m = q.match(cut)
            if m is not None:
                matches.append(m)
                if max_matches is not None and len(matches) >= max_matches:
                    break
    stats = {"events": sum(len(e) for e in events), "cuts": cuts, "matched": len(matches),
             "nodes": builder.nodes, "also": also_matches}
    return matches, stats, log_error


def _streamed(q: Query, logs: list[Path], max_seconds: str, idle_seconds: str,
              max_matches: int | None, stats_out: list[FollowStats],
              stream_out: list[StreamQuery] | None = None,
              also: list[Query] | None = None) -> Iterator[Match]:
    from replicalab.hlc.stream import StreamQuery, follow

    max_s = parse_duration_s(max_seconds, "--max-seconds")
    idle_s = parse_duration_s(idle_seconds, "--idle-seconds")
    stream = StreamQuery(q, list(logs), also or [])
    if stream_out is not None:
        stream_out.append(stream)
    yield from follow(stream, max_seconds=max_s, max_matches=max_matches,
                      idle_seconds=idle_s, on_stop=stats_out.append)


def _row(m: Match) -> list[str]:
    def fmt(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"), default=str)
    values = "  ".join(f"{k}={fmt(v)}" for k, v in m.values.items())
    glob = "  ".join(f"{k}={fmt(v)}" for k, v in m.globals.items())
    sev = "" if m.severity is None else fmt(m.severity)
    return [str(m.time.l), str(m.time.c), values, glob, sev]


def _table(matches: list[Match], title: str, shown: int) -> TableData:
    rows = [_row(m) for m in matches[:shown]]
    cols = ["l_us", "c", "values per node", "globals", "severity"]
    # drop the columns no shown row fills (no SELECT, no COMPUTE, no --severity)
    keep = [i for i in range(len(cols)) if i < 2 or any(r[i] for r in rows)]
    # the values and globals columns hold several name=value pairs: they may wrap between
    # pairs on a narrow terminal (each pair stays whole)
    table = TableData(title, [cols[i] for i in keep],
                      wrap=tuple(k for k, i in enumerate(keep) if i in (2, 3)))
    for r in rows:
        table.add(*(r[i] for i in keep))
    return table


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
    from replicalab.hlc.cuts import CutError
    from replicalab.hlc.query import QueryError, parse_query

    try:
        q = parse_query(text)
        if severity is not None:
            q.with_severity(severity)
        if not follow_logs:
            matches, stats, log_error = _batch(q, logs, max_matches)
            stats.pop("also")
        else:
            stats_out: list[FollowStats] = []
            matches = []
            try:
                for m in _streamed(q, logs, max_seconds, idle_seconds, max_matches, stats_out):
                    matches.append(m)
                    if as_json:
                        say(json.dumps(m.to_json(), default=str))
                    else:
                        say("  ".join(_row(m)))
            except LogError as e:
                fail(f"{e}; the {len(matches)} matches printed above came from the events "
                     "before it")
            s = stats_out[0]
            stats = {"events": s.events, "cuts": s.cuts, "matched": s.matches,
                     "elapsed_s": round(s.elapsed_s, 3), "stopped": s.stopped}
            log_error = None
    except (QueryError, CutError, ValueError) as e:
        fail(str(e))
    if follow_logs:
        if as_json:
            say(json.dumps({"summary": stats}))
        else:
            say(f"{stats['matched']} matches, {stats['cuts']} cuts, {stats['events']} events "
                f"in {stats['elapsed_s']} s (stopped: {stats['stopped']})", err=True)
        return
    more = f", first {show} shown" if len(matches) > show else ""
    table = _table(matches, f"{len(matches)} of {stats['cuts']} cuts match ({stats['events']} "
                   f"events, {len(stats['nodes'])} nodes{more})", show)
    if as_json:
        say(json.dumps({
            "query": text, **stats, "error": None if log_error is None else str(log_error),
            "matches": [m.to_json() for m in matches], "tables": [table.to_json()]},
            default=str))
    else:
        show_tables(table)
    if log_error is not None:
        fail(f"{log_error}; the matches above use the events before it")


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
    from replicalab.hlc.cuts import CutError
    from replicalab.hlc.query import QueryError, parse_query
    from replicalab.hlc.sonify import SonifyConfig, voice_for, write_midi

    log_error: LogError | None = None
    try:
        others = _other_voices(voice)
        rng = _severity_range(severity_range)
        if not 0 <= program <= 127:
            raise ValueError(f"--program {program} must lie in 0..127")
        cfg = SonifyConfig(pitch_low, pitch_high, speed * 1_000_000, note_ms / 1000, rng)
        q = parse_query(text).with_severity(severity)
        if follow_logs:
            stats_out: list[FollowStats] = []
            streams: list[StreamQuery] = []
            matches: list[Match] = []
            try:
                matches.extend(_streamed(q, logs, max_seconds, idle_seconds, max_matches,
                                         stats_out, streams, others))
            except LogError as e:
                log_error = e
            also = streams[0].also_matches if streams else [[] for _ in others]
        else:
            matches, stats, log_error = _batch(q, logs, max_matches, others)
            also = stats["also"]
        found = [(text, matches, program),
                 *((o.text, m, _PALETTE[k % len(_PALETTE)])
                   for k, (o, m) in enumerate(zip(others, also, strict=True)))]
        t0 = min((m[0].time.l for _, m, _ in found if m), default=None)
        voices = [voice_for(name, m, cfg, channel=_CHANNELS[k], program=prog, t0_us=t0)
                  for k, (name, m, prog) in enumerate(found)]
        length_s = write_midi(midi, voices)
    except (QueryError, CutError, ValueError, OSError) as e:
        fail(str(e))
    _say_sonified(midi, length_s, voices, as_json)
    if log_error is not None:
        fail(f"{log_error}; the MIDI file holds the matches from the events before it")


def _other_voices(voice: list[str] | None) -> list[Query]:
    """Return the queries of ``--voice 'QUERY | SEVERITY'`` options (ValueError for a
    malformed one, or more than the MIDI channels left)."""
    from replicalab.hlc.query import parse_query

    others: list[Query] = []
    for spec in voice or []:
        vq, sep, vs = spec.rpartition("|")
        if not sep or not vq.strip() or not vs.strip():
            raise ValueError(f"--voice {spec!r} must be 'QUERY | SEVERITY'")
        others.append(parse_query(vq.strip()).with_severity(vs.strip()))
    if len(others) >= len(_CHANNELS):
        raise ValueError(f"at most {len(_CHANNELS) - 1} --voice options (MIDI channels)")
    return others


def _severity_range(text: str | None) -> tuple[float, float] | None:
    """Return ``--severity-range LO:HI`` as numbers (None: not given)."""
    if text is None:
        return None
    lo, sep, hi = text.partition(":")
    if not sep:
        raise ValueError(f"--severity-range {text!r} must be LO:HI")
    return (float(lo), float(hi))


def _say_sonified(midi: Path, length_s: float, voices: list[Any], as_json: bool) -> None:
    """Print what the MIDI file holds: each voice's notes and pitches, and its length."""
    summary = {"midi": str(midi), "length_s": round(length_s, 3), "voices": [
        {"query": v.name, "notes": len(v.notes), "channel": v.channel, "program": v.program,
         "pitch_min": min((n.pitch for n in v.notes), default=None),
         "pitch_max": max((n.pitch for n in v.notes), default=None)} for v in voices]}
    if as_json:
        say(json.dumps(summary))
        return
    for v in summary["voices"]:
        say(f"{v['notes']} notes, pitches {v['pitch_min']}..{v['pitch_max']}, program "
            f"{v['program']}: {v['query']}")
    say(f"{summary['length_s']} s: {midi}")


def add_commands(hlc_app: typer.Typer) -> None:
    """Add ``query`` and ``sonify`` to the ``replicalab hlc`` sub-app."""
    hlc_app.command("query")(query)
    hlc_app.command("sonify")(sonify)

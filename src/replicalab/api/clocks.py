"""Hybrid logical clocks (seed 002): per-node clock offsets recovered from HLC-stamped trace
logs (:func:`hlc_align`), synthetic traces with known skews (:func:`hlc_synth`), the
trace-sync figures (:func:`hlc_bench`), RQL-style queries over consistent cuts, in batch
or following growing logs (:func:`hlc_query`), and their sonification as MIDI
(:func:`hlc_sonify`). What ``replicalab hlc align|synth|bench|query|sonify`` run."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, INTERRUPTED, STOPPED, Outcome, Table
from replicalab.api.progress import Progress, ticking

# General MIDI programs of the extra voices (vibraphone, guitar, bass, strings, flute, ...)
_PALETTE = (11, 24, 33, 48, 73, 56, 13, 80)
_CHANNELS = [c for c in range(16) if c != 9]  # channel 10 (index 9) is percussion


def _read_logs(paths: Sequence[Path]) -> dict[str, list[Any]]:
    from replicalab.hlc.trace import LogError, read_log

    logs: dict[str, list[Any]] = {}
    for path in paths:
        try:
            events = read_log(Path(path))
        except LogError as e:
            raise ValueError(f"{e}; fix or remove that line") from None
        if not events:
            raise ValueError(f"{path}: no events; pass only non-empty trace logs")
        node = events[0].node
        if node in logs:
            raise ValueError(f"{path}: node {node!r} already came from another log; pass one "
                             "log per node")
        logs[node] = events
    return logs


def _read_truth(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"{path}: cannot read ({e.strerror}); pass the truth.json written by "
                         "hlc synth") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg}); pass the truth.json "
                         "written by hlc synth") from None
    skews = data.get("skews_us") if isinstance(data, dict) else None
    if not isinstance(skews, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in skews.values()):
        raise ValueError(f'{path}: expected an object with "skews_us": {{node: integer µs}}')
    return skews


def hlc_align(logs: Sequence[str | Path], truth: str | Path | None = None,
              driver: str | None = None) -> Outcome:
    """Recover per-node clock offsets, with error bounds, from HLC-stamped trace logs (one
    JSONL log per node), against the detected HLC driver (or ``driver``); with ``truth``
    (the truth.json of ``hlc synth``) the errors too."""
    from replicalab.hlc.align import AlignError, align, alignment_errors

    by_node = _read_logs([Path(p) for p in logs])
    skews = _read_truth(Path(truth)) if truth is not None else None
    if skews is not None and (missing := sorted(set(by_node) - set(skews))):
        raise ParameterError("truth", f"{truth}: no skew for node(s) {', '.join(missing)}; "
                                      "pass the matching truth file")
    if driver is not None and driver not in by_node:
        raise ParameterError("driver", f"{driver!r} is not one of the logs' nodes "
                                       f"({', '.join(sorted(by_node))})")
    try:
        result = align(by_node, driver)
    except AlignError as e:
        raise ValueError(f"{e}; the logs are not HLC-consistent") from None
    data: dict[str, Any] = {**asdict(result), "inconsistent": result.inconsistent()}
    cols = ["node", "offset_us", "low_us", "high_us", "evidence", "events"]
    if skews is not None:
        offsets = {n: skews[result.driver] - skews[n] for n in result.nodes}
        data["true_offsets_us"] = offsets
        data["errors"] = alignment_errors(result, offsets)
        cols += ["true_us", "error"]
    table = Table(f"offsets against HLC driver {result.driver} (µs to add to each pt)", cols,
                  wrap=(), right=tuple(range(1, len(cols))))
    for node in sorted(result.nodes):
        n = result.nodes[node]
        row = [node, str(n.offset_us), "-" if n.low_us is None else str(n.low_us),
               "-" if n.high_us is None else str(n.high_us), str(n.evidence), str(n.events)]
        if skews is not None:
            err = data["errors"].get(node)
            row += [str(data["true_offsets_us"][node]),
                    "-" if err is None else f"{err * 100:.1f}%"]
        table.add(*row)
    remarks = [f"messages {result.messages} (unmatched sends {result.unmatched_sends}, "
               f"receives {result.unmatched_recvs}); receives before their send: "
               f"{result.violations_pt} by pt, {result.violations_aligned} after alignment"]
    if len(result.driver_candidates) > 1:
        remarks.append(f"note: {', '.join(result.driver_candidates)} could each drive HLC; "
                       "offsets are ambiguous until their logs show a causal link")
    if bad := result.inconsistent():
        remarks.append(f"warning: bounds cross for {', '.join(bad)}")
    return Outcome(data, tables=[table], remarks=remarks)


def _range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("..")
    try:
        pair = (int(lo), int(hi if sep else lo))
    except ValueError:
        raise ParameterError("latency", f"{text!r}: expected MIN..MAX in ticks, e.g. 3..10"
                             ) from None
    if not 0 <= pair[0] <= pair[1]:
        raise ParameterError("latency", f"{text!r}: need 0 <= MIN <= MAX")
    return pair


def hlc_synth(out: str | Path, nodes: int = 5, skew: int = 50, latency: str = "3..10",
              p_event: float = 0.4, p_message: float = 0.05, length: int = 400,
              seed: int = 1) -> Outcome:
    """Write a synthetic multi-node HLC trace with known clock skews to ``out``: one log per
    node (``n1.jsonl`` ...) and ``truth.json``; ``skew``: the largest skew in ticks (1 tick
    = 1 µs), ``latency``: message latency MIN..MAX ticks, ``length`` ticks."""
    from replicalab.hlc.synth import SynthConfig, generate, spread_skews
    from replicalab.hlc.trace import write_log

    if nodes < 2:
        raise ParameterError("nodes", "must be at least 2")
    if skew < 0 or length < 1:
        raise ParameterError("skew", "must be >= 0 and {length} >= 1", {"length": "length"})
    cfg = SynthConfig(spread_skews(nodes, skew, seed), _range(latency), p_event, p_message,
                      length, seed)
    trace = generate(cfg)
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        for node, events in trace.logs.items():
            write_log(path / f"{node}.jsonl", events)
        (path / "truth.json").write_text(json.dumps(
            {"skews_us": trace.skews_us, "config": asdict(cfg)}, indent=1) + "\n")
    except OSError as e:
        raise ParameterError("out", f"{path}: cannot write there ({e.strerror}); pass a "
                                    "writable directory") from None
    total = sum(len(v) for v in trace.logs.values())
    return Outcome({"logs": len(trace.logs), "events": total, "out": str(path)}, remarks=[
        f"wrote {len(trace.logs)} logs ({total} events, {trace.messages_sent} messages sent, "
        f"{trace.messages_received} received) and truth.json to {path}"])


def hlc_bench(reps: int = 100, nodes: int = 5, seed: int = 1, quick: bool = False,
              out: str | Path = "runs", progress: Progress = None,
              command: str | None = None) -> Outcome:
    """Reproduce seed 002's trace-sync figures: alignment error against log length and
    against message latency, ``reps`` seeds per point (``quick``: a coarser grid)."""
    from replicalab.history.rundir import make_run_dir, save_results
    from replicalab.hlc.bench import BenchConfig, run_bench
    from replicalab.report.hlc import render_hlc_bench_report

    cfg = BenchConfig(nodes=nodes, reps=reps, seed=seed)
    if quick:
        cfg = BenchConfig(nodes=nodes, reps=reps, seed=seed, lengths_ticks=(25, 100, 400, 1600),
                          latencies_ticks=(1, 3, 10, 20, 50, 60))
    run_dir = make_run_dir(Path(out), "hlc-bench", "synthetic")
    with ticking(f"hlc bench: {cfg.runs()} traces", progress) as tick:
        results = run_bench(cfg, tick or (lambda *_: None))
    if command is not None:
        results["command"] = command
    save_results(results, run_dir)
    report = render_hlc_bench_report(results, run_dir)
    if results["interrupted"]:
        return Outcome(results, run_dir, report, status=INTERRUPTED,
                       why=f"interrupted; the finished points are saved in {run_dir}")
    tables = []
    for title, rows, cols in (
            ("error vs log length (median over seeds)", results["error_vs_length"],
             ("p_message", "length_ticks")),
            ("error vs latency (median over seeds)", results["error_vs_latency"],
             ("skew_ticks", "latency_ticks"))):
        table = Table(title, [*cols, "median", "p25", "p75"], wrap=(), right=(0, 1, 2, 3, 4))
        for r in rows:
            table.add(r[cols[0]], r[cols[1]], *("n/a" if r[k] is None else f"{r[k] * 100:.1f}%"
                                                for k in ("median", "p25", "p75")))
        tables.append(table)
    return Outcome(results, run_dir, report, tables, [f"run directory: {run_dir}"])


def _row(m: Any) -> list[str]:
    def fmt(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"), default=str)
    values = "  ".join(f"{k}={fmt(v)}" for k, v in m.values.items())
    glob = "  ".join(f"{k}={fmt(v)}" for k, v in m.globals.items())
    return [str(m.time.l), str(m.time.c), values, glob,
            "" if m.severity is None else fmt(m.severity)]


def match_line(m: Any) -> str:
    """Return one match of a query as a line (HLC time, values per node, globals)."""
    return "  ".join(_row(m))


def _batch(q: Any, logs: Sequence[Path], max_matches: int | None,
           also: Sequence[Any] = ()) -> tuple[list[Any], dict[str, Any], Any]:
    """Return the matches over complete logs, run stats, and the first malformed-line error
    (the events before the bad line are used). Matches of the ``also`` queries go to
    ``stats["also"]``, one list per query."""
    from replicalab.hlc.cuts import CutBuilder, load_logs, nodes_of

    events, log_error = load_logs(list(logs))
    if log_error is not None and log_error.line == 0:
        raise log_error  # a file that cannot be read at all: nothing to keep
    builder = CutBuilder(nodes_of(events))
    for node_events in events:
        for ev in node_events:
            builder.add(ev)
    for one in (q, *also):
        one.check(builder.fields)
    also_matches: list[list[Any]] = [[] for _ in also]
    matches: list[Any] = []
    cuts = 0
    for cut in builder.cuts():
        cuts += 1
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


def _streamed(q: Any, logs: Sequence[Path], max_seconds: str | float, idle_seconds: str | float,
              max_matches: int | None, stats_out: list[Any], stream_out: list[Any] | None = None,
              also: Sequence[Any] = ()) -> Iterator[Any]:
    from replicalab.hlc.stream import StreamQuery, follow

    stream = StreamQuery(q, list(logs), list(also))
    if stream_out is not None:
        stream_out.append(stream)
    yield from follow(stream, max_seconds=seconds(max_seconds, "max_seconds"),
                      max_matches=max_matches, idle_seconds=seconds(idle_seconds, "idle_seconds"),
                      on_stop=stats_out.append)


def hlc_query(text: str, logs: Sequence[str | Path], follow: bool = False,
              max_seconds: str | float = "60s", idle_seconds: str | float = "2s",
              max_matches: int | None = None, show: int = 20, severity: str | None = None,
              on_match: Callable[[Any], None] | None = None) -> Outcome:
    """Find the consistent cuts of HLC trace logs (one JSONL log per node) that satisfy
    query ``text`` (e.g. ``SELECT x FROM log WHEN EXISTS v IN x : v >= 5``), evaluating
    ``severity`` (a numeric expression) on each. ``follow``: tail the logs as they grow,
    each cut once it is final, ``on_match`` told of each match as it comes, until
    ``max_seconds``, ``idle_seconds`` without growth or ``max_matches``. The
    :class:`Outcome` holds the matches and stats (its table: the first ``show``); a
    malformed line stops it (STOPPED) after the matches from the events before it."""
    from replicalab.hlc.cuts import CutError
    from replicalab.hlc.query import QueryError, parse_query
    from replicalab.hlc.trace import LogError

    paths = [Path(p) for p in logs]
    try:
        q = parse_query(text)
        if severity is not None:
            q.with_severity(severity)
        if follow:
            stats_out: list[Any] = []
            matches: list[Any] = []
            try:
                for m in _streamed(q, paths, max_seconds, idle_seconds, max_matches, stats_out):
                    matches.append(m)
                    if on_match is not None:
                        on_match(m)
            except LogError as e:
                return Outcome({"matched": len(matches)}, status=STOPPED, why=(
                    f"{e}; the {len(matches)} matches printed above came from the events "
                    "before it"))
            s = stats_out[0]
            return Outcome({"summary": {"events": s.events, "cuts": s.cuts,
                                        "matched": s.matches, "elapsed_s": round(s.elapsed_s, 3),
                                        "stopped": s.stopped}})
        matches, stats, log_error = _batch(q, paths, max_matches)
    except (QueryError, CutError) as e:
        raise ValueError(str(e)) from None
    stats.pop("also")
    rows = [_row(m) for m in matches[:show]]
    cols = ["l_us", "c", "values per node", "globals", "severity"]
    # drop the columns no shown row fills (no SELECT, no COMPUTE, no --severity)
    keep = [i for i in range(len(cols)) if i < 2 or any(r[i] for r in rows)]
    more = f", first {show} shown" if len(matches) > show else ""
    # the values and globals columns hold several name=value pairs: they may wrap between
    # pairs on a narrow terminal (each pair stays whole)
    table = Table(f"{len(matches)} of {stats['cuts']} cuts match ({stats['events']} events, "
                  f"{len(stats['nodes'])} nodes{more})", [cols[i] for i in keep],
                  wrap=tuple(k for k, i in enumerate(keep) if i in (2, 3)))
    for r in rows:
        table.add(*(r[i] for i in keep))
    return Outcome({"query": text, **stats,
                    "error": None if log_error is None else str(log_error),
                    "matches": [m.to_json() for m in matches]}, tables=[table],
                   status=DONE if log_error is None else STOPPED,
                   why="" if log_error is None else
                   f"{log_error}; the matches above use the events before it")


def _other_voices(voices: Sequence[str]) -> list[Any]:
    """Return the queries of ``'QUERY | SEVERITY'`` voices (ParameterError for a malformed
    one, or more than the MIDI channels left)."""
    from replicalab.hlc.query import parse_query

    others: list[Any] = []
    for spec in voices:
        vq, sep, vs = spec.rpartition("|")
        if not sep or not vq.strip() or not vs.strip():
            raise ParameterError("voices", f"{spec!r} must be 'QUERY | SEVERITY'")
        others.append(parse_query(vq.strip()).with_severity(vs.strip()))
    if len(others) >= len(_CHANNELS):
        raise ParameterError("voices", f"are too many: at most {len(_CHANNELS) - 1} (MIDI "
                                       "channels)")
    return others


def hlc_sonify(text: str, logs: Sequence[str | Path], severity: str,
               midi: str | Path = "sonify.mid", speed: float = 1.0, pitch_low: int = 48,
               pitch_high: int = 84, note_ms: float = 120.0,
               severity_range: str | None = None, program: int = 0,
               voices: Sequence[str] = (), follow: bool = False,
               max_seconds: str | float = "60s", idle_seconds: str | float = "2s",
               max_matches: int | None = None) -> Outcome:
    """Write a MIDI file in which every cut matching ``text`` plays a note, higher for a
    higher ``severity``; ``voices`` (``'QUERY | SEVERITY'``) are more queries played on
    their own channels and instruments; ``speed``: seconds of HLC time per second of
    sound; ``severity_range``: ``LO:HI`` mapped onto the pitches (default: observed)."""
    from replicalab.hlc.cuts import CutError
    from replicalab.hlc.query import QueryError, parse_query
    from replicalab.hlc.sonify import SonifyConfig, voice_for, write_midi
    from replicalab.hlc.trace import LogError

    paths = [Path(p) for p in logs]
    log_error: LogError | None = None
    try:
        others = _other_voices(voices)
        rng = None
        if severity_range is not None:
            lo, sep, hi = severity_range.partition(":")
            if not sep:
                raise ParameterError("severity_range", f"{severity_range!r} must be LO:HI")
            rng = (float(lo), float(hi))
        if not 0 <= program <= 127:
            raise ParameterError("program", f"{program} must lie in 0..127")
        cfg = SonifyConfig(pitch_low, pitch_high, speed * 1_000_000, note_ms / 1000, rng)
        q = parse_query(text).with_severity(severity)
        if follow:
            stats_out: list[Any] = []
            streams: list[Any] = []
            matches: list[Any] = []
            try:
                matches.extend(_streamed(q, paths, max_seconds, idle_seconds, max_matches,
                                         stats_out, streams, others))
            except LogError as e:
                log_error = e
            also = streams[0].also_matches if streams else [[] for _ in others]
        else:
            matches, stats, log_error = _batch(q, paths, max_matches, others)
            also = stats["also"]
        found = [(text, matches, program),
                 *((o.text, m, _PALETTE[k % len(_PALETTE)])
                   for k, (o, m) in enumerate(zip(others, also, strict=True)))]
        t0 = min((m[0].time.l for _, m, _ in found if m), default=None)
        voiced = [voice_for(name, m, cfg, channel=_CHANNELS[k], program=prog, t0_us=t0)
                  for k, (name, m, prog) in enumerate(found)]
        length_s = write_midi(Path(midi), voiced)
    except (QueryError, CutError, OSError) as e:
        raise ValueError(str(e)) from None
    summary = {"midi": str(midi), "length_s": round(length_s, 3), "voices": [
        {"query": v.name, "notes": len(v.notes), "channel": v.channel, "program": v.program,
         "pitch_min": min((n.pitch for n in v.notes), default=None),
         "pitch_max": max((n.pitch for n in v.notes), default=None)} for v in voiced]}
    remarks = [f"{v['notes']} notes, pitches {v['pitch_min']}..{v['pitch_max']}, program "
               f"{v['program']}: {v['query']}" for v in summary["voices"]]
    return Outcome(summary, remarks=[*remarks, f"{summary['length_s']} s: {midi}"],
                   status=DONE if log_error is None else STOPPED,
                   why="" if log_error is None else
                   f"{log_error}; the MIDI file holds the matches from the events before it")

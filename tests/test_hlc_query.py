"""RQL-style queries over consistent cuts: EXISTS, FORALL, aggregates, set operations, errors,
streaming equal to batch, the CLI, and sonification read back from the MIDI file."""

from __future__ import annotations

import itertools
import json
import random
import tempfile
import threading
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from replicalab.cli.hlc import add_commands
from replicalab.hlc.clock import Timestamp
from replicalab.hlc.cuts import consistent_cuts
from replicalab.hlc.query import QueryError, parse_expr, parse_query
from replicalab.hlc.sonify import (
    TICKS_PER_S,
    SonifyConfig,
    plan_notes,
    read_notes,
    voice_for,
    write_midi,
)
from replicalab.hlc.stream import LogTail, StreamQuery, follow
from replicalab.hlc.trace import Event, LogError, write_log
from test_hlc_cuts import simulate


def _ev(node: str, seq: int, l_us: int, kind: str = "local", msg: str | None = None,
        **vars_: object) -> Event:
    return Event(node, seq, l_us, l_us, 0, kind, msg, dict(vars_))


# Three nodes; x and y change over five HLC times (10..50 µs).
#   t   a.x a.y  b.x b.y  c.x
#  10    1   1    -   -    -
#  20    1   1    4   2    -
#  30    6   1    4   2    3
#  40    6   9    4   2    3
#  50    6   9    4   2   12
LOGS = [
    [_ev("a", 1, 10, x=1, y=1), _ev("a", 2, 30, x=6), _ev("a", 3, 40, y=9)],
    [_ev("b", 1, 20, x=4, y=2)],
    [_ev("c", 1, 30, x=3), _ev("c", 2, 50, x=12)],
]


def _times(query: str, logs: list[list[Event]] = LOGS) -> list[int]:
    q = parse_query(query)
    cuts = list(consistent_cuts(logs))
    q.check({v for log in logs for e in log for v in e.vars})
    return [m.time.l for m in q.run(cuts)]


def test_exists_matches_cuts_where_some_node_has_a_large_value() -> None:
    assert _times("SELECT x FROM log WHEN EXISTS v IN x : v >= 5") == [30, 40, 50]
    assert _times("SELECT x FROM log WHEN EXISTS v IN x : v > 100") == []


def test_forall_matches_cuts_where_every_node_is_small() -> None:
    assert _times("SELECT x, y FROM log WHEN FORALL v IN x : v < 10") == [10, 20, 30, 40]
    assert _times("SELECT x WHEN FORALL v IN y : v <= 2") == [10, 20, 30]


def test_nested_quantifiers_see_the_outer_variable() -> None:
    # some x value exceeds every y value
    assert _times("SELECT x WHEN EXISTS v IN x : FORALL w IN y : v > w") == [20, 30, 50]


def test_aggregates_and_globals() -> None:
    q = parse_query("COMPUTE GLOBAL sum := SUM(x), GLOBAL avg := AVG(x), GLOBAL lo := MIN(x),"
                    " GLOBAL hi := MAX(x), GLOBAL n := COUNT(x), GLOBAL spread := hi - lo "
                    "FROM log WHEN sum > 5")
    matches = list(q.run(consistent_cuts(LOGS)))
    assert [m.time.l for m in matches] == [30, 40, 50]
    assert matches[0].globals == {"sum": 13, "avg": 13 / 3, "lo": 3, "hi": 6, "n": 3,
                                  "spread": 3}
    assert matches[-1].globals["sum"] == 22
    assert matches[0].values == {}  # COMPUTE without SELECT shows only the globals


def test_aggregate_of_no_values_is_undefined_and_compares_false() -> None:
    logs = [[_ev("a", 1, 10, y=1), _ev("a", 2, 20, x=1)]]
    assert _times("SELECT x WHEN NOT MAX(x) > 0", logs) == [10]
    assert _times("SELECT x WHEN COUNT(x) = 0 AND SUM(x) = 0", logs) == [10]


def test_set_operations_and_membership() -> None:
    assert _times("SELECT x WHEN 4 IN x INTERSECT {4, 5}") == [20, 30, 40, 50]
    assert _times("SELECT x WHEN 9 IN x UNION y") == [40, 50]
    assert _times("SELECT x WHEN 4 IN x MINUS y") == [20, 30, 40, 50]
    assert _times("SELECT x WHEN 1 IN y MINUS x") == [30]
    assert _times("SELECT x WHEN x MINUS {1, 4} = {}") == [10, 20]
    assert _times("SELECT x WHEN 6 NOT IN x AND COUNT(x UNION y) = 3") == [20]
    assert _times("SELECT x WHEN x INTERSECT y = {2, 1} UNION {9}") == []
    assert _times("SELECT x WHEN COUNT(x INTERSECT y) >= 1") == [10, 20]


def test_boolean_arithmetic_node_access_and_between() -> None:
    assert _times("SELECT x WHEN x@a * 2 + 1 = 13 AND NOT (y@b != 2)") == [30, 40, 50]
    assert _times("SELECT x WHEN x@c - x@a > 0 OR y@a = 9") == [40, 50]
    assert _times("SELECT x WHEN x@\"b\" = 4 AND -x@c < -10") == [50]
    assert _times("SELECT * FROM log BETWEEN 20 AND 40") == [20, 30, 40]
    assert _times("select x from log between 20 and 40 when exists v in x : v > 5") == [30, 40]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), nodes=st.integers(1, 4), k=st.integers(0, 9))
def test_exists_forall_duality_and_aggregate_laws(seed: int, nodes: int, k: int) -> None:
    logs = simulate(nodes, 80, seed)
    cuts = list(consistent_cuts(logs))
    exists = parse_query(f"SELECT y WHEN EXISTS v IN y : v > {k}")
    not_forall = parse_query(f"SELECT y WHEN NOT FORALL v IN y : NOT v > {k}")
    assert [m.time for m in exists.run(cuts)] == [m.time for m in not_forall.run(cuts)]
    agg = parse_query("COMPUTE GLOBAL s := SUM(y), GLOBAL n := COUNT(y), GLOBAL a := AVG(y),"
                      " GLOBAL lo := MIN(y), GLOBAL hi := MAX(y)")
    for cut, m in zip(cuts, agg.run(cuts), strict=True):
        ys = list(cut.values("y").values())
        assert m.globals["s"] == sum(ys) and m.globals["n"] == len(ys)
        if ys:
            assert m.globals["lo"] <= m.globals["a"] <= m.globals["hi"]
            assert m.globals["a"] == pytest.approx(sum(ys) / len(ys))


def test_select_returns_per_node_values_of_the_matching_cut() -> None:
    q = parse_query("SELECT x, y FROM log WHEN EXISTS v IN x : v >= 12")
    (m,) = list(q.run(consistent_cuts(LOGS)))
    assert m.time == Timestamp(50, 0)
    assert m.values == {"x": {"a": 6, "b": 4, "c": 12}, "y": {"a": 9, "b": 2}}
    assert m.to_json()["l_us"] == 50


def test_syntax_error_gives_line_column_and_what_was_expected() -> None:
    with pytest.raises(QueryError) as e:
        parse_query("SELECT x FROM log\n  WHEN EXISTS v x : v > 1")
    assert "syntax error at 2:17" in str(e.value)
    assert "unexpected 'x'; expected 'IN'" in str(e.value)
    with pytest.raises(QueryError, match=r"at 1:27: unexpected end of query; expected .*a name"):
        parse_query("SELECT x FROM log WHEN x >")
    with pytest.raises(QueryError, match=r"at 1:24: unexpected character '\$'"):
        parse_query("SELECT x FROM log WHEN $")


def test_unknown_field_is_named_with_the_known_ones() -> None:
    q = parse_query("SELECT x FROM log WHEN EXISTS v IN lag : v > 2")
    with pytest.raises(QueryError) as e:
        q.check({"x", "y"})
    assert str(e.value) == "unknown field 'lag' at 1:36; known fields: x, y"


def test_type_errors_are_explained() -> None:
    with pytest.raises(QueryError, match="comparison > at 1:24 needs a single value"):
        parse_query("SELECT x FROM log WHEN x > 5")
    with pytest.raises(QueryError, match="unknown function 'median'"):
        parse_query("COMPUTE GLOBAL m := median(x)")
    with pytest.raises(QueryError, match="needs a condition"):
        parse_query("SELECT x WHEN x UNION y")


def test_keywords_are_case_insensitive_and_names_may_contain_them() -> None:
    logs = [[_ev("a", 1, 10, selection=3, sum=1, x=1)]]
    assert _times("select selection when exists v in selection : v = 3", logs) == [10]
    assert _times("compute global sum := sum(sum) when sum = 1", logs) == [10]


# --- streaming ------------------------------------------------------------------------------

def _write_in_chunks(logs: list[list[Event]], paths: list[Path], seed: int
                     ) -> list[list[bytes]]:
    """Split each log's bytes into random chunks, cutting lines in the middle too."""
    rng = random.Random(seed)
    chunks = []
    for log, path in zip(logs, paths, strict=True):
        data = "".join(e.to_json() + "\n" for e in log).encode()
        path.write_bytes(b"")
        parts, i = [], 0
        while i < len(data):
            n = rng.randint(1, 400)
            parts.append(data[i:i + n])
            i += n
        chunks.append(parts)
    return chunks


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), nodes=st.integers(1, 5))
def test_streaming_equals_batch_for_any_arrival_order(seed: int, nodes: int) -> None:
    logs = simulate(nodes, 150, seed, p_send=0.4)
    text = "SELECT y COMPUTE GLOBAL total := SUM(x) WHEN EXISTS v IN y : v >= 5"
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"n{i}.jsonl" for i in range(nodes)]
        chunks = _write_in_chunks(logs, paths, seed)
        stream = StreamQuery(parse_query(text), paths)
        rng = random.Random(seed)
        streamed = []
        while any(chunks):
            i = rng.choice([k for k, c in enumerate(chunks) if c])
            with paths[i].open("ab") as fh:
                fh.write(chunks[i].pop(0))
            streamed.extend(stream.poll())
        streamed.extend(stream.close())
    assert streamed == list(parse_query(text).run(consistent_cuts(logs)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_streaming_equals_batch_on_the_same_logs(tmp_path: Path, seed: int) -> None:
    logs = simulate(4, 600, seed, p_send=0.4)
    paths = [tmp_path / f"n{i}.jsonl" for i in range(len(logs))]
    chunks = _write_in_chunks(logs, paths, seed)
    text = "SELECT y COMPUTE GLOBAL total := SUM(x) FROM log WHEN EXISTS v IN y : v >= 8 " \
           "AND total > 10"
    stream = StreamQuery(parse_query(text), paths)
    rng = random.Random(seed)
    streamed = []
    early = 0
    while any(chunks):
        i = rng.choice([k for k, c in enumerate(chunks) if c])
        with paths[i].open("ab") as fh:
            fh.write(chunks[i].pop(0))
        got = stream.poll()
        frontier = stream.frontier()
        assert all(frontier is not None and m.time <= frontier for m in got)
        early += len(got)
        streamed.extend(got)
    streamed.extend(stream.close())
    batch = list(parse_query(text).run(consistent_cuts(logs)))
    assert len(batch) > 10
    assert streamed == batch
    assert early > len(batch) // 2  # most matches came out while the logs were still growing


def test_follow_a_live_writer_until_the_logs_go_idle(tmp_path: Path) -> None:
    logs = simulate(3, 300, seed=11, p_send=0.4)
    paths = [tmp_path / f"n{i}.jsonl" for i in range(len(logs))]
    for p in paths:
        p.write_bytes(b"")
    merged = sorted((e for log in logs for e in log), key=lambda e: (e.pt_us, e.node))
    done = threading.Event()

    def writer() -> None:
        for k, e in enumerate(merged):
            with paths[int(e.node[1:])].open("a") as fh:
                fh.write(e.to_json() + "\n")
            if k % 50 == 0:
                done.wait(0.01)
        done.set()

    text = "SELECT x FROM log WHEN EXISTS v IN y : v = 9"
    stats = []
    t = threading.Thread(target=writer)
    t.start()
    try:
        got = list(follow(StreamQuery(parse_query(text), paths), max_seconds=20,
                          idle_seconds=0.5, poll_interval_s=0.01, on_stop=stats.append))
    finally:
        done.set()
        t.join(10)
    assert stats[0].stopped == "idle"
    assert stats[0].events == len(merged)
    assert got == list(parse_query(text).run(consistent_cuts(logs)))


def test_follow_stops_at_max_matches(tmp_path: Path) -> None:
    logs = simulate(2, 200, seed=5)
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for log, p in zip(logs, paths, strict=True):
        write_log(p, log)
    stats = []
    got = list(follow(StreamQuery(parse_query("SELECT x"), paths), max_seconds=10,
                      max_matches=7, idle_seconds=0.2, poll_interval_s=0.01,
                      on_stop=stats.append))
    assert len(got) == 7 and stats[0].stopped == "max-matches"


def test_stream_keeps_the_events_before_a_malformed_line(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_log(a, [_ev("a", 1, 10, x=1), _ev("a", 2, 30, x=2)])
    with a.open("a") as fh:
        fh.write("not json\n" + _ev("a", 3, 50, x=3).to_json() + "\n")
    write_log(b, [_ev("b", 1, 20, x=5), _ev("b", 2, 40, x=6)])
    stream = StreamQuery(parse_query("SELECT x"), [a, b])
    with pytest.raises(LogError, match=rf"{a}:3: not valid JSON"):
        stream.poll()
    assert stream.events_seen == 2  # a's two good events; b was not read yet
    # the next read resumes after the bad line
    assert [m.time.l for m in stream.close()] == [10, 20, 30, 40, 50]


def test_tail_waits_for_the_end_of_a_line(tmp_path: Path) -> None:
    p = tmp_path / "a.jsonl"
    line = _ev("a", 1, 10, x=1).to_json()
    p.write_text(line[:15])
    tail = LogTail(p)
    assert tail.read() == []
    with p.open("a") as fh:
        fh.write(line[15:] + "\n" + _ev("a", 2, 20, x=2).to_json())
    assert [e.seq for e in tail.read()] == [1]
    assert [e.seq for e in tail.read(final=True)] == [2]


def test_stream_reports_an_unknown_field_once_a_cut_is_final(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    write_log(a, [_ev("a", 1, 10, x=1), _ev("a", 2, 20, x=2)])
    stream = StreamQuery(parse_query("SELECT x WHEN MAX(lag) > 1"), [a])
    with pytest.raises(QueryError, match="unknown field 'lag' at 1:19; known fields: x"):
        stream.poll()


# --- sonification ---------------------------------------------------------------------------

def test_midi_read_back_has_one_note_per_match_in_order_with_growing_pitch(
        tmp_path: Path) -> None:
    q = parse_query("SELECT x FROM log WHEN EXISTS v IN x : v >= 4").with_severity("MAX(x)")
    matches = list(q.run(consistent_cuts(LOGS)))
    assert [m.severity for m in matches] == [4, 6, 6, 12]
    cfg = SonifyConfig(pitch_low=40, pitch_high=80, hlc_us_per_s=10.0, note_s=0.05)
    path = tmp_path / "out.mid"
    length_s = write_midi(path, [voice_for("q", matches, cfg)])
    notes = read_notes(path)
    assert len(notes) == 4
    # severities 4..12 scaled onto 40..80: 4 -> 40, 6 -> 50, 12 -> 80
    assert [n.pitch for n in notes] == [40, 50, 50, 80]
    # 10 HLC µs per second of sound: times 20, 30, 40, 50 µs -> 0, 1, 2, 3 s
    assert [n.start_tick for n in notes] == [0, TICKS_PER_S, 2 * TICKS_PER_S, 3 * TICKS_PER_S]
    assert all(n.end_tick - n.start_tick == round(0.05 * TICKS_PER_S) for n in notes)
    assert 3.0 < length_s < 3.2


def test_notes_on_one_tick_are_kept_apart_and_in_order() -> None:
    cfg = SonifyConfig(hlc_us_per_s=1e9, note_s=0.1, severity_range=(0, 10))
    notes = plan_notes([5, 5, 6, 2_000_000_000], [0, 10, 5, None], cfg)
    assert [n.pitch for n in notes] == [48, 84, 66, 48]
    starts = [n.start_tick for n in notes]
    assert starts == sorted(set(starts))
    assert all(a.end_tick <= b.start_tick for a, b in itertools.pairwise(notes))
    assert notes[-1].start_tick == 2 * TICKS_PER_S


def test_severity_must_be_a_number_expression() -> None:
    with pytest.raises(QueryError, match="single number"):
        parse_query("SELECT x").with_severity("x UNION y")
    assert parse_expr("hi * 2", ["hi"]).compiled.kind == "scalar"
    with pytest.raises(QueryError, match=r"^severity: syntax error at 1:5"):
        parse_query("SELECT x").with_severity("MAX(")
    q = parse_query("SELECT x").with_severity("MAX(lag)")
    with pytest.raises(QueryError, match="unknown field 'lag' at 1:5 of the severity; known"):
        q.check({"x"})


# --- CLI ------------------------------------------------------------------------------------

def _app() -> typer.Typer:
    app = typer.Typer()
    add_commands(app)
    return app


def _logfiles(tmp_path: Path, logs: list[list[Event]] = LOGS) -> list[str]:
    paths = []
    for log in logs:
        p = tmp_path / f"{log[0].node}.jsonl"
        write_log(p, log)
        paths.append(str(p))
    return paths


def test_cli_query_batch_json(tmp_path: Path) -> None:
    res = CliRunner().invoke(_app(), ["query", "COMPUTE GLOBAL sum := SUM(x) WHEN sum > 5",
                                      *_logfiles(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["cuts"] == 5 and out["events"] == 6
    assert [m["globals"]["sum"] for m in out["matches"]] == [13, 13, 22]


def test_cli_query_follow_json_lines(tmp_path: Path) -> None:
    res = CliRunner().invoke(_app(), ["query", "SELECT x WHEN EXISTS v IN x : v >= 5",
                                      *_logfiles(tmp_path), "--follow", "--json",
                                      "--idle-seconds", "0.2", "--max-seconds", "10"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(s) for s in res.stdout.splitlines()]
    assert [d["l_us"] for d in lines[:-1]] == [30, 40, 50]
    assert lines[-1]["summary"]["stopped"] == "idle"


def test_cli_bad_query_and_unknown_field_exit_2_with_one_line(tmp_path: Path) -> None:
    logs = _logfiles(tmp_path)
    res = CliRunner().invoke(_app(), ["query", "SELECT x WHEN EXISTS v IN x v", *logs])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0
    assert "syntax error at 1:29" in res.output
    res = CliRunner().invoke(_app(), ["query", "SELECT lag", *logs])
    assert res.exit_code == 2
    assert "unknown field 'lag' at 1:8; known fields: x, y" in res.output


def test_cli_malformed_log_line_keeps_matches_before_it(tmp_path: Path) -> None:
    logs = _logfiles(tmp_path)
    with open(logs[2], "a") as fh:
        fh.write('{"node": "c", "seq": 3}\n')
    res = CliRunner().invoke(_app(), ["query", "SELECT x WHEN EXISTS v IN x : v >= 12",
                                      *logs, "--json"])
    assert res.exit_code == 2
    first, err = res.output.strip().split("\n")
    assert [m["l_us"] for m in json.loads(first)["matches"]] == [50]
    assert f"{logs[2]}:3: missing field(s)" in err


def test_cli_sonify_writes_a_midi_file(tmp_path: Path) -> None:
    midi = tmp_path / "s.mid"
    res = CliRunner().invoke(_app(), ["sonify", "SELECT x WHEN MAX(x) >= 4", *_logfiles(tmp_path),
                                      "--severity", "MAX(x)", "--midi", str(midi), "--speed",
                                      "0.00001", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["voices"][0]["notes"] == 4
    assert [n.pitch for n in read_notes(midi)] == [48, 57, 57, 84]


def test_cli_sonify_plays_each_voice_on_its_own_channel(tmp_path: Path) -> None:
    midi = tmp_path / "v.mid"
    res = CliRunner().invoke(_app(), ["sonify", "SELECT x WHEN MAX(x) >= 4", *_logfiles(tmp_path),
                                      "--severity", "MAX(x)", "--midi", str(midi), "--speed",
                                      "0.00001", "--voice", "SELECT y WHEN 9 IN y | MAX(y)",
                                      "--json"])
    assert res.exit_code == 0, res.output
    voices = json.loads(res.stdout)["voices"]
    assert [(v["notes"], v["channel"]) for v in voices] == [(4, 0), (2, 1)]
    notes = read_notes(midi)
    # both voices share time zero (the first match, t=20 µs): y=9 matches at 40 and 50 µs
    assert [(n.channel, n.start_tick) for n in notes] == [
        (0, 0), (0, TICKS_PER_S), (0, 2 * TICKS_PER_S), (1, 2 * TICKS_PER_S),
        (0, 3 * TICKS_PER_S), (1, 3 * TICKS_PER_S)]
    res = CliRunner().invoke(_app(), ["sonify", "SELECT x", *_logfiles(tmp_path), "--severity",
                                      "MAX(x)", "--voice", "SELECT y"])
    assert res.exit_code == 2 and "must be 'QUERY | SEVERITY'" in res.output

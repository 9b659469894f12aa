"""History: recording, in-flight closing, Parquet round trip, Jepsen exports."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.history import (
    History,
    decode_value,
    encode_value,
    load_history,
    save_history,
    to_edn,
    to_jsonl,
)


def _sample() -> History:
    h = History()
    w = h.invoke(0, "write", ("d/i/a",), ("1.0@5",), "none", 10)
    r = h.invoke(1, "read", ("d/i/a",), (None,), "eventual", 12)
    h.ok(w, 30, node="d/p")
    h.ok(r, 40, ("1.0@5",), "d/s1")
    c = h.invoke(0, "cas", ("d/i/a", "d/i/b"), ("2.0@50", "2.0@50"), "none", 50)
    h.fail(c, 60, "condition failed")
    h.invoke(1, "read", ("d/i/a",), (None,), "consistent", 70)
    return h


def test_ops_and_in_flight_closed_as_info():
    h = _sample()
    assert [op.type for op in h] == ["ok", "ok", "fail", "invoke"]
    assert h.close_in_flight(99, "interrupted") == 1
    last = h.op(3)
    assert (last.type, last.complete_ns, last.error) == ("info", 99, "interrupted")
    assert h.op(1).latency_ns == 28 and h.op(1).node == "d/s1"


def test_parquet_round_trip_with_config(tmp_path: Path):
    h = _sample()
    h.close_in_flight(80)
    save_history(h, tmp_path, {"workload": "staleness"})
    back, config = load_history(tmp_path)
    assert list(back) == list(h)
    assert config["workload"] == "staleness" and config["schema_version"] == 1


def test_load_rejects_missing_and_malformed(tmp_path: Path):
    import pytest

    with pytest.raises(ValueError, match="not a run directory"):
        load_history(tmp_path)
    (tmp_path / "history.parquet").write_text("not parquet")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="malformed"):
        load_history(tmp_path)


def test_jsonl_has_invoke_and_completion_in_time_order(tmp_path: Path):
    h = _sample()
    n = to_jsonl(h, tmp_path / "h.jsonl")
    events = [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert n == len(events) == 7  # three completed ops twice, one still invoked
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    assert [(e["type"], e["process"]) for e in events[:2]] == [("invoke", 0), ("invoke", 1)]
    cas_fail = next(e for e in events if e["type"] == "fail")
    # an op on several keys is a map; values are numbered per key, the recorded ones kept
    assert cas_fail["value"] == {"d/i/a": 2, "d/i/b": 1}
    assert cas_fail["replicalab/value"] == {"d/i/a": "2.0@50", "d/i/b": "2.0@50"}


def test_edn_uses_keywords_and_independent_tuples(tmp_path: Path):
    h = _sample()
    to_edn(h, tmp_path / "h.edn")
    first = (tmp_path / "h.edn").read_text().splitlines()[0]
    assert first.startswith("{:index 0, :process 0,")
    for part in (":type :invoke", ":f :write", ':value ["d/i/a" 1]', ":time 10",
                 ':replicalab/value "1.0@5"'):
        assert part in first
    assert ":key" not in first and ":consistency" not in first  # "none" is left out


@given(st.integers(0, 10**6), st.integers(0, 10**9), st.integers(0, 2**62))
def test_probe_values_round_trip_and_order(writer, seq, t):
    v = decode_value(encode_value(writer, seq, t))
    assert (v.writer, v.seq, v.t_ns) == (writer, seq, t)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["read", "write"]),
                          st.integers(0, 10**12), st.sampled_from(["ok", "fail", "info", None])),
                max_size=30))
def test_any_history_round_trips(tmp_path_factory, ops):
    h = History()
    for proc, f, t, outcome in ops:
        i = h.invoke(proc, f, (f"d/i{proc}/a",), ("x",), "eventual", t)
        if outcome == "ok":
            h.ok(i, t + 5, ("y",), "n1")
        elif outcome == "fail":
            h.fail(i, t + 5, "no")
        elif outcome == "info":
            h.info(i, t + 5, "timeout")
    d = tmp_path_factory.mktemp("h")
    save_history(h, d, {})
    assert list(load_history(d)[0]) == list(h)


def test_a_cas_keeps_what_it_expected_on_disk_and_in_jepsen_events(tmp_path: Path):
    import pyarrow.parquet as pq

    h = History()
    c = h.invoke(3, "cas", ("r/k/v",), ("2.3@9",), "none", 10, expects=("1.0@5",))
    h.ok(c, 20)
    n = h.invoke(3, "cas", ("r/k/v",), ("3.3@30",), "none", 30, expects=(None,))
    h.fail(n, 40, "condition failed")
    save_history(h, tmp_path, {})
    back, _ = load_history(tmp_path)
    assert [op.expects for op in back] == [("1.0@5",), (None,)]
    done = [e for e in _events(h) if e["type"] != "invoke"]
    # Jepsen's [k [from to]], numbered per key; the recorded values beside
    assert [e["value"] for e in done] == [["r/k/v", [1, 2]], ["r/k/v", [None, 3]]]
    assert [e["replicalab/value"] for e in done] == [["1.0@5", "2.3@9"], [None, "3.3@30"]]
    to_edn(h, tmp_path / "h.edn")
    assert ':f :cas' in (tmp_path / "h.edn").read_text()
    assert ':value ["r/k/v" [nil 3]]' in (tmp_path / "h.edn").read_text()
    assert ':replicalab/value [nil "3.3@30"]' in (tmp_path / "h.edn").read_text()
    # a history saved before cas rows kept expectations loads with none
    table = pq.read_table(tmp_path / "history.parquet").drop_columns(["expects"])
    pq.write_table(table, tmp_path / "history.parquet")
    old, _ = load_history(tmp_path)
    assert [op.expects for op in old] == [(), ()]


def _events(h: History) -> list[dict]:
    from replicalab.history.export import events

    return list(events(h))


def test_a_spool_converts_completed_rows_as_they_come_and_saves_the_same_table(tmp_path):
    """The Ctrl-C path converts a growing history in pieces (``Spool``): the table it saves
    equals the table of the whole history, including rows still in flight when a piece was
    cut and rows completed after it."""
    from replicalab.history.io import Spool, _table

    h = History()
    spool = Spool(h, every=4)
    slow = h.invoke(9, "read", ("k",), (None,), "eventual", 0)  # in flight a long time
    for i in range(10):
        j = h.invoke(i % 3, "write", ("k",), (f"v{i}",), "none", i)
        h.ok(j, i + 1)
        spool.feed()
    assert spool.done == 0  # nothing final while the first row is in flight
    h.ok(slow, 20, ("v3",), node="n1")
    for i in range(10, 20):
        j = h.invoke(i % 3, "write", ("k",), (f"v{i}",), "none", i)
        if i != 15:
            h.ok(j, i + 1)
        spool.feed()
    assert 0 < spool.done <= 16  # cut before the row still in flight
    h.fail(16, 30, "late failure")
    assert spool.table().equals(_table(h))
    save_history(h, tmp_path, {"seed": 1}, quick=True, spool=spool)
    back, _ = load_history(tmp_path)
    assert back.values == h.values and back.error == h.error and len(back) == len(h)

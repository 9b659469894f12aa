"""Consistent cuts over HLC-stamped logs: one cut per distinct HLC time, states, consistency."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.hlc.clock import HLC, Timestamp
from replicalab.hlc.cuts import (
    Cut,
    CutBuilder,
    CutError,
    consistent_cuts,
    is_consistent,
    load_logs,
)
from replicalab.hlc.trace import Event, write_log


def simulate(nodes: int, steps: int, seed: int, *, p_send: float = 0.3,
             skew_us: int = 50, latency_us: tuple[int, int] = (3, 10)) -> list[list[Event]]:
    """Return per-node logs of a random message-passing run stamped by real HLCs over skewed
    physical clocks: each node counts its events in ``x`` and keeps a random ``y`` (0..9)."""
    rng = random.Random(seed)
    true_us = [1_000_000]
    skews = [rng.randint(0, skew_us) for _ in range(nodes)]
    clocks = [HLC(lambda i=i: true_us[0] + skews[i]) for i in range(nodes)]
    logs: list[list[Event]] = [[] for _ in range(nodes)]
    inflight: list[tuple[int, int, str, Timestamp]] = []  # (due_us, dst, msg, stamp)
    x = [0] * nodes
    sent = 0

    def log(i: int, ts: Timestamp, kind: str, msg: str | None) -> None:
        x[i] += 1
        logs[i].append(Event(f"n{i}", len(logs[i]) + 1, true_us[0] + skews[i], ts.l, ts.c,
                             kind, msg, {"x": x[i], "y": rng.randint(0, 9)}))

    for _ in range(steps):
        true_us[0] += rng.randint(1, 4)
        due = [m for m in inflight if m[0] <= true_us[0]]
        if due:
            m = due[0]
            inflight.remove(m)
            log(m[1], clocks[m[1]].update(m[3]), "recv", m[2])
            continue
        i = rng.randrange(nodes)
        if nodes > 1 and rng.random() < p_send:
            dst = rng.choice([j for j in range(nodes) if j != i])
            sent += 1
            msg = f"n{i}->n{dst}#{sent}"
            ts = clocks[i].now()
            log(i, ts, "send", msg)
            inflight.append((true_us[0] + rng.randint(*latency_us), dst, msg, ts))
        else:
            log(i, clocks[i].now(), "local", None)
    return logs


def _ev(node: str, seq: int, l_us: int, c: int, kind: str = "local", msg: str | None = None,
        **vars_: object) -> Event:
    return Event(node, seq, l_us, l_us, c, kind, msg, dict(vars_))


def test_one_cut_per_distinct_hlc_time_with_merged_state() -> None:
    a = [_ev("a", 1, 10, 0, x=1, y=7), _ev("a", 2, 20, 0, "send", "a->b#1", x=2),
         _ev("a", 3, 30, 0, x=3)]
    b = [_ev("b", 1, 10, 0, x=5), _ev("b", 2, 20, 1, "recv", "a->b#1", x=6)]
    cuts = list(consistent_cuts([a, b]))
    # times 10.0 (both nodes), 20.0, 20.1, 30.0: four distinct HLC times
    assert [c.time for c in cuts] == [Timestamp(10, 0), Timestamp(20, 0), Timestamp(20, 1),
                                      Timestamp(30, 0)]
    assert cuts[0].state == {"a": {"x": 1, "y": 7}, "b": {"x": 5}}
    # y keeps its last value although the send event does not repeat it
    assert cuts[1].state == {"a": {"x": 2, "y": 7}, "b": {"x": 5}}
    assert cuts[1].seqs == {"a": 2, "b": 1}
    assert cuts[2].seqs == {"a": 2, "b": 2}
    assert cuts[3].values("x") == {"a": 3, "b": 6}


def test_a_node_without_events_yet_is_in_the_cut_with_empty_state() -> None:
    cuts = list(consistent_cuts([[_ev("a", 1, 5, 0, x=1)], [_ev("b", 1, 9, 0, x=2)]]))
    assert cuts[0].state == {"a": {"x": 1}, "b": {}}
    assert cuts[0].seqs == {"a": 1, "b": None}
    assert cuts[0].values("x") == {"a": 1}


def test_is_consistent_detects_a_receive_without_its_send() -> None:
    a = [_ev("a", 1, 10, 0, "send", "a->b#1")]
    b = [_ev("b", 1, 11, 0, "recv", "a->b#1")]
    bad = Cut(Timestamp(11, 0), {"a": {}, "b": {}}, {"a": None, "b": 1})
    assert not is_consistent(bad, [a, b])
    assert all(is_consistent(c, [a, b]) for c in consistent_cuts([a, b]))


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(2, 5), steps=st.integers(1, 120), seed=st.integers(0, 2**31),
       p_send=st.floats(0.0, 1.0), skew_us=st.integers(0, 200))
def test_every_cut_is_consistent_and_holds_exactly_the_events_up_to_its_time(
        nodes: int, steps: int, seed: int, p_send: float, skew_us: int) -> None:
    logs = simulate(nodes, steps, seed, p_send=p_send, skew_us=skew_us)
    cuts = list(consistent_cuts(logs))
    times = sorted({(e.l_us, e.c) for log in logs for e in log})
    assert [(c.time.l, c.time.c) for c in cuts] == times
    for cut in cuts:
        assert is_consistent(cut, logs)
        for log in logs:
            if not log:
                continue
            before = [e for e in log if (e.l_us, e.c) <= (cut.time.l, cut.time.c)]
            assert cut.seqs[log[0].node] == (before[-1].seq if before else None)
            want: dict[str, object] = {}
            for e in before:
                want.update(e.vars)
            assert cut.state[log[0].node] == want


def test_physical_time_cuts_can_be_inconsistent_where_hlc_cuts_are_not() -> None:
    # a node whose clock runs 50 µs behind receives a message: by pt the receive precedes the
    # send; by HLC it follows it
    logs = simulate(2, 400, seed=7, p_send=0.5, skew_us=0)
    skewed = [[Event(e.node, e.seq, e.pt_us - (50 if e.node == "n1" else 0), e.l_us, e.c,
                     e.kind, e.msg, e.vars) for e in log] for log in logs]
    pt_cuts = []
    for t in sorted({e.pt_us for log in skewed for e in log}):
        seqs = {log[0].node: max((e.seq for e in log if e.pt_us <= t), default=None)
                for log in skewed}
        pt_cuts.append(Cut(Timestamp(t, 0), {}, seqs))
    assert not all(is_consistent(c, skewed) for c in pt_cuts)


def test_hlc_that_does_not_grow_is_rejected() -> None:
    with pytest.raises(CutError, match="does not grow at seq 2"):
        list(consistent_cuts([[_ev("a", 1, 10, 0), _ev("a", 2, 10, 0)]]))


def test_two_logs_of_one_node_are_rejected() -> None:
    with pytest.raises(CutError, match="more than one log"):
        list(consistent_cuts([[_ev("a", 1, 10, 0)], [_ev("a", 2, 11, 0)]]))


def test_builder_yields_only_up_to_the_limit_and_continues() -> None:
    b = CutBuilder(["a"])
    for i in range(1, 6):
        b.add(_ev("a", i, 10 * i, 0, x=i))
    first = list(b.cuts(Timestamp(30, 0)))
    assert [c.time.l for c in first] == [10, 20, 30]
    assert b.pending() == 2
    assert [c.time.l for c in b.cuts()] == [40, 50]


def test_malformed_line_is_named_and_the_events_before_it_are_kept(tmp_path: Path) -> None:
    good = tmp_path / "a.jsonl"
    write_log(good, [_ev("a", 1, 10, 0, x=1)])
    bad = tmp_path / "b.jsonl"
    write_log(bad, [_ev("b", 1, 11, 0, x=2), _ev("b", 2, 12, 0, x=3)])
    with bad.open("a") as fh:
        fh.write('{"node": "b", "seq": 3, oops\n')
        fh.write(_ev("b", 4, 14, 0, x=9).to_json() + "\n")
    logs, err = load_logs([good, bad])
    assert err is not None and f"{bad}:3:" in str(err)
    assert [len(log) for log in logs] == [1, 2]
    assert list(consistent_cuts(logs))[-1].values("x") == {"a": 1, "b": 3}

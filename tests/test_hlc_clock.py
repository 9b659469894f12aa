"""Hybrid logical clock: the invariants of Kulkarni et al. as Hypothesis properties, plus
offset rejection, packing and thread safety."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicalab.hlc.clock import HLC, ClockOffsetError, Timestamp

PROPS = settings(max_examples=1000, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@dataclass
class Node:
    offset_us: int
    rate_permille: int  # drift: the clock runs at rate/1000 of true time

    def pt_us(self, t_us: int) -> int:
        return self.offset_us + t_us * self.rate_permille // 1000


@dataclass
class Ev:
    node: int
    t_us: int        # true time
    pt_ticks: int    # physical time the clock read, in ticks
    ts: Timestamp
    ancestors: int   # bitmask of events that happened before this one


@dataclass
class Run:
    nodes: list[Node]
    resolution_us: int
    events: list[Ev]


# an action: (kind 0 local / 1 send / 2 receive, node, peer, true µs elapsed before it)
actions = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 3),
                             st.integers(0, 40)), min_size=1, max_size=60)
clusters = st.lists(st.builds(Node, st.integers(0, 500), st.integers(900, 1100)),
                    min_size=2, max_size=4)


def simulate(nodes: list[Node], resolution_us: int,
             schedule: list[tuple[int, int, int, int]]) -> Run:
    """Run ``schedule`` on real HLC objects whose physical clocks are skewed and drifting."""
    now = {"t": 0}
    clocks = [HLC(lambda n=n: n.pt_us(now["t"]), resolution_us=resolution_us) for n in nodes]
    inbox: list[list[int]] = [[] for _ in nodes]  # indices of send events in flight
    last: list[int | None] = [None] * len(nodes)
    events: list[Ev] = []
    for kind, i, j, dt in schedule:
        node, peer = i % len(nodes), j % len(nodes)
        now["t"] += dt
        anc = 0 if last[node] is None else events[last[node]].ancestors | (1 << last[node])
        if kind == 2 and inbox[node]:
            sent = inbox[node].pop(0)
            anc |= events[sent].ancestors | (1 << sent)
            ts = clocks[node].update(events[sent].ts)
        else:
            ts = clocks[node].now()
        pt_ticks = nodes[node].pt_us(now["t"]) // resolution_us
        events.append(Ev(node, now["t"], pt_ticks, ts, anc))
        last[node] = len(events) - 1
        if kind == 1:
            inbox[peer].append(len(events) - 1)
    return Run(nodes, resolution_us, events)


runs = st.builds(simulate, clusters, st.sampled_from([1, 3, 10]), actions)


@PROPS
@given(runs)
def test_timestamps_strictly_increase_on_every_node(run: Run) -> None:
    for node in range(len(run.nodes)):
        stamps = [e.ts for e in run.events if e.node == node]
        assert all(a < b for a, b in itertools.pairwise(stamps))


@PROPS
@given(runs)
def test_happened_before_implies_hlc_order(run: Run) -> None:
    for e in run.events:
        for k, a in enumerate(run.events):
            if e.ancestors >> k & 1:
                assert a.ts < e.ts


@PROPS
@given(runs)
def test_l_minus_pt_bounded_by_the_clock_offset(run: Run) -> None:
    epsilon = 0
    for e in run.events:
        # the largest amount any clock was ahead of this node's clock at this true time
        ahead = max(n.pt_us(e.t_us) // run.resolution_us for n in run.nodes) - e.pt_ticks
        assert 0 <= e.ts.l - e.pt_ticks <= ahead
        epsilon = max(epsilon, ahead)
    assert all(e.ts.l - e.pt_ticks <= epsilon for e in run.events)


@PROPS
@given(runs)
def test_c_bounded_by_causal_events_sharing_l(run: Run) -> None:
    # Kulkarni et al.: c.f <= |{g : g hb f and l.g = l.f}|
    for e in run.events:
        same_l = sum(1 for k, g in enumerate(run.events)
                     if e.ancestors >> k & 1 and g.ts.l == e.ts.l)
        assert e.ts.c <= same_l


stamps = st.builds(Timestamp, st.integers(0, (1 << 48) - 1), st.integers(0, (1 << 16) - 1))


@PROPS
@given(stamps, stamps)
def test_pack_round_trips_and_preserves_order(a: Timestamp, b: Timestamp) -> None:
    pa, pb = a.pack(), b.pack()
    assert 0 <= pa < 1 << 64
    assert Timestamp.unpack(pa) == a
    assert (pa < pb) == (a < b)
    assert (pa == pb) == (a == b)


@PROPS
@given(stamps, st.integers(0, 1 << 40))
def test_pack_with_epoch_round_trips(a: Timestamp, epoch: int) -> None:
    shifted = Timestamp(a.l + epoch, a.c)
    assert Timestamp.unpack(shifted.pack(epoch), epoch) == shifted


def test_pack_overflow_raises() -> None:
    with pytest.raises(ValueError, match="48 bits"):
        Timestamp(1 << 48, 0).pack()
    with pytest.raises(ValueError, match="16 bits"):
        Timestamp(0, 1 << 16).pack()
    with pytest.raises(ValueError):
        Timestamp(-1, 0).pack()


@PROPS
@given(st.integers(0, 10_000), st.integers(1, 10_000), st.integers(0, 5),
       st.integers(1, 5_000), st.sampled_from([1, 7, 1000]))
def test_remote_beyond_max_offset_is_rejected_and_clock_unchanged(
        pt_us: int, max_offset_us: int, local_events: int, beyond_us: int, res: int) -> None:
    clock = HLC(lambda: pt_us, resolution_us=res, max_offset_us=max_offset_us)
    for _ in range(local_events):
        clock.now()
    before = clock.peek()
    remote_l = (pt_us + max_offset_us + beyond_us) // res + 1
    with pytest.raises(ClockOffsetError):
        clock.update(Timestamp(remote_l, 3))
    assert clock.peek() == before
    # a remote time within the offset is accepted and pulls l forward
    within = Timestamp((pt_us + max_offset_us) // res, 3)
    got = clock.update(within)
    assert got > before and got > within


def test_receive_rules_follow_the_paper() -> None:
    pt = {"us": 100}
    clock = HLC(lambda: pt["us"])
    assert clock.now() == Timestamp(100, 0)
    assert clock.now() == Timestamp(100, 1)          # pt did not move: counter
    assert clock.update(Timestamp(150, 4)) == Timestamp(150, 5)  # remote ahead: adopt it
    assert clock.update(Timestamp(150, 2)) == Timestamp(150, 6)  # same l: max(c) + 1
    assert clock.update(Timestamp(120, 9)) == Timestamp(150, 7)  # remote behind: local c + 1
    pt["us"] = 200
    assert clock.update(Timestamp(150, 9)) == Timestamp(200, 0)  # pt ahead of all: reset c
    assert clock.physical_us() == 200


def test_resolution_coarsens_ticks() -> None:
    pt = {"us": 12_345}
    clock = HLC(lambda: pt["us"], resolution_us=1000)
    assert clock.now() == Timestamp(12, 0)
    pt["us"] = 12_999
    assert clock.now() == Timestamp(12, 1)
    assert clock.to_us(clock.peek()) == 12_000
    with pytest.raises(ValueError):
        HLC(resolution_us=0)


def test_threads_never_share_a_timestamp() -> None:
    frozen = HLC(lambda: 5)  # a stuck physical clock: every stamp comes from the counter
    per_thread = 2000
    results: list[list[Timestamp]] = [[] for _ in range(4)]

    def work(out: list[Timestamp]) -> None:
        for k in range(per_thread):
            out.append(frozen.now() if k % 2 else frozen.update(Timestamp(5, k)))

    threads = [threading.Thread(target=work, args=(r,)) for r in results]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    stamps = [s for r in results for s in r]
    assert len(stamps) == 4 * per_thread
    assert len(set(stamps)) == len(stamps)  # no two events got the same timestamp
    for r in results:
        assert all(a < b for a, b in itertools.pairwise(r))

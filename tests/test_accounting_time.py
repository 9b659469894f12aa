"""Availability counts time, and probe clients keep their schedule (issue 14, item 3).

A client that falls behind skips the slots it missed instead of catching them up in a burst;
availability per window and overall is the fraction of client time covered by ok ops, with
the per-op counts beside it.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.checkers.accounting import availability
from replicalab.faults.schedule import parse_fault
from replicalab.history import NEMESIS, History, encode_value
from replicalab.runtime import VirtualRuntime
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.slots import Slots, next_slot_ns
from replicalab.workloads.staleness import StalenessConfig

S = 1_000_000_000
MS = 1_000_000


# -- the schedule -----------------------------------------------------------------------------

def test_next_slot_keeps_the_grid_and_skips_what_passed():
    assert next_slot_ns(0, 20, 5) == (20, 0)        # on time: the next slot
    assert next_slot_ns(0, 20, 20) == (20, 0)
    assert next_slot_ns(0, 20, 21) == (20, 0)       # one slot late: act at once for it
    assert next_slot_ns(0, 20, 45) == (40, 1)       # slot 20 passed entirely: skipped
    assert next_slot_ns(100, 20, 10_100) == (10_100, 499)
    with pytest.raises(ValueError, match="period must be positive"):
        next_slot_ns(0, 0, 5)


@settings(max_examples=300, deadline=None)
@given(slot=st.integers(0, 10**12), period=st.integers(1, 10**9),
       late=st.integers(-10**9, 10**11))
def test_next_slot_laws(slot: int, period: int, late: int):
    now = slot + period + late
    nxt, skipped = next_slot_ns(slot, period, now)
    assert (nxt - slot) % period == 0                  # on the grid
    assert nxt == slot + period * (1 + skipped)         # skipped = whole slots jumped
    assert nxt >= slot + period                         # never acts twice for one slot
    if now <= slot + period:
        assert skipped == 0
    else:
        assert nxt <= now < nxt + period                # the latest due slot, none older


def test_a_stalled_client_issues_one_late_op_then_keeps_the_grid():
    rt = VirtualRuntime()
    times: list[int] = []

    async def client() -> None:
        slots = Slots(rt, 20 * MS, start_ns=0)
        for i in range(12):
            await slots.wait()
            times.append(rt.now_ns())
            await rt.sleep_ns(1_000 * MS if i == 3 else MS)  # op 3 stalls for 1 s
            slots.advance()

    rt.run(client())
    gaps = [(b - a) // MS for a, b in itertools.pairwise(times)]
    assert gaps[:3] == [20, 20, 20]
    assert gaps[3] == 1_000                             # the next op comes at once ...
    assert gaps[4:] == [20] * 7                         # ... then on the grid: no burst
    assert all(t % (20 * MS) == 0 for t in times)


# -- availability weighted by time ------------------------------------------------------------

def _reads(h: History, process: int, start_ns: int, end_ns: int, gap_ns: int,
           latency_ns: int, ok: bool = True) -> None:
    t = start_ns
    while t < end_ns:
        i = h.invoke(process, "read", ("d/i/a",), (None,), "consistent", t)
        if ok:
            h.ok(i, t + latency_ns, (encode_value(0, 1, 0),))
        else:
            h.info(i, t + latency_ns, "timeout")
        t += max(gap_ns, latency_ns)


def test_a_blocked_reader_counts_for_the_time_it_waited():
    h = History()
    _reads(h, 1, 0, 5 * S, 20 * MS, MS)                   # 250 ok reads in 5 s
    _reads(h, 1, 5 * S, 15 * S, 2 * S, 2 * S, ok=False)   # 5 timeouts of 2 s each
    _reads(h, 1, 15 * S, 25 * S, 20 * MS, MS)             # 500 ok reads
    a = availability(h, 1.0)
    assert a["overall"] == pytest.approx(15 / 25, abs=1e-3)
    assert a["overall_ops"] == pytest.approx(750 / 755, abs=1e-6)  # the old measure: 99 %
    win = dict(zip(a["t_s"], a["ok_fraction"], strict=True))
    assert [win[float(t)] for t in range(5, 15)] == [0.0] * 10
    assert a["during_faults"] is None  # no fault was injected: nothing to be during
    assert win[4.0] == 1.0 and win[15.0] == 1.0
    assert a["by_f"]["read"]["overall"] == a["overall"] and "write" not in a["by_f"]
    assert a["time_s"] == pytest.approx(24.981, abs=1e-6)  # the last read ends at 24.981 s
    assert a["ops"][5] == 1 and a["ok_ops"][5] == 0 and a["ok_fraction_ops"][0] == 1.0


def _fault(h: History, at_ns: int, heal_ns: int) -> None:
    for t, f in ((at_ns, "partition"), (heal_ns, "heal")):
        i = h.invoke(NEMESIS, f, ("US-W",), ("region US-W cut off",), "none", t)
        h.ok(i, t)


def test_during_the_fault_is_the_faults_window_only():
    """Down from 5 s to 15 s, then a slow recovery (3 s of timeouts after the heal at 12 s):
    during the fault (7 s to 12 s) the reader was never served; over the run, 15 of 25 s."""
    h = History()
    _reads(h, 1, 0, 5 * S, 20 * MS, MS)
    _reads(h, 1, 5 * S, 15 * S, 2 * S, 2 * S, ok=False)
    _reads(h, 1, 15 * S, 25 * S, 20 * MS, MS)
    _fault(h, 7 * S, 12 * S)
    a = availability(h, 1.0)
    assert a["during_faults"] == 0.0
    assert a["by_f"]["read"]["during_faults"] == 0.0
    assert a["overall"] == pytest.approx(15 / 25, abs=1e-3)
    # a fault the reader rode through half of (4 s to 10 s: served 4-5 s, blocked 5-10 s)
    h2 = History()
    _reads(h2, 1, 0, 5 * S, 20 * MS, MS)
    _reads(h2, 1, 5 * S, 15 * S, 2 * S, 2 * S, ok=False)
    _reads(h2, 1, 15 * S, 25 * S, 20 * MS, MS)
    _fault(h2, 4 * S, 10 * S)
    assert availability(h2, 1.0)["during_faults"] == pytest.approx(1 / 6, abs=1e-3)


def test_a_read_that_waits_out_the_fault_was_not_served_during_it():
    """Cut off from 5 s to 10 s: reads time out after 2 s until one, invoked at 9 s, waits
    and is answered at 10.5 s, after the heal. Over the run its wait counts as served (the
    client time of an ok op); while the fault lasted nothing was answered."""
    h = History()
    _reads(h, 1, 0, 5 * S, 20 * MS, MS)
    _reads(h, 1, 5 * S, 9 * S, 2 * S, 2 * S, ok=False)
    _reads(h, 1, 9 * S, 10 * S, 2 * S, 1500 * MS)   # invoked at 9 s, ok at 10.5 s
    _reads(h, 1, 10500 * MS, 20 * S, 20 * MS, MS)
    _fault(h, 5 * S, 10 * S)
    a = availability(h, 1.0)
    assert a["during_faults"] == 0.0
    assert a["overall"] == pytest.approx(16 / 20, abs=1e-3)


def _writes(h: History, process: int, times_ms: list[int], latency_ms: int,
            ok: bool) -> None:
    for t_ms in times_ms:
        i = h.invoke(process, "write", ("d/i/a",), (encode_value(process, t_ms, 0),),
                     "none", t_ms * MS)
        if ok:
            h.ok(i, (t_ms + latency_ms) * MS)
        else:
            h.info(i, (t_ms + latency_ms) * MS, "connection refused")


def test_an_op_answered_before_the_fault_covers_nothing_in_it():
    """Issue 29's cut-off writer, by hand: a write every second answered in 10 ms until the
    primary is cut off at 1.5 s for 3 s; every write inside the fault fails. The write
    answered at 1.01 s was once credited with the 0.5 s of the fault before the next write
    (16.7 %); no operation was served in the fault, so it is 0 %."""
    h = History()
    _writes(h, 1, [0, 1000], 10, ok=True)
    _writes(h, 1, [2000, 3000, 4000], 10, ok=False)
    _writes(h, 1, [5000, 6000], 10, ok=True)
    _fault(h, 1500 * MS, 4500 * MS)
    a = availability(h, 1.0)
    assert a["during_faults"] == 0.0
    assert a["by_f"]["write"]["during_faults"] == 0.0
    # the whole run still counts the first writes' slots as served
    assert a["overall"] == pytest.approx((3000 + 10) / 6010, abs=1e-3)


def test_a_client_the_fault_does_not_touch_stays_fully_available():
    """The same schedule with every write answered: the idle half second between the last
    write before the fault and the first inside it is not counted against the store."""
    h = History()
    _writes(h, 1, [0, 1000, 2000, 3000, 4000, 5000], 10, ok=True)
    _fault(h, 1500 * MS, 4500 * MS)
    assert availability(h, 1.0)["during_faults"] == 1.0


def test_an_op_in_flight_when_the_fault_begins_counts_from_its_start():
    """A write invoked at 1.4 s and answered at 1.6 s, inside a fault from 1.5 s, was served
    in the fault: it covers 1.5 s to the next write at 2.4 s, which fails until 4.4 s."""
    h = History()
    _writes(h, 1, [400], 10, ok=True)
    _writes(h, 1, [1400], 200, ok=True)
    _writes(h, 1, [2400], 2000, ok=False)
    _writes(h, 1, [4400], 10, ok=True)
    _fault(h, 1500 * MS, 4500 * MS)
    # served 1.5-2.4 s (0.9 s), refused 2.4-4.4 s (2.0 s), and the last write, answered at
    # 4.41 s before the heal, covers its own 10 ms
    during = availability(h, 1.0)["during_faults"]
    assert during == pytest.approx((0.9 + 0.01) / (0.9 + 2.0 + 0.01), abs=1e-4)


@st.composite
def _histories(draw: st.DrawFn) -> History:
    h = History()
    for proc in range(draw(st.integers(1, 3))):
        t = draw(st.integers(0, 3 * S))
        for _ in range(draw(st.integers(1, 25))):
            lat = draw(st.integers(0, 2 * S))
            f = draw(st.sampled_from(["read", "write"]))
            i = h.invoke(proc, f, ("d/i/a",), (None,), "eventual", t)
            kind = draw(st.sampled_from(["ok", "ok", "fail", "info"]))
            getattr(h, kind)(i, t + lat, *(() if kind == "ok" else ("x",)))
            t += lat + draw(st.integers(0, S))
    return h


@settings(max_examples=150, deadline=None)
@given(h=_histories(), window_s=st.sampled_from([0.25, 1.0, 2.5]))
def test_windows_add_up_to_the_overall_figure(h: History, window_s: float):
    a = availability(h, window_s)
    tol = 1e-5 + 2e-6 * len(a["t_s"])  # every figure is rounded to 1e-6 (s or fraction)
    assert sum(a["client_s"]) == pytest.approx(a["time_s"], abs=tol)
    ok_s = sum(f * c for f, c in zip(a["ok_fraction"], a["client_s"], strict=True))
    assert ok_s == pytest.approx(a["ok_time_s"], abs=tol)
    assert sum(a["ops"]) == a["count"] == len(h) and sum(a["ok_ops"]) == a["ok_count"]
    assert all(0.0 <= x <= 1.0 for x in a["ok_fraction"])
    if a["time_s"] > 0:  # the s figures are rounded to the us
        assert a["overall"] == pytest.approx(a["ok_time_s"] / a["time_s"],
                                             abs=2e-6 / a["time_s"] + 1e-6)
    parts = a["by_f"].values()
    assert sum(p["time_s"] for p in parts) == pytest.approx(a["time_s"], abs=tol)
    if a["ok_count"] == a["count"]:
        assert a["overall"] == 1.0


# -- end to end on the simulated store (virtual time) -----------------------------------------

def test_partitioned_consistent_reader_unavailable_for_the_partitions_share(tmp_path: Path):
    """The issue's compare scenario on sim://primary: a reader in US-W whose consistent reads
    go to the primary in US-E, cut off from 5 s to 15 s of a 25 s run."""
    rate = 50
    spec = ProbeSpec(store="sim://primary?regions=dc3", workload="staleness",
                     options=ProbeOptions(duration_s=25, consistency="consistent",
                                          write_interval_s=1.0, read_rate=rate, period_s=1.0),
                     config=StalenessConfig(placement="separate-clients", writer_region="US-E",
                                            reader_region="US-W"),
                     faults=(parse_fault("at=5s partition region=US-W for=10s"),))
    run = run_probe(spec, tmp_path)
    reads = run.results["availability"]["by_f"]["read"]
    assert reads["overall"] == pytest.approx(15 / 25, abs=0.02)
    assert reads["during_faults"] < 0.02  # cut off from the primary for the whole fault
    assert reads["overall_ops"] > 0.95  # by operations the partition nearly vanishes
    # no catch-up burst: no window holds more reads than the schedule offers
    assert max(reads["ops"]) <= rate * reads["window_s"] + 1
    after = [n for t, n in zip(reads["t_s"], reads["ops"], strict=True) if 15 <= t < 17]
    assert after and max(after) <= rate + 1

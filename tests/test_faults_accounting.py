"""Fault schedules and run accounting (availability, fault periods, lost writes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicalab.checkers.accounting import FINAL, availability, fault_periods, lost_writes
from replicalab.faults.schedule import Fault, load_faults, parse_fault
from replicalab.history import NEMESIS, History, encode_value

S = 1_000_000_000


def test_parse_fault_forms():
    assert parse_fault("at=30s crash node=2 for=20s") == Fault("crash", 30.0, 20.0, node=2)
    f = parse_fault("slow region=EU at=500ms for=2m ms=150")
    assert (f.action, f.at_s, f.for_s, f.region, f.extra_ms) == ("slow", 0.5, 120.0, "EU", 150)
    assert f.label == "slow region EU +150 ms"


@pytest.mark.parametrize(("text", "message"), [
    ("at=1s explode node=1 for=1s", "action 'explode' must be one of"),
    ("at=1s crash node=1", "give both at="),
    ("at=1s crash for=1s", "exactly one target"),
    ("at=1s crash node=1 region=EU for=1s", "exactly one target"),
    ("at=soon crash node=1 for=1s", "at='soon' is not a duration"),
    ("at=1s crash node=x for=1s", "node='x' must be a node number"),
    ("at=1s slow node=1 for=1s", "slow needs ms="),
    ("at=1s crash node=1 for=0s", "for= positive"),
    ("at=1s crash pause node=1 for=1s", "two actions"),
    ("at=1s crash node=1 for=1s colour=red", "unknown field 'colour'"),
])
def test_bad_faults_are_one_line_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_fault(text)


def test_faults_from_toml(tmp_path: Path):
    path = tmp_path / "f.toml"
    path.write_text('[[fault]]\naction = "pause"\nnode = 0\nat = "10s"\nfor = "5s"\n'
                    '[[fault]]\naction = "partition"\nregion = "EU"\nat = "20s"\nfor = "3s"\n')
    assert load_faults(path) == [Fault("pause", 10.0, 5.0, node=0),
                                 Fault("partition", 20.0, 3.0, region="EU")]
    path.write_text("[[fault]\n")
    with pytest.raises(ValueError, match="not valid TOML"):
        load_faults(path)


def _history() -> History:
    h = History()
    for sec in range(6):
        i = h.invoke(0, "write", ("d/i/a",), (encode_value(0, sec + 1, sec * S),), "none",
                     sec * S)
        if sec in (2, 3):
            h.info(i, sec * S + 5, "timeout")
        else:
            h.ok(i, sec * S + 5)
    c = h.invoke(NEMESIS, "crash", ("n1",), ("crash n1",), "none", 2 * S)
    h.ok(c, 2 * S + 1)
    e = h.invoke(NEMESIS, "heal", ("n1",), ("crash n1",), "none", 4 * S)
    h.ok(e, 4 * S + 1)
    return h


def test_availability_and_fault_periods():
    h = _history()
    a = availability(h, 1.0)
    assert a["ok_fraction"] == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    # by time: each write stands for the second until the next; two of five seconds failed
    assert a["overall"] == pytest.approx(3 / 5)
    assert a["overall_ops"] == pytest.approx(4 / 6)
    # from when the crash had happened (its op completed, 1 ns after it began) to the heal
    assert fault_periods(h) == [{"start_ms": 2000.000001, "end_ms": 4000.0,
                                 "label": "crash n1"}]


def test_a_fault_is_on_from_when_its_action_completed():
    """A partition installed over SSH on hosts takes a second of its window to be in place:
    the period starts then (a failed action: when it was tried)."""
    h = History()
    i = h.invoke(0, "write", ("d/i/a",), (encode_value(0, 1, 0),), "none", 0)
    h.ok(i, 5)
    p = h.invoke(NEMESIS, "partition", ("region EU",), ("partition region EU",), "none", S)
    h.ok(p, S + S // 2)
    x = h.invoke(NEMESIS, "pause", ("n1",), ("pause n1",), "none", 2 * S)
    h.fail(x, 2 * S + S // 2, "HostError: unreachable")
    for label in ("partition region EU", "pause n1"):
        e = h.invoke(NEMESIS, "heal", (label,), (label,), "none", 4 * S)
        h.ok(e, 4 * S + 1)
    assert fault_periods(h) == [
        {"start_ms": 1500.0, "end_ms": 4000.0, "label": "partition region EU"},
        {"start_ms": 2000.0, "end_ms": 4000.0, "label": "pause n1"}]


def test_lost_acknowledged_writes():
    h = _history()
    assert lost_writes(h)["checked"] is False
    f = h.invoke(FINAL, "read", ("d/i/a",), (None,), "consistent", 7 * S)
    h.ok(f, 7 * S + 1, (encode_value(0, 5, 4 * S),))  # the final ok write (seq 6) is missing
    lost = lost_writes(h)
    assert (lost["acknowledged"], lost["lost"]) == (4, 1)
    assert lost["examples"][0]["value"] == encode_value(0, 6, 5 * S)


def test_a_store_silent_at_the_end_is_gone_only_if_the_final_reads_get_no_answer():
    from replicalab.workloads.base import ProbeOptions
    from replicalab.workloads.runner import ProbeSpec, _unreachable

    def run(final_ok: bool) -> str:
        h = History()
        for k in range(40):  # 4 s of answers, then 3 s of "leader changed" (unknown)
            h.ok(h.invoke(0, "read", ("d/i/a",), (None,), "eventual", k * S // 10),
                 k * S // 10 + 5)
        for k in range(40, 70):
            i = h.invoke(0, "write", ("d/i/a",), (encode_value(0, k, k),), "none", k * S // 10)
            h.info(i, k * S // 10 + 5, "n0: etcdserver: leader changed")
        i = h.invoke(FINAL, "read", ("d/i/a",), (None,), "consistent", 8 * S)
        if final_ok:
            h.ok(i, 8 * S + 5)
        else:
            h.info(i, 8 * S + 5, "n0: ConnectError")
        spec = ProbeSpec(store="etcd://127.0.0.1:1", workload="register",
                         options=ProbeOptions(duration_s=7.0))
        return _unreachable(spec, h)

    assert run(final_ok=True) == ""  # an outage (an election): availability shows it
    assert run(final_ok=False).startswith("the store became unreachable 4.0 s into the run")


def test_final_reads_that_never_connect_leave_why_in_the_history_and_the_result():
    """A restarted store that never comes back: the final reads give up after their settle
    time, the history keeps a failed final read saying why, and ``lost_writes`` is
    unchecked with that reason (not a silent "checked: False")."""
    from replicalab.stores import open_store
    from replicalab.workloads.runner import _final_reads

    store = open_store("sim://primary", 1)
    h = History()
    h.ok(h.invoke(0, "write", ("d/i/a",), (encode_value(0, 1, 1),), "none", 0), 5)

    async def refuse(region: str | None = None):
        raise ValueError("cannot reach the store at n0: connection refused")

    store.connect = refuse  # type: ignore[method-assign]
    store.runtime.run(_final_reads(store, h, settle_s=1.0))
    failed = [h.op(i) for i in range(len(h)) if h.op(i).process == FINAL]
    assert [(o.f, o.type) for o in failed] == [("read", "fail")], failed
    assert "connection refused" in failed[0].error and "1 s" in failed[0].error
    lost = lost_writes(h)
    assert lost["checked"] is False and "connection refused" in lost["why"], lost

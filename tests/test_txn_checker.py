"""Transaction checker (checkers/txn): each anomaly gadget found by both engines, the
explanations, cycle classes, a search that must stop says "unknown", serial histories
valid, an injected anomaly found, and the native core equal to the Python reference on
random histories of every kind. Elle's own cases are in test_txn_elle.py, the oracle in
test_txn_oracle.py, the issue-36 regressions in test_txn_issue36.py."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicalab.checkers.txn import Options, check, check_txns, result_json
from replicalab.checkers.txn.graph import classify
from replicalab.checkers.txn.run import native_core
from replicalab.checkers.txn.synth import (
    EXPECTED,
    GADGETS,
    REGISTER_EXPECTED,
    REGISTER_GADGETS,
    gadget,
    serial,
    si_execution,
    sloppy,
)
from replicalab.checkers.txn.types import PROCESS, REALTIME, RW, WR, WW, Txn

ENGINES = ["python"] + (["native"] if native_core() is not None else [])
CASES = ([("list-append", g, EXPECTED[g]) for g in GADGETS]
         + [("rw-register", g, REGISTER_EXPECTED[g]) for g in REGISTER_GADGETS])


def _opts(name: str) -> Options:
    """A process gadget needs process edges: ask about strong session serializability."""
    return Options(("strong-session-serializable",)) if name.endswith("-process") else Options()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("model", "name", "expected"), CASES,
                         ids=[f"{m}:{g}" for m, g, _ in CASES])
def test_each_gadget_gives_its_class(model, name, expected, engine):
    r = check(gadget(name, model=model), model, _opts(name), engine=engine)
    assert set(r.counts) == expected
    assert r.valid is False
    for typ, ans in r.anomalies.items():
        an = ans[0]
        assert an.explanation
        if an.cycle is not None:  # a cycle closes, and its class is the one reported
            assert [s.dst for s in an.cycle] == [s.src for s in an.cycle[1:]] + [
                an.cycle[0].src]
            assert classify([("ww", "wr", "rw", "process", "realtime").index(s.kind)
                             for s in an.cycle]) == typ


def test_explanations_name_the_evidence():
    r = check_txns(gadget("G-single-item"), "list-append")
    text = r.anomalies["G-single-item"][0].explanation
    assert ("T0 < T1: T0 read key g-b as the empty list, without T1's append of 1 (rw)"
            in text)
    assert "T1 < T0: T0 read T1's append of 1 to key g-a (wr)" in text
    doc = result_json(r)
    assert doc == r.to_json()
    assert doc["valid"] is False and doc["anomaly_types"] == ["G-single-item"]
    assert doc["not"] == ["consistent-view", "repeatable-read"]
    assert "serializable" in doc["also_not"]
    assert doc["anomalies"]["G-single-item"][0]["cycle"][0]["type"] in ("rw", "wr")


def test_lost_update_explained_as_what_each_ignored():
    appends = check_txns(gadget("lost-update"), "list-append").anomalies["lost-update"][0]
    assert "read key g-a = [] and then wrote it" in appends.explanation[0]
    writes = check_txns(gadget("lost-update", model="rw-register"), "rw-register")
    assert "= nil and then wrote it" in writes.anomalies["lost-update"][0].explanation[0]


def _ring(k: int, start: int = 0) -> list[Txn]:
    """k overlapping transactions, each reading its key empty and appending to the next
    one's: every one misses the previous one's append, a single rw cycle through all k."""
    return [Txn(start + i, start + i, "ok", 0, 10, [("r", f"k{i}", ()),
                                                    ("append", f"k{(i + 1) % k}", 1)])
            for i in range(k)]


@pytest.mark.parametrize("engine", ENGINES)
def test_anomalous_transactions_are_counted_exactly(engine):
    # one ring of 9 (one component: one cycle reported) and a bystander that read k1
    # after the ring had ended
    txns = [*_ring(9), Txn(9, 99, "ok", 20, 30, [("r", "k1", (1,))])]
    r = check(txns, "list-append", engine=engine)
    assert r.counts["G2-item"] == 1 and r.anomalous_txns == 9


def test_cycle_classes():
    assert classify([WW, WW]) == "G0"
    assert classify([WW, WR]) == "G1c"
    assert classify([RW, WR]) == "G-single-item"
    assert classify([RW, WR, RW, WW]) == "G-nonadjacent-item"
    assert classify([RW, WR, WW, RW]) == "G2-item"  # last and first rw are adjacent
    assert classify([RW, RW]) == "G2-item"
    assert classify([WW, PROCESS]) == "G0-process"
    assert classify([RW, PROCESS, REALTIME]) == "G-single-item-realtime"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_search_that_must_stop_says_so(engine):
    # a G-nonadjacent cycle: the search for G-single must look for a path it will not
    # find (the cycle-exists test says a forbidden walk is there); with no step of budget
    # it stops, says which class it left undecided, and claims nothing from it
    txns = gadget("G-nonadjacent-item")
    opts = Options(("serializable",))
    r = check(txns, "list-append", opts, engine=engine, max_steps=0)
    assert r.unfinished and "G-single-item" in r.unfinished[0].classes
    assert r.unfinished[0].limit == "steps"
    assert "cycle-search-timeout" in r.anomaly_types
    assert "consistent-view" not in r.not_ + r.also_not + r.possible
    full = check(txns, "list-append", opts, engine=engine)
    assert full.anomaly_types == ["G-nonadjacent-item"] and not full.unfinished
    assert "consistent-view" in full.possible


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31), n=st.integers(1, 300), keys=st.integers(1, 8),
       length=st.integers(1, 6), model=st.sampled_from(["list-append", "rw-register"]))
def test_serial_histories_with_overlapping_timings_are_valid(engine, seed, n, keys, length,
                                                            model):
    """Never invalid. Unknown only for an empty graph, or (rw-register) where the search
    of the version orders the reads leave open ran out of budget and says so: which
    model, and the limit."""
    txns = serial(random.Random(seed), n, keys, length, model=model)
    r = check(txns, model, Options(wfr_keys=True), engine=engine)
    assert r.valid in (True, "unknown"), (r.anomaly_types, r.counts)
    searched = {f"{m}-cycle-exists" for m in ("PL-3", "PL-SS", "PL-SI")}
    assert all(model == "rw-register" and set(u.classes) <= searched and u.limit
               for u in r.unfinished), r.unfinished
    if r.valid == "unknown":
        assert r.anomaly_types == (["cycle-search-timeout"] if r.unfinished
                                   else ["empty-transaction-graph"]), r.anomaly_types


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31), n=st.integers(0, 300), data=st.data())
def test_an_injected_anomaly_is_found(engine, seed, n, data):
    name = data.draw(st.sampled_from(GADGETS))
    rng = random.Random(seed)
    txns = serial(rng, n, keys=5, max_len=4)
    start = rng.randrange(10 * n + 1)
    txns += gadget(name, start=start, process=1000, index=len(txns), key="zz")
    r = check(txns, "list-append", _opts(name), engine=engine)
    assert r.valid is False
    assert EXPECTED[name] - {"empty-transaction-graph"} <= set(r.counts)


def _same(a, b) -> None:
    assert (a.valid, a.anomaly_types, a.not_, a.also_not, a.possible) == (
        b.valid, b.anomaly_types, b.not_, b.also_not, b.possible)
    assert a.counts == b.counts
    assert a.anomalous_txns == b.anomalous_txns
    assert [(u.classes, u.size) for u in a.unfinished] == [
        (u.classes, u.size) for u in b.unfinished]


@pytest.mark.skipif("native" not in ENGINES, reason="native core not built")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), kind=st.sampled_from(["sloppy", "si", "serial"]),
       model=st.sampled_from(["list-append", "rw-register"]),
       cm=st.sampled_from([("strict-serializable",), ("strong-session-serializable",),
                           ("serializable",), None]),
       wfr=st.booleans())
def test_native_core_equals_the_reference(seed, kind, model, cm, wfr):
    rng = random.Random(seed)
    if kind == "sloppy":
        txns = sloppy(rng, rng.randint(1, 300), rng.randint(1, 6), 4, model=model)
    elif kind == "si" and model == "list-append":
        txns = si_execution(rng, rng.randint(1, 400), keys=rng.randint(1, 5),
                            read_skew_p=rng.choice((0.0, 0.05)))
    else:
        txns = serial(rng, rng.randint(1, 300), rng.randint(1, 6), 4, model=model)
    opts = Options(cm, wfr_keys=wfr)
    _same(check(txns, model, opts, engine="native"), check(txns, model, opts,
                                                           engine="python"))


@pytest.mark.parametrize("engine", ENGINES)
def test_vector_keys_are_named_alike_by_both_readers(engine, tmp_path):
    from replicalab.checkers.txn import check_file

    p = tmp_path / "h.edn"
    p.write_text("{:type :ok, :process 0, :f :txn, :value [[:append [:anti 3] 1] [:r :y [1]]]}\n"
                 "{:type :ok, :process 1, :f :txn, :value [[:append [:anti 3] 2] [:append :y 1]]}\n"
                 "{:type :ok, :process 2, :f :txn, :value [[:r [:anti 3] [1 2]]]}\n")
    r = check_file(p, "list-append", Options(("serializable",)), engine=engine)
    assert r.anomaly_types == ["G1c"]
    assert any("key [anti 3]" in line for line in r.anomalies["G1c"][0].explanation)

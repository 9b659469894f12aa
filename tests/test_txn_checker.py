"""Transaction checker (checkers/txn): known answers per anomaly class, serial histories
valid, injected anomalies found, the model lattice, the budget, and the native core equal
to the Python reference."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicalab.checkers.txn import check, check_txns, result_json, verdict
from replicalab.checkers.txn.graph import classify
from replicalab.checkers.txn.synth import (
    EXPECTED,
    GADGETS,
    REGISTER_EXPECTED,
    REGISTER_GADGETS,
    gadget,
    serial,
)
from replicalab.checkers.txn.types import PROCESS, REALTIME, RW, WR, WW, Txn

CASES = ([("list-append", g, EXPECTED[g]) for g in GADGETS]
         + [("rw-register", g, REGISTER_EXPECTED[g]) for g in REGISTER_GADGETS])


@pytest.mark.parametrize(("model", "name", "expected"), CASES,
                         ids=[f"{m}:{g}" for m, g, _ in CASES])
def test_each_gadget_gives_exactly_its_class(model, name, expected):
    r = check_txns(gadget(name, model=model), model)
    assert set(r.anomaly_types) == expected
    assert r.valid is False
    for typ in r.anomaly_types:
        an = r.anomalies[typ][0]
        assert an.explanation
        if an.cycle is not None:  # a cycle closes, and its class is the one reported
            assert [s.dst for s in an.cycle] == [s.src for s in an.cycle[1:]] + [
                an.cycle[0].src]
            assert classify([("ww", "wr", "rw", "process", "realtime").index(s.kind)
                             for s in an.cycle]) == typ


def test_explanations_name_the_evidence():
    r = check_txns(gadget("G-single"), "list-append")
    text = r.anomalies["G-single"][0].explanation
    assert "T0 < T1: T0 read key g-b (an empty list) without T1's append of 1 (rw)" in text
    assert "T1 < T0: T0 read T1's append of 1 to key g-a (wr)" in text
    doc = result_json(r)
    assert doc["valid"] is False and doc["anomaly_types"] == ["G-single"]
    assert doc["not"] == ["consistent-view"] and "serializable" in doc["also_not"]
    assert doc["anomalies"]["G-single"][0]["cycle"][0]["type"] in ("rw", "wr")


def test_lost_update_explained_as_what_the_model_loses():
    appends = check_txns(gadget("lost-update"), "list-append").anomalies["lost-update"][0]
    assert "appended to it" in appends.explanation[0]
    assert "lost" not in appends.explanation[0]  # no append is lost; each ignored the others
    writes = check_txns(gadget("lost-update", model="rw-register"), "rw-register")
    assert "all but one write was lost" in writes.anomalies["lost-update"][0].explanation[0]


def _ring(k: int, start: int = 0) -> list[Txn]:
    """k overlapping transactions, each reading its key empty and appending to the next
    one's: every one misses the previous one's append, a single rw cycle through all k."""
    return [Txn(start + i, start + i, "ok", 0, 10, [("r", f"k{i}", None),
                                                    ("append", f"k{(i + 1) % k}", 1)])
            for i in range(k)]


@pytest.mark.parametrize("engine", ["python", "native"])
def test_anomalous_transactions_are_counted_exactly(engine):
    if engine == "native" and not hasattr(pytest.importorskip("replicalab_native"),
                                          "txn_check_cols"):
        pytest.skip("native core built without the transaction checker")
    # one ring of 9 (one component: one cycle reported) and a bystander that read k1
    # after the ring had ended
    txns = [*_ring(9), Txn(9, 99, "ok", 20, 30, [("r", "k1", (1,))])]
    r = check(txns, "list-append", engine=engine)
    assert r.counts == {"G2-item": 1} and len(r.anomalies["G2-item"][0].txns) == 9
    assert r.anomalous_txns == 9
    assert result_json(r)["anomalous_txns"] == 9
    # a non-cycle anomaly's transactions count too, once each
    dup = Txn(10, 98, "ok", 40, 50, [("r", "k2", (1, 1))])
    assert check([*txns, dup], "list-append", engine=engine).anomalous_txns == 10


@pytest.mark.parametrize("engine", ["python", "native"])
def test_a_real_time_cycle_does_not_count_the_transactions_between_its_ends(engine):
    if engine == "native" and not hasattr(pytest.importorskip("replicalab_native"),
                                          "txn_check_cols"):
        pytest.skip("native core built without the transaction checker")
    # T0 appends, five unrelated transactions run after it, then T6 reads the key empty:
    # the whole history is one component through real-time order, but only the reported
    # cycle (T0, T6 and one bystander on the way) takes part in the anomaly
    txns = [Txn(0, 0, "ok", 0, 10, [("append", "x", 1)])]
    txns += [Txn(i, i, "ok", 15, 25, [("append", f"y{i}", 1)]) for i in range(1, 6)]
    txns += [Txn(6, 6, "ok", 40, 50, [("r", "x", None)]),
             Txn(7, 7, "ok", 60, 70, [("r", "x", (1,))])]
    r = check(txns, "list-append", engine=engine)
    assert r.anomaly_types == ["G-single-realtime"]
    assert r.anomalous_txns == 3


def test_cycle_classes():
    assert classify([WW, WW]) == "G0"
    assert classify([WW, WR]) == "G1c"
    assert classify([RW, WR]) == "G-single"
    assert classify([RW, WR, RW, WR]) == "G-nonadjacent"
    assert classify([RW, RW]) == "G2-item"
    assert classify([RW, WR, PROCESS]) == "G-single-process"
    assert classify([RW, PROCESS, REALTIME]) == "G-single-realtime"


def test_model_lattice():
    not_, also, possible = verdict(["G2-item"])  # write skew: snapshot isolation allows it
    assert not_ == ["repeatable-read"] and "serializable" in also
    assert "snapshot-isolation" in possible and "serializable" not in possible
    not_, also, possible = verdict(["G-single"])
    assert not_ == ["consistent-view"]
    assert {"snapshot-isolation", "repeatable-read", "serializable"} <= set(also)
    assert "read-committed" in possible
    not_, _, possible = verdict(["G-single-realtime"])
    assert not_ == ["strong-snapshot-isolation"] and "serializable" in possible
    not_, _, possible = verdict(["G1a"])
    assert not_ == ["read-committed"] and possible == ["read-uncommitted"]
    assert verdict([])[0] == [] and "strict-serializable" in verdict([])[2]


def test_a_search_that_must_stop_says_unknown():
    r = check_txns(gadget("G2-item"), "list-append", max_steps=0)
    assert r.valid == "unknown" and r.anomaly_types == []
    assert r.unfinished and r.unfinished[0].size == 2
    assert "strict-serializable" not in r.possible or r.unfinished  # never a silent valid


_seed = st.integers(0, 2**32 - 1)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_seed, st.integers(1, 25), st.integers(1, 5), st.integers(1, 5),
       st.sampled_from(["list-append", "rw-register"]))
def test_serial_histories_with_overlapping_timings_are_valid(seed, n, keys, length, model):
    txns = serial(random.Random(seed), n, keys, length, model, writes_per_key=6)
    r = check_txns(txns, model)
    assert r.valid is True, (r.anomaly_types, txns)
    assert "strict-serializable" in r.possible


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_seed, st.integers(0, 20), st.data())
def test_an_injected_anomaly_is_found(seed, n, data):
    model = data.draw(st.sampled_from(["list-append", "rw-register"]))
    names = GADGETS if model == "list-append" else REGISTER_GADGETS
    name = data.draw(st.sampled_from(names))
    rng = random.Random(seed)
    txns = serial(rng, n, 3, 4, model)
    end = max([t.complete for t in txns] + [t.invoke for t in txns] + [0])
    txns += gadget(name, start=end + 10, process=100, index=len(txns), model=model)
    r = check_txns(txns, model)
    expected = EXPECTED[name] if model == "list-append" else REGISTER_EXPECTED[name]
    assert expected <= set(r.anomaly_types)


native = pytest.importorskip("replicalab_native")
needs_native = pytest.mark.skipif(not hasattr(native, "txn_check_cols"),
                                  reason="native core built without the transaction checker")


def _same(py, nat):
    assert nat.engine == "native" and py.engine == "python"
    assert nat.valid == py.valid and nat.anomaly_types == py.anomaly_types
    assert nat.counts == py.counts
    assert nat.anomalous_txns == py.anomalous_txns
    assert nat.not_ == py.not_ and nat.also_not == py.also_not
    for typ in py.anomaly_types:
        a = [(x.txns, x.cycle, x.explanation) for x in py.anomalies[typ]]
        b = [(x.txns, x.cycle, x.explanation) for x in nat.anomalies[typ]]
        assert a == b, typ


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_seed, st.integers(1, 40), st.integers(1, 5), st.integers(1, 5),
       st.sampled_from(["list-append", "rw-register"]), st.booleans())
def test_native_core_equals_the_reference(seed, n, keys, length, model, isolated):
    from replicalab.checkers.txn.synth import sloppy

    rng = random.Random(seed)
    txns = (serial(rng, n, keys, length, model) if isolated
            else sloppy(rng, n, keys, length, model))
    _same(check(txns, model, engine="python"), check(txns, model, engine="native"))


@needs_native
@pytest.mark.parametrize(("model", "name", "expected"), CASES,
                         ids=[f"{m}:{g}" for m, g, _ in CASES])
def test_native_core_finds_each_gadget(model, name, expected):
    from replicalab.checkers.txn import check

    txns = gadget(name, model=model)
    _same(check(txns, model, engine="python"), check(txns, model, engine="native"))


@needs_native
def test_native_search_that_must_stop_says_unknown():
    from replicalab.checkers.txn.native import check_native

    r = check_native(native, gadget("G2-item"), "list-append", None, max_steps=0)
    assert r.valid == "unknown" and r.anomaly_types == [] and r.unfinished
    assert r.unfinished[0].size == 2 and r.names[r.unfinished[0].sample[0]] == "T0"

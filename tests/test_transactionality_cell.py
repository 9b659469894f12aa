"""The transactionality cell: isolation observed against isolation promised, graded from
hand-made checker results (the consistency models ruled out come from the checker's own
lattice, ``checkers.txn.verdict``) for each promise the store kinds record; the kind
records agree with the adapters' own promises; a sim:// store's cell is measured for real
(virtual time) and a store without transactions gets a grey cell."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from replicalab.checkers.txn import MODELS, verdict
from replicalab.cluster import kinds
from replicalab.cluster.kinds import isolation_promise
from replicalab.experiments.plan import QUICK
from replicalab.experiments.properties import transactionality as tx
from replicalab.experiments.run import Scorecard, run

WORKLOAD = {"name": "list-append", "clients": 6, "keys": 6, "length": [1, 4],
            "duration_s": 5.0, "region": "US-E"}
PROMISE = kinds.Promise("the promise", "its source")


def way(label: str, model: str, counts: dict[str, int] | None = None, ok: int = 2000,
        fail: int = 10, valid: Any = None, unfinished: list | None = None) -> dict[str, Any]:
    """One way's run as the property keeps it, with the checker's result made by hand."""
    counts = counts or {}
    not_, also, possible = verdict([k for k, n in counts.items() if n])
    first = {k: {"txns": ["T1", "T2"],
                 "explanation": [f"T1 < T2: evidence of {k}", f"T2 < T1: more of {k}"]}
             for k, n in counts.items() if n}
    if valid is None:
        valid = not any(counts.values())
    return {"label": label, "url_params": "", "model": model, "promise": "", "source": "",
            "txns": {"ok": ok, "fail": fail, "info": 0},
            "check": {"valid": valid, "anomaly_types": sorted(counts), "counts": counts,
                      "not": not_, "also_not": also, "possible": possible, "first": first,
                      "unfinished": unfinished or [], "check_s": 0.1, "engine": "python"},
            "run": f"runs/{label}"}


def cell(*ways: dict[str, Any]):
    return tx.isolation_cell("store", {"variants": list(ways), "workload": WORKLOAD,
                                       "runs": [w["run"] for w in ways]}, PROMISE)


# --- PostgreSQL SERIALIZABLE: serializable, red on any cycle ---------------------------------

def test_serializable_without_anomaly_is_green_with_its_denominator():
    c = cell(way("SERIALIZABLE", "serializable", ok=2314))
    assert c.grade == "green"
    assert c.value == "serializable as promised: no anomaly in 2,314 committed transactions"
    assert not c.counterexample and not c.caveat
    assert any("2,314 committed, 10 aborted" in d for d in c.details)


@pytest.mark.parametrize("anomaly", ["G2-item", "G-single", "G-nonadjacent", "G1c", "G0",
                                     "G1a", "lost-update"])
def test_serializable_with_any_anomaly_is_red(anomaly: str):
    c = cell(way("SERIALIZABLE", "serializable", {anomaly: 3}))
    assert c.grade == "red"
    assert c.value.startswith("NOT serializable: ") and "3 times" in c.value
    assert anomaly in c.counterexample and "T1 < T2" in c.counterexample


# --- PostgreSQL REPEATABLE READ: snapshot isolation, write skew allowed ----------------------

def test_snapshot_isolation_with_write_skew_is_yellow_as_allowed():
    c = cell(way("REPEATABLE READ", "snapshot-isolation", {"G2-item": 12}, ok=2000))
    assert c.grade == "yellow"
    assert c.value == ("write skew (G2-item) 12 times in 2,000 committed transactions, as "
                       "snapshot isolation allows")
    assert "allows write skew" in c.caveat
    assert any("weakest models ruled out: repeatable-read" in d for d in c.details)
    assert c.counterexample.startswith("REPEATABLE READ, write skew (G2-item) among T1, T2")


@pytest.mark.parametrize("anomaly", ["G-single", "G1a", "G1b", "G1c", "G0", "lost-update",
                                     "G-nonadjacent"])
def test_snapshot_isolation_with_read_skew_or_g1_or_g0_is_red(anomaly: str):
    c = cell(way("REPEATABLE READ", "snapshot-isolation", {anomaly: 1, "G2-item": 5}))
    assert c.grade == "red"
    assert c.value.startswith("NOT snapshot isolation: ")
    # the class that breaks the promise is named and explained, not the allowed write skew
    assert tx.anomaly_words(anomaly) in c.value and "G2-item" not in c.value
    assert anomaly in c.counterexample and "G2-item" not in c.counterexample


def test_both_postgres_levels_in_one_cell_the_worse_grade_wins():
    c = cell(way("SERIALIZABLE", "serializable", ok=1500),
             way("REPEATABLE READ", "snapshot-isolation", {"G2-item": 4}, ok=1800))
    assert c.grade == "yellow"
    assert c.value.startswith("SERIALIZABLE: serializable as promised: no anomaly in 1,500 ")
    assert "; REPEATABLE READ: write skew (G2-item) 4 times in 1,800 " in c.value
    assert c.caveat.startswith("REPEATABLE READ: ")
    assert c.counterexample.startswith("REPEATABLE READ, ")
    assert len(c.figures["variants"]) == 2 and c.runs == ["runs/SERIALIZABLE",
                                                          "runs/REPEATABLE READ"]
    worse = cell(way("SERIALIZABLE", "serializable", {"G2-item": 1}),
                 way("REPEATABLE READ", "snapshot-isolation", {"G2-item": 4}))
    assert worse.grade == "red" and worse.counterexample.startswith("SERIALIZABLE, ")


# --- etcd / ZooKeeper: strict serializable; Redis: serializable ------------------------------

def test_strict_serializable_clean_is_green_and_a_realtime_cycle_is_red():
    assert cell(way("Txn", "strict-serializable", ok=300)).value == (
        "strict serializable as promised: no anomaly in 300 committed transactions "
        "(real-time order included)")
    c = cell(way("Txn", "strict-serializable", {"G2-item-realtime": 2}))
    assert c.grade == "red" and "write skew (G2-item) in real-time order 2 times" in c.value


def test_serializable_allows_a_real_time_only_cycle_with_a_caveat():
    # Redis promises serializable, not strict: a cycle that needs real-time order is allowed
    c = cell(way("MULTI/EXEC", "serializable", {"G-single-realtime": 1}))
    assert c.grade == "yellow" and c.value.endswith("as serializable allows")


# --- no isolation promised: Cassandra's logged batch, sim:// ---------------------------------

def test_no_isolation_promised_anomalies_are_yellow_as_documented():
    c = cell(way("reads at ONE, then a logged batch", "none",
                 {"G-single": 2, "G2-item": 3, "lost-update": 1, "G-single-process": 1}))
    assert c.grade == "yellow"
    assert c.value.startswith("no isolation, as documented: lost update 1 time, read skew "
                              "(G-single) 2 times, write skew (G2-item) 3 times in 2,000 ")
    assert "process" not in c.value  # variants of a listed class stay in the details
    # the counterexample is a cycle (read skew), not the lost update listed first
    assert c.counterexample.startswith("reads at ONE, then a logged batch, read skew (G-single)")
    assert any("G-single-process 1" in d for d in c.details)


def test_no_isolation_promised_and_none_seen_is_still_yellow():
    c = cell(way("micro-operations one by one", "none", ok=800))
    assert c.grade == "yellow"
    assert c.value == "no anomaly in 800 committed transactions, though no isolation is promised"


def test_a_stopped_cycle_search_is_not_green():
    c = cell(way("SERIALIZABLE", "serializable", valid="unknown", unfinished=[
        {"limit": "deadline", "size": 4000, "sample": ["T1"], "classes": ["G2-item"]}]))
    assert c.grade == "yellow" and "stopped early" in c.value
    assert any("might still hold G2-item" in d for d in c.details)


def test_no_committed_transaction_is_grey():
    c = cell(way("SERIALIZABLE", "serializable", ok=0, fail=40))
    assert c.grade == "grey" and "no transaction committed (40 aborted" in c.value
    assert c.reason


# --- the promises: kind records, adapters and the checker agree ------------------------------

@pytest.mark.parametrize("name", ["postgres", "etcd", "zookeeper", "redis", "cassandra"])
def test_each_kind_records_its_isolation_promise_with_its_source(name: str):
    kind = kinds.resolve(name)
    assert kind.transactions
    for v in kind.transactions:
        assert v.model == "none" or v.model in MODELS
        assert v.source.startswith("https://") and v.promise
        # the adapter's own promise for that URL is the record's
        url = tx.with_params(f"{kind.schemes[0]}://127.0.0.1:1?x=1", v.url_params)
        assert isolation_promise(url)[0] == v.model
    p = kind.promise("transactionality")
    assert p is not None and all(v.label in p.text for v in kind.transactions)


def test_postgres_promises_serializable_and_snapshot_isolation():
    levels = {v.label: v.model for v in kinds.POSTGRES.transactions}
    assert levels == {"SERIALIZABLE": "serializable", "REPEATABLE READ": "snapshot-isolation"}


def test_with_params():
    assert tx.with_params("postgresql://h/db", "a=1") == "postgresql://h/db?a=1"
    assert tx.with_params("postgresql://h/db?b=2", "a=1") == "postgresql://h/db?b=2&a=1"
    assert tx.with_params("etcd://h", "") == "etcd://h"


# --- measured: a sim:// store (virtual time) -----------------------------------------------

def test_sim_store_runs_micro_operations_one_by_one_and_shows_anomalies(tmp_path: Path):
    (tmp_path / "runs").mkdir()
    plan = dataclasses.replace(QUICK, txn_s=2.0)
    sc = run(Scorecard(tmp_path, ("sim://primary?regions=dc3",), ("transactionality",),
                       "dc3", plan, seed=3), lambda what: None)
    (c,) = sc.cells
    assert c.grade == "yellow" and c.value.startswith("no isolation, as documented: ")
    (v,) = c.figures["variants"]
    assert v["model"] == "none" and v["txns"]["ok"] > 100
    assert v["check"]["valid"] is False and v["check"]["counts"]
    assert c.counterexample.startswith("micro-operations one by one, ") and " < " in \
        c.counterexample
    assert (tmp_path / c.runs[0] / "history.parquet").exists()
    assert c.source == "docs/transactions.md#simulated-stores"


@pytest.mark.parametrize(("ways", "headline"), [
    ([way("SERIALIZABLE", "serializable", ok=2314)],
     "serializable as promised: no anomaly in 2,314 transactions"),
    ([way("REPEATABLE READ", "snapshot-isolation", {"G-single": 1, "G2-item": 5})],
     "NOT snapshot isolation: G-single 1 time"),
    ([way("SERIALIZABLE", "serializable", ok=1500),
      way("REPEATABLE READ", "snapshot-isolation", {"G2-item": 4}, ok=1800)],
     "REPEATABLE READ: G2-item 4 times, as snapshot isolation allows"),
    ([way("micro-operations one by one", "none", {"G1c": 2, "G0": 7})],
     "G0 7 times; no isolation, as documented"),
    ([way("SERIALIZABLE", "serializable", ok=0, fail=40)], "no transaction committed"),
])
def test_the_headline_names_what_decides_the_grade(ways: list[dict[str, Any]], headline: str):
    c = cell(*ways)
    assert c.headline == headline
    assert len(c.headline.split()) <= 12 and c.headline != c.value

"""Issue 36: one test per class of wrong answer the transaction checker gave before it
was rebuilt (each failed on that code), on both engines, the answers cross-checked with
the brute-force oracle (tests/txn_oracle.py) where it applies:

* test_read_skew_among_write_skews_in_one_component: incomplete cycle search
* test_stale_read_past_many_unread_appends / ..._past_many_nil_readers: edge budgets
* test_realtime_edge_into_an_info_transaction: no real-time edges into :info
* test_future_read / test_read_of_an_element_nobody_appended
* test_g1a_on_a_later_read / test_dirty_update / test_empty_graph_is_unknown
* test_internal_leaves_read_committed_possible / test_incompatible_order_is_g1a /
  test_consistent_view_sits_above_cursor_stability: Elle's lattice
* test_writes_follow_reads_only_when_asked: rw-register inference
* test_lost_updates_grouped_by_the_value_read
* test_jepsen_history_with_nemesis_ops / test_completions_only_history_from_elles_readme
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from tests.txn_oracle import T, serializable, snapshot_isolation

from replicalab.checkers.txn import Options, Txn, check, check_file
from replicalab.checkers.txn.run import native_core

ENGINES = ["python"] + (["native"] if native_core() is not None else [])
DATA = Path(__file__).parent / "data" / "elle"


def txn(i: int, mops: list, outcome: str = "ok", invoke: int = 0, complete: int = 10) -> Txn:
    return Txn(i, i, outcome, invoke, complete, mops)


def as_oracle(txns: list[Txn]) -> list[T]:
    return [T(t.outcome, t.invoke, None if t.complete < 0 else t.complete, tuple(t.mops))
            for t in txns]


@pytest.mark.parametrize("engine", ENGINES)
def test_read_skew_among_write_skews_in_one_component(engine):
    # eight transactions in a ring of write skews (each reads its key empty and appends
    # to the next one's) are one component; two of them also show a read skew: T3 reads
    # s = [1] (T5's) but t empty (T5 appended to it too). The first anchors of the old
    # search were write skews; the read skew went unseen and snapshot isolation passed.
    ring = [[("r", f"k{i}", ()), ("append", f"k{(i + 1) % 8}", 1)] for i in range(8)]
    ring[3] += [("r", "s", (1,)), ("r", "t", ())]
    ring[5] += [("append", "s", 1), ("append", "t", 1)]
    txns = [txn(i, m) for i, m in enumerate(ring)]
    r = check(txns, "list-append", Options(("snapshot-isolation",)), engine=engine)
    assert "G-single-item" in r.anomaly_types
    assert "snapshot-isolation" in r.also_not and "consistent-view" in r.not_
    assert not snapshot_isolation(as_oracle(txns), "list-append")


@pytest.mark.parametrize("engine", ENGINES)
def test_stale_read_past_many_unread_appends(engine):
    # x = [1] is read; then 1,100 appends nobody reads, all but the last still running
    # when R reads x = [1]: R missed the last one, which completed before R began. The
    # old search linked R to the first 1,024 unread appends only and found nothing.
    txns = [txn(0, [("append", "x", 1)], invoke=0, complete=1),
            txn(1, [("r", "x", (1,))], invoke=2, complete=3)]
    for i in range(1100):
        done = 20 if i == 1099 else 100
        txns.append(txn(2 + i, [("append", "x", 10 + i)], invoke=10, complete=done))
    txns.append(txn(1102, [("r", "x", (1,))], invoke=30, complete=40))
    r = check(txns, "list-append", engine=engine)
    assert r.valid is False and "G-single-item-realtime" in r.anomaly_types
    assert "strong-snapshot-isolation" in r.not_


@pytest.mark.parametrize("engine", ENGINES)
def test_stale_read_past_many_nil_readers(engine):
    # 400 readers of nil and 300 writers of x: more rw edges than the old budget (100,000)
    # allowed, so only writers that read nil first were linked; the last writer wrote
    # blind and completed before the last reader began, which still read nil.
    txns = [txn(i, [("r", "x", None)], invoke=0, complete=100) for i in range(399)]
    txns += [txn(399 + i, [("w", "x", 1 + i)], invoke=1, complete=100 if i < 299 else 20)
             for i in range(300)]
    txns.append(txn(699, [("r", "x", None)], invoke=30, complete=40))
    r = check(txns, "rw-register", engine=engine)
    assert r.valid is False and "G-single-item-realtime" in r.anomaly_types


@pytest.mark.parametrize("engine", ENGINES)
def test_realtime_edge_into_an_info_transaction(engine):
    # T1 appends x 1 and completes; I, invoked after, appends x 2 and never completes; a
    # read shows x = [2 1]: I's append came first, yet I began after T1 ended.
    txns = [txn(0, [("append", "x", 1)], invoke=0, complete=1),
            txn(1, [("append", "x", 2)], "info", invoke=2, complete=-1),
            txn(2, [("r", "x", (2, 1))], invoke=3, complete=4)]
    r = check(txns, "list-append", engine=engine)
    assert "G0-realtime" in r.anomaly_types and "strong-read-uncommitted" in r.not_
    assert not serializable(as_oracle(txns), "list-append", realtime=True)


@pytest.mark.parametrize("engine", ENGINES)
def test_future_read(engine):
    txns = [txn(0, [("r", "x", (1,)), ("append", "x", 1)]),
            txn(1, [("r", "x", (1,))], invoke=20, complete=30)]
    r = check(txns, "list-append", engine=engine)
    assert "future-read" in r.anomaly_types and r.not_ == ["read-committed"]


@pytest.mark.parametrize("engine", ENGINES)
def test_read_of_an_element_nobody_appended(engine):
    txns = [txn(0, [("append", "x", 1)]), txn(1, [("r", "x", (1, 5))], invoke=20,
                                                complete=30)]
    r = check(txns, "list-append", engine=engine)
    assert "garbage-read" in r.anomaly_types and r.not_ == ["read-committed"]
    assert not serializable(as_oracle(txns), "list-append")


@pytest.mark.parametrize("engine", ENGINES)
def test_g1a_on_a_later_read(engine):
    # the failed append shows in the transaction's second read of x, not its first
    txns = [txn(0, [("append", "x", 1)], "fail"),
            txn(1, [("r", "x", ()), ("r", "y", ()), ("r", "x", (1,))], invoke=20,
                complete=30)]
    r = check(txns, "list-append", engine=engine)
    assert "G1a" in r.counts and "read-committed" in r.not_


@pytest.mark.parametrize("engine", ENGINES)
def test_dirty_update(engine):
    txns = [txn(0, [("append", "x", 1)], "fail"), txn(1, [("append", "x", 2)]),
            txn(2, [("r", "x", (1, 2))], invoke=20, complete=30)]
    r = check(txns, "list-append", Options(None, ("dirty-update",)), engine=engine)
    assert r.anomaly_types == ["dirty-update"] and r.not_ == ["read-committed"]


@pytest.mark.parametrize("engine", ENGINES)
def test_empty_graph_is_unknown(engine):
    r = check([txn(0, [("append", "x", 1), ("r", "x", (1,))])], "list-append",
              engine=engine)
    assert r.valid == "unknown" and r.anomaly_types == ["empty-transaction-graph"]


@pytest.mark.parametrize("engine", ENGINES)
def test_internal_leaves_read_committed_possible(engine):
    # read committed reads each statement from a new snapshot: T2's two reads of x differ
    # (internal, and a G-single with the append between them: both allowed)
    txns = [txn(0, [("append", "x", 1)], invoke=5, complete=6),
            txn(1, [("r", "x", ()), ("r", "x", (1,))], invoke=0, complete=10)]
    r = check(txns, "list-append", engine=engine)
    assert "internal" in r.anomaly_types and "read-atomic" in r.not_
    assert "read-committed" in r.possible


@pytest.mark.parametrize("engine", ENGINES)
def test_incompatible_order_is_g1a(engine):
    txns = [txn(0, [("append", "x", 1)]), txn(1, [("append", "x", 2)]),
            txn(2, [("r", "x", (1, 2))]), txn(3, [("r", "x", (2,))])]
    r = check(txns, "list-append", engine=engine)
    assert "incompatible-order" in r.anomaly_types and r.not_ == ["read-committed"]


def test_consistent_view_sits_above_cursor_stability():
    from replicalab.checkers.txn import models

    assert "cursor-stability" in {models.friendly(m)
                                  for m in models.implied_models(["consistent-view"])}
    assert "consistent-view" in models.boundary(["lost-update"])[1]


@pytest.mark.parametrize("engine", ENGINES)
def test_writes_follow_reads_only_when_asked(engine):
    # Elle's wfr case: only if writes follow reads does y go 1 -> 2, making T2's read of
    # y = 1 (after T1's write of 2 to it) a read skew
    txns = [txn(0, [("r", "y", 1), ("w", "x", 1), ("w", "y", 2)]),
            txn(1, [("r", "x", 1), ("r", "y", 1)])]
    assert check(txns, "rw-register", Options(("serializable",)), engine=engine).valid
    r = check(txns, "rw-register", Options(("serializable",), wfr_keys=True), engine=engine)
    assert r.anomaly_types == ["G-single-item"]


@pytest.mark.parametrize("engine", ENGINES)
def test_lost_updates_grouped_by_the_value_read(engine):
    # two transactions read lists of the same length, [1] and [5], and append: not the
    # same value read, no lost update (the old check grouped by length)
    txns = [txn(0, [("append", "x", 1)]), txn(1, [("append", "x", 5)]),
            txn(2, [("r", "x", (1,)), ("append", "x", 7)]),
            txn(3, [("r", "x", (5,)), ("append", "x", 8)])]
    r = check(txns, "list-append", engine=engine)
    assert "lost-update" not in r.counts and "incompatible-order" in r.counts
    same = [*txns[:2], txn(2, [("r", "x", (1,)), ("append", "x", 7)]),
            txn(3, [("r", "x", (1,)), ("append", "x", 8)])]
    assert check(same, "list-append", engine=engine).counts["lost-update"] == 1


@pytest.mark.parametrize("engine", ENGINES[-1:])  # the Python engine: test_txn_elle.py
def test_jepsen_history_with_nemesis_ops(engine, tmp_path):
    path = tmp_path / "huge-scc.edn"
    path.write_bytes(gzip.decompress((DATA / "huge-scc.edn.gz").read_bytes()))
    r = check_file(path, "list-append", engine=engine)
    assert r.skipped == {"non-client": 94, "non-txn": 0} and r.txns == 10_254
    assert r.valid is False and r.not_ == ["strong-snapshot-isolation"]
    assert not r.unfinished


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("process", [True, False])
def test_completions_only_history_from_elles_readme(engine, process, tmp_path):
    """Elle's README history, as its README writes it (no :process, no :f, no invokes) and
    with processes: Elle answers G1c."""
    path = tmp_path / "readme.edn"
    text = ("[{:process 0, :type :ok, :value [[:append :x 1] [:r :y [1]]]}\n"
            " {:process 1, :type :ok, :value [[:append :x 2] [:append :y 1]]}\n"
            " {:process 2, :type :ok, :value [[:r :x [1 2]]]}]\n")
    path.write_text(text if process else re.sub(r":process \d, ", "", text))
    r = check_file(path, "list-append", Options(("serializable",)), engine=engine)
    assert r.valid is False and r.anomaly_types == ["G1c"] and r.txns == 3


@pytest.mark.parametrize("engine", ENGINES)
def test_an_invoke_without_a_process_cannot_be_paired(engine, tmp_path):
    path = tmp_path / "h.edn"
    path.write_text("{:type :invoke, :f :txn, :value [[:append :x 1]]}\n"
                    "{:type :ok, :f :txn, :value [[:append :x 1]], :process 0}\n")
    with pytest.raises(ValueError, match=":process"):
        check_file(path, "list-append", engine=engine)

"""Transactions in a History: micro-op encoding, Parquet round trip, Jepsen EDN export."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.history import History, load_history, save_history, to_edn, to_jsonl
from replicalab.history.core import F_NAMES
from replicalab.history.txn import decode_txn, encode_txn, invoke_txn, ok_txn

_key = st.text("abcxyz0123456789/", min_size=1, max_size=6)
_int = st.integers(-(2**40), 2**40)
_mop = st.one_of(
    st.tuples(st.just("append"), _key, _int),
    st.tuples(st.just("w"), _key, _int),
    st.tuples(st.just("r"), _key, st.none() | _int | st.lists(_int, max_size=5)),
)


def test_txn_is_appended_last_so_old_codes_keep_their_meaning():
    assert F_NAMES[-1] == "txn" and F_NAMES[:3] == ("read", "write", "cas")


@settings(max_examples=200, deadline=None)
@given(st.lists(_mop, max_size=8))
def test_encode_decode_round_trip(mops):
    keys, values = encode_txn(mops)
    assert all(isinstance(v, str) for v in values)
    assert decode_txn(keys, values) == [(f, k, v) for f, k, v in mops]


@pytest.mark.parametrize("bad", [[("append", "k", None)], [("inc", "k", 1)],
                                 [("w", "k", "x")]])
def test_encode_refuses_what_is_not_a_micro_op(bad):
    with pytest.raises(ValueError):
        encode_txn(bad)


def test_decode_refuses_malformed_text():
    with pytest.raises(ValueError, match="micro-op"):
        decode_txn(("k",), ("append",))
    with pytest.raises(ValueError, match="keys but"):
        decode_txn(("k", "j"), ("r",))


def _txn_history() -> History:
    h = History()
    a = invoke_txn(h, 0, [("append", "5", 3), ("r", "5", None)], 10)
    b = invoke_txn(h, 1, [("r", "5", None), ("append", "x", 1)], 12)
    ok_txn(h, a, [("append", "5", 3), ("r", "5", [1, 3])], 20)
    h.fail(b, 25, "serialization failure")
    c = invoke_txn(h, 2, [("w", "7", 2)], 30)
    h.info(c, 40, "timeout")
    return h


def test_parquet_round_trip_of_txn_rows(tmp_path: Path):
    h = _txn_history()
    save_history(h, tmp_path, {"workload": "list-append"})
    back, _ = load_history(tmp_path)
    assert list(back) == list(h)
    assert decode_txn(back.keys[0], back.values[0]) == [("append", "5", 3), ("r", "5", [1, 3])]
    assert back.op(1).f == "txn" and back.op(1).type == "fail"


def test_edn_export_is_elles_shape(tmp_path: Path):
    h = _txn_history()
    assert to_edn(h, tmp_path / "h.edn") == 6
    lines = (tmp_path / "h.edn").read_text().splitlines()
    assert lines[0] == ("{:index 0, :process 0, :f :txn, :type :invoke, "
                        ":value [[:append 5 3] [:r 5 nil]], :time 10}")
    ok = next(x for x in lines if ":type :ok" in x)
    assert ":value [[:append 5 3] [:r 5 [1 3]]]" in ok
    fail = next(x for x in lines if ":type :fail" in x)
    assert ":value [[:r 5 nil] [:append \"x\" 1]]" in fail
    assert any(":type :info" in x and "[[:w 7 2]]" in x for x in lines)
    to_jsonl(h, tmp_path / "h.jsonl")
    assert '"value": [["append", 5, 3], ["r", 5, [1, 3]]]' in (
        tmp_path / "h.jsonl").read_text()

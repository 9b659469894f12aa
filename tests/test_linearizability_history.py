"""The History path of the linearizability checker: ``encode_history`` gives byte for byte
the columns of ``encode_columns(ops_from_history(h))``, and ``check_history`` (LinOps made
only for the keys that need an explanation) the same results as ``check`` on every op, on
random Histories and on the register workload's; the register workload's results and
``replicalab check``'s entries are those of the LinOp path."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registerhist import register_history
from replicalab.checkers.linearizability import from_history
from replicalab.checkers.linearizability.checker import check
from replicalab.checkers.linearizability.columns import encode_columns as _encode_columns
from replicalab.checkers.linearizability.from_history import (
    check_history,
    history_key_ops,
    ops_from_history,
)
from replicalab.checkers.linearizability.from_history import encode_history as _encode_history
from replicalab.checkers.linearizability.ops import Verdict
from replicalab.checkers.linearizability.registry import get_model
from replicalab.history import NEMESIS, History
from replicalab.workloads import register_check
from replicalab.workloads.register import RegisterConfig

try:
    import replicalab_native  # noqa: F401
except ImportError:
    if os.environ.get("CI") == "true":
        raise  # make builds the extension: its absence under CI is a failure
    pytest.skip("replicalab_native is not installed (make builds it)", allow_module_level=True)

SEEDS = st.integers(0, 2**32 - 1)
PRIMARY_DC3 = "sim://primary?replication=async&regions=dc3"


@pytest.fixture(params=["native", "python"])
def interning(request, monkeypatch):
    """Run a test with the native History encoder and with the pure-Python one."""
    if request.param == "python":
        monkeypatch.setattr(from_history, "_native_encode_history", None)
    return request.param


def summary(r):
    """Everything a check's result says but the times."""
    return (r.model, r.verdict, r.ops, [(p.key, p.verdict, p.ops, p.linearization,
                                         p.counterexample, p.explanation, p.minimal)
                                        for p in r.parts])


def encode_history(h, model):
    return _encode_history(h, get_model(model))


def encode_columns(ops, model):
    return _encode_columns(ops, get_model(model))


def _fresh(s: str) -> str:
    """An equal string that is another object (a History loaded from disk has those)."""
    return "".join(list(s))


def random_history(seed: int, n: int, keys: int) -> History:
    """A History of random rows: client reads, writes, cas and deletes and nemesis rows,
    every type (invoke = never completed), values shared or equal-but-distinct objects,
    empty value tuples, cas with and without a recorded expected value, ties in time."""
    rnd = random.Random(seed)
    h = History()
    names = ["a", "b", "c", "d"]
    for _ in range(n):
        t = rnd.randint(0, 60)
        key = (rnd.choice(names[:keys]),)
        if rnd.random() < 0.08:
            i = h.invoke(NEMESIS, rnd.choice(("crash", "partition", "heal")), (), (), "none", t)
            h.ok(i, t + 5)
            continue
        f = rnd.choices(("read", "write", "cas", "delete"), (0.4, 0.3, 0.25, 0.05))[0]
        value = rnd.choice((None, "1", "2", "3", _fresh("2"), "x"))
        expects: tuple[Any, ...] = ()
        if f == "cas":
            expects = () if rnd.random() < 0.15 else (rnd.choice((None, "1", "2", _fresh("3"))),)
        values = () if rnd.random() < 0.05 else (value,)
        i = h.invoke(rnd.randint(0, 5), f, key, values if f != "read" else (None,),
                     rnd.choice(("none", "eventual", "consistent")), t, expects)
        kind = rnd.choices(("ok", "info", "fail", "open"), (0.7, 0.12, 0.1, 0.08))[0]
        end = t + rnd.randint(0, 20)
        if kind == "ok":
            h.ok(i, end, values if f == "read" else None)
        elif kind == "info":
            h.info(i, end, "timeout")
        elif kind == "fail":
            h.fail(i, end, "refused")
    if n and rnd.random() < 0.1:
        h.expects = h.expects[: rnd.randrange(n)]  # an older history: fewer expects
    return h


@settings(max_examples=300, deadline=None)
@given(SEEDS, st.integers(0, 30), st.integers(1, 4), st.booleans())
def test_random_histories_encode_and_check_as_the_linop_path(seed, n, keys, fail_fast):
    h = random_history(seed, n, keys)
    ops = ops_from_history(h)
    want = encode_columns(ops, "kv")
    assert encode_history(h, "kv") == want
    saved = from_history._native_encode_history
    try:
        from_history._native_encode_history = None
        assert encode_history(h, "kv") == want
    finally:
        from_history._native_encode_history = saved
    assert summary(check_history(h, "kv", fail_fast=fail_fast)) == summary(
        check(ops, "kv", fail_fast=fail_fast))
    for key in want.keys:
        assert history_key_ops(h, want, key) == [o for o in ops if o.key == key]




def _old_linearizability_results(h: History, timeout_s: float, limit: int) -> dict[str, Any]:
    """register_check.linearizability_results as it was on the LinOp path (the reference)."""
    rc = register_check
    ops = ops_from_history(h)
    result = check(ops, model="kv", timeout_s=timeout_s)
    t0 = rc.history_origin_ns(h)
    by_key: dict[Any, list[Any]] = {}
    for op in sorted(ops, key=lambda o: (o.invoke_ns, o.index)):
        by_key.setdefault(op.key, []).append(op)
    parts = sorted(result.parts, key=lambda p: (rc._RANK[p.verdict], str(p.key)))
    listed, timelines = [], []
    for part in parts:
        if len(listed) >= rc.MAX_PARTS and len(timelines) >= rc.MAX_TIMELINES:
            break
        tops = rc.part_results(by_key.get(part.key, []), part.linearization or (),
                               part.counterexample, t0)
        if len(listed) < rc.MAX_PARTS:
            listed.append({"key": str(part.key), "valid": part.verdict.json(), "ops": part.ops,
                           "counterexample": [rc._op_json(o) for o in tops if o.offending][
                               :rc.MAX_EXAMPLE_OPS] or None,
                           "explanation": part.explanation})
        if len(timelines) < rc.MAX_TIMELINES and (
                part.verdict != Verdict.LINEARIZABLE or not timelines):
            timelines.append(rc.timeline(str(part.key), part.verdict.json(), tops, limit))
    return {"linearizability": {
        "model": "kv", "valid": result.verdict.json(), "keys": len(parts), "ops": result.ops,
        "keys_not_linearizable": sum(p.verdict == Verdict.NOT_LINEARIZABLE
                                     for p in result.parts),
        "keys_unknown": sum(p.verdict == Verdict.UNKNOWN for p in result.parts),
        "timeout_s": timeout_s, "parts": listed, "parts_left_out": len(parts) - len(listed)},
        "timeline": timelines}


@pytest.mark.parametrize(("url", "consistency", "reader", "keys", "clients", "ops", "faults"), [
    # the benchmark's histories (its smaller sizes): linearizable and not
    (PRIMARY_DC3, "consistent", "US-E", 1, 10, 1000, ()),
    (PRIMARY_DC3, "eventual", "EU", 1, 10, 1000, ()),
    (PRIMARY_DC3, "consistent", "US-E", 10, 50, 3000, ()),
    (PRIMARY_DC3, "eventual", "EU", 10, 50, 3000, ()),
    # a crash (info writes, never-completed ops, nemesis rows) and a quorum store
    (PRIMARY_DC3 + "&timeout_ms=500", "consistent", "US-E", 3, 12, None,
     ("at=2s crash node=0 for=3s",)),
    ("sim://quorum?n=3&r=1&w=1", "eventual", None, 3, 12, None, ()),
])
def test_register_histories_give_the_linop_path_results(interning, url, consistency, reader, keys,
                                                        clients, ops, faults):
    cfg = RegisterConfig(keys=keys, clients=clients, rate=10 if ops else 20,
                         writer_region=reader and "US-E", reader_region=reader,
                         **({"ops": ops} if ops else {}))
    h = register_history(url, cfg, 10 * 24 * 3600 if ops else 8.0, 3, consistency, faults)
    lin = ops_from_history(h)
    assert encode_history(h, "kv") == encode_columns(lin, "kv")
    for fail_fast in (False, True):
        assert summary(check_history(h, "kv", timeout_s=60, fail_fast=fail_fast)) == summary(
            check(lin, "kv", timeout_s=60, fail_fast=fail_fast))
    got = register_check.linearizability_results(h, 60.0, 40)
    assert got == _old_linearizability_results(h, 60.0, 40)
    if consistency == "eventual" and reader == "EU":
        assert got["linearizability"]["valid"] is False


def _raises(fn) -> str:
    with pytest.raises(ValueError) as err:
        fn()
    return str(err.value)


def test_what_a_model_refuses_is_refused_with_the_linop_path_message():
    h = History()
    h.ok(h.invoke(0, "write", ("a",), ("1",), "none", 0), 5)
    h.ok(h.invoke(1, "cas", ("a",), ("2",), "none", 1, ("1",)), 6)
    assert _raises(lambda: check_history(h, "register")) == _raises(
        lambda: check(ops_from_history(h), "register"))
    h.ok(h.invoke(2, "write", ("b",), ("3",), "none", 2), 7)
    assert _raises(lambda: check_history(h, "cas-register")) == _raises(
        lambda: check(ops_from_history(h), "cas-register"))
    # columns encoded for kv beforehand (as replicalab check does) are checked the same way
    cols = encode_history(h, "kv")
    assert "2 keys" in _raises(lambda: check_history(h, "cas-register", columns=cols))
    h.ok(h.invoke(3, "write", ("a", "b"), ("4", "5"), "none", 3), 8)
    msg = _raises(lambda: ops_from_history(h))
    assert msg.startswith("row 3: a write of 2 keys")
    assert _raises(lambda: encode_history(h, "kv")) == msg
    assert _raises(lambda: check_history(h, "kv")) == msg


def test_single_register_models_and_empty_histories():
    h = History()
    assert summary(check_history(h)) == summary(check([]))
    h.ok(h.invoke(NEMESIS, "crash", (), (), "none", 0), 1)
    assert summary(check_history(h)) == summary(check([]))
    h.ok(h.invoke(0, "write", ("a",), ("1",), "none", 0), 5)
    h.ok(h.invoke(1, "read", ("a",), (None,), "eventual", 6), 7, ("0",))
    for model in ("register", "cas-register", "kv"):
        got = check_history(h, model)
        assert got.verdict == Verdict.NOT_LINEARIZABLE
        assert summary(got) == summary(check(ops_from_history(h), model))

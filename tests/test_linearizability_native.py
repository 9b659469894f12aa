"""The native core (native/, Rust) against the pure-Python reference: ``search_part``
gives exactly ``search.search_part``'s result (verdict, order, stuck op) on random
parts (Hypothesis), and a linearization that is a legal one (each op inside its interval,
every read and cas legal in its state); the whole-history entry ``check_kv`` behind
``check()`` gives exactly the pure-Python pipeline's results (verdicts, linearizations,
counterexamples, explanations) on random multi-key histories with info and fail ops, on
the register workload's histories of the simulated stores, with ``fail_fast`` and under
a deadline; bad input is named in one line. Under CI the extension must be installed
(make builds it); elsewhere these tests are skipped without it."""

from __future__ import annotations

import os
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registerhist import register_history
from replicalab.checkers.linearizability import checker as linearizability
from replicalab.checkers.linearizability.checker import check
from replicalab.checkers.linearizability.columns import encode_columns
from replicalab.checkers.linearizability.from_history import ops_from_history
from replicalab.checkers.linearizability.ops import UNRECORDED, LinOp, Verdict
from replicalab.checkers.linearizability.registry import get_model
from replicalab.checkers.linearizability.search import ANY, CAS, READ, WRITE, search_part
from replicalab.workloads.register import RegisterConfig

try:
    import replicalab_native
except ImportError:
    if os.environ.get("CI") == "true":
        raise  # make builds the extension: its absence under CI is a failure
    pytest.skip("replicalab_native is not installed (make builds it)", allow_module_level=True)

EXAMPLES = settings(max_examples=1000, deadline=None)
SEEDS = st.integers(0, 2**32 - 1)
PRIMARY_DC3 = "sim://primary?replication=async&regions=dc3"


def events_of(spans: list[tuple[int, int | None]]) -> list[int]:
    """Return the events of ops with (invoke, complete or None for info) in time order,
    an invoke before a completion at the same time (``ops.event_order``'s rule)."""
    evs = []
    for i, (inv, comp) in enumerate(spans):
        evs.append((inv, 0, i, 2 * i))
        if comp is not None:
            evs.append((comp, 1, i, 2 * i + 1))
    return [e[3] for e in sorted(evs)]


def assert_legal(kinds, a, b, events, init, order, full: bool, optional=None) -> None:
    """Fail unless ``order`` is a legal linearization of the ops it lists: each read sees
    the state, each cas its expected value, no op placed after one invoked after it
    completed; with ``full``, every op that completed is in it (info ops may be left out)."""
    pos = {ev: p for p, ev in enumerate(events)}
    assert len(set(order)) == len(order)
    state, latest_invoke = init, -1
    for i in order:
        k = kinds[i]
        if k == READ:
            assert a[i] == state, f"op {i} reads {a[i]} in state {state}"
        elif k == WRITE:
            state = a[i]
        else:
            assert a[i] in (ANY, state), f"op {i} expects {a[i]} in state {state}"
            state = b[i]
        # an op placed after one whose invoke came after its own completion is out of order
        done = pos.get(2 * i + 1)
        if done is not None:
            assert done > latest_invoke, f"op {i} completed before an earlier op was invoked"
        latest_invoke = max(latest_invoke, pos[2 * i])
    if full:  # every op that must have happened (optional ones may not have)
        completed = {ev >> 1 for ev in events if ev & 1 and not (optional or {}).get(ev >> 1)}
        assert completed <= set(order)


def both(kinds, a, b, events, init=0, optional=None):
    """Return (native result, Python result) on the same part, asserting they are the
    same (verdict, order and stuck op) and the orders legal."""
    nat = replicalab_native.search_part(kinds, a, b, events, init, optional=optional)
    ref = search_part(kinds, a, b, events, init, optional=optional)
    assert tuple(nat) == tuple(ref), (kinds, a, b, events, init, optional, nat, ref)
    flags = dict(enumerate(optional or ()))
    for verdict, order, stuck in (nat, ref):
        assert_legal(kinds, a, b, events, init, order, full=verdict == 1, optional=flags)
        assert (stuck == -1) == (verdict == 1 or not order) or stuck >= 0
    return nat, ref


def random_part(n: int, seed: int) -> tuple[list[int], list[int], list[int], list[int], int]:
    """Ops with random kinds, values from a small set (so reads often match) and random
    overlapping intervals; some writes and cas end info, some cas expect ANY."""
    rnd = random.Random(seed)
    kinds, a, b, spans = [], [], [], []
    for _ in range(n):
        k = rnd.choice((READ, WRITE, CAS))
        kinds.append(k)
        a.append(ANY if k == CAS and rnd.random() < 0.2 else rnd.randint(0, 3))
        b.append(rnd.randint(0, 3) if k == CAS else 0)
        inv = rnd.randint(0, 40)
        info = k != READ and rnd.random() < 0.2
        spans.append((inv, None if info else inv + rnd.randint(0, 15)))
    return kinds, a, b, events_of(spans), rnd.randint(0, 2)


def sequential_part(n: int, seed: int, mutate: bool):
    """Ops run one at a time on a register at a point inside their interval (so the part
    is linearizable); some writes end info (half took effect); with ``mutate`` one read
    sees a value never written."""
    rnd = random.Random(seed)
    points = sorted(rnd.sample(range(10 * n + 10), n))
    kinds, a, b, spans = [], [], [], []
    state, fresh = 0, 1
    for p in points:
        inv, comp = p - rnd.randint(0, 25), p + rnd.randint(0, 25)
        k = rnd.choice((READ, READ, WRITE, CAS))
        if k == READ:
            kinds.append(READ)
            a.append(state)
            b.append(0)
            spans.append((inv, comp))
            continue
        info = rnd.random() < 0.15
        effect = not info or rnd.random() < 0.5
        if k == WRITE:
            kinds.append(WRITE)
            a.append(fresh)
            b.append(0)
        else:
            kinds.append(CAS)
            a.append(ANY if rnd.random() < 0.1 else state)
            b.append(fresh)
        if effect:
            state = fresh
        fresh += 1
        spans.append((inv, None if info else comp))
    reads = [i for i, k in enumerate(kinds) if k == READ]
    if mutate and reads:
        a[rnd.choice(reads)] = fresh + 1
    return kinds, a, b, events_of(spans), 0


def test_the_checker_uses_the_native_core():
    assert linearizability.search_core is replicalab_native.search_part
    assert linearizability.native_available("kv")
    assert linearizability.native_available("register")


def reference(ops, model="kv", **kw):
    """Return ``check()``'s result through the pure-Python pipeline (the reference)."""
    saved = linearizability.search_core
    linearizability.search_core = search_part
    try:
        assert not linearizability.native_available(model)
        return check(ops, model, **kw)
    finally:
        linearizability.search_core = saved


def summary(r):
    """Everything a check's result says but the times."""
    return (r.model, r.verdict, r.ops, [(p.key, p.verdict, p.ops, p.linearization,
                                         p.counterexample, p.explanation, p.minimal)
                                        for p in r.parts])


def random_history(seed: int, n: int, keys: int) -> list[LinOp]:
    """A kv history of random ops on a few keys: values from a small set (None, ints, a
    string), cas some with an unrecorded expected value, ok / info / fail outcomes,
    random overlapping intervals and repeated indexes (ties)."""
    rnd = random.Random(seed)
    ops = []
    for _ in range(n):
        f = rnd.choice(("read", "write", "cas"))
        value = rnd.choice((None, 1, 2, 3, "x"))
        if f == "cas":
            value = (UNRECORDED if rnd.random() < 0.15 else rnd.choice((None, 1, 2, 3)),
                     rnd.choice((1, 2, 3, "x")))
        inv = rnd.randint(0, 60)
        outcome = rnd.choices(("ok", "info", "fail"), (0.75, 0.15, 0.1))[0]
        key = ("a", 7, None, ("t", 1))[rnd.randrange(keys)]
        ops.append(LinOp(rnd.randint(0, 8) * 3, rnd.randint(0, 5), f, key, value, outcome,
                         inv, inv + rnd.randint(0, 20)))
    return ops


@settings(max_examples=400, deadline=None)
@given(SEEDS, st.integers(1, 24), st.integers(1, 4), st.booleans())
def test_the_whole_history_core_gives_the_reference_results(seed, n, keys, fail_fast):
    ops = random_history(seed, n, keys)
    got = check(ops, "kv", fail_fast=fail_fast)
    assert summary(got) == summary(reference(ops, fail_fast=fail_fast))
    if fail_fast and got.verdict == Verdict.NOT_LINEARIZABLE:
        first = [p.verdict for p in got.parts]
        assert Verdict.NOT_LINEARIZABLE in first and Verdict.UNKNOWN not in first
    else:
        assert Verdict.SKIPPED not in [p.verdict for p in got.parts]


def test_fail_fast_stops_at_the_first_key_not_linearizable():
    # keys b (2 ops, stale read), a (3 ops, fine), c (4 ops, stale): smallest first
    def key(k, first, n, stale):
        ops = [LinOp(first, 0, "write", k, 1, "ok", 0, 10)]
        ops += [LinOp(first + i, i, "read", k, 0 if stale else 1, "ok", 20 + i, 21 + i)
                for i in range(1, n)]
        return ops
    ops = key("a", 0, 3, False) + key("b", 10, 2, True) + key("c", 20, 4, True)
    for r in (check(ops, "kv", fail_fast=True), reference(ops, fail_fast=True)):
        assert r.verdict == Verdict.NOT_LINEARIZABLE
        assert [(p.key, p.verdict.json()) for p in r.parts] == [
            ("a", "skipped"), ("b", False), ("c", "skipped")]
        skipped = r.parts[0]
        assert (skipped.ops, skipped.linearization, skipped.explanation) == (3, None, None)
    full = check(ops, "kv")
    assert [p.verdict.json() for p in full.parts] == [True, False, False]
    assert summary(full) == summary(reference(ops))
    # under a deadline too
    r = check(ops, "kv", fail_fast=True, timeout_s=30)
    assert [p.verdict.json() for p in r.parts] == ["skipped", False, "skipped"]


def test_a_deadline_gives_unknown_for_the_hard_key_and_decides_the_easy_ones():
    kinds, a, _, events = _hard_part(30)
    spans: dict[int, list[int]] = {}
    for t, ev in enumerate(events):
        spans.setdefault(ev >> 1, []).append(t)
    hard = [LinOp(i, i, "read" if k == READ else "write", "hard", v, "ok", s[0], s[1])
            for i, (k, v, s) in enumerate(zip(kinds, a, (spans[i] for i in range(len(kinds))),
                                              strict=True))]
    easy = [LinOp(1000 + i, 0, "write" if i % 2 == 0 else "read", f"e{i // 20}", i // 2,
                  "ok", 10 * i, 10 * i + 5) for i in range(100)]
    t = time.monotonic()
    r = check(hard + easy, "kv", timeout_s=0.5)
    took = time.monotonic() - t
    assert r.verdict == Verdict.UNKNOWN and took < 3
    by_key = {p.key: p for p in r.parts}
    assert all(by_key[f"e{j}"].verdict == Verdict.LINEARIZABLE for j in range(5))
    part = by_key["hard"]
    assert part.verdict == Verdict.UNKNOWN and part.linearization and part.explanation
    # the prefix is a legal start of a linearization of the hard key
    pos = [o.index for o in hard]
    order = [pos.index(i) for i in part.linearization]
    assert_legal(kinds, a, [0] * len(kinds), events, 0, order, full=False)


def test_the_register_models_refuse_what_partition_refuses():
    two_keys = [LinOp(0, 0, "write", "a", 1, "ok", 0, 1), LinOp(1, 0, "write", "b", 1, "ok",
                                                                 2, 3)]
    a_cas = [LinOp(0, 0, "write", None, 1, "ok", 0, 1),
             LinOp(1, 0, "cas", None, (1, 2), "ok", 2, 3)]
    bad_cas = [LinOp(0, 0, "cas", None, 5, "ok", 0, 1)]
    for ops, model in ((two_keys, "register"), (a_cas, "register"), (bad_cas, "kv")):
        with pytest.raises(ValueError) as native:
            check(ops, model)
        with pytest.raises(ValueError) as python:
            reference(ops, model)
        assert str(native.value) == str(python.value)


def test_check_kv_names_bad_columns_in_one_line():
    cols = encode_columns([LinOp(0, 0, "read", "k", None, "ok", 0, 1)], get_model("kv"))
    args = list(cols.args())
    with pytest.raises(ValueError, match="8 bytes each"):
        replicalab_native.check_kv(*args[:2], b"123", *args[3:])
    args[4] = (7).to_bytes(8, "little")
    with pytest.raises(ValueError, match="outcome 7") as err:
        replicalab_native.check_kv(*args)
    assert "\n" not in str(err.value)
    args[4] = b""
    with pytest.raises(ValueError, match="column outcome has 0 rows"):
        replicalab_native.check_kv(*args)


@EXAMPLES
@given(st.integers(0, 14), SEEDS)
def test_random_parts_get_the_reference_verdict_and_legal_orders(n, seed):
    both(*random_part(n, seed))


@EXAMPLES
@given(st.integers(1, 40), SEEDS, st.booleans())
def test_sequential_parts_are_linearizable_until_a_read_sees_a_value_never_written(
        n, seed, mutate):
    kinds, a, b, events, init = sequential_part(n, seed, mutate)
    (verdict, _, _), _ = both(kinds, a, b, events, init)
    has_read = READ in kinds
    assert verdict == (0 if mutate and has_read else 1)


def test_values_need_not_be_dense_and_the_initial_state_counts():
    big = 1000
    # write big [0, 1]; read big [2, 3]; cas big -> 7 [4, 5]; read 7 [6, 7]
    kinds, a, b = [WRITE, READ, CAS, READ], [big, big, big, 7], [0, 0, 7, 0]
    events = [0, 1, 2, 3, 4, 5, 6, 7]
    (nat, _) = both(kinds, a, b, events)
    assert nat == (1, [0, 1, 2, 3], -1)
    assert both([READ], [5], [0], [0, 1], init=5)[0][0] == 1
    assert both([READ], [5], [0], [0, 1], init=0)[0][0] == 0




@pytest.mark.parametrize(("url", "consistency", "reader", "faults", "valid"), [
    (PRIMARY_DC3, "consistent", "US-E", (), True),
    (PRIMARY_DC3, "eventual", "EU", (), False),
    (PRIMARY_DC3 + "&timeout_ms=500", "consistent", "US-E", ("at=2s crash node=0 for=3s",),
     True),
    ("sim://quorum?n=3&r=1&w=1", "eventual", None, (), None),
    ("sim://quorum?n=3&r=2&w=2", "eventual", None, (), None),
])
def test_register_workload_histories_get_the_reference_verdict(url, consistency, reader, faults,
                                                               valid):
    cfg = RegisterConfig(keys=3, clients=12, rate=20, writer_region=reader and "US-E",
                         reader_region=reader)
    h = register_history(url, cfg, 8.0, 3, consistency, faults)
    ops = ops_from_history(h)
    model = get_model("kv")
    verdicts = []
    for _, part in model.partition(ops):
        enc = model.encode(part)
        (nat, _) = both(enc.kinds, enc.a, enc.b, enc.events, enc.init)
        verdicts.append(nat[0])
    assert len(verdicts) == 3 and len(ops) > 500
    if valid is not None:
        assert all(v == 1 for v in verdicts) if valid else 0 in verdicts
    if faults:  # the crash left writes whose outcome is unknown
        assert any(o.outcome == "info" and o.f != "read" for o in ops)
    # the whole check (counterexamples and explanations included) gives the same results
    # through the native whole-history core as through the pure-Python pipeline
    assert summary(check(ops, "kv", timeout_s=60)) == summary(reference(ops, timeout_s=60))


def _hard_part(writers: int):
    """Concurrent writes of distinct values, each read once while they run, then two reads
    of different values one after the other: the search must try every order of the
    writes to fail."""
    kinds = [WRITE] * writers + [READ] * writers + [READ, READ]
    a = [*range(1, writers + 1), *range(1, writers + 1), 1, 2]
    spans = [(0, 100)] * writers + [(50, 100)] * writers + [(200, 201), (202, 203)]
    return kinds, a, [0] * len(kinds), events_of(spans)


def test_the_deadline_gives_unknown_with_a_legal_prefix():
    kinds, a, b, events = _hard_part(30)
    t = time.monotonic()
    verdict, order, _ = replicalab_native.search_part(kinds, a, b, events, 0, t + 0.3)
    took = time.monotonic() - t
    assert verdict == -1 and 0.25 < took < 2
    assert order
    assert_legal(kinds, a, b, events, 0, order, full=False)
    # a small memo (emptied when full) costs time, never the verdict
    kinds, a, b, events = _hard_part(8)
    assert replicalab_native.search_part(kinds, a, b, events, 0, None, 16)[0] == 0


@pytest.mark.parametrize(("args", "needle"), [
    (([READ, 7], [1, 1], [0, 0], [0, 1, 2, 3]), "kind 7"),
    (([READ], [1, 2], [0], [0, 1]), "one per op"),
    (([READ, READ], [1, 1], [0, 0], [1, 0, 2, 3]), "invoke must come once"),
    (([READ], [1], [0], [0, 1, 4]), "outside"),
    (([READ], [1], [0], []), "needs an invoke"),
    (([READ], [-3], [0], [0, 1]), "values are ints >= 0"),
])
def test_bad_input_is_named_in_one_line(args, needle):
    with pytest.raises(ValueError, match=needle) as err:
        replicalab_native.search_part(*args)
    assert "\n" not in str(err.value)


@EXAMPLES
@given(st.integers(0, 12), SEEDS, SEEDS)
def test_parts_with_optional_ops_get_the_reference_result(n, seed, s2):
    """Ops that took effect inside their interval or not at all (what shrinking makes of
    the ops outside a counterexample): the native core drops them where the Python core
    does, same verdict, order and stuck op."""
    kinds, a, b, events, init = random_part(n, seed)
    rnd = random.Random(s2)
    done = {ev >> 1 for ev in events if ev & 1}
    optional = [i in done and rnd.random() < 0.5 for i in range(n)]
    both(kinds, a, b, events, init, optional)


@settings(max_examples=300, deadline=None)
@given(SEEDS, st.integers(2, 16), SEEDS)
def test_the_window_check_of_shrinking_gives_the_reference_verdict(seed, n, s2):
    """``replicalab_native.check_window`` (a counterexample's window from every start)
    against ``PartSearch._register_window`` on the pure-Python core, on random subsets of
    random single-key histories."""
    ops = [LinOp(o.index * 10 + i, o.process, o.f, None, o.value, o.outcome, o.invoke_ns,
                 o.complete_ns) for i, o in enumerate(random_history(seed, n, 1))]
    m = get_model("cas-register")
    rnd = random.Random(s2)
    sub = frozenset(o.index for o in ops if o.outcome == "ok" and rnd.random() < 0.5)
    nat = linearizability.PartSearch(m, ops, 2**28, "register")
    ref = linearizability.PartSearch(m, ops, 2**28, None)
    saved = linearizability.search_core
    linearizability.search_core = search_part
    try:
        expected = ref.verdict(sub, None)
    finally:
        linearizability.search_core = saved
    assert nat.verdict(sub, None) == expected

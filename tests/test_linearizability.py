"""The linearizability checker on hand-made histories with known answers: Jepsen's
semantics (ok / fail / info), the models, per-key parts, the deadline, counterexamples
and their explanations, and the ops a replicalab History gives."""

from __future__ import annotations

import time

import pytest

from replicalab.checkers.accounting import FINAL
from replicalab.checkers.linearizability.checker import PartSearch, check
from replicalab.checkers.linearizability.from_history import ops_from_history
from replicalab.checkers.linearizability.ops import FINAL_PROCESS, UNRECORDED, LinOp, Verdict
from replicalab.checkers.linearizability.register_models import KV, CasRegister, Register
from replicalab.checkers.linearizability.search import (
    CAS,
    READ,
    WRITE,
    check_events,
    search_model,
    search_part,
)
from replicalab.history import NEMESIS, History

MS = 1_000_000


def op(i, process, f, value, inv_ms, comp_ms=None, outcome="ok", key=None):
    """An op of the checker, times in ms (``comp_ms`` None: an info op)."""
    if comp_ms is None and outcome == "ok":
        outcome = "info"
    return LinOp(i, process, f, key, value, outcome, int(inv_ms * MS),
                 int((comp_ms if comp_ms is not None else -1) * MS))


def verdict(ops, model="cas-register"):
    return check(ops, model).verdict.json()


def relaxed_verdict(ce, ops, model="register"):
    """The verdict on ``ops`` with every op outside ``ce`` relaxed (what a counterexample
    is measured by: ``explain``'s module docstring)."""
    from replicalab.checkers.linearizability.registry import get_model

    return PartSearch(get_model(model), ops, 2**28, None).verdict(
        frozenset(o.index for o in ce), None).json()


def test_stale_read_is_not_linearizable_and_explained():
    h = [op(0, 0, "write", 1, 0, 1), op(1, 0, "write", 2, 2, 3), op(2, 1, "read", 1, 4, 5),
         op(3, 2, "read", 2, 0.5, 6)]
    r = check(h, "register")
    assert r.verdict == Verdict.NOT_LINEARIZABLE and r.ops == 4
    part = r.parts[0]
    # the write of 1 is not needed: whether or not it happened (inside its interval), the
    # write of 2 completed before the read began
    assert part.counterexample == [1, 2]
    assert part.explanation.startswith(
        "process 1 read 1 at 4.0 ms although the write of 2 by process 0 completed at 3.0 ms "
        "and no write of 1 can come after it")
    # a stale read is refuted without a search: no prefix to report
    assert part.linearization is None and part.minimal


def test_reading_the_new_value_while_it_is_written_is_linearizable():
    h = [op(0, 0, "write", 1, 0, 10), op(1, 1, "read", 1, 2, 3), op(2, 2, "read", 1, 4, 5),
         op(3, 3, "read", None, 0, 1)]
    r = check(h, "register")
    assert r.verdict == Verdict.LINEARIZABLE
    assert r.parts[0].linearization == [3, 0, 1, 2]
    assert r.parts[0].counterexample is None and r.parts[0].explanation is None


def test_lost_write():
    """An acknowledged write that a later read does not see."""
    h = [op(0, 0, "write", 1, 0, 1), op(1, 1, "read", None, 2, 3)]
    r = check(h, "register")
    assert r.verdict == Verdict.NOT_LINEARIZABLE
    assert r.parts[0].counterexample == [0, 1]
    assert "read nil at 2.0 ms although the write of 1" in r.parts[0].explanation


def test_cas_with_info_outcome_that_must_have_happened():
    base = [op(0, 0, "write", 1, 0, 1), op(2, 2, "read", 2, 10, 11)]
    cas_info = op(1, 1, "cas", (1, 2), 2, None)
    r = check([*base, cas_info])
    assert r.verdict == Verdict.LINEARIZABLE
    assert r.parts[0].linearization == [0, 1, 2]  # the cas took effect before the read
    # had it failed (never happened), nothing writes 2
    assert verdict([*base, op(1, 1, "cas", (1, 2), 2, 3, outcome="fail")]) is False


def test_cas_with_info_outcome_that_must_not_have_happened():
    base = [op(0, 0, "write", 1, 0, 1), op(2, 2, "read", 1, 10, 11)]
    r = check([*base, op(1, 1, "cas", (1, 2), 2, None), op(3, 0, "write", 3, 12, 13),
               op(4, 2, "read", 3, 14, 15)])
    assert r.verdict == Verdict.LINEARIZABLE
    assert 1 not in r.parts[0].linearization  # left out: it never took effect
    # the same cas acknowledged before the read of 1: not linearizable
    assert verdict([*base, op(1, 1, "cas", (1, 2), 2, 5)]) is False


def test_a_failed_write_is_ignored():
    base = [op(0, 0, "write", 1, 0, 1), op(1, 1, "write", 2, 2, 3, outcome="fail")]
    assert verdict([*base, op(2, 2, "read", 1, 4, 5)], "register") is True
    r = check([*base, op(2, 2, "read", 2, 4, 5)], "register")
    assert r.verdict == Verdict.NOT_LINEARIZABLE
    assert r.parts[0].counterexample == [2]
    assert "but no operation wrote 2" in r.parts[0].explanation


def test_an_info_write_can_take_effect_long_after_its_invoke():
    base = [op(0, 0, "write", 1, 0, 1), op(1, 1, "write", 2, 2, None),
            op(2, 2, "read", 1, 10, 11), op(3, 2, "read", 2, 1000, 1001)]
    assert verdict(base, "register") is True
    # ... but once it is seen, it cannot be unseen
    assert verdict([*base, op(4, 3, "read", 1, 1002, 1003)], "register") is False


def test_failed_and_unknown_reads_constrain_nothing():
    h = [op(0, 0, "write", 1, 0, 1), op(1, 1, "read", 7, 2, 3, outcome="fail"),
         op(2, 1, "read", 9, 4, None, outcome="info")]
    assert verdict(h, "register") is True
    assert [o.index for o in Register().prepare(h)] == [0]


def test_a_cas_needs_the_value_it_expects():
    h = [op(0, 0, "write", 1, 0, 1), op(1, 1, "cas", (2, 3), 2, 3)]
    r = check(h)
    assert r.verdict == Verdict.NOT_LINEARIZABLE
    assert "cas 2 -> 3 succeeded" in r.parts[0].explanation
    # a cas whose expected value was not recorded acts as a write
    assert verdict([h[0], op(1, 1, "cas", (UNRECORDED, 3), 2, 3),
                    op(2, 2, "read", 3, 4, 5)]) is True


def test_kv_checks_each_key_alone():
    h = [op(0, 0, "write", 1, 0, 1, key="a"), op(1, 1, "write", 1, 0, 1, key="b"),
         op(2, 0, "write", 2, 2, 3, key="a"), op(3, 1, "read", 1, 4, 5, key="a"),
         op(4, 2, "read", 1, 4, 5, key="b")]
    r = check(h, "kv")
    assert r.verdict == Verdict.NOT_LINEARIZABLE
    by_key = {p.key: p for p in r.parts}
    assert by_key["a"].verdict == Verdict.NOT_LINEARIZABLE
    assert by_key["b"].verdict == Verdict.LINEARIZABLE
    assert by_key["a"].ops == 3 and by_key["b"].ops == 2
    with pytest.raises(ValueError, match=r"use model kv\b"):  # the Python way, not --model
        check(h, "register")
    with pytest.raises(ValueError, match="use model cas-register or kv"):
        check([op(0, 0, "cas", (1, 2), 0, 1)], "register")
    with pytest.raises(ValueError, match="unknown model"):
        check(h, "sets")


def test_the_counterexample_is_not_linearizable_and_relaxing_any_op_fixes_it():
    h = [op(0, 0, "write", 1, 0, 1), op(1, 1, "read", 1, 1.5, 2), op(2, 0, "write", 2, 2, 3),
         op(3, 1, "read", 2, 3.5, 4), op(4, 2, "write", 3, 4, 9), op(5, 1, "read", 1, 5, 6),
         op(6, 2, "read", 3, 10, 11)]
    r = check(h, "register")
    ce = [o for o in h if o.index in r.parts[0].counterexample]
    assert verdict(ce, "register") is False
    assert relaxed_verdict(ce, h) is False
    for drop in ce:
        rest = [o for o in ce if o is not drop]
        assert relaxed_verdict(rest, h) is True


def test_shrinking_checks_the_failing_neighbourhood_not_far_chained_ops():
    """A stale read at the end of a history full of earlier reads of its value (etcd_057's
    shape): ordered by value, the 40 reads of 1 come before the write of 2 that makes
    the last read stale, so growing prefixes in that order checks sets of dozens of ops;
    the neighbourhood of the failing read holds the write of 2 at once. The answer is
    the same 1-minimal pair, from a few checks of at most 4 ops."""
    from replicalab.checkers.linearizability.explain import shrink
    from replicalab.checkers.linearizability.registry import get_model

    h = [op(0, 0, "write", 1, 0, 1)]
    h += [op(i, 1 + i % 5, "read", 1, 2 * i, 2 * i + 1) for i in range(1, 41)]
    h += [op(41, 0, "write", 2, 90, 91), op(42, 6, "read", 1, 92, 93)]
    search = PartSearch(get_model("register"), h, 2**28, None)
    sizes = []

    def counted(constrained, deadline_s):
        sizes.append(len(constrained))
        return search.verdict(constrained, deadline_s)

    ce, minimal = shrink(h, counted, None, focus=h[-1])
    assert sorted(o.index for o in ce) == [41, 42] and minimal is True
    assert max(sizes) <= 4 and len(sizes) <= 6, sizes
    assert check(h, "register").parts[0].counterexample == [41, 42]


def test_a_model_without_encoding_is_searched_through_its_step():
    class Plain(KV):
        encode = None  # the generic search path

    h = [op(0, 0, "write", 1, 0, 1, key="a"), op(1, 1, "cas", (1, 2), 2, 3, key="a"),
         op(2, 2, "read", 2, 4, 5, key="a"), op(3, 1, "read", 1, 6, 7, key="a")]
    for ops in (h, h[:3]):
        assert check(ops, Plain()).verdict == check(ops, "kv").verdict
    assert check(h[:3], Plain()).parts[0].linearization == [0, 1, 2]


def test_the_core_contract():
    """The plain-data function a native core replaces: ints in, (verdict, order, stuck)."""
    # write 1 [0, 1]; read 1 [2, 3]; cas 1 -> 2 info from 4; read 2 [5, 6]
    kinds, a, b = [WRITE, READ, CAS, READ], [1, 1, 1, 2], [0, 0, 2, 0]
    events = [0, 1, 2, 3, 4, 6, 7]
    check_events(4, events)
    assert search_part(kinds, a, b, events) == (1, [0, 1, 2, 3], -1)
    # the read of 2 before the cas could happen: stuck at the read
    verdict_, order, stuck = search_part(kinds, a, b, [0, 1, 2, 3, 6, 7, 4])
    assert (verdict_, order, stuck) == (0, [0, 1], 3)
    with pytest.raises(ValueError):
        check_events(2, [1, 0, 2])

    def step(state, i):
        k = kinds[i]
        if k == READ:
            return state == a[i], state
        if k == WRITE:
            return True, a[i]
        return state == a[i], b[i]

    assert search_model(4, events, step, 0) == (1, [0, 1, 2, 3], -1)


def _hard(n_writers: int):
    """Concurrent writes of distinct values, all overlapping, then reads that force the
    search through every order of the writes before it can fail: the work grows about
    2.2x per writer (16 writers take about 1.4 s in pure Python, so 28 would take
    hours)."""
    ops = [op(i, i, "write", i + 1, 0, 100) for i in range(n_writers)]
    ops += [op(n_writers + j, 100 + j, "read", (j % n_writers) + 1, 50, 100)
            for j in range(n_writers)]
    # after every write: two reads of different values, one after the other: the value
    # cannot change then, but only trying every order of the writes shows it
    ops.append(op(2 * n_writers, 999, "read", 1, 200, 201))
    ops.append(op(2 * n_writers + 1, 999, "read", 2, 202, 203))
    return ops


def test_the_deadline_gives_unknown_with_partial_results():
    ops = [op(o.index, o.process, o.f, o.value, o.invoke_ns / MS, o.complete_ns / MS,
              key="hard") for o in _hard(28)]
    easy = [op(100 + i, 0, "write", i, 2 * i, 2 * i + 1, key="easy") for i in range(50)]
    t = time.monotonic()
    r = check(ops + easy, "kv", timeout_s=0.5)
    took = time.monotonic() - t
    assert r.verdict == Verdict.UNKNOWN and took < 3
    by_key = {p.key: p for p in r.parts}
    assert by_key["easy"].verdict == Verdict.LINEARIZABLE
    assert len(by_key["easy"].linearization) == 50
    hard = by_key["hard"]
    assert hard.verdict == Verdict.UNKNOWN and hard.counterexample is None
    assert hard.linearization and "longest linearizable prefix" in hard.explanation


def test_ops_from_a_replicalab_history():
    h = History()
    w = h.invoke(0, "write", ("k1",), ("1.0@5",), "none", 10)
    h.ok(w, 20)
    n = h.invoke(NEMESIS, "partition", ("n1",), (None,), "none", 15)
    h.ok(n, 16)
    r = h.invoke(1, "read", ("k1",), (None,), "eventual", 30)
    h.ok(r, 40, ("1.0@5",))
    c = h.invoke(0, "cas", ("k1",), ("2.0@30",), "none", 50)
    h.info(c, 60, "timeout")
    c2 = h.invoke(2, "cas", ("k2",), ("3.2@70",), "none", 70, ("1.0@5",))
    h.fail(c2, 80, "condition failed")
    f = h.invoke(FINAL, "read", ("k1",), (None,), "consistent", 90)
    h.ok(f, 95, ("2.0@30",))
    h.invoke(3, "write", ("k2",), ("4.3@99",), "none", 99)  # never completed
    ops = ops_from_history(h)
    assert [o.index for o in ops] == [0, 2, 3, 4, 5, 6]
    assert ops[0] == LinOp(0, 0, "write", "k1", "1.0@5", "ok", 10, 20)
    assert ops[1].value == "1.0@5" and ops[1].outcome == "ok"
    assert ops[2].value == (UNRECORDED, "2.0@30") and ops[2].outcome == "info"
    assert ops[3].value == ("1.0@5", "3.2@70") and ops[3].outcome == "fail"
    assert ops[4].process == FINAL and ops[5].outcome == "info"
    r = check(ops, "kv")
    assert r.verdict == Verdict.LINEARIZABLE and r.ops == 6
    assert {p.key for p in r.parts} == {"k1", "k2"}
    multi = History()
    multi.invoke(0, "read", ("a", "b"), (None, None), "eventual", 1)
    with pytest.raises(ValueError, match="one key per op"):
        ops_from_history(multi)


def test_the_final_reads_process_is_the_accounting_one():
    assert FINAL_PROCESS == FINAL


def test_explanations_name_processes_values_and_times():
    h = [op(0, 0, "write", "1.0@0", 0, 1.5), op(1, 1, "write", "2.1@0", 10, 10.1),
         op(2, 3, "read", "1.0@0", 12.4, 13)]
    part = check(h, "register").parts[0]
    assert part.explanation.startswith(
        "process 3 read 1.0 at 12.4 ms although the write of 2.1 by process 1 completed at "
        "10.1 ms and no write of 1.0 can come after it")
    assert part.minimal is True and part.check_s >= 0
    final = [*h[:2], op(2, FINAL, "read", "1.0@0", 12.4, 13)]
    assert check(final, "register").parts[0].explanation.startswith("the final read read 1.0")


def test_cas_register_semantics_by_step():
    m = CasRegister()
    assert m.step(None, op(0, 0, "read", None, 0, 1)) == (True, None)
    assert m.step(1, op(0, 0, "cas", (1, 2), 0, 1)) == (True, 2)
    assert m.step(3, op(0, 0, "cas", (1, 2), 0, 1))[0] is False
    assert m.describe(op(0, 0, "cas", ("1.2@3", None), 0, 1)) == "cas 1.2 -> nil"


def test_a_bounded_cache_still_gives_the_right_verdict():
    """The memo cache is emptied when full: the search takes longer, never answers wrong."""
    for n in (5, 7):
        enc = Register().encode(_hard(n))
        args = (enc.kinds, enc.a, enc.b, enc.events, enc.init)
        assert search_part(*args, max_cache=8)[0] == search_part(*args)[0] == 0
    ok = [op(i, i, "write", i, 0, 10) for i in range(8)] + [op(8, 9, "read", 3, 11, 12)]
    enc = Register().encode(ok)
    assert search_part(enc.kinds, enc.a, enc.b, enc.events, enc.init, max_cache=4)[0] == 1


_BIG = """
import random, resource, sys, time
from replicalab.checkers.linearizability.checker import LinOp, check

def key_history(rnd, key, n, first_index):
    # a sequential register per key: each op takes effect at a point inside its interval;
    # about 3 ops overlap at a time, 1 in 50 writes ends info
    ops, state, t, raw = [], None, 0, []
    for i in range(n):
        t += rnd.randint(0, 300)
        d = rnd.randint(100, 1000)
        raw.append((t + rnd.randint(0, d), i, t, t + d))
    raw.sort()
    for at, i, inv, comp in raw:
        f = rnd.choice(("read", "write", "cas"))
        idx = first_index + i
        if f == "read":
            ops.append(LinOp(idx, i % 10, "read", key, state, "ok", inv, comp))
            continue
        new = f"{idx}.{key}"
        if f == "cas" and state is not None:
            ops.append(LinOp(idx, i % 10, "cas", key, (state, new), "ok", inv, comp))
        else:
            ops.append(LinOp(idx, i % 10, "write", key, new,
                             "info" if rnd.random() < 0.02 else "ok", inv, comp))
        state = new
    return ops

def hard(key, first_index, writers=24):
    # every write overlaps every other and reads need them in every order: the memo
    # cache fills up long before the search could end
    ops = [LinOp(first_index + i, i, "write", key, i + 1, "ok", 0, 10**6)
           for i in range(writers)]
    ops += [LinOp(first_index + writers + j, 100 + j, "read", key, j + 1, "ok", 5 * 10**5,
                  10**6) for j in range(writers)]
    ops.append(LinOp(first_index + 2 * writers, 999, "read", key, 1, "ok", 2 * 10**6,
                     2 * 10**6 + 1))
    ops.append(LinOp(first_index + 2 * writers + 1, 999, "read", key, 2, "ok",
                     2 * 10**6 + 2, 2 * 10**6 + 3))
    return ops

rnd = random.Random(7)
cache_mb, timeout_s, n_hard = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
if sys.argv[4:] == ["python"]:
    from replicalab.checkers.linearizability import checker as linearizability
    from replicalab.checkers.linearizability import search
    linearizability.search_core = search.search_part
ops = []
for k in range(100 - n_hard):
    ops += key_history(rnd, f"k{k}", 1010, len(ops))
for k in range(n_hard):
    ops += hard(f"hard{k}", len(ops))
base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.monotonic()
r = check(ops, "kv", timeout_s=timeout_s, cache_bytes=cache_mb * 2**20)
took = time.monotonic() - t
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
decided = sum(p.verdict == 1 for p in r.parts)
print(r.verdict.json(), r.ops, len(r.parts), decided, round(took, 2), round(base_mb),
      round(peak_mb))
"""


@pytest.mark.parametrize("core", ["python", "default"])
def test_100k_ops_over_100_keys_check_in_bounded_memory(core):
    """99 easy keys of 1,010 ops and one key whose search cannot end: the easy keys are
    decided, the hard one is unknown at the timeout, and peak memory grows by the memo
    cache bound (16 MB here) and bookkeeping, not with the search: measured in a fresh
    interpreter with getrusage (with a 256 MB bound the same run grows by ~190 MB). Run
    with the pure-Python core and with the default one (native when installed)."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _BIG, "16", "5", "1", core],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    valid, n_ops, keys, decided, took_s, base_mb, peak_mb = p.stdout.split()
    assert (valid, keys, decided) == ("unknown", "100", "99")
    assert int(n_ops) >= 100_000
    assert float(took_s) < 15
    assert float(peak_mb) - float(base_mb) < 16 + 48, p.stdout


def test_explanations_of_values_that_come_back():
    """A quorum store's new-old inversions: a value written once is seen, replaced, and
    seen again (the writes lie outside the counterexample, or inside it)."""
    h = [op(0, 9, "write", 8, 0, 1), op(1, 9, "write", 7, 0, 300),
         op(2, 1, "read", 8, 270.2, 270.7), op(3, 4, "read", 7, 272.3, 272.8),
         op(4, 1, "read", 8, 284.4, 284.8)]
    part = check(h, "register").parts[0]
    # the write of 8 took effect by 1 ms (in or out of the counterexample), so the read of
    # 7 at 272 ms saw it replaced: the earlier read of 8 is not needed
    assert part.counterexample == [3, 4]
    assert part.explanation.startswith(
        "process 1 read 8 at 284.4 ms although process 4 read 7 (completed at 272.8 ms) "
        "after the write of 8 completed at 1.0 ms: 8, written once, cannot come back.")
    h = [op(0, 9, "write", 13, 0, 700), op(1, 6, "write", 14, 601.4, 611.2),
         op(2, 0, "read", 13, 617.4, 617.8), op(3, 6, "read", 14, 619.9, 620.3)]
    part = check(h, "register").parts[0]
    assert part.counterexample == [2, 3]  # the write of 14 completed when it did, in or out
    assert part.explanation.startswith(
        "process 6 read 14 at 619.9 ms although process 0 read 13 (completed at 617.8 ms) "
        "after the write of 14 completed at 611.2 ms: 14, written once, cannot come back.")


def busy_history(n: int, overlap: int, p_info: float, seed: int) -> list[LinOp]:
    """One key's history from a sequential register with about ``2 * overlap`` ops in
    flight at a time: each op takes effect at a random point of its interval (so the
    history is linearizable), values are unique, cas from the current value succeed and
    others fail, and a fraction ``p_info`` of writes and cas end ``info`` (they did take
    effect)."""
    import random

    rnd = random.Random(seed)
    span, t, raw = 1000, 0, []
    for i in range(n):
        t += rnd.randint(0, span // overlap)
        d = rnd.randint(1, span)
        raw.append((t + rnd.randint(0, d), i, t, t + d))
    raw.sort()
    ops, state = [], None
    for _, i, inv, comp in raw:
        f = rnd.choice(("read", "write", "cas"))
        if f == "read":
            ops.append(LinOp(i, i % 50, "read", "k", state, "ok", inv, comp))
            continue
        outcome = "info" if rnd.random() < p_info else "ok"
        if f == "write":
            state = i + 1
            ops.append(LinOp(i, i % 50, "write", "k", i + 1, outcome, inv, comp))
            continue
        expected = state if rnd.random() < 0.7 else rnd.randint(0, i)
        if expected == state:
            state = i + 1
        else:
            outcome = "fail"
        ops.append(LinOp(i, i % 50, "cas", "k", (expected, i + 1), outcome, inv, comp))
    return sorted(ops, key=lambda o: o.index)


def test_a_busy_key_checks_in_pure_python():
    """~18 ops in flight on one key: without refusing to replace a value still owed
    (reduction 5 in docs/linearizability.md) the pure-Python search of these 4,000 ops
    does not end within 30 s; with it, it takes a fraction of a second."""
    from replicalab.checkers.linearizability import checker as linearizability

    saved = linearizability.search_core
    linearizability.search_core = search_part
    try:
        t = time.monotonic()
        r = check(busy_history(4000, 20, 0.05, 1), "kv", timeout_s=20)
        took = time.monotonic() - t
    finally:
        linearizability.search_core = saved
    assert r.verdict == Verdict.LINEARIZABLE, r.parts[0].explanation
    assert took < 20


def test_check_fail_fast_from_the_command_line_lists_the_keys_left_unchecked(tmp_path):
    """``replicalab check --fail-fast``: the history is still not linearizable (exit 1),
    the keys after the first bad one are "skipped" (not "unknown") in --json and in the
    table, which says they were left unchecked; without the option every key is decided."""
    import json

    import typer
    from typer.testing import CliRunner

    from replicalab.cli import check as check_cli

    app = typer.Typer()
    app.callback()(lambda: None)
    check_cli.register(app)
    lines = []
    for k, (n, stale) in enumerate(((2, True), (3, False), (4, True))):
        t = 100 * k
        lines += [f"{{:type :invoke, :f :write, :value [{k} 1], :process 0, :time {t}}}",
                  f"{{:type :ok, :f :write, :value [{k} 1], :process 0, :time {t + 10}}}"]
        for i in range(1, n):
            seen = "nil" if stale else "1"
            lines += [f"{{:type :invoke, :f :read, :value [{k} nil], :process {i}, "
                      f":time {t + 20 + i}}}",
                      f"{{:type :ok, :f :read, :value [{k} {seen}], :process {i}, "
                      f":time {t + 21 + i}}}"]
    path = tmp_path / "kv.edn"
    path.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(app, ["check", str(path), "--fail-fast", "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)["results"][0]
    assert doc["valid"] is False and doc["keys"] == 3
    assert (doc["keys_not_linearizable"], doc["keys_skipped"], doc["keys_unknown"]) == (1, 2, 0)
    assert [(p["key"], p["valid"]) for p in doc["parts"]] == [(0, False), (1, "skipped"),
                                                              (2, "skipped")]
    assert len(doc["counterexample"]) == 1
    r = CliRunner().invoke(app, ["check", str(path), "--fail-fast"])
    assert r.exit_code == 1
    assert "skipped (unchecked)" in r.output
    assert "2 keys left unchecked: --fail-fast stopped at the first key" in r.output
    r = CliRunner().invoke(app, ["check", str(path), "--json"])
    doc = json.loads(r.stdout)["results"][0]
    assert [p["valid"] for p in doc["parts"]] == [False, True, False]
    assert doc["keys_skipped"] == 0


def test_the_package_entry_exports_each_public_name_and_loads_only_what_is_asked():
    """``replicalab.checkers.linearizability`` gives the checker's public names, each the
    object its module defines; asking for ``Verdict`` loads ``ops`` and nothing else (no
    search, no numpy), so a short ``replicalab check`` pays only for what it uses."""
    import subprocess
    import sys

    import replicalab.checkers.linearizability as lin
    from replicalab.checkers.linearizability import checker, from_history, ops, registry

    assert lin.check is checker.check and lin.check_history is from_history.check_history
    assert lin.Verdict is ops.Verdict and lin.MODELS is registry.MODELS
    for name in lin.__all__:
        assert getattr(lin, name) is not None, name
    code = ("import sys; from replicalab.checkers.linearizability import Verdict; "
            "print(sorted(m for m in sys.modules if m.startswith('replicalab.checkers.')), "
            "'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == ("['replicalab.checkers.linearizability', "
                   "'replicalab.checkers.linearizability.ops'] False"), out

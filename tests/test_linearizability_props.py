"""Properties of the linearizability checker (Hypothesis, 1,000 examples each): histories
of a sequential register are linearizable, a read of a value never written is not, small
random histories agree with a brute-force search of every order, and counterexamples are
1-minimal."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from linbrute import brute_force as brute_force_model
from linbrute import counterexample_bad, relaxed_bad
from replicalab.checkers.linearizability.checker import check
from replicalab.checkers.linearizability.ops import LinOp, Verdict
from replicalab.checkers.linearizability.register_models import KV, CasRegister
from replicalab.checkers.linearizability.search import search_part

EXAMPLES = settings(max_examples=1000, deadline=None)


class Generic(KV):
    """The kv model searched through ``step`` (the generic path, without the register
    core's dead-value reductions): an independent second opinion."""

    encode = None
    native = None
    native_machine = None


# Histories come from a seeded random.Random (a size and a seed drawn by Hypothesis):
# one draw per history instead of dozens keeps 1,000 examples to a second or two.
SEEDS = st.integers(0, 2**32 - 1)


def sequential_history(n: int, seed: int, repeat: bool = False) -> list[LinOp]:
    """Ops run one at a time on a register at a point inside their interval (their
    linearization point): the recorded history is linearizable by construction. Some
    writes end ``info`` (half took effect, half did not), some reads fail or time out
    with a wrong value, cas with a wrong expected value fail. Values written are unique,
    or with ``repeat`` drawn from 1..3 (written again and again)."""
    rnd = random.Random(seed)
    spans = []
    for i in range(n):
        inv, dur = rnd.randint(0, 60), rnd.randint(0, 30)
        spans.append((inv + rnd.randint(0, dur), i, inv, inv + dur))
    spans.sort()
    state, written = None, 0
    ops = []
    for _, i, inv, comp in spans:
        f = rnd.choice(["read", "write", "cas"])
        if f == "read":
            outcome = rnd.choice(["ok", "ok", "ok", "fail", "info"])
            value = state if outcome == "ok" else rnd.randint(100, 200)
            ops.append(LinOp(i, i, "read", None, value, outcome, inv, comp))
            continue
        written += 1
        value = 1 + written % 3 if repeat else written
        if f == "write":
            outcome = rnd.choice(["ok", "ok", "ok", "info", "info-lost"])
            if outcome != "info-lost":
                state = value
            ops.append(LinOp(i, i, "write", None, value, outcome[:4], inv, comp))
            continue
        expected = state if rnd.random() < 0.5 else rnd.choice([None, *range(1, written)])
        if expected == state:
            outcome = rnd.choice(["ok", "ok", "info"])
            state = value
        else:
            outcome = "fail"
        ops.append(LinOp(i, i, "cas", None, (expected, value), outcome, inv, comp))
    return sorted(ops, key=lambda o: o.index)


@st.composite
def sequential_histories(draw, max_ops: int = 14):
    return sequential_history(draw(st.integers(1, max_ops)), draw(SEEDS), draw(st.booleans()))


@EXAMPLES
@given(sequential_histories(), st.data())
def test_sequential_register_histories_are_linearizable_until_a_read_sees_a_new_value(
        ops, data):
    """Two properties on each of the 1,000 histories (one Hypothesis run: its overhead
    per example is most of the time): the history is linearizable, and changing one read
    to a value never written makes it not."""
    r = check(ops, "cas-register")
    assert r.verdict == Verdict.LINEARIZABLE
    enc = KV().encode(ops)
    assert search_part(enc.kinds, enc.a, enc.b, enc.events, enc.init)[0] == 1
    part = r.parts[0]
    # the linearization holds every op that must have happened, each once
    must = {o.index for o in ops if o.outcome == "ok"}
    assert must <= set(part.linearization)
    assert len(part.linearization) == len(set(part.linearization))

    reads = [o for o in ops if o.f == "read" and o.outcome == "ok"]
    if not reads:
        ops = [*ops, LinOp(len(ops), 99, "read", None, None, "ok", 100, 101)]
        reads = [ops[-1]]
    victim = data.draw(st.sampled_from(reads))
    bad = [LinOp(o.index, o.process, o.f, o.key, 10_000, o.outcome, o.invoke_ns,
                 o.complete_ns) if o is victim else o for o in ops]
    r = check(bad, "cas-register")
    assert r.verdict == Verdict.NOT_LINEARIZABLE
    assert victim.index in r.parts[0].counterexample


def brute_force(ops: list[LinOp]) -> bool:
    """Return whether some order of the ops is a legal run of a cas register that
    respects real time (``linbrute.brute_force``)."""
    return brute_force_model(ops, CasRegister())


def random_history(n: int, seed: int) -> list[LinOp]:
    """Any ops on one key: kinds, values, intervals and outcomes at random."""
    rnd = random.Random(seed)
    # few values (they repeat) or many (mostly written once, as probes write them)
    pool = list(range(1, rnd.choice([3, 3, 9]) + 1))
    ops = []
    for i in range(n):
        f = rnd.choice(["read", "write", "cas"])
        v = rnd.choice([None, *pool])
        value = ((v, rnd.choice(pool)) if f == "cas" else
                 v if f == "read" else rnd.choice(pool))
        inv = rnd.randint(0, 20)
        outcome = rnd.choice(["ok", "ok", "ok", "info", "fail"])
        ops.append(LinOp(i, i, f, "k", value, outcome, inv, inv + rnd.randint(0, 10)))
    return ops


@st.composite
def random_histories(draw, max_ops: int = 8):
    return random_history(draw(st.integers(1, max_ops)), draw(SEEDS))


@EXAMPLES
@given(random_histories())
def test_small_random_histories_agree_with_brute_force_and_counterexamples_are_minimal(ops):
    """On each of the 1,000 histories: both search paths agree with the brute force, and
    a counterexample is not linearizable on its own while relaxing any one of its ops
    makes it linearizable."""
    expected = brute_force(ops)
    r = check(ops, "kv")  # the native core when it is installed
    assert r.verdict.json() is expected
    assert check(ops, Generic()).verdict.json() is expected
    enc = KV().encode(ops)  # and the pure-Python core, always
    assert search_part(enc.kinds, enc.a, enc.b, enc.events, enc.init)[0] == int(expected)
    if expected:
        return
    part = r.parts[0]
    assert part.minimal
    ce = [o for o in ops if o.index in part.counterexample]
    assert brute_force(ce) is False
    assert counterexample_bad(ce, ops, KV())
    for drop in ce:
        rest = [o for o in ce if o is not drop]
        assert not counterexample_bad(rest, ops, KV())


@settings(max_examples=500, deadline=None)
@given(st.integers(2, 16), SEEDS, SEEDS, st.booleans())
def test_the_register_core_agrees_with_the_generic_search_on_perturbed_histories(
        n, seed, s2, repeat):
    """Histories too long for the brute force: a sequential register's history with two
    reads' values swapped or one op's interval moved (linearizable or not), searched by
    the register core (with its pruning) and by the generic search (without)."""
    ops = sequential_history(n, seed, repeat)
    rnd = random.Random(s2)
    reads = [i for i, o in enumerate(ops) if o.f == "read"]
    if len(reads) >= 2 and rnd.random() < 0.5:
        i, j = rnd.sample(reads, 2)
        a, b = ops[i], ops[j]
        ops[i] = LinOp(a.index, a.process, a.f, a.key, b.value, a.outcome, a.invoke_ns,
                       a.complete_ns)
        ops[j] = LinOp(b.index, b.process, b.f, b.key, a.value, b.outcome, b.invoke_ns,
                       b.complete_ns)
    else:
        i = rnd.randrange(len(ops))
        o, shift = ops[i], rnd.randint(-40, 40)
        ops[i] = LinOp(o.index, o.process, o.f, o.key, o.value, o.outcome,
                       max(0, o.invoke_ns + shift), max(0, o.complete_ns + shift))
    enc = KV().encode(ops)
    core = search_part(enc.kinds, enc.a, enc.b, enc.events, enc.init)[0]
    assert core == int(check(ops, Generic()).verdict)


@EXAMPLES
@given(random_histories(max_ops=10))
def test_what_the_register_patterns_refute_is_a_counterexample_and_the_core_refutes_it_too(
        ops):
    """When the register model's patterns (a value never written; a stale read: a value
    that cannot come back, ``CasRegister.refute``) name ops without a search, those ops
    are not linearizable whatever the other ops did — the brute force's own definition,
    on the whole part (``linbrute.relaxed_bad``) — and the native core's
    ``refute_register`` names the same ops."""
    from replicalab.checkers.linearizability.columns import _native as native
    from replicalab.checkers.linearizability.columns import encode_columns

    m = KV()
    ce = m.refute(ops)
    if ce:
        assert relaxed_bad(ce, ops, m, window=False), ce
    if native is None or not hasattr(native, "refute_register"):
        return
    found = native.refute_register(*encode_columns(ops, m).args())
    rows = [memoryview(b).cast("I").tolist() for _, b in found]
    assert rows == ([[ops.index(o) for o in ce]] if ce else [])

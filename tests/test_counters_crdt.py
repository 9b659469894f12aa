"""Bounded Counter CRDT: lattice laws, the invariant under faults, and the pitfalls of other
implementations (seed 004 §III)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from replicalab.counters.crdt import (
    BoundedCounter,
    BoundViolation,
    CounterError,
    InsufficientRights,
    MalformedState,
    UnknownReplica,
)

NAMES = ("A", "B", "C")
LAWS = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _base(kind: str) -> BoundedCounter:
    if kind == "lower":
        return BoundedCounter.create(NAMES, initial=12, lower=0)
    if kind == "upper":
        return BoundedCounter.create(NAMES, initial=0, lower=None, upper=12)
    return BoundedCounter.create(NAMES, initial=6, lower=0, upper=12)


def _apply(states: list[BoundedCounter], op: tuple) -> list[BoundedCounter]:
    """Apply one operation to replica states; failed operations leave them unchanged."""
    name, i, j, n = op
    s = list(states)
    try:
        if name == "inc":
            s[i] = s[i].inc(NAMES[i], n)
        elif name == "dec":
            s[i] = s[i].dec(NAMES[i], n)
        elif name == "transfer" and i != j:
            direction = "inc" if s[i].down is None else "dec"
            s[i] = s[i].transfer(NAMES[i], NAMES[j], n, direction)
        elif name == "merge":
            s[i] = s[i].merge(s[j])
    except InsufficientRights:
        pass
    return s


OPS = st.tuples(st.sampled_from(["inc", "dec", "transfer", "merge"]),
                st.integers(0, 2), st.integers(0, 2), st.integers(1, 5))


@st.composite
def reachable(draw, count: int = 3):
    """Return ``count`` replica states of one counter reached by a random execution."""
    kind = draw(st.sampled_from(["lower", "upper", "two-sided"]))
    states = [_base(kind)] * 3
    for op in draw(st.lists(OPS, max_size=25)):
        states = _apply(states, op)
    return [states[draw(st.integers(0, 2))] for _ in range(count)]


@LAWS
@given(reachable(2))
def test_merge_is_commutative(s):
    a, b = s
    assert a.merge(b) == b.merge(a)


@LAWS
@given(reachable(3))
def test_merge_is_associative(s):
    a, b, c = s
    assert a.merge(b).merge(c) == a.merge(b.merge(c))


@LAWS
@given(reachable(1))
def test_merge_is_idempotent(s):
    (a,) = s
    assert a.merge(a) == a


@LAWS
@given(reachable(2))
def test_merge_is_inflationary_and_the_least_upper_bound(s):
    a, b = s
    m = a.merge(b)
    assert a.leq(m) and b.leq(m)
    assert m.leq(m) and (not m.leq(a) or m == a)


@LAWS
@given(reachable(1))
def test_serialisation_round_trips(s):
    (a,) = s
    assert BoundedCounter.from_text(a.to_text()) == a


class Replicated(RuleBasedStateMachine):
    """Three replicas exchanging states over a network that loses, duplicates and reorders
    messages, and crashes: every replica persists before it sends (as the middleware must),
    so a crash loses only its inbox and the messages in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.kind = "two-sided"
        self.states: list[BoundedCounter] = []
        self.inflight: list[tuple[int, BoundedCounter]] = []
        self.up = [True, True, True]

    @rule(kind=st.sampled_from(["lower", "upper", "two-sided"]))
    @precondition(lambda self: not self.states)
    def create(self, kind):
        self.kind = kind
        self.states = [_base(kind)] * 3

    @rule(i=st.integers(0, 2), n=st.integers(1, 6), op=st.sampled_from(["inc", "dec"]))
    @precondition(lambda self: bool(self.states))
    def local_op(self, i, n, op):
        if self.up[i]:
            self.states = _apply(self.states, (op, i, i, n))

    @rule(i=st.integers(0, 2), j=st.integers(0, 2), n=st.integers(1, 6))
    @precondition(lambda self: bool(self.states))
    def transfer(self, i, j, n):
        if self.up[i] and i != j:
            self.states = _apply(self.states, ("transfer", i, j, n))

    @rule(i=st.integers(0, 2), j=st.integers(0, 2))
    @precondition(lambda self: bool(self.states))
    def send(self, i, j):
        if self.up[i]:
            self.inflight.append((j, self.states[i]))

    @rule(data=st.data(), duplicate=st.booleans())
    @precondition(lambda self: bool(self.inflight))
    def deliver(self, data, duplicate):
        k = data.draw(st.integers(0, len(self.inflight) - 1))  # any order
        dst, state = self.inflight[k] if duplicate else self.inflight.pop(k)
        if self.up[dst]:
            self.states[dst] = self.states[dst].merge(state)

    @rule(data=st.data())
    @precondition(lambda self: bool(self.inflight))
    def lose(self, data):
        self.inflight.pop(data.draw(st.integers(0, len(self.inflight) - 1)))

    @rule(i=st.integers(0, 2))
    @precondition(lambda self: bool(self.states))
    def crash(self, i):
        self.up[i] = False
        self.inflight = [(d, s) for d, s in self.inflight if d != i]

    @rule(i=st.integers(0, 2))
    def restart(self, i):
        self.up[i] = True

    def _truth(self) -> int:
        """The global value: each replica's own row is authoritative for its operations."""
        union = self.states[0]
        for s in self.states[1:]:
            union = union.merge(s)
        return union.value()

    @invariant()
    def bounds_hold_everywhere(self):
        for s in self.states:
            if s.lower is not None:
                assert s.value() >= s.lower
                assert all(s.local_rights(x, "dec") >= 0 for x in NAMES)
            if s.upper is not None:
                assert s.value() <= s.upper
                assert all(s.local_rights(x, "inc") >= 0 for x in NAMES)
        if self.states:
            truth, s0 = self._truth(), self.states[0]
            assert s0.lower is None or truth >= s0.lower
            assert s0.upper is None or truth <= s0.upper

    @invariant()
    def transfers_move_rights_and_never_create_them(self):
        if not self.states:
            return
        union = self.states[0]
        for s in self.states[1:]:
            union = union.merge(s)
        for e, direction in ((union.down, "dec"), (union.up, "inc")):
            if e is not None:
                assert sum(union.local_rights(x, direction) for x in NAMES) == e.slack()


Replicated.TestCase.settings = settings(max_examples=300, stateful_step_count=50,
                                        deadline=None)
TestReplicatedUnderFaults = Replicated.TestCase


def test_a_transfer_moves_rights_from_the_donor():
    c = BoundedCounter.create(NAMES, initial=9, lower=0, holder="A").transfer("A", "B", 4)
    assert (c.local_rights("A"), c.local_rights("B")) == (5, 4)
    with pytest.raises(InsufficientRights):
        c.dec("A", 6)


def test_value_is_an_int_not_raw_state():
    c = BoundedCounter.create(NAMES, initial=40, lower=10, holder="A")
    assert c.value() == 40 and type(c.value()) is int
    assert c.local_rights("A") == 30 and c.local_rights("B") == 0


def test_self_transfer_is_rejected_not_counted_as_an_increment():
    c = BoundedCounter.create(NAMES, initial=10, lower=0, holder="A")
    with pytest.raises(CounterError, match="itself"):
        c.transfer("A", "A", 5)
    assert c.value() == 10


def test_upper_bound_increments_add_up_instead_of_overwriting():
    c = BoundedCounter.create(NAMES, initial=0, lower=None, upper=10, holder="A")
    c = c.inc("A", 3).inc("A", 4)
    assert c.value() == 7 and c.local_rights("A", "inc") == 3
    with pytest.raises(InsufficientRights):
        c.inc("A", 4)
    assert c.dec("B", 2).value() == 5  # a decrement creates increment rights at B
    assert c.dec("B", 2).local_rights("B", "inc") == 2


def test_seed_figure3_example():
    # seed 004 Fig. 3: invariant >= 10, initial 40; A transfers 10 to B and 10 to C
    c = BoundedCounter.create(NAMES, initial=40, lower=10, holder="A")
    c = c.transfer("A", "B", 10).transfer("A", "C", 10)
    c = c.dec("A", 5).dec("B", 5).dec("C", 5)
    assert c.local_rights("A") == 5 and c.local_rights("B") == 5
    assert c.value() == 25 and c.transferred("A", "B") == 10 and c.transferred("B", "A") == 0


def test_two_sided_counter_moves_rights_between_directions():
    c = BoundedCounter.create(("A", "B"), initial=5, lower=0, upper=10, holder="A")
    c = c.dec("A", 5)
    with pytest.raises(InsufficientRights):
        c.dec("A", 1)
    c = c.inc("A", 10)
    assert c.value() == 10 and c.local_rights("A", "dec") == 10
    with pytest.raises(InsufficientRights):
        c.inc("A", 1)


def test_rights_cannot_be_spent_twice_across_replicas():
    c = BoundedCounter.create(("A", "B"), initial=4, lower=0)  # 2 rights each
    a, b = c.dec("A", 2), c.dec("B", 2)
    with pytest.raises(InsufficientRights):
        a.dec("A", 1)
    assert a.merge(b).value() == 0


@pytest.mark.parametrize("call", [
    lambda c: c.dec("A", 0), lambda c: c.inc("A", -1), lambda c: c.transfer("A", "B", 0),
    lambda c: c.dec("A", 1.5), lambda c: c.dec("A", True)])
def test_non_positive_or_non_integer_amounts_are_rejected(call):
    with pytest.raises(CounterError, match="positive integer"):
        call(BoundedCounter.create(NAMES, initial=9, lower=0))


def test_unknown_replica_and_transfer_beyond_rights():
    c = BoundedCounter.create(NAMES, initial=9, lower=0)
    with pytest.raises(UnknownReplica):
        c.dec("Z")
    with pytest.raises(InsufficientRights) as e:
        c.transfer("A", "B", 4)
    assert (e.value.available, e.value.needed) == (3, 4)


def test_create_rejects_initial_beyond_the_bound():
    with pytest.raises(BoundViolation):
        BoundedCounter.create(NAMES, initial=-1, lower=0)
    with pytest.raises(BoundViolation):
        BoundedCounter.create(NAMES, initial=11, lower=0, upper=10)
    with pytest.raises(CounterError):
        BoundedCounter.create(("A", "A"), initial=1, lower=0)


def test_merge_of_different_counters_is_refused():
    with pytest.raises(CounterError, match="different counters"):
        BoundedCounter.create(NAMES, initial=1, lower=0).merge(
            BoundedCounter.create(NAMES, initial=1, lower=-5))


@pytest.mark.parametrize("text, problem", [
    ("{", "not JSON"), ("[1]", "no format version"), ('{"v": 9}', "format 9"),
    ('{"v":1,"rep":["A"],"lo":0,"hi":null,"d":[[1,2],[0]]}', "wrong shape"),
    ('{"v":1,"rep":["A","B"],"lo":0,"hi":null,"d":[[0,5,0,0],[0,0]]}', "negative rights"),
    ('{"v":1,"rep":["A"],"lo":0,"hi":null,"d":[[-1],[0]]}', "negative"),
    ('{"v":1,"rep":["A"],"lo":0,"hi":null}', "missing"),
])
def test_malformed_state_is_rejected_with_its_reason(text, problem):
    with pytest.raises(MalformedState, match=problem):
        BoundedCounter.from_text(text)


def test_serialised_form_is_compact_and_versioned():
    c = BoundedCounter.create(NAMES, initial=6000, lower=0)
    text = c.to_text()
    assert text.startswith('{"v":1') and len(text) < 100 and " " not in text

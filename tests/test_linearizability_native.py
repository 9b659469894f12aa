"""The native search core (native/, Rust) against the pure-Python reference
(``linsearch.search_part``): the same verdict on random histories (Hypothesis) and on the
register workload's histories of the simulated stores, a linearization that is a legal
one (each op inside its interval, every read and cas legal in its state), the deadline,
and bad input named in one line. Under CI the extension must be installed (make builds
it); elsewhere these tests are skipped without it."""

from __future__ import annotations

import os
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.checkers import linearizability
from replicalab.checkers.linmodels import get_model
from replicalab.checkers.linsearch import ANY, CAS, READ, WRITE, search_part
from replicalab.faults.schedule import parse_fault
from replicalab.faults.sim import SimNemesis
from replicalab.history import History
from replicalab.stores import open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.register import RegisterConfig, generate

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
    an invoke before a completion at the same time (``linmodels.event_order``'s rule)."""
    evs = []
    for i, (inv, comp) in enumerate(spans):
        evs.append((inv, 0, i, 2 * i))
        if comp is not None:
            evs.append((comp, 1, i, 2 * i + 1))
    return [e[3] for e in sorted(evs)]


def assert_legal(kinds, a, b, events, init, order, full: bool) -> None:
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
    if full:
        completed = {ev >> 1 for ev in events if ev & 1}
        assert completed <= set(order)


def both(kinds, a, b, events, init=0):
    """Return (native result, Python result) on the same part, asserting equal verdicts
    and legal orders."""
    nat = replicalab_native.search_part(kinds, a, b, events, init)
    ref = search_part(kinds, a, b, events, init)
    assert nat[0] == ref[0], (kinds, a, b, events, init, nat, ref)
    for verdict, order, stuck in (nat, ref):
        assert_legal(kinds, a, b, events, init, order, full=verdict == 1)
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


def _register_history(url: str, cfg: RegisterConfig, duration_s: float, seed: int,
                      consistency: str, faults: tuple[str, ...] = ()) -> History:
    """Return the history of the register workload's clients on a simulated store."""
    store = open_store(url, seed)
    h = History()
    rec = Recorder(h, store.runtime)
    opts = ProbeOptions(duration_s=duration_s, seed=seed, consistency=consistency)

    async def main() -> None:
        jobs = [generate(store, h, opts, cfg, rec)]
        if faults:
            t0 = store.runtime.now_ns()
            jobs.append(SimNemesis.of(store).run([parse_fault(f) for f in faults], h,
                                                 store.runtime, t0, t0 + int(duration_s * 1e9)))
        await store.runtime.gather(*jobs)

    store.runtime.run(main())
    return h


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
    h = _register_history(url, cfg, 8.0, 3, consistency, faults)
    ops = linearizability.ops_from_history(h)
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
    # the whole check (shrinking included) gives the same verdicts with either core
    native = linearizability.check(ops, "kv", timeout_s=60)
    try:
        linearizability.search_core = search_part
        reference = linearizability.check(ops, "kv", timeout_s=60)
    finally:
        linearizability.search_core = replicalab_native.search_part
    assert [(p.key, p.valid) for p in native.parts] == [(p.key, p.valid)
                                                        for p in reference.parts]


def _hard_part(writers: int):
    """Concurrent writes of distinct values, each read once while they run, then a read of
    a value never written: the search must try every order of the writes to fail."""
    kinds = [WRITE] * writers + [READ] * writers + [READ]
    a = [*range(1, writers + 1), *range(1, writers + 1), 10_000]
    spans = [(0, 100)] * writers + [(50, 100)] * writers + [(200, 201)]
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

"""The Wing–Gong–Lowe search for one part of a history (pure, no I/O).

Two entry points share one algorithm:

* :func:`search_part` runs on plain data — op kinds and interned values as small ints, the
  events in time order — with the register semantics built in (read, write, cas). It is
  the function a native extension replaces one for one (same arguments, same result), so
  keep its contract exact:

  - ``kinds[i]``: ``READ`` (0), ``WRITE`` (1) or ``CAS`` (2) for op ``i``;
  - ``a[i]``: the value read, written, or a cas's expected value (``ANY`` = -1: legal in
    every state, a cas whose expected value was not recorded); ``b[i]``: a cas's new value
    (ignored otherwise); values are ints >= 0, ``NIL`` (0) is "no value";
  - ``events``: ``2 * i`` for the invoke of op ``i``, ``2 * i + 1`` for its completion,
    sorted by time (an invoke before a completion at the same time, so ops that touch
    are concurrent). An op that must have happened (``ok``) has both; an op that may have
    happened any time after its invoke, or never (``info``), has only its invoke;
  - ``init``: the initial state; ``deadline_s``: a ``time.monotonic()`` value in s after
    which the search gives up (None: no limit); ``max_cache``: most memo entries kept
    (the cache is emptied when full, which costs time, never correctness);
  - ``optional`` (None: all False): op ``i`` has both events but may also not have
    happened at all: when the search reaches its completion with the op not linearized,
    the op is dropped (it did not happen) instead of the search backtracking. Shrinking
    a counterexample makes the ops it leaves out optional.

  It returns ``(verdict, order, stuck)``: verdict 1 linearizable, 0 not, -1 unknown
  (deadline reached); ``order`` the op ids of a full linearization (verdict 1) or of the
  longest linearizable prefix found; ``stuck`` the op whose completion the longest prefix
  could not get past (-1 if none).

* :func:`search_model` runs the same search over any model
  (:class:`~replicalab.checkers.linearizability.model.Model`; states are any hashable
  value), for data types without an int encoding; ``pure[i]`` marks the ops that never
  change the state (reads), which get the first reduction below.

Why two loops here when the native core has one (``wgl::search_machine``, generic over a
``Machine`` trait, the register core one machine of it): :func:`search_part` is a
documented fast-path copy. Its register step, the dead state, stranding and twin checks
are written inline with an int memo key; the same search written as :func:`search_model`
over a register machine (the step, the counts and the drop as calls, a tuple key) gave
the same results but took 1.16x the time on a backtracking register part (600 ops, 10
clients, stale reads; medians of five alternated runs of nine, 27.4 against 31.8 ms) and
as long on linearizable parts. In Rust the trait is monomorphised and costs nothing.

The search (Lowe's version of Wing and Gong's): events sit in a doubly linked list; the
search walks it from the head, and at each invoke tries to linearize that op now (the
model allows it and the pair (set of linearized ops, state) was not seen before); it then
lifts the op's invoke and completion out of the list and starts again from the head. At a
completion of an op not yet linearized it backtracks (or, for an optional op, drops it
and goes on). Reaching the end of the list means every op that must have happened is
linearized: ``info`` ops still in the list never took effect. The set of linearized (or
dropped) ops is a Python int used as a bitset. A placement made without a choice (a legal
read taken first, an optional op dropped at its completion) is undone together with the
choice before it when the search backtracks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

READ, WRITE, CAS = 0, 1, 2
NIL = 0
"""The interned id of "no value" (a register never written)."""
ANY = -1
"""A cas expected value meaning "whatever the state is" (the expected value is unknown)."""
DEAD = -2
"""The state once it holds a value no op left to linearize can observe (internal)."""
LINEARIZABLE, NOT_LINEARIZABLE, UNKNOWN = 1, 0, -1
DEFAULT_MAX_CACHE = 2_000_000
_CLOCK_EVERY = 4095
"""Iterations between two looks at the clock (a bitmask: a power of two minus one)."""


def _links(events: Sequence[int]) -> tuple[list[int], list[int], list[int], list[int], int]:
    """Return (op of entry, the other entry of the op's pair (a call's return, a return's
    call) or 0, next, prev, tail id) of the list holding ``events``: entry 0 is the head,
    1..m the events, m + 1 the tail."""
    m = len(events)
    op_of = [0] * (m + 2)
    match = [0] * (m + 2)
    call_entry: dict[int, int] = {}
    for e, ev in enumerate(events, start=1):
        op_of[e] = ev >> 1
        if ev & 1:
            c = call_entry[ev >> 1]
            match[c], match[e] = e, c
        else:
            call_entry[ev >> 1] = e
    nxt = list(range(1, m + 3))
    prv = list(range(-1, m + 1))
    return op_of, match, nxt, prv, m + 1


def _lift(call: int, nxt: list[int], prv: list[int], match: list[int]) -> None:
    """Take an op's call entry and its return entry (if any) out of the list."""
    p, q = prv[call], nxt[call]
    nxt[p], prv[q] = q, p
    r = match[call]
    if r:
        p, q = prv[r], nxt[r]
        nxt[p], prv[q] = q, p


def _unlift(call: int, nxt: list[int], prv: list[int], match: list[int]) -> None:
    """Put back what :func:`_lift` took out, in the reverse order."""
    r = match[call]
    if r:
        p, q = prv[r], nxt[r]
        nxt[p] = prv[q] = r
    p, q = prv[call], nxt[call]
    nxt[p] = prv[q] = call


def _twins(n: int, events: Sequence[int], kinds: Sequence[int], a: Sequence[int],
           b: Sequence[int], completes: Sequence[bool]) -> list[int]:
    """Return, per write or cas, the latest one invoked before it that is identical (same
    kind and values) and, like it, has no completion (``info``), or -1. Two such ops are
    interchangeable once both are invoked: a search places one only when its twin is
    placed already, which leaves out orders that differ by swapping them (exact: any
    linearization placing the later one first is one with the two swapped)."""
    twin = [-1] * n
    last: dict[tuple[int, int, int], int] = {}
    for ev in events:
        i = ev >> 1
        if ev & 1 or completes[i] or kinds[i] == READ:
            continue
        k = (kinds[i], a[i], b[i] if kinds[i] == CAS else 0)
        twin[i] = last.get(k, -1)
        last[k] = i
    return twin


def _order(stack: list[int], op_of: list[int], is_call: list[bool]) -> list[int]:
    """Return the ops linearized by ``stack`` in order (a dropped op, whose frame is its
    return entry, did not happen and is left out)."""
    return [op_of[e] for e in stack if is_call[e]]


def check_events(n: int, events: Sequence[int]) -> None:
    """Raise ValueError unless ``events`` holds each op's invoke once, before its
    completion if it has one, for ops ``0..n-1``."""
    seen = [0] * n
    for ev in events:
        i = ev >> 1
        if not 0 <= i < n:
            raise ValueError(f"event {ev} names op {i}, outside 0..{n - 1}")
        if seen[i] != (ev & 1):
            raise ValueError(f"event {ev}: op {i}'s invoke must come once, before its completion")
        seen[i] += 1
    if any(s == 0 for s in seen):
        raise ValueError("every op needs an invoke event")


def search_part(kinds: Sequence[int], a: Sequence[int], b: Sequence[int],
                events: Sequence[int], init: int = NIL, deadline_s: float | None = None,
                max_cache: int = DEFAULT_MAX_CACHE, optional: Sequence[bool] | None = None
                ) -> tuple[int, list[int], int]:
    """Return (verdict 1/0/-1, op order, stuck op or -1) of one register part (see the
    module docstring for the exact contract)."""
    n = len(kinds)
    opt = list(optional) if optional is not None else [False] * n
    op_of, match, nxt, prv, tail = _links(events)
    is_call = [True] * (tail + 1)
    for e, ev in enumerate(events, start=1):
        is_call[e] = not ev & 1
    # Values no op still to be linearized can observe (read, or expect in a cas) all
    # act alike: the state becomes DEAD, so orders that differ only in which of them
    # was last are one memo entry.
    size = max(max(a, default=0), max(b, default=0), init) + 1
    obs_left = [0] * size
    # A value replaced while an op that must happen (it has a completion) still has to
    # observe it, and nothing left writes it again: no completion can satisfy that op,
    # so the replacing step is pruned at once instead of when the op's completion comes.
    must_left = [0] * size
    writes_left = [0] * size
    has_ret = [False] * n  # must happen: a completion and not optional
    completes = [False] * n
    for ev in events:
        if ev & 1:
            has_ret[ev >> 1] = not opt[ev >> 1]
            completes[ev >> 1] = True
    twin = _twins(n, events, kinds, a, b, completes)

    def _count(op: int, d: int) -> None:
        """Count op ``op`` in (``d`` = 1) or out of (-1) what is left to linearize."""
        k = kinds[op]
        if k == READ or (k == CAS and a[op] != ANY):
            obs_left[a[op]] += d
            if has_ret[op]:
                must_left[a[op]] += d
        if k == WRITE:
            writes_left[a[op]] += d
        elif k == CAS:
            writes_left[b[op]] += d

    for op in range(n):
        _count(op, 1)
    stack: list[int] = []
    saved: list[int] = []
    cache: set[int] = set()
    bits, state = 0, (init if obs_left[init] else DEAD)
    best: list[int] = []
    best_len, stuck, fresh = 0, -1, False
    steps = 0
    entry = nxt[0]
    while True:
        steps += 1
        if deadline_s is not None and not steps & _CLOCK_EVERY and time.monotonic() > deadline_s:
            return UNKNOWN, _order(best, op_of, is_call), stuck
        if entry == tail:
            return LINEARIZABLE, _order(stack, op_of, is_call), -1
        if entry == nxt[0]:
            # a new configuration: a legal read among the ops invoked so far is taken
            # first (see the backtracking below for why nothing else need be tried)
            e = entry
            while e != tail and is_call[e]:
                op = op_of[e]
                if kinds[op] == READ and a[op] == state:
                    entry = e
                    break
                e = nxt[e]
        op = op_of[entry]
        call = is_call[entry]
        if call or opt[op]:
            k = kinds[op]
            if not call:
                # an optional op not linearized by its completion did not happen: drop
                # it, without a choice (placing it earlier is what the other branches try)
                obs = a[op] if k == READ or (k == CAS and a[op] != ANY) else -3
                new = DEAD if obs == state and obs_left[state] == 1 else state
                lift_at = match[entry]
            else:
                if twin[op] >= 0 and not bits >> twin[op] & 1:
                    entry = nxt[entry]  # an identical info op before it is still free: that one
                    continue
                if k == READ:
                    if state != a[op]:
                        entry = nxt[entry]
                        continue
                    new = state if obs_left[state] > 1 else DEAD
                elif k == WRITE:
                    new = a[op]
                    if (state >= 0 and new != state and must_left[state]
                            and not writes_left[state]):
                        entry = nxt[entry]
                        continue
                    if not obs_left[new]:
                        new = DEAD
                else:
                    x = a[op]
                    new = b[op]
                    if x == ANY:
                        if (state >= 0 and new != state and must_left[state]
                                and not writes_left[state]):
                            entry = nxt[entry]
                            continue
                        if not obs_left[new]:
                            new = DEAD
                    elif x != state:
                        entry = nxt[entry]
                        continue
                    else:
                        if (new != x and must_left[x] - has_ret[op] > 0
                                and not writes_left[x]):
                            entry = nxt[entry]
                            continue
                        if obs_left[new] == (new == x):
                            new = DEAD
                lift_at = entry
            nb = bits | (1 << op)
            key = nb | ((new + 2) << n)
            if key not in cache:
                if len(cache) >= max_cache:
                    cache.clear()  # bounded memory: forget, never prune wrongly
                cache.add(key)
                stack.append(entry)
                saved.append(state)
                bits, state = nb, new
                _count(op, -1)
                _lift(lift_at, nxt, prv, match)
                if len(stack) > best_len:
                    best_len, fresh = len(stack), True
                    best = stack[:]
                entry = nxt[0]
                continue
            if call and k != READ:
                entry = nxt[entry]
                continue
            # a legal read whose configuration was searched before: it failed, and so
            # does this one (see below); likewise an optional op's drop
        elif fresh or stuck < 0:
            stuck, fresh = op, False
        # Backtrack. A read that was legal when linearized never needs another place:
        # whatever order completes the history from there can take the read first (it
        # changes no state, and everything that had to precede it already did), so if
        # the search after it failed, the configuration before it fails too. The same
        # holds for an optional op dropped at its completion.
        while True:
            if not stack:
                return NOT_LINEARIZABLE, _order(best, op_of, is_call), stuck
            e = stack.pop()
            state = saved.pop()
            op = op_of[e]
            bits ^= 1 << op
            _count(op, 1)
            if is_call[e]:
                _unlift(e, nxt, prv, match)
                if kinds[op] != READ:
                    break
            else:
                _unlift(match[e], nxt, prv, match)
        entry = nxt[e]


def search_model(n: int, events: Sequence[int], step: Callable[[Any, int], tuple[bool, Any]],
                 init: Hashable, deadline_s: float | None = None,
                 max_cache: int = DEFAULT_MAX_CACHE, pure: Sequence[bool] | None = None,
                 optional: Sequence[bool] | None = None,
                 viable: Callable[[Any, int], bool] | None = None
                 ) -> tuple[int, list[int], int]:
    """Return (verdict 1/0/-1, op order, stuck op or -1) of ops ``0..n-1`` under any model:
    ``step(state, i)`` returns (legal, new state) of op ``i`` (states hashable);
    ``pure[i]`` (None: all False) marks an op that never changes the state (a read): at a
    new configuration the first one legal there is taken at once, without a choice;
    ``viable(state, done)`` (``done`` the bitset of ops placed or dropped), when given,
    says whether the ops left can still be linearized from ``state`` as far as the model
    can tell at once: a step of an op that is not pure to a state that is not viable is
    refused (a pruning that must never refuse a state some linearization goes through).
    The rest is as :func:`search_part`."""
    op_of, match, nxt, prv, tail = _links(events)
    is_call = [True] * (tail + 1)
    for e, ev in enumerate(events, start=1):
        is_call[e] = not ev & 1
    opt = list(optional) if optional is not None else [False] * n
    reads = list(pure) if pure is not None else [False] * n
    stack: list[int] = []
    saved: list[Any] = []
    forced: list[bool] = []
    cache: set[tuple[int, Any]] = set()
    bits, state = 0, init
    best: list[int] = []
    best_len, stuck, fresh = 0, -1, False
    steps = 0
    entry = nxt[0]
    while True:
        steps += 1
        if deadline_s is not None and not steps & _CLOCK_EVERY and time.monotonic() > deadline_s:
            return UNKNOWN, _order(best, op_of, is_call), stuck
        if entry == tail:
            return LINEARIZABLE, _order(stack, op_of, is_call), -1
        take = False
        if entry == nxt[0]:
            # a new configuration: the first legal read among the ops invoked so far is
            # taken at once (as in search_part)
            e = entry
            while e != tail and is_call[e]:
                op = op_of[e]
                if reads[op]:
                    legal, new = step(state, op)
                    if legal:
                        entry, take = e, True
                        break
                e = nxt[e]
        op = op_of[entry]
        call = is_call[entry]
        if take or (call and not reads[op]) or (not call and opt[op]):
            if not call:  # an optional op not placed by its completion: dropped, it did
                legal, new, lift_at = True, state, match[entry]  # not happen
            else:
                lift_at = entry
                if not take:
                    legal, new = step(state, op)
                    if legal and viable is not None and not viable(new, bits | (1 << op)):
                        legal = False
            if legal:
                nb = bits | (1 << op)
                key = (nb, new)
                if key not in cache:
                    if len(cache) >= max_cache:
                        cache.clear()
                    cache.add(key)
                    stack.append(entry)
                    saved.append(state)
                    forced.append(take or not call)
                    bits, state = nb, new
                    _lift(lift_at, nxt, prv, match)
                    if len(stack) > best_len:
                        best_len, fresh = len(stack), True
                        best = stack[:]
                    entry = nxt[0]
                    continue
            if call and not take:
                entry = nxt[entry]
                continue
        elif call:
            entry = nxt[entry]  # a read not legal here (a legal one was taken above)
            continue
        elif fresh or stuck < 0:
            stuck, fresh = op, False
        while True:  # backtrack to the last placement made by choice
            if not stack:
                return NOT_LINEARIZABLE, _order(best, op_of, is_call), stuck
            e = stack.pop()
            state = saved.pop()
            bits ^= 1 << op_of[e]
            _unlift(e if is_call[e] else match[e], nxt, prv, match)
            if not forced.pop():
                break
        entry = nxt[e]

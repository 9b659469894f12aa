"""A brute-force oracle for small transaction histories, and random histories to give it.

Independent of the graph checker (``replicalab.checkers.txn``): it shares no code with it
and decides from the definitions, by search:

* serializable: some subset of the transactions that may have committed (every ok one,
  any of the info ones) has a total order whose serial execution gives every committed
  read exactly what it returned;
* strict serializable: the same, the order also keeping real-time order (a committed
  transaction that completed before another was invoked comes first);
* snapshot isolation: some such subset, a commit order and for each transaction a
  snapshot (a prefix of the commit order before its commit) such that every committed
  read returns the snapshot's value with the transaction's own earlier writes applied,
  and no two transactions writing a common key commit one inside the other's interval
  from snapshot to commit (first committer wins).

Histories are lists of :class:`T`: outcome, invoke and completion positions in the
history (None: never completed), micro-ops ``(f, key, value)``; list-append reads are
tuples, register reads a value or None.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class T:
    """One transaction of a generated history."""

    outcome: str
    invoke: int
    complete: int | None
    mops: tuple[tuple[str, str, Any], ...]


# -- the oracle -----------------------------------------------------------------------------

def _run(t: T, snapshot: dict[str, Any], check: bool, lists: bool) -> bool:
    """Whether t's reads (if ``check``) are what it sees from ``snapshot`` and its own
    earlier writes (``lists``: list-append, where nil reads as the empty list)."""
    local: dict[str, Any] = {}
    for f, k, v in t.mops:
        if f == "append":
            local[k] = (*local.get(k, snapshot.get(k, ())), v)
        elif f == "w":
            local[k] = v
        elif check:
            seen = local[k] if k in local else snapshot.get(k)
            if lists:
                seen, v = tuple(seen or ()), tuple(v or ())
            if seen != v:
                return False
    return True


def _apply(t: T, state: dict[str, Any]) -> dict[str, Any]:
    out = dict(state)
    for f, k, v in t.mops:
        if f == "append":
            out[k] = (*out.get(k, ()), v)
        elif f == "w":
            out[k] = v
    return out


def _frozen(state: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted(state.items()))


def _writes(t: T) -> set[str]:
    return {k for f, k, _ in t.mops if f != "r"}


def _setup(h: list[T]) -> tuple[list[int], frozenset[int], list[set[int]]]:
    cands = [i for i, t in enumerate(h) if t.outcome in ("ok", "info")]
    must = frozenset(i for i in cands if h[i].outcome == "ok")
    # real-time: a committed transaction completed before another was invoked
    preds = [{a for a in must if h[a].complete is not None and h[a].complete < h[b].invoke}
             for b in range(len(h))]
    return cands, must, preds


def serializable(h: list[T], model: str, realtime: bool = False) -> bool:
    """Return whether ``h`` is serializable (strict serializable with ``realtime``)."""
    lists = model == "list-append"
    cands, must, preds = _setup(h)
    failed: set[tuple[frozenset[int], tuple[Any, ...]]] = set()

    def go(placed: frozenset[int], state: dict[str, Any]) -> bool:
        if must <= placed:
            return True
        key = (placed, _frozen(state))
        if key in failed:
            return False
        for t in cands:
            if t in placed or (realtime and not preds[t] <= placed):
                continue
            if _run(h[t], state, h[t].outcome == "ok", lists) and go(placed | {t},
                                                              _apply(h[t], state)):
                return True
        failed.add(key)
        return False

    return go(frozenset(), {})


def snapshot_isolation(h: list[T], model: str) -> bool:
    """Return whether ``h`` is snapshot isolated (see the module docstring)."""
    lists = model == "list-append"
    cands, must, _ = _setup(h)
    writes = [_writes(t) for t in h]

    def go(order: list[int], states: list[dict[str, Any]]) -> bool:
        placed = set(order)
        if must <= placed:
            return True
        for t in cands:
            if t in placed:
                continue
            # a snapshot at p (the first p commits): no later commit before t's may
            # write what t writes; the later the snapshot, the fewer such commits
            ok = False
            for p in range(len(order), -1, -1):
                if p < len(order) and writes[order[p]] & writes[t]:
                    break
                if _run(h[t], states[p], h[t].outcome == "ok", lists):
                    ok = True
                    break
            if ok and go([*order, t], [*states, _apply(h[t], states[-1])]):
                return True
        return False

    return go([], [{}])


# -- random histories -----------------------------------------------------------------------

def _all_writes(txns: dict[int, T]) -> list[tuple[str, str, Any]]:
    return [m for t in txns.values() for m in t.mops if m[0] != "r"]


def _timing(rng: random.Random, n: int, spread: int) -> list[tuple[int, int]]:
    """Return n (start, end) intervals over distinct event positions, overlapping at
    random."""
    ivs = []
    for i in range(n):
        s = i * 2 + rng.randint(0, spread)
        ivs.append((s, s + 1 + rng.randint(0, spread)))
    events = sorted([(s, 0, i) for i, (s, _) in enumerate(ivs)]
                    + [(e, 1, i) for i, (_, e) in enumerate(ivs)])
    pos: dict[tuple[int, int], int] = {}
    for p, (_, kind, i) in enumerate(events):
        pos[(kind, i)] = p
    return [(pos[(0, i)], pos[(1, i)]) for i in range(n)]


def random_history(rng: random.Random, model: str, n: int | None = None,
                   keys: int | None = None, rmw: bool = False,
                   info_writes: bool = True) -> list[T]:
    """Return a small random history (up to 8 transactions, 3 keys) of ``model``: its
    transactions run against a store that keeps every committed state and lets each
    read see one of the latest few, its own writes on top (so some histories are
    serializable, some snapshot isolated, some neither); some fail, some end unknown
    (info, their effects applied or not), some overlap in time, a few reads are
    corrupted outright. ``rmw``: every write is preceded by a read of its key in the
    same transaction; ``info_writes`` False: unknown transactions only read."""
    n = n or rng.randint(1, 8)
    keys = keys or rng.randint(1, 3)
    lag = rng.choice((1, 1, 2, 3))  # 1: every read sees the latest state
    states: list[dict[str, Any]] = [{}]
    value = 1
    out = []
    times = _timing(rng, n, rng.choice((0, 1, 3, 8)))
    order = sorted(range(n), key=lambda i: times[i][1])  # effects in completion order
    txns: dict[int, T] = {}
    for i in order:
        r = rng.random()
        outcome = "fail" if r < 0.1 else "info" if r < 0.2 else "ok"
        snap = states[-rng.randint(1, min(lag, len(states)))]
        local: dict[str, Any] = {}
        mops: list[tuple[str, str, Any]] = []
        for _ in range(rng.randint(1, 4)):
            k = "xyz"[rng.randrange(keys)]
            if rng.random() < 0.5 or (outcome == "info" and not info_writes):
                seen = local[k] if k in local else snap.get(k, () if model == "list-append"
                                                             else None)
                if rng.random() < 0.03:  # corrupted
                    seen = (*(seen or ()), 99) if model == "list-append" else \
                        rng.choice([v for _, kk, v in _all_writes(txns) if kk == k] or [None])
                mops.append(("r", k, seen))
            else:
                if rmw and not any(m[1] == k for m in mops):  # read the key first
                    mops.append(("r", k, snap.get(k, () if model == "list-append"
                                                  else None)))
                if model == "list-append":
                    local[k] = (*(local[k] if k in local else snap.get(k, ())), value)
                    mops.append(("append", k, value))
                else:
                    local[k] = value
                    mops.append(("w", k, value))
                value += 1
        applied = outcome == "ok" or (outcome == "info" and rng.random() < 0.5)
        if applied:
            new = dict(states[-1])
            for f, k, v in mops:
                if f == "append":
                    new[k] = (*new.get(k, ()), v)
                elif f == "w":
                    new[k] = v
            states.append(new)
        if outcome != "ok":  # what it read is not known
            mops = [(f, k, None if f == "r" else v) for f, k, v in mops]
        s, e = times[i]
        txns[i] = T(outcome, s, None if outcome == "info" and rng.random() < 0.5 else e,
                    tuple(mops))
    out = [txns[i] for i in range(n)]
    return out

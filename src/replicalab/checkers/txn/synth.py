"""Synthetic transaction histories: serial executions with timings compatible with their
serial order (valid under every model), snapshot-isolation executions over a few hot
keys (strongly connected components as large as the concurrency makes them; write skew
their only anomaly), sloppy ones, and small gadgets that each hold one anomaly class.
Tests and ``benchmarks/bench_txn_check.py`` build on these."""

from __future__ import annotations

import random
from typing import Any

from replicalab.checkers.txn.types import Txn

GADGETS = ("G0", "G1a", "G1b", "G1c", "G-single-item", "G-nonadjacent-item", "G2-item",
           "internal", "incompatible-order", "duplicate-elements", "lost-update", "G0-process",
           "G0-realtime", "G1c-process", "G-single-item-realtime", "G2-item-process")
"""List-append gadgets: ``gadget(name)`` holds the anomaly ``name``, and what
``EXPECTED`` adds: no dependency edge at all for a lone aborted read or internal
inconsistency (Elle's empty-transaction-graph); an intermediate read or a lost update
whose appends a read shows is a G-single cycle too."""
EXPECTED = {g: {g} for g in GADGETS} | {
    "G1a": {"G1a", "empty-transaction-graph"},
    "G1b": {"G1b", "G-single-item"},
    "internal": {"internal", "empty-transaction-graph"},
    "lost-update": {"lost-update", "G-single-item"}}

REGISTER_GADGETS = ("G1a", "G1b", "G1c", "G-single-item", "G2-item", "internal",
                    "lost-update", "G-single-item-realtime")
REGISTER_EXPECTED = {g: {g} for g in REGISTER_GADGETS} | {
    "G1a": {"G1a", "empty-transaction-graph"}, "G1b": {"G1b", "empty-transaction-graph"},
    "internal": {"internal", "empty-transaction-graph"},
    "lost-update": {"lost-update", "G2-item"}}


def serial(rng: random.Random, n: int, keys: int, max_len: int, model: str = "list-append",
           fail_p: float = 0.05, info_p: float = 0.05, start: int = 0,
           first_value: int = 1, key_prefix: str = "", writes_per_key: int = 32
           ) -> list[Txn]:
    """Return ``n`` transactions executed one after another in list order, each
    interval holding its commit point so real-time order never contradicts the serial
    order, processes assigned so each runs one transaction at a time; some ``fail`` (no
    effect) and some ``info`` (effect applied or not). Times in ns from ``start``. A key
    written ``writes_per_key`` times is retired for a fresh one (as Elle's generator
    does), so reads stay short."""
    state: dict[str, Any] = {}
    active = list(range(keys))
    writes = [0] * keys
    next_key = keys
    value = first_value
    out: list[Txn] = []
    for i in range(n):
        mops: list[tuple[str, str, Any]] = []
        r = rng.random()
        outcome = "fail" if r < fail_p else "info" if r < fail_p + info_p else "ok"
        applied = outcome == "ok" or (outcome == "info" and rng.random() < 0.5)
        local: dict[str, Any] = {}  # this transaction's writes over the state
        for _ in range(rng.randint(1, max_len)):
            slot = rng.randrange(keys)
            k = f"{key_prefix}{active[slot]}"
            if rng.random() < 0.5:
                cur = local[k] if k in local else state.get(k)
                mops.append(("r", k, (tuple(cur) if cur else ()) if model == "list-append"
                             else cur))
            else:
                if model == "list-append":
                    local[k] = [*((local[k] if k in local else state.get(k)) or []), value]
                    mops.append(("append", k, value))
                else:
                    local[k] = value
                    mops.append(("w", k, value))
                value += 1
                writes[slot] += 1
                if writes[slot] >= writes_per_key:
                    active[slot], writes[slot] = next_key, 0
                    next_key += 1
        if applied:
            state.update(local)
        if outcome != "ok":  # what a failed or unknown transaction read is not known
            mops = [(f, k, None if f == "r" else v) for f, k, v in mops]
        commit = start + 10 * (i + 1)
        inv = commit - rng.randint(1, 40)
        comp = commit + rng.randint(1, 40)
        out.append(Txn(i, 0, outcome, inv, comp if outcome != "info" else -1, mops))
    _processes(rng, out)
    return out


def _processes(rng: random.Random, txns: list[Txn]) -> None:
    """Give each transaction a process free at its invoke (a process runs one at a time;
    one that ran an ``info`` transaction is not used again, as Jepsen's crashed ones)."""
    import heapq

    busy: list[tuple[int, int]] = []  # (completes at, process)
    free: list[int] = []
    procs = 0
    for t in sorted(txns, key=lambda x: x.invoke):
        while busy and busy[0][0] < t.invoke:
            free.append(heapq.heappop(busy)[1])
        if free and rng.random() < 0.9:
            i = rng.randrange(len(free))
            free[i], free[-1] = free[-1], free[i]
            p = free.pop()
        else:
            p, procs = procs, procs + 1
        t.process = p
        if t.complete >= 0:
            heapq.heappush(busy, (t.complete, p))


def gadget(name: str, start: int = 0, process: int = 0, index: int = 0, key: str = "g",
           model: str = "list-append") -> list[Txn]:
    """Return transactions holding the anomaly ``name`` (see GADGETS / REGISTER_GADGETS)
    on keys ``key``-a, -b, ...; processes from ``process``, indices from ``index``, all
    transactions inside [start, start + 100] ns and overlapping unless the anomaly needs
    process or real-time order."""
    a, b, c, d = (f"{key}-{x}" for x in "abcd")
    sp = (_register if model == "rw-register" else _list_append)(name, a, b, c, d)
    out = []
    for i, (proc, outcome, inv, comp, mops) in enumerate(sp):
        out.append(Txn(index + i, process + proc, outcome, start + inv,
                       start + comp if comp >= 0 else -1, mops))
    return out


def _list_append(name: str, a: str, b: str, c: str, d: str) -> list[tuple[Any, ...]]:
    both = (10, 90)
    g = {
        "G0": [(0, "ok", *both, [("append", a, 1), ("append", b, 2)]),
               (1, "ok", *both, [("append", a, 2), ("append", b, 1)]),
               (2, "ok", *both, [("r", a, (1, 2)), ("r", b, (1, 2))])],
        "G1a": [(0, "fail", *both, [("append", a, 1)]),
                (1, "ok", *both, [("r", a, (1,))])],
        "G1b": [(0, "ok", *both, [("append", a, 1), ("append", a, 2)]),
                (1, "ok", *both, [("r", a, (1,))])],
        "G1c": [(0, "ok", *both, [("append", a, 1), ("r", b, (1,))]),
                (1, "ok", *both, [("append", b, 1), ("r", a, (1,))])],
        "G-single-item": [(0, "ok", *both, [("r", a, (1,)), ("r", b, ())]),
                     (1, "ok", *both, [("append", a, 1), ("append", b, 1)])],
        "G-nonadjacent-item": [(0, "ok", *both, [("r", a, ()), ("r", d, (1,))]),
                          (1, "ok", *both, [("append", a, 1), ("append", b, 1)]),
                          (2, "ok", *both, [("r", b, (1,)), ("r", c, ())]),
                          (3, "ok", *both, [("append", c, 1), ("append", d, 1)])],
        "G2-item": [(0, "ok", *both, [("append", a, 1), ("r", b, ())]),
                    (1, "ok", *both, [("append", b, 1), ("r", a, ())])],
        "internal": [(0, "ok", *both, [("append", a, 1), ("r", a, ())])],
        "incompatible-order": [(0, "ok", *both, [("append", a, 1)]),
                               (1, "ok", *both, [("append", a, 2)]),
                               (2, "ok", *both, [("r", a, (1, 2))]),
                               (3, "ok", *both, [("r", a, (2, 1))])],
        "duplicate-elements": [(0, "ok", *both, [("append", a, 1)]),
                               (1, "ok", *both, [("r", a, (1, 1))])],
        "lost-update": [(0, "ok", *both, [("r", a, ()), ("append", a, 1)]),
                        (1, "ok", *both, [("r", a, ()), ("append", a, 2)]),
                        (2, "ok", *both, [("r", a, (1, 2))])],
        # same process, one after the other; a later reader shows the opposite order
        "G0-process": [(0, "ok", 10, 20, [("append", a, 1)]),
                       (0, "ok", 30, 40, [("append", a, 2)]),
                       (1, "ok", 5, 90, [("r", a, (2, 1))])],
        "G0-realtime": [(0, "ok", 10, 20, [("append", a, 1)]),
                        (1, "ok", 30, 40, [("append", a, 2)]),
                        (2, "ok", 5, 90, [("r", a, (2, 1))])],
        "G1c-process": [(0, "ok", 10, 20, [("r", a, (1,))]),
                        (0, "ok", 30, 40, [("append", a, 1)])],
        "G-single-item-realtime": [(0, "ok", 10, 20, [("append", a, 1)]),
                                   (1, "ok", 30, 40, [("r", a, ())])],
        "G2-item-process": [(0, "ok", 10, 20, [("append", c, 1)]),
                            (0, "ok", 30, 40, [("r", a, ())]),
                            (1, "ok", 5, 90, [("append", a, 1), ("r", c, ())])],
    }
    return g[name]


def _register(name: str, a: str, b: str, c: str, d: str) -> list[tuple[Any, ...]]:
    both = (10, 90)
    g = {
        "G1a": [(0, "fail", *both, [("w", a, 1)]), (1, "ok", *both, [("r", a, 1)])],
        "G1b": [(0, "ok", *both, [("w", a, 1), ("w", a, 2)]), (1, "ok", *both, [("r", a, 1)])],
        "G1c": [(0, "ok", *both, [("w", a, 1), ("r", b, 1)]),
                (1, "ok", *both, [("w", b, 1), ("r", a, 1)])],
        "G-single-item": [(0, "ok", *both, [("r", a, 1), ("r", b, None)]),
                     (1, "ok", *both, [("w", a, 1), ("w", b, 1)])],
        "G2-item": [(0, "ok", *both, [("w", a, 1), ("r", b, None)]),
                    (1, "ok", *both, [("w", b, 1), ("r", a, None)])],
        "internal": [(0, "ok", *both, [("w", a, 1), ("r", a, 2)]),
                     (1, "ok", *both, [("w", a, 2)])],
        "lost-update": [(0, "ok", *both, [("r", a, None), ("w", a, 1)]),
                        (1, "ok", *both, [("r", a, None), ("w", a, 2)])],
        "G-single-item-realtime": [(0, "ok", 10, 20, [("w", a, 1)]),
                                   (1, "ok", 30, 40, [("r", a, None)])],
    }
    return g[name]


def si_execution(rng: random.Random, n: int, keys: int = 4, clients: int = 10,
                 max_len: int = 4, appends_per_key: int = 64, read_skew_p: float = 0.0,
                 start: int = 0, first_value: int = 1) -> list[Txn]:
    """Return ``n`` list-append transactions run under snapshot isolation by ``clients``
    concurrent clients over ``keys`` hot keys: each reads the state committed when it
    takes its snapshot (just after its invoke), plus its own appends, and commits unless
    a transaction that committed since its snapshot appended to a key it appends to
    (first committer wins: it then fails); a key is retired for a fresh one after
    ``appends_per_key`` appends, so lists stay short. Real-time order agrees (snapshot
    after the invoke, commit before the completion), so the only anomaly is write skew
    (G2-item, and its real-time variant), unless ``read_skew_p``: that share of the
    committed transactions has one read answered from the state at its commit instead
    of its snapshot (read skew, G-single). Times in ns from ``start``."""
    import heapq

    state: dict[str, tuple[int, ...]] = {}
    last_commit: dict[str, int] = {}  # key -> number of the last commit that wrote it
    commits = 0
    active = list(range(keys))
    count = [0] * keys
    next_key = keys
    value = first_value
    events: list[tuple[int, int, str, Any]] = []
    seq = 0
    started = 0
    out: list[Txn] = []

    def schedule(client: int, t: int) -> None:
        nonlocal seq, started
        inv = t + rng.randint(1, 5)
        heapq.heappush(events, (inv + rng.randint(1, 3), seq, "snap", (client, inv)))
        seq += 1
        started += 1

    for c in range(min(clients, n)):
        schedule(c, start + c)
    while events:
        now, _, kind, p = heapq.heappop(events)
        if kind == "snap":
            client, inv = p
            local: dict[str, tuple[int, ...]] = {}
            mops: list[tuple[str, str, Any]] = []
            for _ in range(rng.randint(1, max_len)):
                k = str(active[rng.randrange(keys)])
                if rng.random() < 0.5:
                    mops.append(("r", k, local[k] if k in local else state.get(k, ())))
                else:
                    local[k] = (*(local[k] if k in local else state.get(k, ())), value)
                    mops.append(("append", k, value))
                    value += 1
            heapq.heappush(events, (now + rng.randint(5, 50), seq, "commit",
                                    (client, inv, commits, mops, local)))
            seq += 1
            continue
        client, inv, snap_no, mops, local = p
        ok = not any(last_commit.get(k, -1) >= snap_no for k in local)
        if ok and rng.random() < read_skew_p:
            reads = [j for j, m in enumerate(mops) if m[0] == "r" and m[1] not in local]
            if reads:
                j = rng.choice(reads)
                mops[j] = ("r", mops[j][1], state.get(mops[j][1], ()))
        if ok:
            for k, v in local.items():
                state[k] = v
                last_commit[k] = commits
                slot = next((i for i, a in enumerate(active) if str(a) == k), None)
                if slot is not None:
                    count[slot] += sum(1 for f, kk, _ in mops if f == "append" and kk == k)
                    if count[slot] >= appends_per_key:
                        active[slot], count[slot] = next_key, 0
                        next_key += 1
            commits += 1
        else:
            mops = [(f, k, None if f == "r" else v) for f, k, v in mops]
        comp = now + rng.randint(1, 3)
        out.append(Txn(0, client, "ok" if ok else "fail", inv, comp, mops))
        if started < n:
            schedule(client, comp)
    out.sort(key=lambda t: t.invoke)
    for j, t in enumerate(out):
        t.index = j
    return out


def sloppy(rng: random.Random, n: int, keys: int, max_len: int, model: str = "list-append",
           lag: int = 3) -> list[Txn]:
    """Return ``n`` transactions of a store without isolation: each read sees one of the
    last ``lag`` states at random, writes apply to the newest, so histories hold cycles of
    every kind (and, for list-append, reads that are not prefixes of each other)."""
    states: list[dict[str, Any]] = [{}]
    value = 1
    out: list[Txn] = []
    for i in range(n):
        mops: list[tuple[str, str, Any]] = []
        r = rng.random()
        outcome = "fail" if r < 0.05 else "info" if r < 0.1 else "ok"
        for _ in range(rng.randint(1, max_len)):
            k = str(rng.randrange(keys))
            if rng.random() < 0.5:
                seen = states[-rng.randint(1, min(lag, len(states)))].get(k)
                if model == "list-append":
                    mops.append(("r", k, tuple(seen) if seen else ()))
                else:
                    mops.append(("r", k, seen))
            else:
                new = dict(states[-1])
                if model == "list-append":
                    new[k] = [*(new.get(k) or []), value]
                    mops.append(("append", k, value))
                else:
                    new[k] = value
                    mops.append(("w", k, value))
                value += 1
                if outcome != "fail":
                    states.append(new)
        if outcome != "ok":
            mops = [(f, k, None if f == "r" else v) for f, k, v in mops]
        inv = 10 * i + rng.randint(0, 30)
        out.append(Txn(i, 0, outcome, inv, inv + rng.randint(1, 60) if outcome != "info"
                       else -1, mops))
    _processes(rng, out)
    return out

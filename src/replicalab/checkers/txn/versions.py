"""rw-register where a key's version order is not known: search the orders.

A register's reads name the version they saw but not where later writes went, so the
graph of :mod:`register` holds only the ww and rw edges every version order implies. A
model that graph leaves possible may still be impossible: every order of some key's
writes may close a cycle the model forbids (two transactions that each overwrote a value
the other had read, say, with nobody reading the result). A history is serializable iff
some version order of each key leaves the dependencies acyclic, strict serializable iff
that holds with real-time order too, snapshot isolated iff some order leaves no cycle
without two adjacent rw edges (Adya; Cerone and Gotsman). That is NP-complete in general
(Papadimitriou's view serializability), so the search has a budget: it tries the likely
order first (the topological order of what is known, earlier completions first: the
commit order of a store that kept its promise), then every order, key by key, a prefix
at a time, pruning as soon as a forbidden cycle appears (adding edges never removes one).
It answers for each model: possible (an order that is a witness), impossible (Elle's
``<model>-cycle-exists``), or unknown (the budget ran out; the result says so).

Which writes take part: those of committed transactions and of unknown (info) ones some
committed read shows committed; an unknown transaction nobody read from may as well not
have committed, and leaving it out only removes edges.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

from replicalab.checkers.txn import cycles, graph
from replicalab.checkers.txn.register import ext_reads, ext_writes
from replicalab.checkers.txn.types import INFO, OK, RW, WR, WW, Txn

Edge = tuple[int, int, int, Any, Any, Any]
MAX_STEPS = 5_000_000
"""Edges looked at by the search of one history, over all its models (about a second
of CPU here); past it the models left are "unknown"."""
TARGETS = ("PL-3", "PL-SS", "PL-SI")
"""The models searched (canonical names): serializable, strict serializable, snapshot
isolation."""


class Register:
    """Per key, the writers whose order is open and who read which of their versions."""

    def __init__(self, txns: list[Txn]) -> None:
        xr = [ext_reads(t) if t.outcome == OK else {} for t in txns]
        xw = [ext_writes(t) if t.outcome in (OK, INFO) else {} for t in txns]
        writer: dict[tuple[str, Any], int] = {}
        for t, ws in enumerate(xw):
            for k, v in ws.items():
                writer[(k, v)] = t
        shown = {writer[(k, v)] for rs in xr for k, v in rs.items() if (k, v) in writer}
        self.writers: dict[str, list[int]] = {}
        for t, ws in enumerate(xw):
            if txns[t].outcome == OK or t in shown:
                for k in ws:
                    self.writers.setdefault(k, []).append(t)
        # readers[k][w]: committed transactions whose external read of k is w's version
        self.readers: dict[str, dict[int, list[int]]] = {}
        for r, rs in enumerate(xr):
            for k, v in rs.items():
                w = writer.get((k, v))
                if w is not None and w != r:
                    self.readers.setdefault(k, {}).setdefault(w, []).append(r)
        self.values = {(k, t): v for t, ws in enumerate(xw) for k, v in ws.items()}
        self.committed = [t for t, x in enumerate(txns) if x.outcome == OK or t in shown]
        # sees[t]: key -> the writer of the version t's external read returned (None: nil;
        # -1: no committed writer, which no serial order explains)
        self.sees = [{k: writer.get((k, v), -1) if v is not None else None
                      for k, v in rs.items()} for rs in xr]
        self.writes = [list(ws) if t in shown or txns[t].outcome == OK else []
                       for t, ws in enumerate(xw)]

    def open_keys(self) -> list[str]:
        """Return the keys with two or more writers (their order is a choice)."""
        return sorted(k for k, ws in self.writers.items() if len(ws) > 1)

    def step(self, k: str, prev: int, nxt: int) -> list[Edge]:
        """Return the edges of ``nxt``'s version following ``prev``'s on key ``k``: ww
        between the writers, rw from each reader of ``prev``'s version."""
        v1, v2 = self.values[(k, prev)], self.values[(k, nxt)]
        out: list[Edge] = [(prev, nxt, WW, k, v1, v2)]
        out += [(r, nxt, RW, k, v1, v2) for r in self.readers.get(k, {}).get(prev, ())
                if r != nxt]
        return out


def likely_ranks(txns: list[Txn], edges: list[Edge]) -> list[int]:
    """Return each transaction's place in the likely commit order: a topological order
    of ``edges`` taking, of the transactions free to come next, the one that completed
    first (an unknown one: its invoke); inside a cycle, the earliest one first."""
    import heapq

    n = len(txns)
    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for e in edges:
        out[e[0]].append(e[1])
        indeg[e[1]] += 1

    def when(x: int) -> tuple[int, int]:
        done = txns[x].complete
        return (done if done >= 0 else max(txns[x].invoke, 0), x)

    heap = [when(x) for x in range(n) if indeg[x] == 0]
    heapq.heapify(heap)
    waiting = sorted(when(x) for x in range(n) if indeg[x] > 0)
    rank = [-1] * n
    nxt = 0
    while nxt < n:
        if not heap:  # the rest lie on or after a cycle: the earliest waiting one goes
            while rank[waiting[0][1]] >= 0:
                waiting.pop(0)
            heap.append(waiting.pop(0))
        x = heapq.heappop(heap)[1]
        if rank[x] >= 0:
            continue
        rank[x] = nxt
        nxt += 1
        for y in out[x]:
            indeg[y] -= 1
            if indeg[y] == 0 and rank[y] < 0:
                heapq.heappush(heap, when(y))
    return rank


def serial_guess(txns: list[Txn], reg: Register, edges: list[Edge],
                 max_scan: int) -> list[int] | None:
    """Return a serial order of the committed transactions that explains every read, or
    None if none was found within ``max_scan`` candidates looked at (the history may
    still be serializable: the search decides). It runs the history: next, of the
    transactions whose ``edges`` predecessors have run, whose reads see the current
    versions and whose writes overwrite no version a transaction yet to run still reads,
    the one whose interval's middle comes first (an unknown one: its invoke); at a dead
    end it takes back the last choice and tries the next candidate (depth first)."""
    n = len(txns)
    member = [False] * n
    for t in reg.committed:
        member[t] = True
    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for e in edges:
        if member[e[0]] and member[e[1]] and e[0] != e[1]:
            out[e[0]].append(e[1])
            indeg[e[1]] += 1
    waiting: dict[tuple[str, int | None], int] = {}  # (key, writer): readers yet to run
    for t in reg.committed:
        for k, w in reg.sees[t].items():
            waiting[(k, w)] = waiting.get((k, w), 0) + 1

    def when(x: int) -> tuple[int, int]:
        # the commit point lies in the interval: its middle is the best guess
        start, done = max(txns[x].invoke, 0), txns[x].complete
        return ((start + done) // 2 if done >= 0 else start, x)

    def fits(t: int) -> bool:
        if indeg[t] or any(current.get(k) != w for k, w in reg.sees[t].items()):
            return False
        return not any(waiting.get((k, current.get(k)), 0)
                       - (reg.sees[t].get(k, -2) == current.get(k)) for k in reg.writes[t])

    todo = sorted(reg.committed, key=when)
    current: dict[str, int | None] = {}
    done: list[tuple[int, int, dict[str, int | None]]] = []  # (t, its place in todo, undo)
    start = 0
    scanned = 0
    while todo:
        for i in range(start, len(todo)):
            scanned += 1
            if scanned > max_scan:
                return None
            if fits(todo[i]):
                break
        else:
            if not done:
                return None
            t, i, before = done.pop()  # take the last choice back
            todo.insert(i, t)
            for k, w in reg.sees[t].items():
                waiting[(k, w)] += 1
            current.update(before)
            for y in out[t]:
                indeg[y] += 1
            start = i + 1
            continue
        t = todo.pop(i)
        done.append((t, i, {k: current.get(k) for k in reg.writes[t]}))
        for k, w in reg.sees[t].items():
            waiting[(k, w)] -= 1
        for k in reg.writes[t]:
            current[k] = t
        for y in out[t]:
            indeg[y] -= 1
        start = 0
    return [t for t, _, _ in done]


def forced(n: int, edges: list[Edge], reg: Register, keys: list[str],
           rounds: int = 8) -> list[tuple[int, int]]:
    """Return orders every serial witness must keep, beyond ``edges`` (Elle's and
    Cobra's pruning): when ``r`` read ``w``'s version of a key that ``x`` also wrote,
    ``x`` comes before ``w`` or after ``r``; if ``x`` already reaches ``r`` it must come
    before ``w``, if ``w`` reaches ``x``, after ``r``. Repeated while that adds orders
    (at most ``rounds`` times); nothing once ``edges`` are cyclic."""
    pairs = [(e[0], e[1]) for e in edges]
    added: list[tuple[int, int]] = []
    for _ in range(rounds):
        desc = _descendants(n, pairs + added)
        if desc is None:
            return added
        new: list[tuple[int, int]] = []
        for k in keys:
            ws = reg.writers[k]
            for w, rs in reg.readers.get(k, {}).items():
                for r in rs:
                    for x in ws:
                        if x in (w, r):
                            continue
                        if desc[x] >> r & 1 and not desc[x] >> w & 1:
                            new.append((x, w))
                        elif desc[w] >> x & 1 and not desc[r] >> x & 1:
                            new.append((r, x))
        if not new:
            break
        added += new
    return added


def _descendants(n: int, pairs: list[tuple[int, int]]) -> list[int] | None:
    """Return each node's descendants as a bit set (None when the graph is cyclic)."""
    out: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for a, b in pairs:
        out[a].append(b)
        indeg[b] += 1
    order = [x for x in range(n) if indeg[x] == 0]
    for x in order:
        for y in out[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                order.append(y)
    if len(order) < n:
        return None
    desc = [0] * n
    for x in reversed(order):
        d = 0
        for y in out[x]:
            d |= desc[y] | 1 << y
        desc[x] = d
    return desc


def _cyclic(n: int, edges: list[Edge]) -> bool:
    adj: list[list[int]] = [[] for _ in range(n)]
    for e in edges:
        adj[e[0]].append(e[1])
    return len(set(graph.tarjan(n, adj))) < n


def forbids(model: str) -> Callable[[int, list[Edge]], bool]:
    """Return the test of whether edges hold a cycle ``model`` forbids."""
    return cycles.si_cycle if model == "PL-SI" else _cyclic


def search(n: int, base: list[Edge], reg: Register, keys: list[str],
           rank: list[Any], forbidden: Callable[[int, list[Edge]], bool],
           budget: cycles.Budget) -> str:
    """Return "possible" (some order of each key's writers leaves ``base`` plus that
    order's edges free of a ``forbidden`` cycle), "impossible" or "unknown" (the budget
    ran out)."""
    cost = len(base) + 2 * n

    def spend() -> None:
        if not budget.spend(cost):
            raise cycles.OutOfBudget

    def chain(k: str, order: list[int]) -> list[Edge]:
        return [e for a, b in pairwise(order) for e in reg.step(k, a, b)]

    likely = {k: sorted(reg.writers[k], key=lambda t: rank[t]) for k in keys}

    def go(i: int, fixed: list[Edge]) -> bool:
        if i == len(keys):
            return True
        k = keys[i]

        def extend(prefix: list[int], left: list[int], added: list[Edge]) -> bool:
            if not left:
                return go(i + 1, fixed + added)
            for x in left:
                more = added + (reg.step(k, prefix[-1], x) if prefix else [])
                spend()
                if forbidden(n, base + fixed + more):
                    continue
                if extend([*prefix, x], [y for y in left if y != x], more):
                    return True
            return False

        return extend([], likely[k], [])

    try:
        spend()
        if forbidden(n, base):
            return "impossible"
        spend()
        if not forbidden(n, base + [e for k in keys for e in chain(k, likely[k])]):
            return "possible"
        return "possible" if go(0, []) else "impossible"
    except cycles.OutOfBudget:
        return "unknown"


def complete(txns: list[Txn], edges: list[Edge], targets: list[str],
             budget: cycles.Budget) -> dict[str, tuple[str, list[int], list[str]]]:
    """Return, for each model of ``targets`` (canonical names from :data:`TARGETS`), the
    search's answer, the transactions that write the open keys and those keys; nothing
    when no key's order is open. ``edges`` are the history's dependency edges (real-time
    ones are added here)."""
    reg = Register(txns)
    keys = reg.open_keys()
    if not keys or not targets:
        return {}
    budget = cycles.Budget(min(budget.steps, MAX_STEPS), budget.deadline_s)
    n = len(txns)
    dep = [e for e in edges if e[2] in (WW, WR, RW)]
    involved = sorted({t for k in keys for t in reg.writers[k]})
    realtime = graph.realtime_edges(txns)
    # a guess that keeps real-time order first: a witness of every target, and real time
    # keeps the guess from running ahead of transactions it cannot yet see
    guess = None
    for extra in (realtime, []):
        pins = [(a, b, WW, None, None, None) for a, b in forced(n, dep + extra, reg, keys)]
        guess = serial_guess(txns, reg, dep + extra + pins, max_scan=20 * n + 1000)
        if guess is not None:
            break
    rank = likely_ranks(txns, dep) if guess is None else _positions(n, guess)
    out = {}
    for model in targets:
        base = dep + realtime if model == "PL-SS" else dep
        out[model] = (search(n, base, reg, keys, rank, forbids(model), budget),
                      involved, keys)
    return out


def _positions(n: int, order: list[int]) -> list[int]:
    """Return each transaction's place in ``order`` (those not in it after, in index
    order)."""
    rank = list(range(n, 2 * n))
    for i, t in enumerate(order):
        rank[t] = i
    return rank

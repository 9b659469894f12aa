"""The dependency graph and its cycles: process and real-time order edges, strongly
connected components (Tarjan, iterative) and the shortest cycle of each anomaly class.

A cycle class is decided by its edges (Adya, Elle): G0 only ww; G1c ww and wr (at least
one wr); G-single exactly one rw; G-nonadjacent two or more rw, never two in a row;
G2-item any other cycle with rw. A cycle that needs process edges is the class's
``-process`` variant, one that needs real-time edges its ``-realtime`` variant.

Each class is searched in the components of the graph restricted to the edges it may use:
from an anchor edge (ww for G0, wr for G1c, rw for the others) a breadth-first search
over (transaction, rw-state) finds the shortest way back, so the cycle is the shortest
one through that anchor. A component tries up to ``ANCHORS`` anchors and keeps the
shortest cycle; every step of the search counts against a budget and a deadline, and a
component left unfinished is reported, never taken as acyclic.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from replicalab.checkers.txn.types import (
    OK,
    PROCESS,
    REALTIME,
    RW,
    WR,
    WW,
    Txn,
    Unfinished,
)

Edge = tuple[int, int, int, Any, Any, Any]
ANCHORS = 4
CLASSES = ("G0", "G1c", "G-single", "G-nonadjacent", "G2-item")
VARIANTS = ("", "-process", "-realtime")
_EXTRA = {"": (), "-process": (PROCESS,), "-realtime": (PROCESS, REALTIME)}
_ANCHOR = {"G0": WW, "G1c": WR, "G-single": RW, "G-nonadjacent": RW, "G2-item": RW}
_KINDS = {"G0": (WW,), "G1c": (WW, WR), "G-single": (WW, WR, RW),
          "G-nonadjacent": (WW, WR, RW), "G2-item": (WW, WR, RW)}


def order_edges(txns: list[Txn]) -> list[Edge]:
    """Return process edges (each process's committed transactions in invoke order) and
    real-time edges (T1 completed before T2 was invoked), the latter as a transitive
    reduction kept small: each transaction links from the frontier of transactions
    completed before its invoke and not already implied by a later one."""
    edges: list[Edge] = []
    ok = [t for t, x in enumerate(txns) if x.outcome == OK]
    last: dict[int, int] = {}
    by_process: set[tuple[int, int]] = set()
    for t in sorted(ok, key=lambda t: (txns[t].invoke, t)):
        p = txns[t].process
        if p in last:
            edges.append((last[p], t, PROCESS, None, None, None))
            by_process.add((last[p], t))
        last[p] = t
    events = [(txns[t].invoke, 1, t) for t in ok] + [(txns[t].complete, 0, t) for t in ok]
    events.sort()  # completions before invokes at the same instant: no overlap at a tie
    frontier: set[int] = set()
    preds: dict[int, list[int]] = {}
    for _, kind, t in events:
        if kind == 1:
            preds[t] = sorted(frontier)
            for s in preds[t]:
                if (s, t) not in by_process:  # a process edge says it already
                    edges.append((s, t, REALTIME, None, None, None))
        else:
            for s in preds.pop(t, ()):
                frontier.discard(s)
            frontier.add(t)
    return edges


def tarjan(n: int, adj: list[list[int]]) -> list[int]:
    """Return each node's component id (iterative Tarjan; ids in reverse topological
    order of the condensation)."""
    index = [-1] * n
    low = [0] * n
    comp = [-1] * n
    on_stack = [False] * n
    stack: list[int] = []
    counter = 0
    ncomp = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, i = work[-1]
            nbrs = adj[v]
            if i < len(nbrs):
                work[-1] = (v, i + 1)
                w = nbrs[i]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
    return comp


def classify(kinds: list[int]) -> str:
    """Return the class name (with its variant) of a cycle given its edge kinds in order."""
    rw = [k == RW for k in kinds]
    n_rw = sum(rw)
    if n_rw == 0:
        base = "G1c" if WR in kinds else "G0"
    elif n_rw == 1:
        base = "G-single"
    elif not any(rw[i] and rw[i - 1] for i in range(len(rw))):
        base = "G-nonadjacent"
    else:
        base = "G2-item"
    if REALTIME in kinds:
        return base + "-realtime"
    if PROCESS in kinds:
        return base + "-process"
    return base


class Budget:
    """Search steps left and a deadline (``time.monotonic()`` seconds, None: none)."""

    def __init__(self, steps: int, deadline_s: float | None) -> None:
        self.steps = steps
        self.deadline_s = deadline_s

    def spend(self, n: int) -> bool:
        """Take ``n`` steps; return False once the budget or the deadline is exhausted."""
        self.steps -= n
        if self.steps < 0:
            return False
        return self.deadline_s is None or time.monotonic() < self.deadline_s


def _bfs(adj: list[list[tuple[int, int, int]]], kinds: list[int], comp: list[int], c: int,
         anchor: tuple[int, int, int], cls: str, required: tuple[int, ...], budget: Budget
         ) -> list[int] | None:
    """Return the edge ids of the shortest cycle through ``anchor`` (src, dst, edge id)
    that class ``cls`` allows, or None; raises TimeoutError when the budget runs out."""
    a, b, e0 = anchor
    if not budget.spend(1):
        raise TimeoutError
    k0 = kinds[e0]
    single = cls in ("G0", "G1c", "G-single")  # no rw on the way back
    nonadj = cls == "G-nonadjacent"
    need = bool(required)
    start = (b, 1 if k0 == RW else 0, 1 if (not need or k0 in required) else 0)
    if start[0] == a and (not nonadj) and start[2]:
        return [e0]
    parent: dict[tuple[int, int, int], tuple[tuple[int, int, int], int] | None] = {start: None}
    queue = deque([start])
    steps = 0
    while queue:
        state = queue.popleft()
        v, last_rw, got = state
        for w, k, e in adj[v]:
            steps += 1
            if comp[w] != c:
                continue
            if k == RW and (single or (nonadj and last_rw)):
                continue
            nstate = (w, 1 if k == RW else 0, 1 if (got or k in required) else 0)
            if nstate in parent:
                continue
            parent[nstate] = (state, e)
            if w == a and nstate[2] and not (nonadj and nstate[1]):
                path = [e]
                s = state
                while parent[s] is not None:
                    s, pe = parent[s]  # type: ignore[misc]
                    path.append(pe)
                path.reverse()
                return [e0, *path]
            queue.append(nstate)
        if steps > 4096:
            if not budget.spend(steps):
                raise TimeoutError
            steps = 0
    if not budget.spend(steps):
        raise TimeoutError
    return None


def search_cycles(n: int, edges: list[Edge], budget: Budget
                  ) -> tuple[list[tuple[str, list[int]]], list[Unfinished], list[int]]:
    """Return the cycles found, as (class name, edge ids into ``edges``), at most one per
    class and component (a cycle found by two classes' searches once), the components
    whose search stopped, and every transaction on a dependency cycle (ww, wr, rw only:
    the nodes of the nontrivial strongly connected components of that graph, ascending)."""
    kinds = [e[2] for e in edges]
    found: list[tuple[str, list[int]]] = []
    # only edges inside a component of the whole graph can lie on a cycle: the rest
    # (all of them, in a valid history) is dropped before the per-class searches
    whole: list[list[int]] = [[] for _ in range(n)]
    for s, d, *_rest in edges:
        whole[s].append(d)
    comp_all = tarjan(n, whole)
    cyclic = [i for i, e in enumerate(edges) if comp_all[e[0]] == comp_all[e[1]]]
    if not cyclic:
        return [], [], []
    # transactions on a dependency cycle: no serial order places them among the others of
    # their component (process and real-time edges left out: through them a cycle would
    # take in every transaction between its ends)
    dep = [i for i in cyclic if edges[i][2] in (WW, WR, RW)]
    dep_adj: list[list[int]] = [[] for _ in range(n)]
    for i in dep:
        dep_adj[edges[i][0]].append(edges[i][1])
    comp_dep = tarjan(n, dep_adj)
    on_cycle = sorted({v for i in dep if comp_dep[edges[i][0]] == comp_dep[edges[i][1]]
                       for v in edges[i][:2]})
    unfinished: list[Unfinished] = []
    seen_cycles: set[tuple[int, ...]] = set()
    for variant in VARIANTS:
        extra = _EXTRA[variant]
        for cls in CLASSES:
            allowed = set(_KINDS[cls]) | set(extra)
            adj: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
            for i in cyclic:
                s, d, k = edges[i][:3]
                if k in allowed:
                    adj[s].append((d, k, i))
            comp = tarjan(n, [[w for w, _, _ in out] for out in adj])
            sizes: dict[int, int] = {}
            for c in comp:
                sizes[c] = sizes.get(c, 0) + 1
            anchors: dict[int, list[tuple[int, int, int]]] = {}
            want = _ANCHOR[cls]
            for i in cyclic:
                s, d, k = edges[i][:3]
                if k == want and comp[s] == comp[d] and (s != d):
                    lst = anchors.setdefault(comp[s], [])
                    if len(lst) < ANCHORS:
                        lst.append((s, d, i))
            required = (REALTIME,) if variant == "-realtime" else extra
            for c in sorted(anchors):
                best: list[int] | None = None
                try:
                    for anchor in anchors[c]:
                        cyc = _bfs(adj, kinds, comp, c, anchor, cls, required, budget)
                        if cyc is not None and (best is None or len(cyc) < len(best)):
                            best = cyc
                except TimeoutError:
                    unfinished.append(Unfinished(
                        variant or "base", sizes[c],
                        sorted(t for t in range(n) if comp[t] == c)[:8], [cls + variant]))
                    if best is None:
                        continue
                if best is not None and tuple(sorted(best)) not in seen_cycles:
                    seen_cycles.add(tuple(sorted(best)))  # another class's search found it
                    found.append((classify([edges[e][2] for e in best]), best))
    return found, unfinished, on_cycle

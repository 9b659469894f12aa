"""Graph basics of the transaction checker: process and real-time order edges (as
Elle's ``process-graph`` and ``realtime-graph``), strongly connected components (Tarjan,
iterative) and the classification of a cycle by its edges."""

from __future__ import annotations

from typing import Any

from replicalab.checkers.txn.types import NEVER, OK, PROCESS, REALTIME, RW, WR, WW, Txn

Edge = tuple[int, int, int, Any, Any, Any]


def process_edges(txns: list[Txn]) -> list[Edge]:
    """Return each process's committed transactions linked in the order they completed
    (Elle's process order: ok ones only)."""
    edges: list[Edge] = []
    last: dict[int, int] = {}
    ok = [t for t, x in enumerate(txns) if x.outcome == OK]
    for t in sorted(ok, key=lambda t: (txns[t].complete, t)):
        p = txns[t].process
        if p in last:
            edges.append((last[p], t, PROCESS, None, None, None))
        last[p] = t
    return edges


def realtime_edges(txns: list[Txn]) -> list[Edge]:
    """Return real-time edges: from each committed transaction to every transaction
    invoked after it completed, whatever became of that one (failed and unknown ones
    included: an unknown one may have committed), as a transitive reduction: a
    transaction links from the committed ones completed before its invoke that no later
    such completion already follows. At equal instants the invoke comes first (no edge:
    the order is not known)."""
    events: list[tuple[int, int, int]] = []
    for t, x in enumerate(txns):
        if x.invoke != NEVER:
            events.append((x.invoke, 0, t))
        if x.outcome == OK and x.complete != NEVER:
            events.append((x.complete, 1, t))
    events.sort()
    edges: list[Edge] = []
    frontier: set[int] = set()
    preds: dict[int, list[int]] = {}
    for _, kind, t in events:
        if kind == 0:
            preds[t] = sorted(frontier)
            for s in preds[t]:
                edges.append((s, t, REALTIME, None, None, None))
        else:
            for s in preds.pop(t, ()):
                frontier.discard(s)
            frontier.add(t)
    return edges


def tarjan(n: int, adj: list[list[int]]) -> list[int]:
    """Return each node's component id (iterative Tarjan; ids in reverse topological
    order of the condensation: a component's successors have smaller ids)."""
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
    """Return the Elle class of a cycle given its edge kinds in order: by its rw edges
    G-single-item (one), G-nonadjacent-item (two or more, none adjacent, the last and
    the first included), G2-item (two adjacent), else G1c (a wr) or G0; then
    ``-realtime`` if it has a real-time edge, else ``-process`` if a process edge."""
    rw = [k == RW for k in kinds]
    n_rw = sum(rw)
    if n_rw == 1:
        base = "G-single-item"
    elif n_rw > 1:
        adjacent = any(rw[i] and rw[i - 1] for i in range(len(rw)))
        base = "G2-item" if adjacent else "G-nonadjacent-item"
    elif WR in kinds:
        base = "G1c"
    else:
        base = "G0"
    if REALTIME in kinds:
        return base + "-realtime"
    if PROCESS in kinds:
        return base + "-process"
    return base


KIND_BITS = {WW: 1, WR: 2, RW: 4, PROCESS: 8, REALTIME: 16}

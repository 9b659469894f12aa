"""rw-register analysis, as Elle's ``elle.rw-register``: dependency edges from what can
be inferred of each key's version order, and the anomalies no cycle is needed for.

A transaction's external read of a key is its first micro-op on the key when that is a
read; its external write the last write of the key. Writes are unique per key, so an
external read names its writer (``wr``). The version order is only partly known: nil,
the initial state, precedes every value written or read; with ``wfr_keys`` a
transaction's external write follows its external read of the key (writes follow
reads); with ``sequential_keys`` / ``linearizable_keys`` versions follow process /
real-time order. Each version ``v1 < v2`` gives ``ww`` from v1's writer to v2's and
``rw`` from v1's readers to v2's writer. A source whose order would make a key's
versions cyclic is left out and reported (``cyclic-versions``).

Where we differ from Elle: an info transaction's external writes have writers here too
(Elle indexes ok ones only), so a read of an info transaction's write is a ``wr`` edge —
the read proves it committed — and a real-time cycle through it is found.

Anomalies found without a cycle: ``G1a`` (a committed read of a failed write),
``G1b`` (a committed read of another transaction's non-final write), ``internal`` (a
read that disagrees with the transaction's own earlier read or write of the key),
``lost-update`` (committed transactions that read the same value of a key and then wrote
it).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from replicalab.checkers.txn.listappend import _lost_updates
from replicalab.checkers.txn.types import (
    DEFAULT_OPTIONS,
    FAIL,
    INFO,
    OK,
    RW,
    WR,
    WW,
    Anomaly,
    Options,
    Txn,
    TxnInputError,
)
from replicalab.errors import MODEL

Edge = tuple[int, int, int, Any, Any, Any]
NIL = None


def ext_reads(txn: Txn) -> dict[str, Any]:
    """Return the transaction's external reads: key -> value of its first micro-op on the
    key, when that is a read."""
    out: dict[str, Any] = {}
    seen: set[str] = set()
    for f, k, v in txn.mops:
        if k not in seen:
            seen.add(k)
            if f == "r":
                out[k] = v
    return out


def ext_writes(txn: Txn) -> dict[str, Any]:
    """Return the transaction's external writes: key -> its last value written."""
    return {k: v for f, k, v in txn.mops if f == "w"}


def _check_input(txns: list[Txn]) -> None:
    seen: dict[tuple[str, Any], int] = {}
    for t, txn in enumerate(txns):
        for f, k, v in txn.mops:
            if f == "w":
                if isinstance(v, bool) or not isinstance(v, int):
                    raise TxnInputError(txn.index, f"writes {v!r} to key {k}; rw-register "
                                        "writes integers")
                if (k, v) in seen:
                    raise TxnInputError(txn.index, f"writes {v} to key {k}, which "
                                        f"T{txns[seen[(k, v)]].index} wrote too; rw-register "
                                        "needs values unique per key")
                seen[(k, v)] = t
            elif f == "r":
                if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                    raise TxnInputError(txn.index, f"the read of key {k} returned {v!r}; "
                                        "rw-register reads return an integer (or nil)")
            else:
                raise TxnInputError(txn.index, f"micro-op :{f}; rw-register takes :w and :r "
                                    "(for :append use {model} list-append)", MODEL)


def analyse(txns: list[Txn], opts: Options = DEFAULT_OPTIONS,
            order_edges: Any = None) -> tuple[list[Edge], list[Anomaly]]:
    """Return the ww/wr/rw edges and the non-cycle anomalies of an rw-register history
    (raises TxnInputError on input that is not rw-register). ``order_edges`` (a function
    of kind -> edges) gives the process and real-time orders ``sequential_keys`` and
    ``linearizable_keys`` need."""
    _check_input(txns)
    anomalies: list[Anomaly] = []
    xr = [ext_reads(x) if x.outcome == OK else {} for x in txns]
    xw = [ext_writes(x) if x.outcome in (OK, INFO) else {} for x in txns]
    writers: dict[tuple[str, Any], list[int]] = {}
    readers: dict[tuple[str, Any], list[int]] = {}
    for t in range(len(txns)):
        for k, v in xw[t].items():
            writers.setdefault((k, v), []).append(t)
        for k, v in xr[t].items():
            readers.setdefault((k, v), []).append(t)
    edges: list[Edge] = []
    for (k, v), rs in readers.items():
        for w in writers.get((k, v), ()):
            for r in rs:
                if r != w:
                    edges.append((w, r, WR, k, v, v))
    versions, cyclic = version_graphs(txns, xr, xw, opts, order_edges)
    anomalies.extend(cyclic)
    for k, graph in versions.items():
        for v1, succ in graph.items():
            for v2 in succ:
                for w2 in writers.get((k, v2), ()):
                    for w1 in writers.get((k, v1), ()):
                        if w1 != w2:
                            edges.append((w1, w2, WW, k, v1, v2))
                    for r in readers.get((k, v1), ()):
                        if r != w2:
                            edges.append((r, w2, RW, k, v1, v2))
    _reads(txns, anomalies)
    _lost_updates(txns, "w", anomalies)
    return edges, anomalies


VersionGraph = dict[Any, set[Any]]


def version_graphs(txns: list[Txn], xr: list[dict[str, Any]], xw: list[dict[str, Any]],
                   opts: Options, order_edges: Any
                   ) -> tuple[dict[str, VersionGraph], list[Anomaly]]:
    """Return each key's version graph (v1 -> the versions known to follow it) from the
    sources the options allow, and a ``cyclic-versions`` anomaly per cycle a source would
    have made (that source then left out)."""
    sources: list[tuple[str, Any]] = [("initial-state", _initial)]
    if opts.transaction_order is not None:
        rank = dict(opts.transaction_order)
        sources.append(("transaction-order-keys", lambda *a: _ranked(*a, rank)))
    if opts.wfr_keys:
        sources.append(("wfr-keys", _wfr))
    if opts.sequential_keys:
        sources.append(("sequential-keys", lambda *a: _along(*a, order_edges, "process")))
    if opts.linearizable_keys:
        sources.append(("linearizable-keys", lambda *a: _along(*a, order_edges, "realtime")))
    graphs: dict[str, VersionGraph] = {}
    used: list[str] = []
    cyclic: list[Anomaly] = []
    for name, source in sources:
        merged = {k: {v: set(s) for v, s in g.items()} for k, g in graphs.items()}
        for k, g in source(txns, xr, xw).items():
            mk = merged.setdefault(k, {})
            for v1, succ in g.items():
                mk.setdefault(v1, set()).update(succ)
                for v2 in succ:
                    mk.setdefault(v2, set())
        cycles = [(k, scc) for k in merged for scc in _sccs(merged[k])]
        if cycles:
            for k, scc in cycles:
                cyclic.append(Anomaly("cyclic-versions", [], key=k, detail={
                    "scc": sorted(scc, key=lambda x: (x is not None, x)),
                    "sources": [*used, name]}))
            continue
        graphs = merged
        used.append(name)
    return graphs, cyclic


def _initial(txns: list[Txn], xr: list[dict[str, Any]], xw: list[dict[str, Any]]
             ) -> dict[str, VersionGraph]:
    out: dict[str, VersionGraph] = {}
    for t in range(len(txns)):
        for kv in (xw[t], xr[t]):
            for k, v in kv.items():
                if v is not None:
                    out.setdefault(k, {}).setdefault(NIL, set()).add(v)
    return out


def _wfr(txns: list[Txn], xr: list[dict[str, Any]], xw: list[dict[str, Any]]
         ) -> dict[str, VersionGraph]:
    out: dict[str, VersionGraph] = {}
    for t, txn in enumerate(txns):
        if txn.outcome != OK:
            continue
        for k, v in xr[t].items():
            v2 = xw[t].get(k)
            if v is not None and k in xw[t] and v2 != v:
                out.setdefault(k, {}).setdefault(v, set()).add(v2)
    return out


def _ranked(txns: list[Txn], xr: list[dict[str, Any]], xw: list[dict[str, Any]],
            rank: dict[int, int]) -> dict[str, VersionGraph]:
    """Versions in the order of a known commit order: per key, the external writes of
    ok and info transactions sorted by their transaction's rank (unranked first), each
    before the next."""
    writes: dict[str, list[tuple[bool, int, Any]]] = {}
    for t in range(len(txns)):
        r = rank.get(t)
        for k, v in xw[t].items():
            writes.setdefault(k, []).append((r is not None, r or 0, v))
    out: dict[str, VersionGraph] = {}
    for k, ws in writes.items():
        vs = [v for _, _, v in sorted(ws, key=lambda w: (w[0], w[1]))]
        for v1, v2 in pairwise(vs):
            out.setdefault(k, {}).setdefault(v1, set()).add(v2)
    return out


_NONE = object()


def _along(txns: list[Txn], xr: list[dict[str, Any]], xw: list[dict[str, Any]],
           order_edges: Any, kind: str) -> dict[str, VersionGraph]:
    """Versions along process or real-time order (Elle's transaction-graph ->
    version-graphs): from each transaction's last version of a key to the first version
    of that key of the nearest transactions after it (in that order) that touch the key;
    ok transactions' reads and writes, info ones' writes."""
    n = len(txns)
    out_adj: list[list[int]] = [[] for _ in range(n)]
    for s, d in order_edges(kind):
        out_adj[s].append(d)

    def keys(t: int) -> set[str]:
        return set(xw[t]) | set(xr[t])

    # downstream[t]: key -> the nearest transactions after t that touch the key
    downstream: list[dict[str, set[int]] | None] = [None] * n
    order = sorted(range(n), key=lambda t: -txns[t].complete if txns[t].complete >= 0
                   else -(2**62))
    for t0 in order:
        stack = [t0]
        while stack:
            t = stack[-1]
            if downstream[t] is not None:
                stack.pop()
                continue
            todo = [b for b in out_adj[t] if downstream[b] is None]
            if todo:
                stack.extend(todo)
                continue
            d: dict[str, set[int]] = {}
            for b in out_adj[t]:
                kb = keys(b)
                for k, bs in (downstream[b] or {}).items():
                    if k not in kb:
                        d.setdefault(k, set()).update(bs)
                for k in kb:
                    d.setdefault(k, set()).add(b)
            downstream[t] = d
            stack.pop()
    out: dict[str, VersionGraph] = {}
    for a in range(n):
        for k, bs in (downstream[a] or {}).items():
            oa = txns[a].outcome
            v1 = (xw[a][k] if k in xw[a] else xr[a].get(k, _NONE)) if oa == OK else \
                xw[a].get(k, _NONE) if oa == INFO else _NONE
            if v1 is _NONE:
                continue
            for b in bs:
                ob = txns[b].outcome
                if ob == OK:
                    r = xr[b].get(k)
                    v = r if r is not None else xw[b].get(k, r if k in xr[b] else _NONE)
                elif ob == INFO:
                    v = xw[b].get(k, _NONE)
                else:
                    v = _NONE
                if v is not _NONE and v != v1:
                    out.setdefault(k, {}).setdefault(v1, set()).add(v)
    return out


def _sccs(g: VersionGraph) -> list[set[Any]]:
    """Return the strongly connected components of more than one version."""
    from replicalab.checkers.txn.graph import tarjan

    ids = {v: i for i, v in enumerate(g)}
    names = list(g)
    adj = [[ids[w] for w in g[v]] for v in names]
    comp = tarjan(len(names), adj)
    groups: dict[int, set[Any]] = {}
    for i, c in enumerate(comp):
        groups.setdefault(c, set()).add(names[i])
    return [s for s in groups.values() if len(s) > 1]


def _reads(txns: list[Txn], anomalies: list[Anomaly]) -> None:
    """Add G1a, G1b and internal anomalies of committed transactions' reads."""
    failed: dict[tuple[str, Any], int] = {}
    intermediate: dict[tuple[str, Any], int] = {}
    final: dict[tuple[int, str], Any] = {}
    for t, txn in enumerate(txns):
        last: dict[str, Any] = {}
        for f, k, v in txn.mops:
            if f != "w":
                continue
            if txn.outcome == FAIL:
                failed[(k, v)] = t
            if k in last:
                intermediate[(k, last[k])] = t
            last[k] = v
        for k, v in last.items():
            final[(t, k)] = v
    for t, txn in enumerate(txns):
        if txn.outcome != OK:
            continue
        for f, k, v in txn.mops:
            if f != "r" or v is None:
                continue
            src = failed.get((k, v))
            if src is not None:
                anomalies.append(Anomaly("G1a", [src, t], key=k, detail={"value": v}))
            src = intermediate.get((k, v))
            if src is not None and src != t:
                anomalies.append(Anomaly("G1b", [src, t], key=k, detail={
                    "value": v, "final": final[(src, k)]}))
        state: dict[str, Any] = {}
        for f, k, v in txn.mops:
            if f == "w":
                state[k] = v
            elif k in state and state[k] != v:
                anomalies.append(Anomaly("internal", [t], key=k, detail={
                    "expected": state[k], "read": v}))
                break
            else:
                state[k] = v

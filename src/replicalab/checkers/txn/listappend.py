"""List-append analysis: version orders from reads, dependency edges, and the anomalies
that need no cycle (aborted and intermediate reads, internal inconsistency, incompatible
orders, duplicate elements, lost updates).

Each key's version order is its longest read; every other read of the key must be a prefix
of it. A key whose reads disagree is reported (``incompatible-order``) and gives no ww/rw
edges: its order is not known, and merging the reads would invent one.
"""

from __future__ import annotations

from typing import Any

from replicalab.checkers.txn.types import FAIL, OK, RW, WR, WW, Anomaly, Txn, TxnInputError
from replicalab.checkers.txn.writes import APPEND, index_writes

UNREAD_EDGE_BUDGET = 1024
"""Most appends no read shows that one read of a key's last version links to (rw): each
link is sound, but readers x unread appends can grow large."""
Edge = tuple[int, int, int, Any, Any, Any]
"""(src, dst, kind code, key, a, b): see :class:`~replicalab.checkers.txn.types.Step`."""


def _reads(txns: list[Txn], anomalies: list[Anomaly]
           ) -> tuple[dict[str, list[tuple[int, tuple[int, ...]]]],
                      list[tuple[int, str, tuple[int, ...]]],
                      dict[tuple[str, int], list[int]]]:
    """Walk every committed transaction's reads: return the reads per key (for the
    version orders), the external reads (the first read of a key in a transaction, its own
    appends cut off) and the lost-update groups (key, version read) -> transactions that
    read that version and then appended; add internal and duplicate anomalies."""
    by_key: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
    external: list[tuple[int, str, tuple[int, ...]]] = []
    groups: dict[tuple[str, int], list[int]] = {}
    for t, txn in enumerate(txns):
        if txn.outcome != OK:
            continue
        own: dict[str, list[int]] = {}
        seen: dict[str, tuple[int, ...]] = {}  # last read of each key, own appends added
        read_first: dict[str, int] = {}  # length read before any own append of the key
        for f, k, v in txn.mops:
            if f == "append":
                if k in seen:
                    seen[k] = (*seen[k], v)
                if k in read_first and k not in own:
                    groups.setdefault((k, read_first[k]), []).append(t)
                own.setdefault(k, []).append(v)
                continue
            if v is None:
                v = ()
            if not isinstance(v, tuple):
                raise TxnInputError(txn.index, f"the read of key {k} returned {v!r}; "
                                    "list-append reads return a list (or nil)")
            if len(set(v)) != len(v):
                dup = next(x for i, x in enumerate(v) if x in v[:i])
                anomalies.append(Anomaly("duplicate-elements", [t], key=k,
                                         detail={"element": dup, "read": list(v)}))
                continue
            if k in seen:
                if v != seen[k]:
                    anomalies.append(Anomaly("internal", [t], key=k, detail={
                        "expected": list(seen[k]), "read": list(v)}))
                seen[k] = v
                continue
            seen[k] = v
            mine = own.get(k)
            if mine and v[len(v) - len(mine):] != tuple(mine):
                anomalies.append(Anomaly("internal", [t], key=k, detail={
                    "expected_suffix": list(mine), "read": list(v)}))
                continue
            by_key.setdefault(k, []).append((t, v))
            prefix = v[:len(v) - len(mine)] if mine else v
            external.append((t, k, prefix))
            if not mine:
                read_first[k] = len(prefix)
    return by_key, external, groups


def _orders(by_key: dict[str, list[tuple[int, tuple[int, ...]]]], anomalies: list[Anomaly]
            ) -> dict[str, tuple[int, ...]]:
    """Return each key's version order (its longest read) for the keys whose reads are
    all prefixes of it; add an incompatible-order anomaly for each other key."""
    orders: dict[str, tuple[int, ...]] = {}
    for k, reads in by_key.items():
        lt, longest = max(reads, key=lambda r: len(r[1]))
        bad = next(((t, v) for t, v in reads if longest[:len(v)] != v), None)
        if bad is not None:
            anomalies.append(Anomaly("incompatible-order", [bad[0], lt], key=k, detail={
                "reads": [list(bad[1]), list(longest)]}))
            continue
        orders[k] = longest
    return orders


def analyse(txns: list[Txn]) -> tuple[list[Edge], list[Anomaly]]:
    """Return the ww/wr/rw edges and the non-cycle anomalies of a list-append history
    (raises TxnInputError on input that is not list-append)."""
    writer, last, _ = index_writes(txns, APPEND)
    anomalies: list[Anomaly] = []
    by_key, external, groups = _reads(txns, anomalies)
    orders = _orders(by_key, anomalies)
    edges: list[Edge] = []
    failed = [txn.outcome == FAIL for txn in txns]
    in_order = {k: set(o) for k, o in orders.items()}
    for k, order in orders.items():
        prev = -1
        for i, v in enumerate(order):
            w = writer.get((k, v), -1)
            if w >= 0 and failed[w]:
                w = -1
            if w >= 0 and prev >= 0 and w != prev:
                edges.append((prev, w, WW, k, order[i - 1], v))
            prev = w
    # appends no read shows come after every version read (the longest read is a
    # version, and a committed append before it would be in it): ww from the last
    # version's writer, rw from the readers of the last version
    unread: dict[str, list[tuple[int, int]]] = {}
    for (k, v), w in writer.items():
        if not failed[w] and k in orders and v not in in_order[k]:
            unread.setdefault(k, []).append((w, v))
    for k, order in orders.items():  # in the orders' key order, as the native core
        ws = unread.get(k)
        if not ws:
            continue
        lw = writer.get((k, order[-1]), -1) if order else -1
        if lw >= 0 and not failed[lw]:
            for w, v in ws[:UNREAD_EDGE_BUDGET]:
                if w != lw:
                    edges.append((lw, w, WW, k, order[-1], v))
    for t, k, prefix in external:
        for v in prefix:  # every element read, not only the last: each must have committed
            w = writer.get((k, v), -1)
            if w >= 0 and failed[w]:
                anomalies.append(Anomaly("G1a", [w, t], key=k, detail={"value": v}))
        from_w = -1
        if prefix:
            v = prefix[-1]
            w = from_w = writer.get((k, v), -1)
            if w >= 0 and not failed[w] and w != t:
                edges.append((w, t, WR, k, v, v))
                if last[(w, k)] != v:
                    anomalies.append(Anomaly("G1b", [w, t], key=k, detail={
                        "value": v, "final": last[(w, k)]}))
        order = orders.get(k)
        if order is not None and len(prefix) < len(order):
            nxt = order[len(prefix)]
            w = writer.get((k, nxt), -1)
            # an intermediate read (G1b) of w is no anti-dependency on w itself
            if w >= 0 and not failed[w] and w != t and w != from_w:
                edges.append((t, w, RW, k, prefix[-1] if prefix else None, nxt))
        elif order is not None and unread.get(k):
            ws = unread[k]
            for w, v in ws if len(ws) <= UNREAD_EDGE_BUDGET else ws[:UNREAD_EDGE_BUDGET]:
                if w != t and w != from_w:
                    edges.append((t, w, RW, k, prefix[-1] if prefix else None, v))
    for (k, n), ts in groups.items():
        if len(ts) > 1:
            anomalies.append(Anomaly("lost-update", sorted(ts), key=k, detail={
                "read_length": n}))
    return edges, anomalies

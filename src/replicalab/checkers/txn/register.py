"""rw-register analysis: dependency edges that can be inferred soundly, and the anomalies
that need no cycle (aborted and intermediate reads, internal inconsistency, lost updates).

Writes are unique per key, so a read names its writer (wr). The version order is only
partly known: nil, the initial state, precedes every write, and a transaction that read
``v`` and then wrote ``w`` shows ``v < w`` (ww from v's writer; rw from every other reader
of v). Nothing is assumed from process or real-time order.
"""

from __future__ import annotations

from typing import Any

from replicalab.checkers.txn.types import FAIL, OK, RW, WR, WW, Anomaly, Txn, TxnInputError
from replicalab.checkers.txn.writes import WRITE, index_writes

Edge = tuple[int, int, int, Any, Any, Any]

NIL_EDGE_BUDGET = 100_000
"""Most rw edges from the readers of nil to the writers of one key; above it only the
writers that themselves read nil first get them (each reader-writer pair is sound, but all
of them grow as readers x writers)."""


def analyse(txns: list[Txn]) -> tuple[list[Edge], list[Anomaly]]:
    """Return the ww/wr/rw edges and the non-cycle anomalies of an rw-register history
    (raises TxnInputError on input that is not rw-register)."""
    writer, last, writers_of = index_writes(txns, WRITE)
    anomalies: list[Anomaly] = []
    readers: dict[tuple[str, Any], list[int]] = {}  # external reads: (key, value) -> txns
    overwrote: dict[tuple[str, Any], list[int]] = {}  # (key, value read) -> txns that then wrote
    edges: list[Edge] = []
    failed = [txn.outcome == FAIL for txn in txns]
    for t, txn in enumerate(txns):
        if txn.outcome != OK:
            continue
        own: dict[str, int] = {}
        read: dict[str, Any] = {}
        for f, k, v in txn.mops:
            if f == "w":
                if k in read and k not in own:
                    overwrote.setdefault((k, read[k]), []).append(t)
                own[k] = v
                continue
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise TxnInputError(txn.index, f"the read of key {k} returned {v!r}; "
                                    "rw-register reads return an integer (or nil)")
            if k in own or k in read:
                expected = own[k] if k in own else read[k]
                if v != expected:
                    anomalies.append(Anomaly("internal", [t], key=k, detail={
                        "expected": expected, "read": v}))
                if k not in own:
                    read[k] = v
                continue
            read[k] = v
            readers.setdefault((k, v), []).append(t)
            if v is None:
                continue
            w = writer.get((k, v), -1)
            if w < 0 or w == t:
                continue
            if failed[w]:
                anomalies.append(Anomaly("G1a", [w, t], key=k, detail={"value": v}))
                continue
            edges.append((w, t, WR, k, v, v))
            if last[(w, k)] != v:
                anomalies.append(Anomaly("G1b", [w, t], key=k, detail={
                    "value": v, "final": last[(w, k)]}))
    for (k, v), ts in overwrote.items():
        w = writer.get((k, v), -1) if v is not None else -1
        for t in ts:
            mine = next(x for f, kk, x in txns[t].mops if f == "w" and kk == k)
            if w >= 0 and w != t and not failed[w]:
                edges.append((w, t, WW, k, v, mine))
            if v is None:
                continue  # the readers of nil are linked below
            for r in readers.get((k, v), ()):
                if r != t:
                    edges.append((r, t, RW, k, v, mine))
        if len(ts) > 1:
            anomalies.append(Anomaly("lost-update", sorted(ts), key=k, detail={"value": v}))
    for k, ws in writers_of.items():
        nil_readers = readers.get((k, None), [])
        if not nil_readers:
            continue
        targets = ws if len(nil_readers) * len(ws) <= NIL_EDGE_BUDGET else overwrote.get(
            (k, None), [])
        for r in nil_readers:
            for w in targets:
                if w != r:
                    edges.append((r, w, RW, k, None, _first_write(txns[w], k)))
    return edges, anomalies


def _first_write(txn: Txn, key: str) -> int:
    return next(v for f, k, v in txn.mops if f == "w" and k == key)

"""List-append analysis, as Elle's ``elle.list-append``: each key's version order from
its reads, the ww / wr / rw edges it gives, and the anomalies no cycle is needed for.

The dependency graph covers the transactions that may have happened (ok and info; a
failed one did not). A key's version order is its longest read (a key appended once and
never read: that one element); an append no read shows comes after every element read.
``ww``: the writer of the element before an append (its predecessor in the order, or
the last element read if no read shows it); ``rw``: every transaction that read the list
ending at that element (or the empty list); ``wr``: the writer of a read's last element.

Anomalies found without a cycle: ``G1a`` (any element of any committed read appended by
a failed transaction), ``G1b`` (a read ending at another transaction's non-final
append), ``internal`` (a read that disagrees with the transaction's own earlier read or
appends), ``future-read`` (a read holding an element the transaction appends later),
``duplicate-elements``, ``incompatible-order`` (two reads of a key neither a prefix of
the other), ``lost-update`` (committed transactions that read the same value of a key
and then appended to it), ``dirty-update`` (a failed append followed by a committed one
in a key's order) and, ours, ``garbage-read`` (a read holding an element nobody
appended: Elle stops there).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from replicalab.checkers.txn.types import FAIL, INFO, OK, RW, WR, WW, Anomaly, Txn, TxnInputError
from replicalab.errors import MODEL

Edge = tuple[int, int, int, Any, Any, Any]
"""(src, dst, kind code, key, a, b): see :class:`~replicalab.checkers.txn.types.Step`."""
INIT = None
"""The empty list, before any append (an element no append wrote)."""


@dataclass(frozen=True)
class Writes:
    """Who appended what: ``writer`` (key, element) -> transaction, any outcome;
    ``intermediate`` the appends followed by another append of the same key in the same
    transaction; ``final`` (transaction, key) -> its last append of the key."""

    writer: dict[tuple[str, int], int]
    intermediate: dict[tuple[str, int], int]
    final: dict[tuple[int, str], int]


def index_writes(txns: list[Txn]) -> Writes:
    """Return the write index; raises TxnInputError for an element appended twice to a
    key, a micro-op other than :append and :r, or a value of the wrong type."""
    writer: dict[tuple[str, int], int] = {}
    intermediate: dict[tuple[str, int], int] = {}
    final: dict[tuple[int, str], int] = {}
    for t, txn in enumerate(txns):
        for f, k, v in txn.mops:
            if f == "append":
                if isinstance(v, bool) or not isinstance(v, int):
                    raise TxnInputError(txn.index, f"appends {v!r} to key {k}; list-append "
                                        "appends integers")
                if (k, v) in writer:
                    other = txns[writer[(k, v)]].index
                    raise TxnInputError(txn.index, f"appends {v} to key {k}, which T{other} "
                                        "appended too; list-append needs values unique "
                                        "per key")
                writer[(k, v)] = t
                prev = final.get((t, k))
                if prev is not None:
                    intermediate[(k, prev)] = t
                final[(t, k)] = v
            elif f == "r":
                if v is not None and not isinstance(v, tuple):
                    raise TxnInputError(txn.index, f"the read of key {k} returned {v!r}; "
                                        "list-append reads return a list (or nil)")
            else:
                raise TxnInputError(txn.index, f"micro-op :{f}; list-append takes :append "
                                    "and :r (for :w use {model} rw-register)", MODEL)
    return Writes(writer, intermediate, final)


def version_orders(txns: list[Txn], outcomes: tuple[str, ...]
                   ) -> tuple[dict[str, tuple[int, ...]], list[tuple[str, list[tuple[Any, int]]]]]:
    """Return each key's version order as the transactions of ``outcomes`` show it (the
    longest non-empty read, the last seen of equal ones, each element once; a key they
    append once and never read: that element), and per key its distinct non-empty reads
    sorted by length (first seen first on a tie) with the transaction that first read
    each."""
    reads: dict[str, dict[tuple[int, ...], int]] = {}
    appends: dict[str, Any] = {}
    for t, txn in enumerate(txns):
        if txn.outcome not in outcomes:
            continue
        for f, k, v in txn.mops:
            if f == "r":
                if v:
                    seen = reads.setdefault(k, {})
                    if v not in seen:
                        seen[v] = t
            else:
                appends[k] = v if k not in appends else _MANY
    orders: dict[str, tuple[int, ...]] = {}
    sorted_reads = []
    for k, seen in reads.items():
        vals = sorted(seen.items(), key=lambda kv: len(kv[0]))  # stable: first seen first
        sorted_reads.append((k, vals))
        orders[k] = tuple(dict.fromkeys(vals[-1][0]))
    for k, v in appends.items():
        if v is not _MANY and k not in orders:
            orders[k] = (v,)
    return orders, sorted_reads


_MANY = object()


def analyse(txns: list[Txn]) -> tuple[list[Edge], list[Anomaly]]:
    """Return the ww/wr/rw edges and the non-cycle anomalies of a list-append history
    (raises TxnInputError on input that is not list-append)."""
    w = index_writes(txns)
    anomalies: list[Anomaly] = []
    possible = (OK, INFO)
    orders, sorted_reads = version_orders(txns, possible)
    _incompatible(sorted_reads, anomalies)
    position = {k: {v: i for i, v in enumerate(o)} for k, o in orders.items()}
    # who read the list ending at each element (INIT: the empty list); an info's nil
    # read is what it was asked to read, not what it saw
    readers: dict[tuple[str, Any], list[int]] = {}
    edges: list[Edge] = []
    writer = {kv: t for kv, t in w.writer.items() if txns[t].outcome != FAIL}
    for t, txn in enumerate(txns):
        if txn.outcome not in possible:
            continue
        for f, k, v in txn.mops:
            if f != "r" or (v is None and txn.outcome == INFO):
                continue
            last = v[-1] if v else INIT
            readers.setdefault((k, last), []).append(t)
            if v:
                src = writer.get((k, last))
                if src is not None and src != t:
                    edges.append((src, t, WR, k, last, last))
    for t, txn in enumerate(txns):
        if txn.outcome not in possible:
            continue
        for f, k, v in txn.mops:
            if f != "append":
                continue
            order = orders.get(k, ())
            i = position.get(k, {}).get(v)
            if i is not None:
                prev = order[i - 1] if i > 0 else INIT
            else:
                prev = order[-1] if order else INIT
            if prev is not INIT:
                src = writer.get((k, prev))
                if src is not None and src != t:
                    edges.append((src, t, WW, k, prev, v))
            for r in dict.fromkeys(readers.get((k, prev), ())):
                if r != t:
                    edges.append((r, t, RW, k, prev, v))
    _reads(txns, w, anomalies)
    _lost_updates(txns, "append", anomalies)
    _dirty_updates(txns, w, anomalies)
    return edges, anomalies


def unread_appenders(txns: list[Txn]) -> dict[str, list[int]]:
    """Return, per key, the committed transactions whose appends to it no read shows
    (ok ones, and info ones some read shows did commit), when there are two or more:
    the order among them is not known."""
    orders, _ = version_orders(txns, (OK, INFO))
    seen = {(k, v) for k, o in orders.items() for v in o}
    committed = {t for t, x in enumerate(txns) if x.outcome == OK} | {
        t for t, x in enumerate(txns) if x.outcome == INFO
        and any(f == "append" and (k, v) in seen for f, k, v in x.mops)}
    out: dict[str, list[int]] = {}
    for t in sorted(committed):
        for f, k, v in txns[t].mops:
            if f == "append" and (k, v) not in seen:
                ts = out.setdefault(k, [])
                if t not in ts:
                    ts.append(t)
    return {k: ts for k, ts in out.items() if len(ts) > 1}


def _incompatible(sorted_reads: list[tuple[str, list[tuple[Any, int]]]],
                  anomalies: list[Anomaly]) -> None:
    for k, vals in sorted_reads:
        for (a, ta), (b, tb) in pairwise(vals):
            if b[:len(a)] != a:
                anomalies.append(Anomaly("incompatible-order", [ta, tb], key=k,
                                         detail={"values": [list(a), list(b)]}))
                break


def _reads(txns: list[Txn], w: Writes, anomalies: list[Anomaly]) -> None:
    """Add the anomalies of committed reads: G1a, G1b, garbage, internal, future reads;
    and duplicate elements in the reads of transactions that may have happened."""
    for t, txn in enumerate(txns):
        if txn.outcome == INFO:
            for f, k, v in txn.mops:
                if f == "r" and v:
                    _duplicates(t, k, v, anomalies)
        if txn.outcome != OK:
            continue
        for f, k, v in txn.mops:
            if f != "r":
                continue
            if v:
                _duplicates(t, k, v, anomalies)
                garbage = next((e for e in v if (k, e) not in w.writer), None)
                if garbage is not None:
                    anomalies.append(Anomaly("garbage-read", [t], key=k, detail={
                        "element": garbage, "read": list(v)}))
                for e in v:
                    src = w.writer.get((k, e))
                    if src is not None and txns[src].outcome == FAIL:
                        anomalies.append(Anomaly("G1a", [src, t], key=k, detail={
                            "value": e, "read": list(v)}))
                src = w.intermediate.get((k, v[-1]))
                if src is not None and src != t:
                    anomalies.append(Anomaly("G1b", [src, t], key=k, detail={
                        "value": v[-1], "final": w.final[(src, k)], "read": list(v)}))
        _internal(t, txn, anomalies)
        _future_read(t, txn, anomalies)


def _duplicates(t: int, k: str, v: tuple[int, ...], anomalies: list[Anomaly]) -> None:
    if len(set(v)) != len(v):
        counts: dict[int, int] = {}
        for e in v:
            counts[e] = counts.get(e, 0) + 1
        anomalies.append(Anomaly("duplicate-elements", [t], key=k, detail={
            "read": list(v), "duplicates": {e: c for e, c in counts.items() if c > 1}}))


def _internal(t: int, txn: Txn, anomalies: list[Anomaly]) -> None:
    """Add the transaction's first read that disagrees with what it read or appended
    before: a known list (its earlier read, plus its appends since), or an unknown prefix
    followed by its own appends (it appended before reading)."""
    state: dict[str, tuple[bool, Any]] = {}  # key -> (known?, list or suffix)
    for f, k, v in txn.mops:
        s = state.get(k)
        if f == "append":
            if s is None:
                state[k] = (False, (v,))
            else:
                state[k] = (s[0], (*(s[1] or ()), v))
            continue
        if s is not None:
            known, els = s
            if known:
                bad = els != v  # nil and the empty list differ, as in Elle
            else:
                read = v or ()
                i = len(read) - len(els)
                bad = i < 0 or read[i:] != els
            if bad:
                anomalies.append(Anomaly("internal", [t], key=k, detail={
                    "expected": (None if els is None else list(els)) if known
                    else ["...", *els], "read": None if v is None else list(v)}))
                return
        state[k] = (True, v)


def _future_read(t: int, txn: Txn, anomalies: list[Anomaly]) -> None:
    """Add the transaction's first read of an element it appends afterwards."""
    seen: dict[tuple[str, int], tuple[int, ...]] = {}
    for f, k, v in txn.mops:
        if f == "r":
            for e in v or ():
                seen.setdefault((k, e), v)
        elif (k, v) in seen:
            anomalies.append(Anomaly("future-read", [t], key=k, detail={
                "element": v, "read": list(seen[(k, v)])}))
            return


def _lost_updates(txns: list[Txn], write: str, anomalies: list[Anomaly]) -> None:
    """Add, per key and value read, the committed transactions that read that value of
    the key and then wrote it, when two or more did (Elle's lost update)."""
    groups: dict[tuple[str, Any], list[int]] = {}
    for t, txn in enumerate(txns):
        if txn.outcome != OK:
            continue
        read: dict[str, Any] = {}
        wrote: set[str] = set()
        for f, k, v in txn.mops:
            if f == write:
                if k not in wrote and k in read:
                    groups.setdefault((k, read[k]), []).append(t)
                    wrote.add(k)
            elif k not in read:
                read[k] = v
    for (k, v), ts in groups.items():
        if len(ts) > 1:
            anomalies.append(Anomaly("lost-update", ts, key=k, detail={
                "value": list(v) if isinstance(v, tuple) else v}))


def _dirty_updates(txns: list[Txn], w: Writes, anomalies: list[Anomaly]) -> None:
    """Add, per key, each stretch of its version order (read by any transaction, failed
    ones included) where a failed append is followed by a committed one."""
    orders, _ = version_orders(txns, (OK, INFO, FAIL))
    for k, order in orders.items():
        t1: int | None = None  # the initial state counts as committed
        vs: list[int] = []
        for v in order:
            vs = [*vs, v]
            t2 = w.writer.get((k, v))
            o1 = OK if t1 is None else txns[t1].outcome
            o2 = INFO if t2 is None else txns[t2].outcome  # unwritten: garbage-read says it
            if o2 == OK:
                if o1 == FAIL and t1 is not None:
                    anomalies.append(Anomaly("dirty-update", [t1, t2], key=k,
                                             detail={"values": vs}))
                t1, vs = t2, [v]
            elif o2 == FAIL and o1 != FAIL:
                t1, vs = t2, [v]
            # info after anything: the stretch goes on

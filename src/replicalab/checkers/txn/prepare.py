"""Transactions from what was recorded: a replicalab History's ``txn`` rows, or the ops of
a Jepsen/Elle history file (``history.read.FileOp``), as Jepsen writes them: client ops
of ``:f :txn`` only (others skipped and counted), real-time order from the file's order
of events (as Elle: times are not compared), a completion without an invoke taken as an
op whose invoke is not known."""

from __future__ import annotations

from typing import Any

from replicalab.checkers.txn.types import NEVER, Txn, TxnInputError

_FS = {"append", "r", "w"}


def _key(k: Any) -> str:
    if isinstance(k, bool) or k is None:
        raise ValueError(f"key {k!r} is not an integer, a string or a vector")
    if isinstance(k, tuple | list):
        return "[" + " ".join(_key(x) for x in k) + "]"
    text = str(k)
    return text[1:] if text.startswith(":") else text


def _read_value(v: Any) -> Any:
    if isinstance(v, tuple | list):
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise ValueError(f"read {list(v)!r} holds something that is not an integer")
        return tuple(v)
    return v


def mops(value: Any) -> list[tuple[str, str, Any]]:
    """Return a ``:value`` of micro-ops as (f, key, value) tuples (raises ValueError)."""
    if value is None:
        raise ValueError("a :txn without a :value; expected [[:append 5 3] [:r 5 nil]]")
    if not isinstance(value, tuple | list):
        raise ValueError(f":value {value!r} is not a vector of micro-ops like [[:r 5 nil]]")
    out = []
    for m in value:
        if not isinstance(m, tuple | list) or len(m) not in (2, 3):
            raise ValueError(f"micro-op {m!r}: expected [:append k v], [:w k v] or [:r k v]")
        f = str(m[0]).lstrip(":")
        if f not in _FS:
            raise ValueError(f"micro-op {m!r}: expected :append, :w or :r")
        v = m[2] if len(m) == 3 else None
        if f != "r" and (isinstance(v, bool) or not isinstance(v, int)):
            raise ValueError(f"micro-op {m!r}: :{f} takes an integer")
        out.append((f, _key(m[1]), _read_value(v) if f == "r" else v))
    return out


def from_file_ops(ops: list[Any]) -> tuple[list[Txn], int]:
    """Return the transactions of a history file's ops (``FileOp``; T<n> is the op whose
    invoke, or lone completion, is on line n) and how many ops were not ``:txn`` ones
    (left out); raises TxnInputError naming the line of an op whose value is not a
    transaction of micro-ops. Real-time order is the file's: an op's instants are the
    positions of its events."""
    out = []
    other = 0
    for op in ops:
        if op.f != "txn":
            other += 1
            continue
        try:
            ms = mops(op.value)
        except ValueError as err:
            raise TxnInputError(op.line, str(err)) from None
        out.append(Txn(op.line, op.process, op.outcome, op.line if op.invoked else NEVER,
                       op.complete_line if op.complete_line >= 0 else NEVER, ms))
    return out, other


def from_history(h: Any) -> list[Txn]:
    """Return the transactions (``f == "txn"`` rows of client processes) of a replicalab
    History, in row order; T<n> is row n; instants are its times (ns). Raises
    TxnInputError for a row that does not decode."""
    from replicalab.history.core import F_NAMES, TYPE_NAMES
    from replicalab.history.txn import decode_txn

    code = F_NAMES.index("txn")
    out = []
    for i in range(len(h)):
        if h.f[i] != code or h.process[i] < 0:
            continue
        try:
            ms = [(f, k, tuple(v) if isinstance(v, list) else v)
                  for f, k, v in decode_txn(h.keys[i], h.values[i])]
        except ValueError as err:
            raise TxnInputError(i, str(err)) from None
        outcome = TYPE_NAMES[h.type[i]] if h.type[i] else "info"  # in flight: unknown
        complete = int(h.complete_ns[i]) if h.type[i] else NEVER
        out.append(Txn(i, int(h.process[i]), outcome, int(h.invoke_ns[i]), complete, ms))
    return out

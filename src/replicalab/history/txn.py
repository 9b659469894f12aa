"""Transactions in a History: one row with ``f="txn"`` per transaction.

A transaction is a list of micro-operations in Elle's shape, a tuple ``(f, key, value)``:
list-append uses ``("append", key, int)`` and ``("r", key, None | list[int])``;
rw-register uses ``("w", key, int)`` and ``("r", key, None | int)``. Keys are ``str``.

The row's ``keys`` tuple holds each micro-op's key and its ``values`` tuple one string per
micro-op: ``"append 3"``, ``"w 3"``, ``"r"`` (a read not known yet, or nil), ``"r 5"``
(a register read), ``"r [1,2,3]"`` (a list read; ``"r []"`` the empty list). Plain
strings keep the Parquet schema of every other row (lists of strings), and the text
stays readable in a table viewer.
"""

from __future__ import annotations

from typing import Any

MicroOp = tuple[str, str, Any]
"""``(f, key, value)``: f is ``"append"``, ``"w"`` or ``"r"``; value an int, a list of
ints, or None (a read not known, or nil)."""

MICRO_FS = ("append", "r", "w")


def _encode_value(f: str, value: Any) -> str:
    if f == "r":
        if value is None:
            return "r"
        if isinstance(value, list | tuple):
            return "r [" + ",".join(str(int(v)) for v in value) + "]"
        return f"r {int(value)}"
    if f not in ("append", "w"):
        raise ValueError(f"micro-op {f!r}: use append, w or r")
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"micro-op {f} writes an integer, not {value!r}")
    return f"{f} {value}"


def encode_txn(micro_ops: list[MicroOp] | tuple[MicroOp, ...]
               ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return ``(keys, values)``, the History row's tuples holding ``micro_ops``
    (raises ValueError for a micro-op that is not append/w of an int or a read)."""
    keys = []
    values = []
    for mop in micro_ops:
        f, key, value = mop
        keys.append(str(key))
        values.append(_encode_value(f, value))
    return tuple(keys), tuple(values)


def decode_value(text: str) -> tuple[str, Any]:
    """Return ``(f, value)`` of one encoded micro-op (raises ValueError if malformed)."""
    try:
        return _decode_value(text)
    except ValueError:
        raise ValueError(f"micro-op {text!r}: expected 'append N', 'w N', 'r', 'r N' or "
                         "'r [..]'") from None


def _decode_value(text: str) -> tuple[str, Any]:
    f, _, rest = text.partition(" ")
    if f == "r":
        if not rest:
            return "r", None
        if rest[0] == "[":
            body = rest[1:-1] if rest[-1] == "]" else None
            if body is None:
                raise ValueError(f"micro-op {text!r}: a list read ends with ]")
            return "r", [int(x) for x in body.split(",")] if body else []
        return "r", int(rest)
    if f in ("append", "w") and rest:
        return f, int(rest)
    raise ValueError(f"micro-op {text!r}: expected 'append N', 'w N', 'r', 'r N' or 'r [..]'")


def decode_txn(keys: tuple[str, ...] | list[str], values: tuple[str | None, ...] | list[Any]
               ) -> list[MicroOp]:
    """Return the micro-ops held by a History row's ``keys``/``values`` tuples (raises
    ValueError if they are not an encoded transaction)."""
    if len(keys) != len(values):
        raise ValueError(f"a transaction row has {len(keys)} keys but {len(values)} values")
    out: list[MicroOp] = []
    for key, text in zip(keys, values, strict=True):
        if text is None:
            raise ValueError(f"micro-op on key {key!r} has no value")
        f, value = decode_value(text)
        out.append((f, key, value))
    return out


def invoke_txn(history: Any, process: int, micro_ops: list[MicroOp], now_ns: int) -> int:
    """Record the invoke of a transaction in ``history`` (reads as None, as Jepsen's
    invoke); return its index (pass it to :func:`ok_txn` or ``history.fail/info``)."""
    blank = [(f, k, None if f == "r" else v) for f, k, v in micro_ops]
    keys, values = encode_txn(blank)
    return history.invoke(process, "txn", keys, values, "none", now_ns)


def ok_txn(history: Any, index: int, micro_ops: list[MicroOp], now_ns: int,
           node: str = "") -> None:
    """Close transaction ``index`` as committed with ``micro_ops`` (its reads filled)."""
    _, values = encode_txn(micro_ops)
    history.ok(index, now_ns, values, node=node)


def edn_value(keys: tuple[str, ...], values: tuple[str | None, ...]) -> list[list[Any]]:
    """Return a transaction row as Jepsen's ``:value`` (``[["append", k, 3], ["r", k,
    [1, 2]]]``; integer-looking keys become integers, as Elle's histories have them)."""
    out: list[list[Any]] = []
    for f, key, value in decode_txn(keys, values):
        k: Any = key
        if key.lstrip("-").isdigit() and str(int(key)) == key:
            k = int(key)
        out.append([f, k, value])
    return out

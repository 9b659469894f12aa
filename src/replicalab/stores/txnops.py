"""What every adapter's ``transact`` shares: how a list or a register is kept as the text
value of one element, and how a transaction's micro-operations play out on values read.

A micro-operation is Elle's ``(f, key, value)`` (see ``stores.base.MicroOp``); the key is an
element ``domain/item/attribute``, so transactions live in the same key space as every other
operation (key prefixes and clean-up work unchanged). A list-append key holds the text
``[1,2,3]``, a register ``7``: a read tells which one it finds by the first character, so a
read-only transaction needs no hint. An absent key reads as None (Elle: nil, an empty list).

Stores that validate optimistically (etcd, ZooKeeper, Redis) read every key a transaction
touches, play the micro-operations out on those values with :func:`play`, and commit the
values it returns only if nothing they read has changed since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from replicalab.stores.base import MicroOp

READ, APPEND, WRITE = "r", "append", "w"
_FS = (READ, APPEND, WRITE)


def encode_list(values: Sequence[int]) -> str:
    """Return the stored text of a list-append key holding ``values``."""
    return "[" + ",".join(str(int(v)) for v in values) + "]"


def decode_stored(text: str | None) -> list[int] | int | None:
    """Return what a read of stored ``text`` gives: a list, a register's int, or None."""
    if text is None or text == "":
        return None
    if text[0] == "[":
        body = text[1:-1]
        return [int(x) for x in body.split(",")] if body else []
    return int(text)


def appended_text(old: str | None, value: int) -> str:
    """Return the stored text of a list after appending ``value`` to ``old``."""
    if old is None or old in ("", "[]"):
        return f"[{int(value)}]"
    if old[0] != "[":
        raise ValueError(f"cannot append to a register value {old!r}: list-append and "
                         "rw-register transactions must use different keys")
    return old[:-1] + f",{int(value)}]"


def check_ops(ops: Sequence[MicroOp]) -> None:
    """Raise ValueError naming the first micro-operation that is not ``(f, key, value)`` with
    f one of r, append, w."""
    if not ops:
        raise ValueError("a transaction needs at least one micro-operation")
    for op in ops:
        if len(op) != 3 or op[0] not in _FS or not isinstance(op[1], str):
            raise ValueError(f"micro-operation {op!r} is not (f, key, value) with f one of "
                             f"{', '.join(_FS)}")


def keys_of(ops: Sequence[MicroOp]) -> list[str]:
    """Return the distinct keys ``ops`` touch, in first-use order."""
    return list(dict.fromkeys(op[1] for op in ops))


@dataclass(frozen=True, slots=True)
class Played:
    """A transaction played out on values read: the ops with reads filled in, and the text
    each written key must hold at commit (in first-write order)."""

    ops: list[MicroOp]
    writes: dict[str, str]


def play(ops: Sequence[MicroOp], stored: Mapping[str, str | None]) -> Played:
    """Return ``ops`` played out on ``stored`` (key -> text, None absent): every read sees
    what the transaction's own earlier writes left, as inside one transaction."""
    state: dict[str, str | None] = dict(stored)
    writes: dict[str, str] = {}
    out: list[MicroOp] = []
    for f, k, v in ops:
        if f == READ:
            out.append((f, k, decode_stored(state.get(k))))
            continue
        text = appended_text(state.get(k), v) if f == APPEND else str(int(v))
        state[k] = writes[k] = text
        out.append((f, k, v))
    return Played(out, writes)


def fill_reads(ops: Sequence[MicroOp], reads: Sequence[Any]) -> list[MicroOp]:
    """Return ``ops`` with the read values ``reads`` (one per read op, in order) filled in."""
    it = iter(reads)
    return [(f, k, next(it)) if f == READ else (f, k, v) for f, k, v in ops]

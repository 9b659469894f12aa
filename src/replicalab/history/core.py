"""The History: Jepsen-style operation records kept in columns.

Each operation is one row, created at invoke time (type ``invoke``) and closed at
completion (``ok``: it happened, ``fail``: it certainly did not, ``info``: unknown).
Because the row exists from the invoke on, an interrupted run keeps every operation;
:meth:`History.close_in_flight` turns the ones still open into ``info``. Exports expand a
row into the two Jepsen events (invoke, completion).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from enum import IntEnum

import numpy as np


class OpType(IntEnum):
    """Completion state of an operation (``INVOKE`` = still in flight)."""

    INVOKE = 0
    OK = 1
    FAIL = 2
    INFO = 3


TYPE_NAMES = ("invoke", "ok", "fail", "info")
F_NAMES = ("read", "write", "cas", "delete", "crash", "pause", "partition", "heal", "slow",
           "power-loss", "txn")
"""Operation names; a new name is appended at the end so saved codes keep their meaning
(``txn``: one transaction, its micro-ops encoded by ``history/txn.py``)."""
CONSISTENCY_NAMES = ("none", "eventual", "consistent")
NEMESIS = -1
CONDITION_FAILED = "condition failed"
"""How the error of a ``fail`` op starts when the store answered that a conditional write's
condition was false: an answer (the store was available), not a refusal."""
"""Process id of the fault injector (Jepsen's ``:nemesis``)."""

_F_CODE = {name: i for i, name in enumerate(F_NAMES)}
_C_CODE = {name: i for i, name in enumerate(CONSISTENCY_NAMES)}


@dataclass(frozen=True, slots=True)
class Op:
    """One operation as plain values (a row of the history)."""

    index: int
    process: int
    type: str
    f: str
    keys: tuple[str, ...]
    values: tuple[str | None, ...]
    consistency: str
    invoke_ns: int
    complete_ns: int
    node: str
    error: str
    expects: tuple[str | None, ...] = ()
    """For a cas: the value each key had to hold (None: absent); empty otherwise."""

    @property
    def latency_ns(self) -> int:
        """Return complete minus invoke time in ns (-1 while in flight)."""
        return self.complete_ns - self.invoke_ns if self.complete_ns >= 0 else -1


class History:
    """Append-only columnar record of operations; the recording API is the hot path of probes."""

    def __init__(self) -> None:
        self.process = array("i")
        self.type = array("b")
        self.f = array("b")
        self.consistency = array("b")
        self.invoke_ns = array("q")
        self.complete_ns = array("q")
        self.keys: list[tuple[str, ...]] = []
        self.values: list[tuple[str | None, ...]] = []
        # a cas's expected values, one per key (None: must be absent); () for other ops
        self.expects: list[tuple[str | None, ...]] = []
        self.node: list[str] = []
        self.error: list[str] = []

    def __len__(self) -> int:
        return len(self.type)

    def invoke(
        self,
        process: int,
        f: str,
        keys: tuple[str, ...],
        values: tuple[str | None, ...],
        consistency: str,
        now_ns: int,
        expects: tuple[str | None, ...] = (),
    ) -> int:
        """Record the start of an operation; return its index (pass it to a completion).
        A cas passes ``expects``, the value each key must hold (None: absent)."""
        self.process.append(process)
        self.type.append(0)
        self.f.append(_F_CODE[f])
        self.consistency.append(_C_CODE[consistency])
        self.invoke_ns.append(now_ns)
        self.complete_ns.append(-1)
        self.keys.append(keys)
        self.values.append(values)
        self.expects.append(expects)
        self.node.append("")
        self.error.append("")
        return len(self.type) - 1

    def ok(self, index: int, now_ns: int, values: tuple[str | None, ...] | None = None,
           node: str = "") -> None:
        """Close operation ``index`` as having happened; reads pass the values they saw."""
        self.type[index] = 1
        self.complete_ns[index] = now_ns
        if values is not None:
            self.values[index] = values
        if node:
            self.node[index] = node

    def fail(self, index: int, now_ns: int, error: str, node: str = "") -> None:
        """Close operation ``index`` as certainly not having happened."""
        self.type[index] = 2
        self.complete_ns[index] = now_ns
        self.error[index] = error
        if node:
            self.node[index] = node

    def info(self, index: int, now_ns: int, error: str) -> None:
        """Close operation ``index`` with an unknown outcome (timeout, crash)."""
        self.type[index] = 3
        self.complete_ns[index] = now_ns
        self.error[index] = error

    def close_in_flight(self, now_ns: int, reason: str = "interrupted") -> int:
        """Mark every still-open operation ``info``; return how many were open."""
        open_idx = np.flatnonzero(self.types() == OpType.INVOKE)
        for i in open_idx:
            self.info(int(i), now_ns, reason)
        return len(open_idx)

    def types(self) -> np.ndarray:
        """Return the type codes (see :class:`OpType`) as an int8 array."""
        return np.frombuffer(self.type, dtype=np.int8) if len(self.type) else np.zeros(0, np.int8)

    def column(self, name: str) -> np.ndarray:
        """Return numeric column ``name`` as a numpy array (a copy-free view where possible)."""
        col = getattr(self, name)
        dtype = {"i": np.int32, "b": np.int8, "q": np.int64}[col.typecode]
        return np.frombuffer(col, dtype=dtype) if len(col) else np.zeros(0, dtype)

    def f_code(self, f: str) -> int:
        """Return the numeric code of operation name ``f``."""
        return _F_CODE[f]

    def consistency_code(self, c: str) -> int:
        """Return the numeric code of consistency level ``c``."""
        return _C_CODE[c]

    def op(self, index: int) -> Op:
        """Return row ``index`` as an :class:`Op`."""
        return Op(
            index=index,
            process=self.process[index],
            type=TYPE_NAMES[self.type[index]],
            f=F_NAMES[self.f[index]],
            keys=self.keys[index],
            values=self.values[index],
            consistency=CONSISTENCY_NAMES[self.consistency[index]],
            invoke_ns=self.invoke_ns[index],
            complete_ns=self.complete_ns[index],
            node=self.node[index],
            error=self.error[index],
            expects=self.expects[index],
        )

    def __iter__(self):  # type: ignore[no-untyped-def]
        return (self.op(i) for i in range(len(self)))

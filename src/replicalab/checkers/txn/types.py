"""Plain data at the transaction checker's boundaries: transactions in, anomalies out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WW, WR, RW, PROCESS, REALTIME = 0, 1, 2, 3, 4
EDGE_NAMES = ("ww", "wr", "rw", "process", "realtime")

OK, FAIL, INFO = "ok", "fail", "info"


class TxnInputError(ValueError):
    """A history that is not of the model's shape: ``index`` names the transaction (its
    row, or the line of its invoke in a file; -1: none), the message the problem."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


@dataclass(slots=True)
class Txn:
    """One transaction: ``index`` its name (T<index>: the history row, or the line of its
    invoke in a file); ``outcome`` ok / fail / info; ``invoke``/``complete`` its times in
    ns, or lines for a file without times (``complete`` -1: never completed); ``mops``
    its micro-ops ``(f, key, value)`` with keys as str and list reads as tuples."""

    index: int
    process: int
    outcome: str
    invoke: int
    complete: int
    mops: list[tuple[str, str, Any]]


@dataclass(frozen=True, slots=True)
class Step:
    """One edge of a cycle: ``src`` < ``dst`` (positions in the transaction list) because
    of ``kind`` (``ww``, ``wr``, ``rw``, ``process``, ``realtime``); ``key`` and the
    values ``a`` (src's side: written or read; None: nil / empty) and ``b`` (dst's side)
    name the evidence of a dependency edge."""

    src: int
    dst: int
    kind: str
    key: str | None = None
    a: Any = None
    b: Any = None


@dataclass(slots=True)
class Anomaly:
    """One anomaly: its Elle name, the transactions (positions) it involves, its cycle
    (for the cycle classes) and each step explained in words."""

    type: str
    txns: list[int]
    cycle: list[Step] | None = None
    key: str | None = None
    explanation: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Unfinished:
    """A strongly connected component whose cycle search stopped (deadline or budget):
    its size, a few of its transactions, and the anomaly classes it might still hold."""

    variant: str
    size: int
    sample: list[int]
    might_hold: list[str]


@dataclass(slots=True)
class TxnCheckResult:
    """What ``check_txns`` found. ``valid`` True, False or "unknown" (a search stopped and
    nothing was found); ``anomaly_types`` sorted Elle names; ``not_``/``also_not`` the
    consistency models ruled out (the weakest ones, then every stronger one); ``possible``
    the models the history may still satisfy; ``check_s`` seconds spent checking."""

    model: str
    valid: bool | str
    txns: int
    anomaly_types: list[str]
    anomalies: dict[str, list[Anomaly]]
    not_: list[str]
    also_not: list[str]
    possible: list[str]
    unfinished: list[Unfinished]
    check_s: float
    engine: str
    names: dict[int, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    """How many anomalies of each type were found (``anomalies`` keeps a few of each)."""
    anomalous_txns: int = 0
    """How many transactions take part in some anomaly: every one on a cycle of ww, wr and
    rw edges (a node of a nontrivial strongly connected component of that graph: no serial
    order places it among the others of its component), and every one an anomaly found
    names (non-cycle anomalies, process and real-time cycles). Exact for serializability,
    where ``counts`` of a cycle class is a lower bound (one cycle per component)."""
    schema_version: int = 1

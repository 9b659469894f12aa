"""Plain data at the transaction checker's boundaries: transactions and options in,
anomalies and a verdict out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replicalab.errors import InputError

WW, WR, RW, PROCESS, REALTIME = 0, 1, 2, 3, 4
EDGE_NAMES = ("ww", "wr", "rw", "process", "realtime")

OK, FAIL, INFO = "ok", "fail", "info"
NEVER = -1
"""An instant that is not in the history: an invoke a completions-only history does not
show, or the completion of an op that never completed."""


class TxnInputError(InputError):
    """A history that is not of the model's shape: ``index`` names the transaction (its
    row, or the line of its invoke in a file; -1: none), the message the problem (``{model}``
    in it: the model that would take it, ``mentions`` saying how Python names that
    parameter)."""

    def __init__(self, index: int, message: str,
                 mentions: dict[str, str] | None = None) -> None:
        super().__init__(message, mentions)
        self.index = index


@dataclass(slots=True)
class Txn:
    """One transaction: ``index`` its name (T<index>: the history row, or the line of its
    invoke in a file); ``outcome`` ok / fail / info; ``invoke``/``complete`` the instants
    of its invoke and completion (ns, or positions in a file; ``NEVER``: not in the
    history) that real-time order compares; ``mops`` its micro-ops ``(f, key, value)``
    with keys as str and list reads as tuples (nil: None)."""

    index: int
    process: int
    outcome: str
    invoke: int
    complete: int
    mops: list[tuple[str, str, Any]]


@dataclass(frozen=True, slots=True)
class Options:
    """What to look for, as Elle's options: ``consistency_models`` the models the history
    is expected to satisfy (None: none; Elle's default is strict serializability),
    ``anomalies`` further anomalies to report, ``wfr_keys`` (rw-register) whether a
    transaction's write of a key follows its read of it in the key's version order,
    ``sequential_keys`` / ``linearizable_keys`` (rw-register) whether each key's versions
    follow process / real-time order, ``transaction_order`` (rw-register) a known commit
    order: (position in the transaction list, rank) pairs, versions following ranks."""

    consistency_models: tuple[str, ...] | None = ("strict-serializable",)
    anomalies: tuple[str, ...] = ()
    wfr_keys: bool = False
    sequential_keys: bool = False
    linearizable_keys: bool = False
    transaction_order: tuple[tuple[int, int], ...] | None = None


DEFAULT_OPTIONS = Options()
"""Elle's defaults: strict serializability expected, no further assumption."""


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
    """A strongly connected component in which the search for ``classes`` stopped
    before deciding them (``limit``: "steps" or "deadline"): its size and a few of its
    transactions."""

    size: int
    sample: list[int]
    classes: list[str]
    limit: str


@dataclass(slots=True)
class TxnCheckResult:
    """What the check found. ``valid`` True, False or "unknown" (a search it needed
    stopped, or the graph was empty, and nothing forbidden was found); ``anomaly_types``
    the anomalies found that the options ask about (Elle's ``:anomaly-types``);
    ``not_``/``also_not`` the models every anomaly found rules out (the weakest ones,
    then the rest); ``possible`` the transactional models still possible (among those
    whose cycle classes the search looked at: process ones need process edges,
    real-time ones real-time edges, which the options decide; a model forbidding a class
    a search left undecided is not listed);
    ``anomalies`` a few of each type found (``counts`` has how many); ``check_s`` seconds
    spent checking."""

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
    anomalous_txns: int = 0
    """How many transactions take part in some anomaly: every one on a cycle of ww, wr and
    rw edges (a node of a nontrivial strongly connected component of that graph), and
    every one an anomaly found names."""
    options: Options = field(default_factory=Options)
    skipped: dict[str, int] = field(default_factory=dict)
    """Events left out of the history: ``non-client`` (nemesis) events, ``non-txn`` ops."""
    schema_version: int = 2

    def to_json(self) -> dict[str, Any]:
        """Return Elle's result map: ``valid`` (true, false or "unknown"),
        ``anomaly_types``, ``not``, ``also_not``, ``anomalies`` (per type: transactions,
        cycle steps with their explanation), plus what we add (``possible``, ``counts``,
        ``unfinished``, ``txns``, ``check_s``, ``options``, ``skipped``)."""
        name = self.names

        def step(s: Any) -> dict[str, Any]:
            out = {"from": name[s.src], "to": name[s.dst], "type": s.kind}
            if s.key is not None:
                out.update(key=s.key, a=_plain(s.a), b=_plain(s.b))
            return out

        anomalies = {
            typ: [{"txns": [name[t] for t in an.txns],
                   **({"key": an.key} if an.key is not None else {}),
                   **({"cycle": [step(s) for s in an.cycle]} if an.cycle is not None
                      else {}),
                   **({"detail": {k: _plain(v) for k, v in an.detail.items()}}
                      if an.detail else {}),
                   "explanation": an.explanation}
                  for an in ans]
            for typ, ans in self.anomalies.items()}
        o = self.options
        return {
            "schema_version": self.schema_version, "model": self.model,
            "valid": self.valid, "txns": self.txns,
            "anomaly_types": self.anomaly_types, "counts": self.counts,
            "anomalous_txns": self.anomalous_txns,
            "not": self.not_, "also_not": self.also_not, "possible": self.possible,
            "anomalies": anomalies,
            "unfinished": [{"size": u.size,
                            "sample": [name.get(t, f"#{t}") for t in u.sample],
                            "classes": u.classes, "limit": u.limit}
                           for u in self.unfinished],
            "options": {"consistency_models": (list(o.consistency_models)
                                               if o.consistency_models is not None else None),
                        "anomalies": list(o.anomalies), "wfr_keys": o.wfr_keys},
            "skipped": self.skipped,
            "check_s": round(self.check_s, 3), "engine": self.engine,
        }


def _plain(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return v

"""What every part of the linearizability checker shares: the operation (:class:`LinOp`),
the verdict (:class:`Verdict`), outcomes and the order of events (pure, no I/O).

Outcomes follow Jepsen: ``ok`` took effect inside its interval, ``fail`` never did,
``info`` (or never completed) may have taken effect at any time after its invoke, or
never. One more is used inside the checker only: ``optional`` took effect inside its
interval *or not at all* — what shrinking makes of the operations left out of a
counterexample (:mod:`replicalab.checkers.linearizability.explain`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any, ClassVar

from replicalab.records import record


class Verdict(IntEnum):
    """The verdict on a history or on one of its parts, everywhere in the checker.

    The integer values are the search cores' (``search``, ``replicalab_native``):
    1 linearizable, 0 not, -1 unknown (the deadline came first), 2 skipped (``fail_fast``
    stopped before the part was searched). JSON shows it as :meth:`json`."""

    NOT_LINEARIZABLE = 0
    LINEARIZABLE = 1
    UNKNOWN = -1
    SKIPPED = 2

    def json(self) -> bool | str:
        """Return the verdict as results and ``--json`` write it: true, false,
        ``"unknown"`` or ``"skipped"``."""
        return _JSON[self]

    @property
    def words(self) -> str:
        """Return the verdict as the terminal prints it."""
        return _WORDS[self]


_JSON: dict[Verdict, bool | str] = {
    Verdict.LINEARIZABLE: True, Verdict.NOT_LINEARIZABLE: False,
    Verdict.UNKNOWN: "unknown", Verdict.SKIPPED: "skipped"}
_WORDS = {Verdict.LINEARIZABLE: "linearizable", Verdict.NOT_LINEARIZABLE: "NOT linearizable",
          Verdict.UNKNOWN: "unknown", Verdict.SKIPPED: "skipped (unchecked)"}


def overall(verdicts: Sequence[Verdict]) -> Verdict:
    """Return a history's verdict from its parts': not linearizable if one is not,
    linearizable if all are, else unknown."""
    if Verdict.NOT_LINEARIZABLE in verdicts:
        return Verdict.NOT_LINEARIZABLE
    if all(v == Verdict.LINEARIZABLE for v in verdicts):
        return Verdict.LINEARIZABLE
    return Verdict.UNKNOWN


class _Unrecorded:
    """A value the history did not record: a cas's expected value (the cas then acts as a
    write), or what an ``info`` dequeue returned."""

    _it: ClassVar[_Unrecorded | None] = None

    def __new__(cls) -> _Unrecorded:
        if cls._it is None:
            cls._it = super().__new__(cls)
        return cls._it

    def __repr__(self) -> str:
        return "?"

    def __reduce__(self) -> str:
        return "UNRECORDED"


UNRECORDED = _Unrecorded()
"""A value the history did not record (legal whatever the state is)."""

OK, INFO, FAIL, OPTIONAL = "ok", "info", "fail", "optional"
"""Outcomes of a :class:`LinOp` (``optional`` only inside the checker, see the module)."""


@record(frozen=True, slots=True)  # made at start-up: no compiled source (records.py)
class LinOp:
    """One operation as the checker sees it.

    ``index`` identifies it (the History row or the file line of its invoke); ``f`` names
    it as the model does (``read``, ``write``, ``cas``, ``append``, ``add``, ``enqueue``,
    ...); ``key`` is None for a single object; ``value`` is the model's (the value read,
    the value written, a cas's ``(expected, new)``, ...); ``outcome`` is ``ok``, ``fail``,
    ``info`` or ``optional``; times are ns, or line numbers for a history without times
    (``complete_ns`` is ignored for ``info``).
    """

    index: int
    process: int
    f: str
    key: Any
    value: Any
    outcome: str
    invoke_ns: int
    complete_ns: int

    def __init__(self, index: int, process: int, f: str, key: Any, value: Any, outcome: str,
                 invoke_ns: int, complete_ns: int) -> None:
        # written out: ops are made by the thousand, and records' generic __init__ (a loop
        # over the fields) takes twice as long
        s = object.__setattr__
        s(self, "index", index)
        s(self, "process", process)
        s(self, "f", f)
        s(self, "key", key)
        s(self, "value", value)
        s(self, "outcome", outcome)
        s(self, "invoke_ns", invoke_ns)
        s(self, "complete_ns", complete_ns)


def linop_slots() -> tuple[Callable[..., None], ...]:
    """Return the setters of :class:`LinOp`'s eight slots in field order (``set(op,
    value)``): with ``object.__new__(LinOp)`` they make the same op ``LinOp(...)`` makes
    at about half the cost (a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``), for the thousands of ops of a history file."""
    return tuple(getattr(LinOp, f).__set__ for f in (
        "index", "process", "f", "key", "value", "outcome", "invoke_ns", "complete_ns"))


def event_order(ops: Sequence[LinOp]) -> list[int]:
    """Return the events of ``ops`` (ids = positions) in time order: ``2 i`` for an invoke,
    ``2 i + 1`` for the completion of an op that took effect inside its interval (``ok``)
    or not at all (``optional``); ``info`` ops have none. An invoke sorts before a
    completion at the same time (touching ops are concurrent)."""
    evs = []
    add = evs.append
    for i, op in enumerate(ops):
        t = op.invoke_ns
        add((t, 0, 2 * i))
        if op.outcome == OK or op.outcome == OPTIONAL:
            c = op.complete_ns
            add((c if c > t else t, 1, 2 * i + 1))
    evs.sort()
    return [e[2] for e in evs]


def optional_flags(ops: Sequence[LinOp]) -> list[bool]:
    """Return, per op, whether it is ``optional`` (what the search cores take)."""
    return [op.outcome == OPTIONAL for op in ops]


FINAL_PROCESS = -2
"""The process of the register workload's final reads (``checkers.accounting.FINAL``)."""


def who(process: int) -> str:
    """Return how a process is named in an explanation."""
    return "the final read" if process == FINAL_PROCESS else f"process {process}"

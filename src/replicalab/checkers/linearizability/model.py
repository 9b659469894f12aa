"""The contract of a linearizability model: one class per data type, as Porcupine's Model
(pure, no I/O).

A model declares what it takes — its operations (``ops``), other names read as them
(``aliases``: Porcupine's kv histories say ``get``/``put``), the operations that change
nothing (``reads``: Jepsen drops them unless they completed ``ok``), whether a history's
keys are independent objects checked one by one (``keyed``) — and what it does:
``init()``, ``step(state, op)`` -> (legal, new state), ``describe(op)``. Optionally it
names a native machine (``native``) and turns a part into the machine's integer columns
(:meth:`Model.native_columns`). A new data type is one subclass and one line in
:mod:`replicalab.checkers.linearizability.registry`; everything that lists, parses,
checks or explains reads it from there.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple

from replicalab.checkers.linearizability.ops import FAIL, OK, LinOp
from replicalab.errors import MODEL, InputError
from replicalab.history.read import edn_text

_BY_INVOKE = attrgetter("invoke_ns", "index")
"""Sort key of ops in invoke order (index breaks ties): in C, not a lambda per op."""


class NativeColumns(NamedTuple):
    """A part's operations as a native machine takes them, one entry per op: ``kind``
    (the position of the op's name in the model's ``ops``), ``a`` and ``b`` (ints whose
    meaning is the machine's) and ``table``, what the machine needs besides (the strings
    behind value ids for ``append``, the elements of each set read for ``set``; None
    when nothing)."""

    kind: list[int]
    a: list[int]
    b: list[int]
    table: list[Any] | None = None


class Model:
    """A sequential data type: subclass it, set the class attributes, implement
    :meth:`init`, :meth:`step` and :meth:`describe` (states must be hashable)."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    """One line for ``replicalab check --help``: the operations and what they do."""
    ops: ClassVar[tuple[str, ...]] = ()
    aliases: ClassVar[dict[str, str]] = {}
    reads: ClassVar[frozenset[str]] = frozenset()
    keyed: ClassVar[bool] = False
    """True: ops on different keys are independent objects, checked one key at a time
    (P-compositionality); False: one object (a history with several keys is refused)."""
    tuples: ClassVar[bool] = False
    """True: an EDN op without ``:key`` carries Jepsen's ``independent`` ``[key value]``
    tuple as its value."""
    native: ClassVar[str | None] = None
    """The ``replicalab_native`` machine that searches this model, if any."""

    def init(self) -> Hashable:
        """Return the initial state."""
        raise NotImplementedError

    def step(self, state: Any, op: LinOp) -> tuple[bool, Any]:
        """Return (whether ``op`` is legal in ``state``, the state after it)."""
        raise NotImplementedError

    def describe(self, op: LinOp) -> str:
        """Return ``op`` in a few words ("read 3", "enqueue 7")."""
        return f"{op.f} {edn_text(op.value)}"

    def value_problem(self, op: LinOp) -> str | None:
        """Return what is wrong with ``op``'s value for this model (its f is one of
        ``ops``), or None."""
        return None

    def canonical(self, f: str) -> str:
        """Return the model's name for operation ``f`` (an alias mapped)."""
        return self.aliases.get(f, f)

    def why_not(self, op: LinOp) -> str | None:
        """Return a few words saying why the model cannot take ``op`` ("a incr; the
        register model has read, write"), or None; a model that would take it is named
        after ``{model}`` (:data:`replicalab.errors.MODEL`)."""
        if op.f not in self.ops:
            return f"a {op.f}; the {self.name} model has {', '.join(self.ops)}"
        return self.value_problem(op)

    def file_value(self, f: str, value: Any) -> Any:
        """Return the value of a history file's ``f`` op (``f`` canonical) as ``step``
        takes it (a register's cas written as a bare value: its new value)."""
        return value

    def check_ops(self, ops: Sequence[LinOp]) -> None:
        """Raise InputError naming the first op the model cannot take."""
        for op in ops:
            bad = self.why_not(op)
            if bad:
                raise InputError(f"op {op.index}: {bad}", MODEL)

    def partition(self, ops: Sequence[LinOp]) -> list[tuple[Any, list[LinOp]]]:
        """Return the independent parts of ``ops`` as (key, ops) pairs, keys in
        first-seen order: one per key when ``keyed``, else one (raises InputError for
        several keys, or for an op the model cannot take)."""
        self.check_ops(ops)
        parts: dict[Any, list[LinOp]] = {}
        for op in ops:
            parts.setdefault(op.key, []).append(op)
        if self.keyed:
            return list(parts.items())
        if len(parts) > 1:
            raise InputError(f"the history has {len(parts)} keys; the {self.name} model "
                             "checks one object: use {model} kv, or one key per history",
                             MODEL)
        return list(parts.items()) or [(None, [])]

    def prepare(self, ops: Sequence[LinOp]) -> list[LinOp]:
        """Return the ops that constrain the search, in invoke order: ``fail`` ops and
        reads that did not complete ``ok`` are dropped (Jepsen: they did not happen / saw
        nothing)."""
        reads = self.reads
        kept = [op for op in ops
                if op.outcome != FAIL and not (op.outcome != OK and op.f in reads)]
        kept.sort(key=_BY_INVOKE)
        return kept

    def useless(self, relaxed: Sequence[LinOp], constrained: Sequence[LinOp]) -> set[int]:
        """Return the indexes of the ``relaxed`` ops (each may take effect, or not) that
        could not help any linearization of the ``constrained`` ops, so leaving them out
        changes no verdict (default: none). Shrinking's checks drop them: fewer ops that
        may or may not happen, a smaller search."""
        return set()

    def viability(self, ops: Sequence[LinOp]) -> Any:
        """Return ``viable(state, done)`` for the search of the prepared part ``ops``
        (``done`` the bitset of op positions placed or dropped): False only when no
        linearization of the ops left can go on from ``state``; or None (default: no
        pruning)."""
        return None

    def refutes(self, ops: Sequence[LinOp]) -> bool:
        """Return whether :meth:`refute` may find something in ``ops`` (a whole history)."""
        return type(self).refute is not Model.refute

    def refute(self, ops: Sequence[LinOp]) -> list[LinOp] | None:
        """Return a few ops of the part ``ops`` that cannot be linearized whatever the others
        did, found without a search (a pattern the model knows), or None (default: none).
        The check then skips the search of that part: the verdict is known."""
        return None

    def headline(self, ce: Sequence[LinOp], part: Sequence[LinOp], clock: Any) -> str | None:
        """Return the sentence saying why the counterexample ``ce`` (of the ops ``part``)
        fails, points named by ``clock`` (``explain.Clock``), or None (default: the
        explanation lists the ops under a general sentence)."""
        return None

    def native_columns(self, ops: Sequence[LinOp]) -> NativeColumns:
        """Return ``ops`` as the native machine's columns (models with ``native``)."""
        raise NotImplementedError(f"the {self.name} model has no native machine")

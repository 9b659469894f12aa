"""The register models: ``register``, ``cas-register`` and ``kv`` (pure, no I/O).

Their parts go to the register search core (:func:`replicalab.checkers.linsearch.search_part`
or its native twin), which knows their semantics, through :meth:`CasRegister.encode`:
the part as small ints. ``kv`` also takes ``append`` (Porcupine's key-value model):
string concatenation onto the key's value; a part with appends goes to the generic search
(natively the ``append`` machine), since its states are the strings built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from replicalab.checkers.linmodel import Model, NativeColumns
from replicalab.checkers.linops import OK, UNRECORDED, LinOp
from replicalab.checkers.linsearch import ANY, CAS, NIL, READ, WRITE
from replicalab.history.values import decode_value


def show_value(v: Any) -> str:
    """Return a value as people read it: ``nil``, a probe value as ``seq.writer``, or its
    text."""
    if v is None:
        return "nil"
    if isinstance(v, str):
        pv = decode_value(v)
        return f"{pv.seq}.{pv.writer}" if pv is not None else repr(v) if v == "" else v
    return str(v)


@dataclass(frozen=True)
class Encoded:
    """One part as the register search core takes it (see ``linsearch.search_part``);
    ``ops[i]`` is the LinOp behind op id ``i`` (ops that constrain nothing are left out);
    ``optional[i]`` whether op ``i`` may also not have happened."""

    ops: list[LinOp]
    kinds: list[int]
    a: list[int]
    b: list[int]
    events: list[int]
    init: int
    values: list[Any]
    """Interned value id -> value (id 0 is nil)."""
    optional: list[bool]


def _observed_pruned(kept: list[LinOp]) -> list[LinOp]:
    """Return ``kept`` without the ``info``/``optional`` writes and cas whose new value
    no op that must happen observes (to a fixed point through the ones kept): taking
    effect could only move the register to a state nothing looks at, so leaving them
    out (not happening is one of their options) changes no verdict."""
    seen: set[Any] = set()
    pending = []
    for op in kept:
        if op.outcome == OK:
            if op.f == "read":
                seen.add(op.value)
            elif op.f == "cas" and op.value[0] is not UNRECORDED:
                seen.add(op.value[0])
        elif op.f != "read":
            pending.append(op)
    retained: set[int] = set()
    grew = True
    while grew:
        grew = False
        rest = []
        for op in pending:
            if (op.value[1] if op.f == "cas" else op.value) in seen:
                retained.add(id(op))
                if op.f == "cas" and op.value[0] is not UNRECORDED and op.value[0] not in seen:
                    seen.add(op.value[0])
                    grew = True
            else:
                rest.append(op)
        pending = rest
    return [op for op in kept if op.outcome == OK or id(op) in retained]


class CasRegister(Model):
    """A register with read, write and compare-and-set; the state is its value (None = nil)."""

    name = "cas-register"
    summary = "one register: read, write, cas [from to]"
    ops: ClassVar[tuple[str, ...]] = ("read", "write", "cas")
    reads: ClassVar[frozenset[str]] = frozenset({"read"})
    native = "register"

    def init(self) -> Any:
        """Return None: the register starts empty."""
        return None

    def step(self, state: Any, op: LinOp) -> tuple[bool, Any]:
        """Return (legal, new value): a read must see the value, a cas its expected one."""
        if op.f == "read":
            return state == op.value, state
        if op.f == "write":
            return True, op.value
        expected, new = op.value
        return expected is UNRECORDED or expected == state, new

    def value_problem(self, op: LinOp) -> str | None:
        """Return the problem with a cas that is not ``(expected, new)``, or a read or
        write of a pair (a Jepsen ``independent`` history read as one register)."""
        if op.f == "cas":
            if not (isinstance(op.value, tuple) and len(op.value) == 2):
                return f"a cas needs (expected, new), got {op.value!r}"
        elif isinstance(op.value, tuple):
            return (f"a {op.f} of {op.value!r}; expected one value (a jepsen.independent "
                    "[key value] history? use --model kv)")
        return None

    def why_not(self, op: LinOp) -> str | None:
        """As :meth:`Model.why_not`, with the model to use for a cas or an append."""
        bad = super().why_not(op)
        if bad and op.f == "cas" and "cas" not in self.ops:
            bad += " (use --model cas-register or kv)"
        elif bad and op.f in ("append", "get", "put") and op.f not in self.ops:
            bad += " (use --model kv)"
        return bad

    def file_value(self, f: str, value: Any) -> Any:
        """Return a cas's value as ``(expected, new)``: ``[from to]`` as written, a bare
        value as ``(UNRECORDED, value)`` (the expected value was not recorded)."""
        if f == "cas" and not (isinstance(value, tuple) and len(value) == 2):
            return (UNRECORDED, value)
        return value

    def describe(self, op: LinOp) -> str:
        """Return "read 3", "write 3", "cas 1 -> 2" (values as :func:`show_value`)."""
        if op.f == "cas":
            expected, new = op.value
            return f"cas {show_value(expected)} -> {show_value(new)}"
        return f"{op.f} {show_value(op.value)}"

    empty_is_nil: ClassVar[bool] = False
    """True: "" and nil are one value (kv, as Porcupine's kv model)."""

    def intern_key(self, v: Any) -> Any:
        """Return the value ``v`` is interned as ("" as nil when ``empty_is_nil``)."""
        return None if self.empty_is_nil and v == "" else v

    def encode(self, ops: Sequence[LinOp]) -> Encoded | None:
        """Return the part as ints for the register search core (None when it has ops the
        core does not know: appends). Besides :meth:`prepare`'s drops, ``info`` and
        ``optional`` writes whose value nothing observes are left out
        (:func:`_observed_pruned`)."""
        from replicalab.checkers.linops import event_order, optional_flags

        if any(op.f == "append" for op in ops):
            return None
        kept = _observed_pruned(self.prepare(ops))
        norm = self.intern_key
        # values interned in first-seen order: dict insertion order is the id
        ids: dict[Any, int] = {None: NIL}
        intern = ids.setdefault
        kinds, a, b = [], [], []
        for op in kept:
            f = op.f
            if f == "read":
                kinds.append(READ)
                a.append(intern(norm(op.value), len(ids)))
                b.append(0)
            elif f == "write":
                kinds.append(WRITE)
                a.append(intern(norm(op.value), len(ids)))
                b.append(0)
            else:
                expected, new = op.value
                kinds.append(CAS)
                a.append(ANY if expected is UNRECORDED else intern(norm(expected), len(ids)))
                b.append(intern(norm(new), len(ids)))
        return Encoded(ops=kept, kinds=kinds, a=a, b=b, events=event_order(kept), init=NIL,
                       values=list(ids), optional=optional_flags(kept))


class Register(CasRegister):
    """A read/write register (Jepsen's ``register``)."""

    name = "register"
    summary = "one register: read, write"
    ops: ClassVar[tuple[str, ...]] = ("read", "write")


def _text(v: Any) -> str | None:
    """Return ``v`` as the kv model compares it: nil and "" are one value (a key never
    written; Porcupine's kv model starts every key at "")."""
    return None if v == "" else v


class KV(CasRegister):
    """A map of independent registers (Jepsen's ``independent`` register test, Porcupine's
    kv): read (``get``), write (``put``), cas and append, checked one key at a time.

    ``append`` concatenates its string onto the key's value (a key never written holds
    nil and appends onto ""); nil and "" are one value, so a ``get`` of "" sees a key
    never written, as in Porcupine's kv model."""

    name = "kv"
    summary = "a register per key: read/get, write/put, cas, append (strings)"
    ops: ClassVar[tuple[str, ...]] = ("read", "write", "cas", "append")
    aliases: ClassVar[dict[str, str]] = {"get": "read", "put": "write"}
    keyed = True
    tuples = True
    empty_is_nil = True

    def step(self, state: Any, op: LinOp) -> tuple[bool, Any]:
        """Return (legal, new value) as :class:`CasRegister`, "" being nil, and an append
        legal onto nil or a string."""
        f = op.f
        if f == "append":
            if state is not None and not isinstance(state, str):
                return False, state
            return True, _text((state or "") + op.value)
        if f == "read":
            return state == _text(op.value), state
        if f == "write":
            return True, _text(op.value)
        expected, new = op.value
        return expected is UNRECORDED or _text(expected) == state, _text(new)

    def value_problem(self, op: LinOp) -> str | None:
        """Return the problem with a cas that is not a pair or an append of no string."""
        if op.f == "append" and not isinstance(op.value, str):
            return f"an append needs a string, got {op.value!r}"
        return super().value_problem(op)

    def useless(self, relaxed: Sequence[LinOp], constrained: Sequence[LinOp]) -> set[int]:
        """Return the relaxed appends whose string no value observed contains (no read of
        the constrained ops, no cas's expected value): placing one could only put it into
        every value read until the next write, and no read has it."""
        seen = [v for o in constrained if o.f == "read" and isinstance(v := o.value, str)]
        seen += [e for o in (*relaxed, *constrained) if o.f == "cas"
                 and isinstance(e := o.value[0], str)]
        text = "\0".join(seen)
        return {o.index for o in relaxed
                if o.f == "append" and o.value and o.value not in text}

    def native_machine(self, ops: Sequence[LinOp]) -> str:
        """Return the native machine for ``ops``: ``register``, or ``append`` when there
        are appends."""
        return "append" if any(op.f == "append" for op in ops) else "register"

    def native_columns(self, ops: Sequence[LinOp]) -> NativeColumns:
        """Return the ops as the ``append`` machine takes them: kind = position in
        ``ops``, ``a`` the value id (a cas's expected one, -1 unrecorded), ``b`` a cas's
        new value id; ``table[id]`` the string behind an id (0: nil; False: a value that is
        not a string)."""
        ids: dict[Any, int] = {None: 0}
        intern = ids.setdefault
        kind_of = {f: i for i, f in enumerate(self.ops)}
        kinds, a, b = [], [], []
        for op in ops:
            kinds.append(kind_of[op.f])
            if op.f == "cas":
                expected, new = op.value
                a.append(-1 if expected is UNRECORDED else intern(_text(expected), len(ids)))
                b.append(intern(_text(new), len(ids)))
            else:
                a.append(intern(_text(op.value), len(ids)))
                b.append(0)
        # the machine appends onto strings only: any other value is False ("not a string")
        return NativeColumns(kinds, a, b,
                             [v if v is None or isinstance(v, str) else False for v in ids])

"""Linearizability models: what a sequential object does, one small pure class per type.

A model has four parts, as Porcupine's: ``init()`` the initial state, ``step(state, op)``
-> (legal, new state), ``partition(ops)`` -> independent parts checked one by one
(P-compositionality), and ``describe(op)`` -> the op in words. The three shipped models
(``register``, ``cas-register``, ``kv``) also have ``encode(ops)``: the part as small ints
for the fast search core (:func:`replicalab.checkers.linsearch.search_part`), which knows
their semantics; a model without ``encode`` is searched through its ``step``.

Operations are :class:`LinOp`. Jepsen's semantics are applied when a part is prepared
(:func:`prepare`), not by the models: a ``fail`` op never happened (dropped); a read that
did not complete ``ok`` constrains nothing (dropped); an ``info`` op may take effect at any
time after its invoke, or never.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from replicalab.checkers.linsearch import ANY, CAS, NIL, READ, WRITE
from replicalab.history import decode_value


class _Unknown:
    """The expected value of a cas that was not recorded (the cas then acts as a write)."""

    _it: ClassVar[_Unknown | None] = None

    def __new__(cls) -> _Unknown:
        if cls._it is None:
            cls._it = super().__new__(cls)
        return cls._it

    def __repr__(self) -> str:
        return "?"

    def __reduce__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
"""A cas's expected value when the history did not record it: legal in every state."""


@dataclass(frozen=True, slots=True)
class LinOp:
    """One operation as the checker sees it.

    ``index`` identifies it (the History row or the file line); ``f`` is ``read``,
    ``write`` or ``cas``; ``key`` is None for a single register; ``value`` is the value
    read (None = nil), the value written, or a cas's ``(expected, new)``; ``outcome`` is
    ``ok``, ``fail`` or ``info``; times are ns (``complete_ns`` is ignored for ``info``).
    """

    index: int
    process: int
    f: str
    key: Any
    value: Any
    outcome: str
    invoke_ns: int
    complete_ns: int


@dataclass(frozen=True)
class Encoded:
    """One part as the search core takes it (see ``linsearch.search_part``); ``ops[i]`` is
    the LinOp behind op id ``i`` (ops that constrain nothing are left out)."""

    ops: list[LinOp]
    kinds: list[int]
    a: list[int]
    b: list[int]
    events: list[int]
    init: int
    values: list[Any]
    """Interned value id -> value (id 0 is nil)."""


class Model(Protocol):
    """What the checker needs of a data type."""

    name: str

    def init(self) -> Any:
        """Return the initial state."""

    def step(self, state: Any, op: LinOp) -> tuple[bool, Any]:
        """Return (whether ``op`` is legal in ``state``, the state after it)."""

    def partition(self, ops: Sequence[LinOp]) -> list[tuple[Any, list[LinOp]]]:
        """Return the independent parts of ``ops`` as (key, ops) pairs."""

    def describe(self, op: LinOp) -> str:
        """Return ``op`` in a few words ("read 3", "cas 1 -> 2")."""


def show_value(v: Any) -> str:
    """Return a value as people read it: ``nil``, a probe value as ``seq.writer``, or its
    text."""
    if v is None:
        return "nil"
    if isinstance(v, str):
        pv = decode_value(v)
        return f"{pv.seq}.{pv.writer}" if pv is not None else v
    return str(v)


def event_order(ops: Sequence[LinOp]) -> list[int]:
    """Return the events of ``ops`` (ids = positions) in time order: ``2 i`` for an invoke,
    ``2 i + 1`` for the completion of an ``ok`` op (``info`` ops have none); an invoke
    sorts before a completion at the same time (touching ops are concurrent)."""
    evs = []
    add = evs.append
    for i, op in enumerate(ops):
        t = op.invoke_ns
        add((t, 0, 2 * i))
        if op.outcome == "ok":
            c = op.complete_ns
            add((c if c > t else t, 1, 2 * i + 1))
    evs.sort()
    return [e[2] for e in evs]


def prepare(ops: Sequence[LinOp]) -> list[LinOp]:
    """Return the ops that constrain the search, in invoke order: ``fail`` ops and reads
    that did not complete ``ok`` are dropped (Jepsen: they did not happen / saw nothing)."""
    kept = [op for op in ops
            if op.outcome != "fail" and not (op.f == "read" and op.outcome != "ok")]
    kept.sort(key=lambda o: (o.invoke_ns, o.index))
    return kept


class CasRegister:
    """A register with read, write and compare-and-set; the state is its value (None = nil)."""

    name = "cas-register"
    allowed: ClassVar[tuple[str, ...]] = ("read", "write", "cas")

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
        return expected is UNKNOWN or expected == state, new

    def partition(self, ops: Sequence[LinOp]) -> list[tuple[Any, list[LinOp]]]:
        """Return one part: a single register (raises ValueError if ops name several keys
        or use an op the model does not have)."""
        self._check_ops(ops)
        keys = {op.key for op in ops}
        if len(keys) > 1:
            raise ValueError(f"the history has {len(keys)} keys; the {self.name} model checks "
                             "one register: use --model kv")
        return [(next(iter(keys)) if keys else None, list(ops))]

    def _check_ops(self, ops: Sequence[LinOp]) -> None:
        for op in ops:
            if op.f not in self.allowed:
                raise ValueError(f"op {op.index} is a {op.f}: the {self.name} model has "
                                 f"{', '.join(self.allowed)}"
                                 + (" (use --model cas-register or kv)" if op.f == "cas" else ""))
            if op.f == "cas" and not (isinstance(op.value, tuple) and len(op.value) == 2):
                raise ValueError(f"op {op.index}: a cas needs (expected, new), got {op.value!r}")

    def describe(self, op: LinOp) -> str:
        """Return "read 3", "write 3", "cas 1 -> 2" (values as :func:`show_value`)."""
        if op.f == "cas":
            expected, new = op.value
            return f"cas {show_value(expected)} -> {show_value(new)}"
        return f"{op.f} {show_value(op.value)}"

    def encode(self, ops: Sequence[LinOp]) -> Encoded:
        """Return the part as ints for the search core. Besides :func:`prepare`'s drops, an
        ``info`` write or cas whose new value no read or cas ever saw is left out: taking
        effect could only change the state to one nothing observed, so leaving it out
        never turns a linearizable history into a non-linearizable one or back."""
        kept = prepare(ops)
        # what the ops that must happen observe, then (to a fixed point) what the info
        # ops kept because their value is observed expect in turn
        seen: set[Any] = set()
        pending = []
        for op in kept:
            if op.outcome == "ok":
                if op.f == "read":
                    seen.add(op.value)
                elif op.f == "cas" and op.value[0] is not UNKNOWN:
                    seen.add(op.value[0])
            elif op.f != "read":
                pending.append(op)
        retained: list[LinOp] = []
        grew = True
        while grew:
            grew = False
            rest = []
            for op in pending:
                if (op.value[1] if op.f == "cas" else op.value) in seen:
                    retained.append(op)
                    if op.f == "cas" and op.value[0] is not UNKNOWN and op.value[0] not in seen:
                        seen.add(op.value[0])
                        grew = True
                else:
                    rest.append(op)
            pending = rest
        keep = {id(op) for op in retained}
        kept = [op for op in kept if op.outcome == "ok" or id(op) in keep]
        # values interned in first-seen order: dict insertion order is the id
        ids: dict[Any, int] = {None: NIL}
        intern = ids.setdefault
        kinds, a, b = [], [], []
        for op in kept:
            f = op.f
            if f == "read":
                kinds.append(READ)
                a.append(intern(op.value, len(ids)))
                b.append(0)
            elif f == "write":
                kinds.append(WRITE)
                a.append(intern(op.value, len(ids)))
                b.append(0)
            else:
                expected, new = op.value
                kinds.append(CAS)
                a.append(ANY if expected is UNKNOWN else intern(expected, len(ids)))
                b.append(intern(new, len(ids)))
        return Encoded(ops=kept, kinds=kinds, a=a, b=b, events=event_order(kept), init=NIL,
                       values=list(ids))


class Register(CasRegister):
    """A read/write register (Jepsen's ``register``)."""

    name = "register"
    allowed: ClassVar[tuple[str, ...]] = ("read", "write")


class KV(CasRegister):
    """A map of independent cas registers (Jepsen's ``independent`` register test):
    checked one key at a time."""

    name = "kv"

    def partition(self, ops: Sequence[LinOp]) -> list[tuple[Any, list[LinOp]]]:
        """Return one part per key, keys in first-seen order."""
        self._check_ops(ops)
        parts: dict[Any, list[LinOp]] = {}
        for op in ops:
            parts.setdefault(op.key, []).append(op)
        return list(parts.items())


MODELS: dict[str, Model] = {m.name: m for m in (Register(), CasRegister(), KV())}


def get_model(name: str | Model) -> Model:
    """Return the model named ``name`` (or ``name`` itself if it is a model); raises
    ValueError naming the known ones."""
    if not isinstance(name, str):
        return name
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}: use one of {', '.join(MODELS)}") from None

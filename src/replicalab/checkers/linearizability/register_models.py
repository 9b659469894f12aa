"""The register models: ``register``, ``cas-register`` and ``kv`` (pure, no I/O).

Their parts go to the register search core
(:func:`replicalab.checkers.linearizability.search.search_part` or its native twin), which
knows their semantics, through :meth:`CasRegister.encode`: the part as small ints. ``kv``
also takes ``append`` (Porcupine's key-value model): string concatenation onto the key's
value; a part with appends goes to the generic search (natively the ``append`` machine),
since its states are the strings built.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any, ClassVar, NamedTuple

from replicalab.checkers.linearizability.model import Model, NativeColumns
from replicalab.checkers.linearizability.ops import OK, UNRECORDED, LinOp, who
from replicalab.checkers.linearizability.search import ANY, CAS, NIL, READ, WRITE
from replicalab.history.read import edn_text


def show_value(v: Any) -> str:
    """Return a value as people read it: ``nil``, a probe value as ``seq.writer``, or its
    text."""
    if v is None:
        return "nil"
    if isinstance(v, str):
        from replicalab.history.values import decode_value  # a register of ints needs none

        pv = decode_value(v)
        return f"{pv.seq}.{pv.writer}" if pv is not None else '""' if v == "" else v
    return str(v)


class Encoded(NamedTuple):
    """One part as the register search core takes it (see ``search.search_part``);
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
                return f"a cas needs (expected, new), got {edn_text(op.value)}"
        elif isinstance(op.value, tuple):
            return (f"a {op.f} of {edn_text(op.value)}; expected one value (a jepsen.independent "
                    "[key value] history? use {model} kv)")
        return None

    def why_not(self, op: LinOp) -> str | None:
        """As :meth:`Model.why_not`, with the model to use for a cas or an append."""
        bad = super().why_not(op)
        if bad and op.f == "cas" and "cas" not in self.ops:
            bad += " (use {model} cas-register or kv)"
        elif bad and op.f in ("append", "get", "put") and op.f not in self.ops:
            bad += " (use {model} kv)"
        return bad

    def file_value(self, f: str, value: Any) -> Any:
        """Return a cas's value as ``(expected, new)``: ``[from to]`` as written, a bare
        value as ``(UNRECORDED, value)`` (the expected value was not recorded)."""
        if f == "cas" and not (isinstance(value, tuple) and len(value) == 2):
            return (UNRECORDED, value)
        return value

    def _unwritten(self, ops: Sequence[LinOp]) -> LinOp | None:
        """Return the first op that completed ``ok`` needing a value (a read's, a cas's
        expected one) that no write or cas of its key began to write by the time it
        ended."""
        norm = self.intern_key
        first: dict[tuple[Any, Any], int] = {}  # (key, value) -> earliest invoke writing it
        def pair(o: LinOp) -> bool:  # what the checks later refuse is left to them
            return isinstance(o.value, tuple) and len(o.value) == 2

        for o in ops:
            if o.outcome != "fail" and (o.f == "write" or (o.f == "cas" and pair(o))):
                k = (o.key, norm(o.value[1] if o.f == "cas" else o.value))
                if k not in first or o.invoke_ns < first[k]:
                    first[k] = o.invoke_ns
        for o in sorted(ops, key=lambda o: (o.invoke_ns, o.index)):
            if o.outcome != "ok" or o.f not in ("read", "cas") or (o.f == "cas" and not pair(o)):
                continue
            v = norm(o.value if o.f == "read" else o.value[0])
            if v is None or v is UNRECORDED:
                continue
            # a write invoked when o completed may still have come first (they touch)
            if first.get((o.key, v), o.complete_ns + 1) > o.complete_ns:
                return o
        return None

    def _stale(self, ops: Sequence[LinOp]) -> list[LinOp] | None:
        """Return [w, r]: a read r of a value v and a write (or cas) w of another value
        that began after every write of v that could take effect before r completed
        (those invoked by then) completed (none of those may still take effect: all
        ``ok``) and completed before r began — v cannot come back before r; or None. One
        sweep of the reads by invoke over the writes by completion. (Counting the writes
        of v invoked after r ended too, even ``info`` ones, left most stale reads of
        Jepsen's etcd histories to the search.)"""
        norm = self.intern_key
        writers: dict[tuple[Any, Any], list[LinOp]] = {}
        done = []
        for o in ops:
            if o.outcome == "fail" or o.f not in ("write", "cas"):
                continue
            if o.f == "cas" and not (isinstance(o.value, tuple) and len(o.value) == 2):
                continue
            v = norm(o.value[1] if o.f == "cas" else o.value)
            writers.setdefault((o.key, v), []).append(o)
            if o.outcome == "ok":
                done.append((o.complete_ns, o, v))
        done.sort(key=lambda d: d[0])
        reads = sorted((o for o in ops if o.f == "read" and o.outcome == "ok"),
                       key=lambda o: o.invoke_ns)
        # per key, the two latest-invoked writes of different values completed so far
        best: dict[Any, list[tuple[LinOp, Any]]] = {}
        i = 0
        for r in reads:
            while i < len(done) and done[i][0] < r.invoke_ns:
                _, w, v = done[i]
                top = [t for t in best.get(w.key, []) if t[1] != v]
                top.append((w, v))
                top.sort(key=lambda t: -t[0].invoke_ns)
                best[w.key] = top[:2]
                i += 1
            v = norm(r.value)
            of_v = [x for x in writers.get((r.key, v), ()) if x.invoke_ns <= r.complete_ns]
            if any(x.outcome != "ok" for x in of_v):
                continue
            last_v = max((x.complete_ns for x in of_v), default=None)
            for w, wv in best.get(r.key, []):
                if wv != v and (last_v is None or w.invoke_ns > last_v):
                    return [w, r]
        return None

    def refutes(self, ops: Sequence[LinOp]) -> bool:
        """Return whether :meth:`refute` finds something (a pass and a sweep)."""
        return self._unwritten(ops) is not None or self._stale(ops) is not None

    def refute(self, ops: Sequence[LinOp]) -> list[LinOp] | None:
        """Return a counterexample found without a search (a search would have to try
        every order of everything before it to fail): a read (or a cas) of a value no
        write began to write before it ended; or a stale read and the write that
        certainly replaced its value (:meth:`_stale`)."""
        op = self._unwritten(ops)
        return [op] if op is not None else self._stale(ops)

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
        from replicalab.checkers.linearizability.ops import event_order, optional_flags

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



def _resets_before(ops: Sequence[LinOp]) -> Callable[[LinOp], float]:
    """Return ``reset_after(r)``: the latest time (ns) at which a write or cas that may take
    effect before ``r`` completes can still take effect (``-inf`` when none can): a reset
    may fall between an operation ``x`` and ``r`` exactly when ``x`` began before it."""
    resets = sorted((o for o in ops if o.f in ("write", "cas") and o.outcome != "fail"),
                    key=lambda o: o.invoke_ns)
    starts = [o.invoke_ns for o in resets]
    # an ok reset takes effect by its completion, any other may take effect at any later time
    latest = list(accumulate((float(o.complete_ns) if o.outcome == OK else math.inf
                              for o in resets), max, initial=-math.inf))

    def reset_after(r: LinOp) -> float:
        return latest[bisect_left(starts, r.complete_ns)]
    return reset_after

def _brief(v: Any, limit: int = 48) -> str:
    """Return a value for a sentence: a long string by its two ends."""
    text = show_value(v)
    if len(text) <= limit:
        return text
    return f"{text[:limit // 2 - 2]}…{text[-(limit // 2 - 2):]} ({len(text)} characters)"


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
            return f"an append needs a string, got {edn_text(op.value)}"
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

    def refutes(self, ops: Sequence[LinOp]) -> bool:
        """Return whether the history has appends (the patterns :meth:`refute` knows) or
        a value read that nothing wrote."""
        return any(o.f == "append" for o in ops) or super().refutes(ops)

    def refute(self, ops: Sequence[LinOp]) -> list[LinOp] | None:
        """Return a counterexample found without a search: a value read that nothing
        wrote (:meth:`CasRegister.refute`); in a part with appends, an append that
        completed before a read began whose value lacks its string, or two reads one
        after the other where the first is not the start of the second — when no write
        or cas could have put a new value there in between."""
        if not any(o.f == "append" for o in ops):
            return super().refute(ops)
        reset_after = _resets_before(ops)
        reads = sorted((o for o in ops if o.f == "read" and o.outcome == "ok"
                        and isinstance(o.value, str | None)), key=lambda o: o.complete_ns)
        appends = sorted((o for o in ops if o.f == "append" and o.outcome == "ok"
                          and o.value), key=lambda o: o.complete_ns)
        read_ends = [o.complete_ns for o in reads]
        append_ends = [o.complete_ns for o in appends]
        latest_start = list(accumulate((o.invoke_ns for o in reads), max, initial=-math.inf))

        # Only the last operations before r need checking: an append or read x that
        # completed before some read r' began that itself completed before r began is
        # covered by the pairs (x, r') and (r', r) — containment and prefixes are
        # transitive, and a reset between x and r' or r' and r is one between x and r.
        # That keeps the work near linear where a pairwise scan was quadratic.
        by_start = sorted(reads, key=lambda o: o.invoke_ns)
        for r in by_start:
            before = bisect_left(read_ends, r.invoke_ns)
            since = latest_start[before]
            text = r.value or ""
            reset = reset_after(r)
            for a in appends[bisect_left(append_ends, since):
                             bisect_left(append_ends, r.invoke_ns)]:
                if a.value not in text and reset < a.invoke_ns:
                    return [a, r]
        for r2 in by_start:
            before = bisect_left(read_ends, r2.invoke_ns)
            reset = reset_after(r2)
            second = r2.value or ""
            for r1 in reads[bisect_left(read_ends, latest_start[before]):before]:
                if not second.startswith(r1.value or "") and reset < r1.invoke_ns:
                    return [r1, r2]
        return None

    def headline(self, ce: Sequence[LinOp], part: Sequence[LinOp], clock: Any) -> str | None:
        """Return the sentence for the append patterns :meth:`refute` finds."""

        if len(ce) != 2 or not any(o.f == "append" for o in part):
            return None
        x, r = sorted(ce, key=lambda o: (o.complete_ns, o.index))
        if r.f != "read" or r.outcome != "ok":
            return None
        did = f"{who(r.process)} read {_brief(r.value)} at {clock.point(r.invoke_ns)}"
        tail = "and no write or cas could have replaced the value in between"
        if x.f == "append" and x.value not in (r.value or ""):
            return (f"{did} although the append of {edn_text(x.value)} by {who(x.process)} "
                    f"completed at {clock.point(x.complete_ns)}, before it began: the value read "
                    f"lacks it, {tail}.")
        if x.f == "read" and not (r.value or "").startswith(x.value or ""):
            return (f"{did} although {who(x.process)} had read {_brief(x.value)} "
                    f"(completed at {clock.point(x.complete_ns)}), which it does not start "
                    f"with: appends only lengthen a value, {tail}.")
        return None

    def viability(self, ops: Sequence[LinOp]) -> Any:
        """Return the pruning of a part with appends: appends only lengthen a value, so
        a state is viable only if every read that must still happen reads a value that
        starts with it, or with a value a write or cas still to come may put there (a
        read of nil or "" needs the empty value). None for parts without appends."""
        if not any(o.f == "append" for o in ops):
            return None
        resets = []  # (position, the string it puts there): only strings can be read
        for i, o in enumerate(ops):
            if o.f in ("write", "cas"):
                w = _text(o.value[1] if o.f == "cas" else o.value)
                if isinstance(w, str | None):
                    resets.append((i, w or ""))
        reads = []
        for i, o in enumerate(ops):
            if o.f == "read" and o.outcome == "ok" and isinstance(o.value, str | None):
                text = o.value or ""
                reads.append((i, text, [j for j, w in resets if text.startswith(w)]))

        def viable(state: Any, done: int) -> bool:
            s = state or ""
            if not isinstance(s, str):
                return True
            for i, text, resetters in reads:
                if done >> i & 1 or text.startswith(s):
                    continue
                if not any(not done >> j & 1 for j in resetters):
                    return False
            return True

        return viable

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

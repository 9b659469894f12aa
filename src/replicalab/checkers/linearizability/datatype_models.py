"""More linearizability models, as Knossos ships them: ``set``, ``fifo-queue``, ``counter``
and ``mutex`` (pure, no I/O). Each is one class; each names a native machine of
``replicalab_native`` that runs the same step (:meth:`native_columns` is its input).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from replicalab.checkers.linearizability.model import Model, NativeColumns
from replicalab.checkers.linearizability.ops import INFO, UNRECORDED, LinOp, who
from replicalab.checkers.linearizability.register_models import show_value
from replicalab.history.read import edn_text


def _elements(v: Any) -> frozenset[Any] | None:
    """Return a set read as a frozenset (nil: empty), or None if it is not a collection."""
    if v is None:
        return frozenset()
    if isinstance(v, frozenset | set | tuple | list):
        return frozenset(v)
    return None


class SetModel(Model):
    """A set: ``add`` an element, ``read`` the whole set (Knossos's set). The state is a
    frozenset; a read must return exactly the elements added so far."""

    name = "set"
    summary = "a set: add x, read (the whole set, e.g. #{1 2})"
    ops: ClassVar[tuple[str, ...]] = ("add", "read")
    reads: ClassVar[frozenset[str]] = frozenset({"read"})
    keyed = True
    native = "set"

    def init(self) -> frozenset[Any]:
        """Return the empty set."""
        return frozenset()

    def step(self, state: frozenset[Any], op: LinOp) -> tuple[bool, frozenset[Any]]:
        """Return (legal, new set): an add always, a read when it saw the set."""
        if op.f == "add":
            return True, state | {op.value}
        return _elements(op.value) == state, state

    def value_problem(self, op: LinOp) -> str | None:
        """Return the problem with a read that is not a collection or an unhashable add."""
        if op.f == "read" and _elements(op.value) is None:
            return f"a set read returns a collection (#{{...}} or [...]), got {edn_text(op.value)}"
        try:
            hash(op.value)
        except TypeError:
            return f"an element must be hashable, got {edn_text(op.value)}"
        return None

    def useless(self, relaxed: Sequence[LinOp], constrained: Sequence[LinOp]) -> set[int]:
        """Return the relaxed adds of an element no constrained read saw: placed before a
        read, it would be in it (a set only grows)."""
        seen: set[Any] = set()
        for o in constrained:
            if o.f == "read":
                seen |= _elements(o.value) or frozenset()
        return {o.index for o in relaxed if o.f == "add" and o.value not in seen}

    def describe(self, op: LinOp) -> str:
        """Return "add 3" or "read #{1 2 3}"."""
        if op.f == "add":
            return f"add {show_value(op.value)}"
        items = sorted(_elements(op.value) or (), key=repr)
        return "read #{" + " ".join(show_value(x) for x in items) + "}"

    def native_columns(self, ops: Sequence[LinOp]) -> NativeColumns:
        """Return kind 0 add / 1 read; ``a`` the element id (add) or the set id (read);
        ``table[set id]`` the sorted element ids of that set."""
        elem: dict[Any, int] = {}
        sets: dict[tuple[int, ...], int] = {}
        table: list[list[int]] = []
        kinds, a = [], []
        for op in ops:
            if op.f == "add":
                kinds.append(0)
                a.append(elem.setdefault(op.value, len(elem)))
            else:
                ids = tuple(sorted(elem.setdefault(x, len(elem))
                                   for x in _elements(op.value) or ()))
                sid = sets.get(ids)
                if sid is None:
                    sid = sets[ids] = len(table)
                    table.append(list(ids))
                kinds.append(1)
                a.append(sid)
        return NativeColumns(kinds, a, [0] * len(ops), table)


class FifoQueue(Model):
    """A FIFO queue: ``enqueue`` a value, ``dequeue`` the oldest (nil when empty), as
    Knossos's fifo-queue. The state is a tuple, oldest first. A dequeue whose outcome is
    unknown (``info``) removed the oldest value if it happened, whatever it was."""

    name = "fifo-queue"
    summary = "a FIFO queue: enqueue x, dequeue (returns the oldest, nil when empty)"
    ops: ClassVar[tuple[str, ...]] = ("enqueue", "dequeue")
    keyed = True
    native = "fifo-queue"

    def init(self) -> tuple[Any, ...]:
        """Return the empty queue."""
        return ()

    def step(self, state: tuple[Any, ...], op: LinOp) -> tuple[bool, tuple[Any, ...]]:
        """Return (legal, new queue)."""
        if op.f == "enqueue":
            return True, (*state, op.value)
        if op.outcome == INFO or op.value is UNRECORDED:
            return True, state[1:]
        if op.value is None:
            return not state, state
        return bool(state) and state[0] == op.value, state[1:]

    def value_problem(self, op: LinOp) -> str | None:
        """Return the problem with an enqueue of nil (a dequeue's nil means empty)."""
        if op.f == "enqueue" and op.value is None:
            return "an enqueue of nil cannot be told from a dequeue of an empty queue"
        return None

    @staticmethod
    def _taken(op: LinOp) -> bool:
        """Whether ``op`` is a dequeue known to have returned a value."""
        return (op.f == "dequeue" and op.outcome == "ok" and op.value is not None
                and op.value is not UNRECORDED)

    def refute(self, ops: Sequence[LinOp]) -> list[LinOp] | None:
        """Return a counterexample found without a search, for values enqueued at most
        once: a dequeue of a value no enqueue began before it ended; a value dequeued
        twice; or two values dequeued in the opposite order of their enqueues (x's
        enqueue completed before y's began, y's dequeue completed before x's began)."""
        enq: dict[Any, list[LinOp]] = {}
        deq: dict[Any, list[LinOp]] = {}
        for o in ops:
            if o.f == "enqueue" and o.outcome != "fail":
                enq.setdefault(o.value, []).append(o)
            elif self._taken(o):
                deq.setdefault(o.value, []).append(o)
        unique = []
        for v, ds in deq.items():
            es = enq.get(v, [])
            if len(es) > 1:
                continue  # a value enqueued again: no simple pattern
            ds.sort(key=lambda o: (o.invoke_ns, o.index))
            early = [d for d in ds if not es or es[0].invoke_ns >= d.complete_ns]
            if early:
                return [early[0]]
            if len(ds) > 1:
                return ds[:2]
            if es[0].outcome == "ok":
                unique.append((es[0], ds[0]))
        # opposite order: sweep the dequeues by completion, keeping the one whose
        # enqueue began latest among those completed so far
        unique.sort(key=lambda p: p[1].complete_ns)
        by_invoke = sorted(unique, key=lambda p: p[1].invoke_ns)
        best: tuple[LinOp, LinOp] | None = None
        i = 0
        for ex, dx in by_invoke:
            while i < len(unique) and unique[i][1].complete_ns < dx.invoke_ns:
                if best is None or unique[i][0].invoke_ns > best[0].invoke_ns:
                    best = unique[i]
                i += 1
            if best is not None and best[0].invoke_ns > ex.complete_ns:
                return [best[1], dx]
        return None

    def useless(self, relaxed: Sequence[LinOp], constrained: Sequence[LinOp]) -> set[int]:
        """Return the relaxed enqueues of a value no constrained dequeue returned (placed,
        it could only stand in front of one), the relaxed dequeues of such values and of
        nil: they could not help the constrained ops."""
        wanted = {o.value for o in constrained if self._taken(o)}
        return {o.index for o in relaxed
                if (o.f == "enqueue" and o.value not in wanted)
                or (o.f == "dequeue" and o.outcome == "optional"
                    and (o.value is None or o.value not in wanted))}

    def headline(self, ce: Sequence[LinOp], part: Sequence[LinOp], clock: Any) -> str | None:
        """Return the sentence for the patterns :meth:`refute` finds."""

        ds = sorted((o for o in ce if self._taken(o)), key=lambda o: (o.invoke_ns, o.index))
        if len(ce) == 1 and ds:
            d = ds[0]
            return (f"{who(d.process)} dequeued {show_value(d.value)} at "
                    f"{clock.point(d.invoke_ns)}, which no enqueue began before it ended.")
        if len(ce) == 2 and len(ds) == 2:
            a, b = ds
            if a.value == b.value:
                return (f"{who(b.process)} dequeued {show_value(b.value)} at "
                        f"{clock.point(b.invoke_ns)} although {who(a.process)} had dequeued "
                        f"it already (at {clock.point(a.invoke_ns)}): a FIFO queue hands each "
                        "value out once.")
            enq = {o.value: o for o in part if o.f == "enqueue" and o.outcome == "ok"}
            ey, ex = enq.get(a.value), enq.get(b.value)
            if ex is not None and ey is not None and ex.complete_ns < ey.invoke_ns:
                return (f"{who(b.process)} dequeued {show_value(b.value)} at "
                        f"{clock.point(b.invoke_ns)} after {who(a.process)} had dequeued "
                        f"{show_value(a.value)} (completed at {clock.point(a.complete_ns)}), "
                        f"although {show_value(b.value)} was enqueued first (completed at "
                        f"{clock.point(ex.complete_ns)}, before the enqueue of "
                        f"{show_value(a.value)} began at {clock.point(ey.invoke_ns)}): a FIFO "
                        "queue hands values out in the order they went in.")
        return None

    def describe(self, op: LinOp) -> str:
        """Return "enqueue 3", "dequeue 3", "dequeue (empty)" or "dequeue ?"."""
        if op.f == "enqueue":
            return f"enqueue {show_value(op.value)}"
        if op.outcome == INFO or op.value is UNRECORDED:
            return "dequeue ?"
        return "dequeue (empty)" if op.value is None else f"dequeue {show_value(op.value)}"

    def native_columns(self, ops: Sequence[LinOp]) -> NativeColumns:
        """Return kind 0 enqueue / 1 dequeue; ``a`` the value id (0: nil, -1: unknown)."""
        ids: dict[Any, int] = {None: 0}
        kinds, a = [], []
        for op in ops:
            kinds.append(0 if op.f == "enqueue" else 1)
            if op.f == "dequeue" and (op.outcome == INFO or op.value is UNRECORDED):
                a.append(-1)
            else:
                a.append(ids.setdefault(op.value, len(ids)))
        return NativeColumns(kinds, a, [0] * len(ops))


class Counter(Model):
    """A counter: ``add`` an integer (negative too), ``read`` the total (Jepsen's counter,
    checked for linearizability). It starts at 0."""

    name = "counter"
    summary = "a counter from 0: add n, read"
    ops: ClassVar[tuple[str, ...]] = ("add", "read")
    reads: ClassVar[frozenset[str]] = frozenset({"read"})
    keyed = True
    native = "counter"

    def init(self) -> int:
        """Return 0."""
        return 0

    def step(self, state: int, op: LinOp) -> tuple[bool, int]:
        """Return (legal, new total)."""
        if op.f == "add":
            return True, state + op.value
        return state == op.value, state

    def value_problem(self, op: LinOp) -> str | None:
        """Return the problem with a value that is not an integer."""
        if isinstance(op.value, bool) or not isinstance(op.value, int):
            return f"a counter's {op.f} needs an integer, got {edn_text(op.value)}"
        if not -2**62 < op.value < 2**62:
            return f"a counter's {op.f} of {op.value} is out of range (|n| < 2^62)"
        return None

    def describe(self, op: LinOp) -> str:
        """Return "add 3" or "read 7"."""
        return f"{op.f} {op.value}"

    def headline(self, ce: Sequence[LinOp], part: Sequence[LinOp], clock: Any) -> str | None:
        """Return the sentence for a read no total of the adds could give: the adds done
        before it began count for sure, those that overlap it or whose outcome is unknown
        may or may not (a failed add never happened)."""
        for r in sorted((o for o in ce if o.f == "read" and o.outcome == "ok"),
                        key=lambda o: (o.invoke_ns, o.index)):
            adds = [a for a in part if a.f == "add" and a.outcome != "fail"
                    and a.invoke_ns <= r.complete_ns]
            done = [a.value for a in adds if a.outcome == "ok" and a.complete_ns < r.invoke_ns]
            maybe = [a.value for a in adds if not (a.outcome == "ok"
                                                   and a.complete_ns < r.invoke_ns)]
            sure = sum(done)
            if len(maybe) <= 12:  # every subset: the totals exactly
                totals = {sure}
                for v in maybe:
                    totals |= {t + v for t in totals}
                if r.value in totals:
                    continue
                could = (" or ".join(str(t) for t in sorted(totals)) if len(totals) <= 6
                         else f"between {min(totals)} and {max(totals)} (not every value)")
            else:
                low = sure + sum(v for v in maybe if v < 0)
                high = sure + sum(v for v in maybe if v > 0)
                if low <= r.value <= high:
                    continue
                could = f"between {low} and {high}"
            basis = (f"the {len(done)} add{'s' if len(done) != 1 else ''} completed before "
                     f"it began total{'s' if len(done) == 1 else ''} {sure}" if done else
                     "no add had completed before it began")
            some = "the 1 add" if len(maybe) == 1 else f"any of the {len(maybe)} adds"
            extra = (f", and with {some} that may have taken effect by its end the total "
                     f"could only be {could}" if maybe else
                     ", and no other add began before it ended")
            return (f"{who(r.process)} read {r.value} at {clock.point(r.invoke_ns)}, a total "
                    f"no set of adds gives: {basis}{extra}.")
        return None

    def native_columns(self, ops: Sequence[LinOp]) -> NativeColumns:
        """Return kind 0 add / 1 read; ``a`` the integer."""
        return NativeColumns([0 if op.f == "add" else 1 for op in ops],
                             [op.value for op in ops], [0] * len(ops))


class Mutex(Model):
    """A lock: ``acquire`` when free, ``release`` when held (Knossos's mutex; owners are
    not tracked). It starts free."""

    name = "mutex"
    summary = "a lock: acquire (when free), release (when held)"
    ops: ClassVar[tuple[str, ...]] = ("acquire", "release")
    keyed = True
    native = "mutex"

    def init(self) -> bool:
        """Return False: free."""
        return False

    def step(self, state: bool, op: LinOp) -> tuple[bool, bool]:
        """Return (legal, held)."""
        if op.f == "acquire":
            return not state, True
        return state, False

    def describe(self, op: LinOp) -> str:
        """Return "acquire" or "release"."""
        return op.f

    def native_columns(self, ops: Sequence[LinOp]) -> NativeColumns:
        """Return kind 0 acquire / 1 release."""
        return NativeColumns([0 if op.f == "acquire" else 1 for op in ops], [0] * len(ops),
                             [0] * len(ops))

"""Linearizability checking (pure, no I/O).

``check(ops, model, timeout_s=60)`` splits a history into independent parts (one per key
for a keyed model: P-compositionality), searches each with Wing–Gong–Lowe's algorithm
(:mod:`replicalab.checkers.linearizability.search`) and returns a :class:`CheckResult`: a
:class:`~replicalab.checkers.linearizability.ops.Verdict` (linearizable, not, or unknown when the
deadline came first), and per part the linearization found (or the longest linearizable
prefix), a 1-minimal counterexample and a plain-language explanation
(:mod:`replicalab.checkers.linearizability.explain`). Models are in
:mod:`replicalab.checkers.linearizability.registry`; a name is resolved there once, at the entry.

Semantics are Jepsen's: an ``ok`` op took effect inside its interval, a ``fail`` op never
did, an ``info`` op (or one that never completed) may have taken effect at any time after
its invoke or never, and reads that did not complete ``ok`` constrain nothing.

Memory is bounded: each part's memo cache holds at most ``cache_bytes`` worth of entries
(then it is emptied, which costs time, never a wrong verdict), and parts are searched one
after another, so peak memory is the history plus one part's cache.

With the native core installed (``replicalab_native``, built by ``make``) and a model with
a native machine, the whole history goes to it at once as int64 columns
(:func:`~replicalab.checkers.linearizability.columns.encode_columns`): Jepsen's preparation, the
partition, event ordering and every part's search run natively with the same results as
the Python pipeline, which stays the reference (and runs whenever ``search_core`` is the
pure-Python one). Shrinking a counterexample checks the part again and again with
operations made optional, natively too. :func:`check_history` checks a recorded History
the same way without a LinOp per row (:mod:`replicalab.checkers.linearizability.from_history`).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from replicalab.checkers.linearizability.columns import (
    OUTCOME_CODE,
    Columns,
    encode_columns,
    int64s,
    native_check,
    native_machine,
    uint32s,
)
from replicalab.checkers.linearizability.explain import Clock, explain, explain_prefix, shrink
from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.ops import (
    FAIL,
    OK,
    OPTIONAL,
    UNRECORDED,
    LinOp,
    Verdict,
    event_order,
    overall,
)
from replicalab.checkers.linearizability.registry import get_model
from replicalab.checkers.linearizability.search import search_model, search_part
from replicalab.records import record

__all__ = ["CheckResult", "Clock", "LinOp", "PartResult", "Verdict", "check", "check_part",
           "native_available", "search_core"]

DEFAULT_CACHE_BYTES = 256 * 2**20
"""Memo cache budget per part (the one part being searched at a time)."""
SHRINK_TIMEOUT_S = 10.0
"""Most time spent shrinking one part's counterexample (then it is returned as it is)."""
SHRINK_GRACE_S = 1.0
"""How far past a check's deadline shrinking may go, all parts together."""

try:  # the native register search core, a drop-in for search.search_part
    from replicalab_native import search_part as _native_search_part
except ImportError:
    _native_search_part = None
try:  # shrinking's window check, the native twin of PartSearch._register_window
    from replicalab_native import check_window as _native_check_window
except ImportError:
    _native_check_window = None

search_core: Callable[..., tuple[int, list[int], int]] = _native_search_part or search_part
"""The register search core: ``search.search_part`` or a native drop-in with the same
contract. Tests swap in the pure-Python one to get the reference pipeline."""


@record(frozen=True)
class PartResult:
    """The verdict on one independent part (one key of a keyed model's history).

    ``ops`` counts the part's ops as given; ``linearization`` lists ``LinOp.index`` values
    in linearization order — all the ops that took effect when linearizable, the longest
    linearizable prefix found otherwise (None if the part was never searched: skipped, or
    refuted without a search, ``Model.refute``);
    ``counterexample`` the indexes of a 1-minimal non-linearizable subset (None unless not
    linearizable); ``minimal`` False when shrinking ran out of time; ``explanation`` a
    paragraph saying why; ``check_s`` the time spent on the part in s (search and
    shrinking).
    """

    key: Any
    verdict: Verdict
    ops: int
    linearization: list[int] | None
    counterexample: list[int] | None
    explanation: str | None
    check_s: float
    minimal: bool = True


@record(frozen=True)
class CheckResult:
    """The verdict on a whole history: linearizable only if every part is, not if one is
    not, else unknown; ``ops`` counts the ops given; ``check_s`` in s; with ``fail_fast``
    the parts after the first one not linearizable are skipped."""

    model: str
    verdict: Verdict
    ops: int
    parts: list[PartResult]
    check_s: float


def _cache_entries(n: int, cache_bytes: int) -> int:
    """Return how many memo entries of an ``n``-op part fit in ``cache_bytes`` (an entry
    is one Python int of n + 64 bits plus its set slot: about n / 8 + 100 bytes)."""
    return max(1024, cache_bytes // (n // 8 + 100))


def native_available(model: str | Model = "kv", ops: Sequence[LinOp] = ()) -> bool:
    """Return whether :func:`check` runs ``model`` (on ``ops``) through the native core:
    it is installed with the model's machine, and ``search_core`` is the native one
    (tests swap in the pure-Python one to get the reference pipeline)."""
    return (_native_search_part is not None and search_core is _native_search_part
            and native_machine(get_model(model), ops) is not None)


class PartSearch:
    """One part, searched as recorded or with some ops made optional (shrinking): through
    the native core when ``native`` (its columns built once), else the Python search
    (the register core for register models, the generic one otherwise)."""

    def __init__(self, model: Model, ops: Sequence[LinOp], cache_bytes: int,
                 native: str | None, register: bool | None = None,
                 cols: Columns | None = None) -> None:
        self.model = model
        self.ops = list(ops)
        self.cache_bytes = cache_bytes
        self.native = native
        self.cols: Columns | None = None
        # the register core (and its pruning) for the register models, unless the whole
        # history has ops it does not know (kv's appends): decided per history, as the
        # native core picks its machine, so both give the same results
        self.register = register_core(model, self.ops) if register is None else register
        # register models check a counterexample on its window (see verdict); shrinking
        # turns it off for a part whose window check cannot see the violation at all
        self.windowed = self.register
        # decided verdicts by (windowed, constrained): shrinking asks again for a set it
        # has seen (the ops kept after a round is often the prefix that round found
        # failing) — 88 of the 557 checks of the 102 etcd histories' counterexamples
        self.known: dict[tuple[bool, frozenset[int]], Verdict] = {}
        if native is not None and self.ops:
            # ``cols``: the part's rows of the history's columns, already encoded
            self.cols = cols or encode_columns(self.ops, model, native, one_part=True)
            self.pos = {o.index: n for n, o in enumerate(self.ops)}

    def relaxed_outcomes(self, constrained: frozenset[int]) -> list[str]:
        """Return each op's outcome with the ops outside ``constrained`` relaxed: an ``ok``
        op becomes optional; an op invoked after every constrained op completed, or that
        could not help them (``Model.useless``), becomes ``fail`` (left out: it need not
        happen, and happening could not help)."""
        end = max((o.complete_ns for o in self.ops if o.index in constrained), default=0)
        inside = [o for o in self.ops if o.index in constrained]
        loose = [o for o in self.ops if o.index not in constrained and o.outcome != FAIL
                 and o.invoke_ns <= end]
        drop = self.model.useless(loose, inside)  # could not help: left out too
        return [o.outcome if o.index in constrained or o.outcome == FAIL else
                FAIL if o.invoke_ns > end or o.index in drop else
                OPTIONAL if o.outcome == OK else o.outcome for o in self.ops]

    def run(self, constrained: frozenset[int] | None, deadline_s: float | None
            ) -> tuple[Verdict, list[LinOp], LinOp | None]:
        """Return (verdict, linearization or longest prefix, stuck op) of the part, with
        the ops outside ``constrained`` relaxed (:meth:`relaxed_outcomes`; None: all as
        recorded)."""
        if self.cols is not None:
            cols = self.cols
            if constrained is not None:
                codes = list(map(OUTCOME_CODE.__getitem__, self.relaxed_outcomes(constrained)))
                cols = cols.with_outcomes(array("q", codes).tobytes())
            (_, _, v, order_b, stuck, _), = native_check(cols, deadline_s, self.cache_bytes)
            return (Verdict(v), [self.ops[r] for r in uint32s(order_b)],
                    self.ops[stuck] if stuck >= 0 else None)
        ops = self.ops
        if constrained is not None:
            ops = [o if o.outcome == out else replace(o, outcome=out)
                   for o, out in zip(ops, self.relaxed_outcomes(constrained), strict=True)]
        return _search_python(self.model, ops, deadline_s, self.cache_bytes, self.register)

    def verdict(self, constrained: frozenset[int], deadline_s: float | None) -> Verdict:
        """Return the verdict with the ops outside ``constrained`` relaxed (see
        ``explain``): when ``windowed`` (register models) on the window of the
        constrained ops, from any value the register could hold when it opens
        (:meth:`_register_window`), else on the whole part (:meth:`relaxed_outcomes`).
        A set decided before is not checked again."""
        key = (self.windowed, constrained)
        v = self.known.get(key)
        if v is None:
            v = self._verdict(constrained, deadline_s)
            if v != Verdict.UNKNOWN:  # a deadline's unknown may be decided with more time
                self.known[key] = v
        return v

    def _verdict(self, constrained: frozenset[int], deadline_s: float | None) -> Verdict:
        if not self.windowed:
            return self.run(constrained, deadline_s)[0]
        if (self.cols is not None and self.native == "register"
                and _native_check_window is not None):
            if len(self.pos) == len(self.ops):  # indexes unique: set the few flags
                flags = bytearray(len(self.ops))
                pos = self.pos
                for i in constrained:
                    if i in pos:
                        flags[pos[i]] = 1
                mask = bytes(flags)
            else:
                mask = bytes(o.index in constrained for o in self.ops)
            return Verdict(_native_check_window(*self.cols.args(), mask, deadline_s,
                                                self.cache_bytes))
        return self._register_window(constrained, deadline_s)

    def _register_window(self, constrained: frozenset[int], deadline_s: float | None
                         ) -> Verdict:
        """Return whether the constrained ops can be linearized with every other op
        relaxed, searching only the ops that overlap their window (from the first
        invoke to the last completion) and starting from each value the register could
        hold when the window opens (nil or a value written by an op invoked before it):
        linearizable if one start is."""
        model = self.model
        inside = [o for o in self.ops if o.index in constrained]
        if not inside:
            return Verdict.LINEARIZABLE
        lo = min(o.invoke_ns for o in inside)
        hi = max(o.complete_ns for o in inside)
        norm = model.intern_key
        window = []
        before = []
        for o in self.ops:
            if o.outcome == FAIL or o.invoke_ns > hi:
                continue
            if o.index in constrained:
                window.append(o)
                continue
            if o.invoke_ns < lo and o.f != "read":
                before.append(o)
            if o.outcome != OK:
                window.append(o)  # info: may take effect at any time after its invoke
            elif o.complete_ns >= lo:
                window.append(replace(o, outcome=OPTIONAL))
        starts = window_starts(before, norm)
        enc = model.encode(window)
        ids = {v: i for i, v in enumerate(enc.values)}
        inits = sorted({ids.get(v, len(enc.values)) for v in starts})
        unknown = False
        entries = _cache_entries(len(enc.ops), self.cache_bytes)
        extra = {"optional": enc.optional} if any(enc.optional) else {}
        for init in inits:
            v = search_core(enc.kinds, enc.a, enc.b, enc.events, init, deadline_s, entries,
                            **extra)[0]
            if v == Verdict.LINEARIZABLE:
                return Verdict.LINEARIZABLE
            unknown = unknown or v == Verdict.UNKNOWN
        return Verdict.UNKNOWN if unknown else Verdict.NOT_LINEARIZABLE


def window_starts(before: Sequence[LinOp], norm: Callable[[Any], Any]) -> set[Any]:
    """Return the values a register may hold when a counterexample's window opens, from
    the writes and cas invoked ``before`` it: nil, every value written, and to a fixed
    point the new value of a cas whose expected value is one of them (or unrecorded)."""
    starts = {norm(None)}
    cas = []
    for o in before:
        if o.f == "cas":
            cas.append(o)
        else:
            starts.add(norm(o.value))
    grew = True
    while grew and cas:
        grew = False
        rest = []
        for o in cas:
            expected, new = o.value
            if expected is UNRECORDED or norm(expected) in starts:
                grew = grew or norm(new) not in starts
                starts.add(norm(new))
            else:
                rest.append(o)
        cas = rest
    return starts


def register_core(model: Model, ops: Sequence[LinOp]) -> bool:
    """Return whether ``ops`` (a whole history) go to the register search core: the model
    encodes them (the register models) and they hold no op the core does not know."""
    return (getattr(model, "encode", None) is not None
            and not any(o.f == "append" for o in ops))


def _search_python(model: Model, ops: list[LinOp], deadline_s: float | None,
                   cache_bytes: int, register: bool = True
                   ) -> tuple[Verdict, list[LinOp], LinOp | None]:
    """Return (verdict, linearization or longest prefix, stuck op) by the Python search:
    the register core when ``register`` and the model encodes the part, else the generic
    search through the model's ``step``."""
    encode = getattr(model, "encode", None) if register else None
    enc = encode(ops) if encode is not None else None
    if enc is not None:
        verdict, order, stuck = search_core(
            enc.kinds, enc.a, enc.b, enc.events, enc.init, deadline_s,
            _cache_entries(len(enc.ops), cache_bytes),
            **({"optional": enc.optional} if any(enc.optional) else {}))
        kept = enc.ops
    else:
        kept = model.prepare(ops)
        # optional reads constrain nothing (they may not have happened)
        kept = [o for o in kept if not (o.outcome == OPTIONAL and o.f in model.reads)]

        def step(state: Any, i: int) -> tuple[bool, Any]:
            return model.step(state, kept[i])

        verdict, order, stuck = search_model(
            len(kept), event_order(kept), step, model.init(), deadline_s,
            _cache_entries(len(kept), cache_bytes), [o.f in model.reads for o in kept],
            [o.outcome == OPTIONAL for o in kept], model.viability(kept))
    return Verdict(verdict), [kept[i] for i in order], kept[stuck] if stuck >= 0 else None


def check_part(model: Model, key: Any, ops: Sequence[LinOp], deadline_s: float | None = None,
               clock: Clock | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
               shrink_timeout_s: float = SHRINK_TIMEOUT_S,
               shrink_deadline_s: float | None = None,
               register: bool | None = None) -> PartResult:
    """Return the verdict on one part (``ops`` of one key) by the Python search, with its
    counterexample and explanation when it is not linearizable (points named by
    ``clock``; default: ms since the part's first invoke). The search stops at
    ``deadline_s``, shrinking after ``shrink_timeout_s`` or at ``shrink_deadline_s``
    (``time.monotonic()`` values), whichever is first; then the counterexample is
    returned as it stands."""
    started = time.monotonic()
    ops = list(ops)
    if clock is None:
        clock = Clock(min((o.invoke_ns for o in ops), default=0))
    search = PartSearch(model, ops, cache_bytes, None, register)
    verdict, order, stuck = search.run(None, deadline_s)
    return part_result(search, key, verdict, order, stuck, clock, shrink_timeout_s,
                       shrink_deadline_s, started)


def part_result(search: PartSearch, key: Any, verdict: Verdict, order: list[LinOp],
                stuck: LinOp | None, clock: Clock, shrink_timeout_s: float,
                shrink_deadline_s: float | None, started: float,
                searched_s: float = 0.0) -> PartResult:
    """Return the PartResult of a part searched to (verdict, order, stuck): its
    counterexample shrunk and explained when not linearizable, the prefix explained when
    unknown; ``check_s`` is the time since ``started`` plus ``searched_s`` (a search timed
    elsewhere)."""
    ops, model = search.ops, search.model
    linearization = [o.index for o in order]
    if verdict == Verdict.LINEARIZABLE:
        return PartResult(key, verdict, len(ops), linearization, None, None,
                          time.monotonic() - started + searched_s)
    if verdict != Verdict.NOT_LINEARIZABLE:
        return PartResult(key, Verdict.UNKNOWN, len(ops), linearization, None,
                          explain_prefix(order, stuck, model, clock, len(ops)),
                          time.monotonic() - started + searched_s)
    # shrinking may run past this part's share of the time (the verdict is known and
    # the counterexample is what a person needs) but not past shrink_deadline_s
    end = time.monotonic() + shrink_timeout_s
    if shrink_deadline_s is not None:
        end = min(end, shrink_deadline_s)
    kept = model.prepare(ops)
    ce, minimal = shrink(kept, search.verdict, end, focus=stuck)
    if minimal is None and search.windowed:
        # the window's starting values over-approximate what came before it: when even
        # every op constrained is not seen failing that way, shrink on the whole part
        search.windowed = False
        ce, minimal = shrink(kept, search.verdict, end, focus=stuck)
    minimal = bool(minimal)
    ce.sort(key=lambda o: (o.invoke_ns, o.index))
    return PartResult(key, verdict, len(ops), linearization, [o.index for o in ce],
                      explain(ce, kept, model, clock, minimal),
                      time.monotonic() - started + searched_s, minimal)


def check(ops: Sequence[LinOp], model: str | Model = "kv", timeout_s: float | None = None,
          deadline_s: float | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
          progress: Callable[[int, int], None] | None = None,
          t0_ns: int | None = None, fail_fast: bool = False,
          clock: Clock | None = None) -> CheckResult:
    """Return the linearizability verdict on ``ops`` under ``model`` (a Model, or a name
    resolved once here through the registry).

    The search stops at ``timeout_s`` from now or at ``deadline_s`` (a
    ``time.monotonic()`` value), whichever is first: parts decided by then keep their
    verdicts, the others are unknown with the longest prefix found. With a deadline each
    part first gets a fair share of the time left (smallest parts first), then the
    undecided ones share the rest, so most keys get decided. ``progress`` is called with
    (parts done, parts total). With ``fail_fast`` the check stops at the first part found
    not linearizable (parts are searched smallest first): the parts not searched yet are
    skipped and the history's verdict is not linearizable. Explanations name points as
    ``clock`` does (default: ms since ``t0_ns``, itself by default the first invoke).
    Raises ValueError for ops the model cannot take.
    """
    started = time.monotonic()
    m = get_model(model)
    if timeout_s is not None:
        limit = started + timeout_s
        deadline_s = limit if deadline_s is None else min(deadline_s, limit)
    ops = list(ops)
    if clock is None:
        clock = Clock(min((o.invoke_ns for o in ops), default=0) if t0_ns is None else t0_ns)
    if ops and native_machine(m, ops) == "register" and native_available(m, ops):
        try:
            cols = encode_columns(ops, m, "register")
        except (TypeError, OverflowError):
            cols = None  # times, indexes or values that are not int64: Python takes them
        if cols is not None:  # refutations found natively on the columns, as for runs
            r = check_columns(cols, m, lambda rows: [ops[i] for i in rows], deadline_s,
                              cache_bytes, progress, clock, fail_fast)
            return replace(r, ops=len(ops), check_s=time.monotonic() - started)
    final: list[PartResult] | None = None
    if m.refutes(ops):
        # parts a pattern of the model refutes skip the search (their verdict is known),
        # smallest first as the search goes; with fail_fast the first one ends the check
        parts = m.partition(ops)
        refuted: dict[int, PartResult] = {}
        for j in sorted(range(len(parts)), key=lambda j: len(parts[j][1])):
            r = _refuted(m, parts[j][0], parts[j][1], clock, cache_bytes, deadline_s)
            if r is not None:
                refuted[j] = r
                if fail_fast:
                    break
        if fail_fast and refuted:
            final = [refuted.get(j) or PartResult(key, Verdict.SKIPPED, len(part), None, None,
                                                  None, 0.0)
                     for j, (key, part) in enumerate(parts)]
        elif refuted:
            rest = [o for j, (_, part) in enumerate(parts) if j not in refuted for o in part]
            found = iter(_search_all(m, rest, deadline_s, cache_bytes, progress, clock,
                                     fail_fast))
            final = [refuted[j] if j in refuted else next(found) for j in range(len(parts))]
    if final is None:
        final = _search_all(m, ops, deadline_s, cache_bytes, progress, clock, fail_fast)
    return CheckResult(m.name, overall([p.verdict for p in final]), len(ops), final,
                       time.monotonic() - started)


def check_encoded(cols: Columns, model: str | Model, ops: Callable[[], list[LinOp]],
                  deadline_s: float | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  fail_fast: bool = False, clock: Clock | None = None) -> CheckResult:
    """Return :func:`check`'s result on a register history given as its columns
    (``cols``, the native reader's of a history file, :func:`columns.file_columns`);
    ``ops()`` returns its LinOps (row ``i`` is ``ops()[i]``), asked for only when a part
    is not linearizable or not decided (shrinking and explanations need them): a history
    found linearizable is checked without a LinOp. Without the native core (or with the
    Python ``search_core``) the LinOps are checked as :func:`check` checks them."""
    started = time.monotonic()
    m = get_model(model)
    # a register model's machine does not depend on its ops
    if native_machine(m, ()) != "register" or not native_available(m, ()):
        return check(ops(), m, deadline_s=deadline_s, progress=progress,
                     fail_fast=fail_fast, clock=clock)
    def ops_at(rows: list[int]) -> list[LinOp]:
        made = ops()
        return [made[i] for i in rows]

    r = check_columns(cols, m, ops_at, deadline_s, DEFAULT_CACHE_BYTES, progress, clock,
                      fail_fast)
    return replace(r, check_s=time.monotonic() - started)


def _search_all(m: Model, ops: list[LinOp], deadline_s: float | None, cache_bytes: int,
                progress: Callable[[int, int], None] | None, clock: Clock,
                fail_fast: bool) -> list[PartResult]:
    """Return every part's result: the native core when it runs the model, else the
    Python pipeline."""
    machine = native_machine(m, ops) if ops and native_available(m, ops) else None
    if machine is not None:
        try:
            cols = encode_columns(ops, m, machine)
        except (TypeError, OverflowError):
            cols = None  # times, indexes or values that are not int64: Python takes them
        if cols is not None:
            return check_native(lambda rows: [ops[r] for r in rows], m, cols, deadline_s,
                                cache_bytes, progress, clock, fail_fast)
    return _check_python(m, m.partition(ops), deadline_s, cache_bytes, progress, clock,
                         fail_fast, register_core(m, ops))


def _refuted(m: Model, key: Any, part: list[LinOp], clock: Clock, cache_bytes: int,
             deadline_s: float | None, ce: list[LinOp] | None = None,
             search: PartSearch | None = None) -> PartResult | None:
    """Return the result of a part the model refutes without a search (its counterexample
    confirmed and shrunk, 1-minimal), or None. ``ce``: the ops the model's patterns
    found (None: ``m.refute(part)`` finds them); ``search``: the part's
    :class:`PartSearch` (None: made here)."""
    started = time.monotonic()
    if ce is None:
        ce = m.refute(part)
    if not ce:
        return None
    if search is None:
        machine = native_machine(m, part) if native_available(m, part) else None
        search = PartSearch(m, part, cache_bytes, machine)
    end = started + SHRINK_TIMEOUT_S
    if deadline_s is not None:
        end = min(end, deadline_s + SHRINK_GRACE_S)
    if search.verdict(frozenset(o.index for o in ce), end) != Verdict.NOT_LINEARIZABLE:
        return None  # not a counterexample after all: the search decides
    kept = m.prepare(part)
    small, confirmed = shrink(ce, search.verdict, end)
    minimal = bool(confirmed)
    small.sort(key=lambda o: (o.invoke_ns, o.index))
    return PartResult(key, Verdict.NOT_LINEARIZABLE, len(part), None,
                      [o.index for o in small], explain(small, kept, m, clock, minimal),
                      time.monotonic() - started, minimal)


def _check_python(m: Model, parts: list[tuple[Any, list[LinOp]]], deadline_s: float | None,
                  cache_bytes: int, progress: Callable[[int, int], None] | None,
                  clock: Clock, fail_fast: bool, register: bool) -> list[PartResult]:
    """Return every part's result by the Python pipeline (the reference)."""
    results: list[PartResult | None] = [None] * len(parts)
    order = sorted(range(len(parts)), key=lambda j: len(parts[j][1]))
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, len(parts))

    stop = False
    if deadline_s is None:
        for j in order:
            results[j] = check_part(m, parts[j][0], parts[j][1], None, clock, cache_bytes,
                                    register=register)
            tick()
            if fail_fast and results[j].verdict == Verdict.NOT_LINEARIZABLE:
                break
    else:
        # two passes: first each part gets a fair share of the time left, so one hard key
        # cannot keep easy ones undecided; then the undecided ones share what remains
        shrink_until = deadline_s + SHRINK_GRACE_S
        deferred = []
        for n, j in enumerate(order):
            now = time.monotonic()
            share = now + max(0.0, deadline_s - now) / (len(order) - n)
            r = check_part(m, parts[j][0], parts[j][1], min(share, deadline_s), clock,
                           cache_bytes, shrink_deadline_s=shrink_until, register=register)
            results[j] = r
            if r.verdict == Verdict.UNKNOWN:
                deferred.append(j)
            else:
                tick()
            if fail_fast and r.verdict == Verdict.NOT_LINEARIZABLE:
                stop = True
                break
        for j in deferred:
            if stop:
                break
            if time.monotonic() < deadline_s:
                r = check_part(m, parts[j][0], parts[j][1], deadline_s, clock, cache_bytes,
                               shrink_deadline_s=shrink_until, register=register)
                if r.verdict != Verdict.UNKNOWN or len(r.linearization or ()) >= len(
                        results[j].linearization or ()):
                    results[j] = r
            tick()
            if fail_fast and results[j].verdict == Verdict.NOT_LINEARIZABLE:
                stop = True
    return [r if r is not None else
            PartResult(key, Verdict.SKIPPED, len(part), None, None, None, 0.0)
            for r, (key, part) in zip(results, parts, strict=True)]


def check_native(ops_at: Callable[[list[int]], list[LinOp]], m: Model, cols: Columns,
                 deadline_s: float | None, cache_bytes: int,
                 progress: Callable[[int, int], None] | None, clock: Clock,
                 fail_fast: bool) -> list[PartResult]:
    """Return every part's result with the searches run by the native core (same
    verdicts, orders and stuck ops as the Python pipeline), then counterexamples shrunk
    (natively) and explanations written as :func:`check_part` does. ``ops_at(rows)``
    returns the LinOps of column rows: it is called only for the parts that are not
    linearizable (or unknown), once per part."""
    raw = native_check(cols, deadline_s, cache_bytes, fail_fast, progress)
    index: list[int] | None = None
    key_ids: list[int] | None = None
    shrink_until = None if deadline_s is None else deadline_s + SHRINK_GRACE_S
    out = []
    for kid, n_ops, verdict, order_b, stuck, seconds in raw:
        key = cols.keys[kid] if cols.keys else None
        v = Verdict(verdict)
        if v == Verdict.LINEARIZABLE:
            if index is None:
                index = int64s(cols.index)
            out.append(PartResult(key, v, n_ops, [index[r] for r in uint32s(order_b)], None,
                                  None, seconds))
        elif v == Verdict.SKIPPED:
            out.append(PartResult(key, v, n_ops, None, None, None, 0.0))
        else:
            if key_ids is None:
                key_ids = int64s(cols.key)
            rows = [r for r, k in enumerate(key_ids) if k == kid]
            part = ops_at(rows)
            by_row = dict(zip(rows, part, strict=True))
            search = PartSearch(m, part, cache_bytes, cols.machine,
                                register=cols.machine == "register",
                                cols=_part_columns(cols, rows))
            out.append(part_result(search, key, v, [by_row[r] for r in uint32s(order_b)],
                                   by_row[stuck] if stuck >= 0 else None, clock,
                                   SHRINK_TIMEOUT_S, shrink_until, time.monotonic(),
                                   seconds))
    return out


def _part_columns(cols: Columns, rows: list[int]) -> Columns | None:
    """Return the columns of one part (``rows`` of ``cols``) as :class:`PartSearch` takes
    them, or None to encode its ops again: another machine's ``table`` may be built for
    the whole history."""
    if cols.machine == "register" or len(rows) == cols.rows():
        return cols.select(rows)
    return None


def check_columns(cols: Columns, m: Model, ops_at: Callable[[list[int]], list[LinOp]],
                  deadline_s: float | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
                  progress: Callable[[int, int], None] | None = None,
                  clock: Clock | None = None, fail_fast: bool = False) -> CheckResult:
    """Return the verdict on a history already encoded as native columns (``ops_at`` as
    :func:`check_native`): what :func:`check_history` and the CLI use. The parts the
    model refutes without a search (``replicalab_native.refute_register`` finds them on
    the columns, ``Model.refute`` makes their counterexample from their LinOps) are not
    searched, as in :func:`check`."""
    started = time.monotonic()
    if clock is None:
        clock = Clock(cols.t0_ns)
    refuted = _refuted_columns(cols, m, ops_at, clock, cache_bytes, deadline_s, fail_fast)
    if not refuted:
        final = check_native(ops_at, m, cols, deadline_s, cache_bytes, progress, clock,
                             fail_fast)
    elif len(refuted) == len(cols.keys):  # nothing left to search
        final = [refuted[k] for k in range(len(cols.keys))]
    elif fail_fast:
        key_ids = int64s(cols.key)
        sizes = {k: key_ids.count(k) for k in range(len(cols.keys))}
        final = [refuted.get(k) or PartResult(cols.keys[k], Verdict.SKIPPED, sizes[k], None,
                                              None, None, 0.0) for k in range(len(cols.keys))]
    else:
        # the refuted parts' rows are left out of the search (as if they failed)
        key_ids = int64s(cols.key)
        codes = [OUTCOME_CODE[FAIL] if k in refuted else c
                 for k, c in zip(key_ids, int64s(cols.outcome), strict=True)]
        rest = cols.with_outcomes(array("q", codes).tobytes())
        searched = check_native(ops_at, m, rest, deadline_s, cache_bytes, progress, clock,
                                fail_fast)
        final = [refuted.get(k, p) for k, p in enumerate(searched)]
    return CheckResult(m.name, overall([p.verdict for p in final]), cols.rows(), final,
                       time.monotonic() - started)


try:  # the register refutations on columns (an older build of the core may lack it)
    from replicalab_native import refute_register as _native_refute_register
except ImportError:
    _native_refute_register = None


def _refuted_columns(cols: Columns, m: Model, ops_at: Callable[[list[int]], list[LinOp]],
                     clock: Clock, cache_bytes: int, deadline_s: float | None,
                     fail_fast: bool) -> dict[int, PartResult]:
    """Return key id -> result of the register parts of ``cols`` refuted without a search
    (smallest first; with ``fail_fast`` only the first)."""
    if (cols.machine != "register" or _native_refute_register is None or not cols.kind
            or type(m).refute is Model.refute):
        return {}
    found = _native_refute_register(*cols.args())
    if not found:
        return {}
    key_ids = int64s(cols.key)
    rows_of: dict[int, list[int]] = {}
    for r, k in enumerate(key_ids):
        rows_of.setdefault(k, []).append(r)
    out: dict[int, PartResult] = {}
    for kid, ce_rows in sorted(found, key=lambda f: (len(rows_of[f[0]]), f[0])):
        rows = rows_of[kid]
        part = ops_at(rows)
        by_row = dict(zip(rows, part, strict=True))
        # the core's counterexample rows are the ones the model's refute() picks; the
        # part's own columns let its windows be checked natively
        search = PartSearch(m, part, cache_bytes, cols.machine, register=True,
                            cols=_part_columns(cols, rows))
        r = _refuted(m, cols.keys[kid], part, clock, cache_bytes, deadline_s,
                     ce=[by_row[x] for x in uint32s(ce_rows)], search=search)
        if r is not None:
            out[kid] = r
            if fail_fast:
                break
    return out

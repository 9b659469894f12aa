"""What a person reads about a non-linearizable part: a 1-minimal counterexample found by
shrinking, and a one-paragraph explanation of it (pure, no I/O).

A counterexample is a set S of a part's operations that cannot be linearized *whatever the
other operations did*: S's operations keep their recorded intervals and outcomes; every
other operation that completed ``ok`` may have taken effect inside its interval or not at
all (``optional``), an ``info`` one at any time after its invoke or never (as recorded).
Every run of the history is one of those runs, so S proves the part is not linearizable;
dropping the others outright would not do (without the write of 1, a read of 1 is a
"violation" of its own, which explains nothing).

Non-linearizability only grows with S (each operation added to S has fewer options), so
a counterexample can be sought inside any set of candidates seen failing: first the
smallest neighbourhood in time of the operation the search could not get past (its 2, 4,
8, ... nearest operations, constrained together) that is not linearizable. Inside it,
shrinking is a search along one order of the candidates — the operations that completed
``ok``: first the operation the search could not get past, then (register models) the
operations chained to it through the value it needs, then the other writes, then the
rest, nearest in time first within each rank (:func:`_by_value`). Round after round, the
shortest prefix of the candidates left that, with the operations kept so far, is not
linearizable is found by doubling then bisection; its last operation is needed (without
it the rest is linearizable), so it is kept and the candidates after it are dropped,
until the kept operations alone are not linearizable. The result is 1-minimal: relaxing
any one of its operations makes it linearizable. Each step is one check (natively when
the core is installed) of a few operations more than the counterexample, so a
counterexample costs a few dozen checks of small sets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.ops import OK, UNRECORDED, LinOp, Verdict, who
from replicalab.checkers.linearizability.register_models import show_value

MAX_LISTED = 20
"""Operations a paragraph lists (a counterexample not fully shrunk can be long)."""

NEIGHBOURHOOD_OPS = 2
"""Ops nearest the failing point in time constrained in shrinking's first check; the
neighbourhood doubles until it is not linearizable (:func:`_failing_neighbourhood`)."""

SubVerdict = Callable[[frozenset[int], float | None], Verdict]
"""``verdict(S, deadline_s)``: the part checked with the ops whose index is not in S made
optional (see the module docstring)."""


class Clock(NamedTuple):
    """How an explanation names a point of the history: ms since ``t0_ns``, or, for a
    history without times (``lines``: the times are the lines of its events), the line."""

    t0_ns: int = 0
    lines: bool = False

    def point(self, ns: int) -> str:
        """Return "4.0 ms" or "line 41"."""
        if self.lines:
            return f"line {ns}"
        return f"{(ns - self.t0_ns) / 1e6:,.1f} ms"

    def span(self, op: LinOp) -> str:
        """Return where ``op`` ran: "at 4.0–5.0 ms" / "at lines 40–41", or for an op whose
        outcome is unknown "from 4.0 ms (outcome unknown)"."""
        if op.outcome != OK:
            return f"from {self.point(op.invoke_ns)} (outcome unknown)"
        end = max(op.complete_ns, op.invoke_ns)
        if self.lines:
            return f"at lines {op.invoke_ns}–{end}"
        return f"at {(op.invoke_ns - self.t0_ns) / 1e6:,.1f}–{(end - self.t0_ns) / 1e6:,.1f} ms"

    def json(self, op: LinOp) -> dict[str, Any]:
        """Return ``op``'s times for ``--json``: invoke/complete in ms since ``t0_ns``, or
        their lines."""
        done = op.outcome == OK
        if self.lines:
            return {"invoke_line": op.invoke_ns, "complete_line": op.complete_ns if done else None}
        return {"invoke_ms": round((op.invoke_ns - self.t0_ns) / 1e6, 3),
                "complete_ms": round((op.complete_ns - self.t0_ns) / 1e6, 3) if done else None}


def _near(ops: Sequence[LinOp], focus: LinOp | None) -> list[LinOp]:
    """Return ``ops`` nearest ``focus`` in time first: overlapping its interval, then by
    the gap between the intervals (an ``info`` op's interval has no end), then by the
    distance between the invokes and by index (ties in the order given); in invoke order
    without a focus."""
    if focus is None:
        return sorted(ops, key=lambda o: (o.invoke_ns, o.index))
    lo = focus.invoke_ns
    hi = focus.complete_ns if focus.outcome == OK else lo
    # the keys built in one loop, not by a key function per op: shrinking sorts every
    # failing part this way
    keyed = []
    for n, o in enumerate(ops):
        t = o.invoke_ns
        if o.outcome == OK and o.complete_ns < lo:
            gap = lo - o.complete_ns
        else:
            gap = t - hi if t > hi else 0
        keyed.append((o is not focus, gap, t - lo if t >= lo else lo - t, o.index, n))
    keyed.sort()
    return [ops[k[4]] for k in keyed]


def _by_value(ops: Sequence[LinOp], focus: LinOp, near: Sequence[LinOp] | None = None
              ) -> list[LinOp]:
    """Return register ops in the order a counterexample around ``focus`` most likely
    needs them (the operations the failing point reaches): ``focus``; then the ops
    chained to it through the value it needs (reading, expecting or writing that value);
    then the other writes (they may replace it); then ops that observe other values; then
    ops invoked after ``focus`` completed; by time distance within each rank (their
    places in ``near``, :func:`_near` of ``ops`` or of more ops). Ops that observe few
    values keep every check of shrinking small: writes of values no constrained op
    observes are left out."""
    need = _observed(focus)
    if need is UNRECORDED:
        need = _written(focus) if focus.f != "read" else UNRECORDED
    place = {id(o): n for n, o in enumerate(near or _near(ops, focus))}
    end = focus.complete_ns if focus.outcome == OK else focus.invoke_ns
    keyed = []
    for o in ops:
        if o is focus:
            rank = 0
        elif o.invoke_ns > end:
            rank = 4  # began after the failing point: rarely needed, widens every check
        elif _observed(o) == need or (o.f != "read" and _written(o) == need):
            rank = 1
        elif o.f == "write" or (o.f == "cas" and _observed(o) is UNRECORDED):
            rank = 2
        else:
            rank = 3
        keyed.append((rank, place[id(o)], o))
    keyed.sort()  # places are distinct: the ops themselves are never compared
    return [k[2] for k in keyed]


def shrink(ops: Sequence[LinOp], verdict: SubVerdict, deadline_s: float | None,
           focus: LinOp | None = None) -> tuple[list[LinOp], bool | None]:
    """Return (a counterexample, whether it is 1-minimal) of the non-linearizable part
    ``ops``: the ops that completed ``ok`` are the candidates, in the order of
    :func:`_by_value` (register models) or nearest ``focus`` in time (the op the search
    could not get past); needed ops are found one per round (see the module docstring).
    ``verdict(S, deadline_s)`` checks the part with S constrained; shrinking stops at
    ``deadline_s`` (``time.monotonic()`` s): the counterexample is then returned as it
    stands, not 1-minimal. Whether it is 1-minimal is None when ``verdict`` never saw the
    candidates fail, even all of them (the ops are then returned unconfirmed)."""
    ok = [o for o in ops if o.outcome == OK]
    near = _near(ok, focus)
    by_value = focus is not None and all(o.f in ("read", "write", "cas") for o in ok)

    def bad(sub: Sequence[LinOp]) -> bool | None:
        """True: ``sub`` constrained is not linearizable; None: not decided in time."""
        if deadline_s is not None and time.monotonic() > deadline_s:
            return None
        v = verdict(frozenset(o.index for o in sub), deadline_s)
        return None if v == Verdict.UNKNOWN else v == Verdict.NOT_LINEARIZABLE

    pool = near
    if focus is not None:
        inside = _failing_neighbourhood(near, bad)
        if inside is None:
            return near, False
        pool = inside
    # the candidates: the pool in _by_value's order (the same relative order as over all
    # of ``ok``), or nearest in time first
    cand = _by_value(pool, focus, near) if by_value else pool
    # Each round finds the shortest prefix of the candidates left that, with the ops
    # kept so far, is not linearizable (doubling, then bisection): its last op is needed
    # (without it the rest is linearizable, and so is every subset of the rest), so it is
    # kept and the candidates after it are dropped. Checks stay small: a prefix grows
    # only as far as the next needed op.
    kept: list[LinOp] = []
    rest = list(cand)
    while True:
        if kept:
            b = bad(kept)
            if b is None:
                return kept + rest, False
            if b:
                return kept, True
        # kept + rest is known not linearizable (the whole part, then each round's
        # prefix): it needs no check
        if not rest:
            # every candidate kept and still not seen failing: this check cannot see the
            # violation (the caller may try another one); nothing is confirmed
            return kept, None
        lo, hi, j = 0, None, 1
        while hi is None:
            if j >= len(rest):
                hi = len(rest)
                break
            b = bad(kept + rest[:j])
            if b is None:
                return kept + rest, False
            if b:
                hi = j
            else:
                lo, j = j, j * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            b = bad(kept + rest[:mid])
            if b is None:
                return kept + rest, False
            if b:
                hi = mid
            else:
                lo = mid
        kept.append(rest[hi - 1])
        rest = rest[:hi - 1]


def _failing_neighbourhood(near: list[LinOp],
                           bad: Callable[[Sequence[LinOp]], bool | None]
                           ) -> list[LinOp] | None:
    """Return the smallest neighbourhood of the failing point seen failing: the first 2,
    4, 8, ... ops of ``near`` (the candidates nearest it in time first, :func:`_near`),
    constrained together, until a set is not linearizable (all of ``near`` when none is;
    None when the deadline came first). A counterexample sits around the op the search
    could not get past, so shrinking inside that neighbourhood checks small windows
    instead of reaching for ops far from it, and needs fewer checks."""
    k = NEIGHBOURHOOD_OPS
    while k < len(near):
        b = bad(near[:k])
        if b is None:
            return None
        if b:
            return near[:k]
        k *= 2
    return near


def _written(op: LinOp) -> Any:
    return op.value[1] if op.f == "cas" else op.value


def _observed(op: LinOp) -> Any:
    """Return the value ``op`` needs the register to hold (read: the value; cas: the
    expected one), or UNRECORDED if it needs nothing."""
    if op.f == "read":
        return op.value
    if op.f == "cas":
        return op.value[0]
    return UNRECORDED


def _headline(ce: Sequence[LinOp], part: Sequence[LinOp], model: Model,
              clock: Clock) -> str | None:
    """Return the sentence naming why the counterexample ``ce`` (of the ops ``part``)
    fails, for register-like ops (None when no simple pattern fits)."""
    if not all(op.f in ("read", "write", "cas") for op in ce) or not (
            {"write", "cas"} & set(model.ops)):
        return None  # a counter's read of 3 is reached by adds: nothing "wrote 3"
    ms = clock.point
    inside = {o.index for o in ce}
    writers = [op for op in ce if op.f in ("write", "cas")]
    every_writer = [op for op in part if op.f in ("write", "cas") and op.outcome != "fail"]
    for op in sorted(ce, key=lambda o: (-o.invoke_ns, o.index)):
        v = _observed(op)
        if v is UNRECORDED or op.outcome != OK:
            continue
        did = (f"{who(op.process)} read {show_value(v)}" if op.f == "read" else
               f"{who(op.process)}'s {model.describe(op)} succeeded")
        at = f"at {ms(op.invoke_ns)}"
        of_v = [w for w in every_writer if _written(w) == v and w is not op]
        if v is not None and not of_v:
            return f"{did} {at} but no operation wrote {show_value(v)}."
        if len(of_v) == 1 and of_v[0].index not in inside:
            # v was written once: before any op that observed it, so an observer that
            # completed before another write began shows that write came after v's
            for w in sorted(writers, key=lambda w: -w.complete_ns):
                if w.outcome != OK or _written(w) == v or w.complete_ns >= op.invoke_ns:
                    continue
                if w.f == "cas" and _observed(w) == v:
                    return (f"{did} {at} although {who(w.process)}'s {model.describe(w)} "
                            f"completed at {ms(w.complete_ns)}: {show_value(v)}, written "
                            "once, was already overwritten.")
                early = [r for r in ce if r is not op and r.outcome == OK
                         and _observed(r) == v and r.complete_ns < w.invoke_ns]
                if early:
                    r = early[0]
                    seen = "read" if r.f == "read" else "cas from"
                    wrote = "write" if w.f == "write" else "cas"
                    return (f"{did} {at} although the {wrote} of {show_value(_written(w))} "
                            f"by {who(w.process)} completed at {ms(w.complete_ns)}, after "
                            f"{who(r.process)} had {seen} {show_value(v)} (completed at "
                            f"{ms(r.complete_ns)}): {show_value(v)}, written once, was "
                            "already overwritten.")
        if len(of_v) == 1 and of_v[0].outcome == OK:
            # v was written once; another value seen after v certainly existed means v
            # had been replaced, and nothing writes it again
            x = of_v[0]
            for r in sorted(ce, key=lambda o: -o.complete_ns):
                u = _observed(r)
                if (r is op or r.f != "read" or r.outcome != OK or u == v
                        or r.complete_ns >= op.invoke_ns):
                    continue
                if x.complete_ns < r.invoke_ns:  # done, in or out of the counterexample
                    since = f"after the write of {show_value(v)} completed at " \
                            f"{ms(x.complete_ns)}"
                else:
                    first = [r0 for r0 in ce if r0 is not op and r0.outcome == OK
                             and _observed(r0) == v and r0.complete_ns < r.invoke_ns]
                    if not first:
                        continue
                    since = (f"after {who(first[0].process)} had read {show_value(v)} "
                             f"(completed at {ms(first[0].complete_ns)})")
                return (f"{did} {at} although {who(r.process)} read {show_value(u)} "
                        f"(completed at {ms(r.complete_ns)}) {since}: {show_value(v)}, "
                        "written once, cannot come back.")
        # the writes of v that could take effect before op completed all completed
        # before a write in the counterexample that completed before op began
        before = [x for x in of_v if x.invoke_ns < op.complete_ns]
        writes = sorted(writers, key=lambda w: -w.complete_ns) if all(
            x.outcome == OK for x in before) else []
        for w in writes:
            if (w is op or w.outcome != OK or _written(w) == v
                    or w.complete_ns >= op.invoke_ns):
                continue
            if all(x.complete_ns < w.invoke_ns for x in before):
                wrote = "write" if w.f == "write" else "cas"
                if v is None:
                    tail = " and nil cannot come back after a write"
                else:
                    tail = (f" and no write of {show_value(v)} can come after it (the last "
                            f"write of {show_value(v)} before the read completed at "
                            f"{ms(max(x.complete_ns for x in before))}, before it began)"
                            if before else
                            f" and no write of {show_value(v)} began before the read ended")
                return (f"{did} {at} although the {wrote} of {show_value(_written(w))} by "
                        f"{who(w.process)} completed at {ms(w.complete_ns)}{tail}.")
        for r in ce:
            u = _observed(r)
            if (r is op or r.outcome != OK or u is UNRECORDED or u == v
                    or r.complete_ns >= op.invoke_ns):
                continue
            of_u = [w for w in writers if _written(w) == u]
            if all(any(x.complete_ns < y.invoke_ns for y in of_u) for x in of_v):
                seen = "read" if r.f == "read" else "cas from"
                back = (f"{show_value(v)} cannot come back" if not of_v else
                        f"every write of {show_value(v)} completed before "
                        f"{show_value(u)} was written")
                return (f"{did} {at} although {who(r.process)} had already {seen} "
                        f"{show_value(u)} (completed at {ms(r.complete_ns)}) and {back}.")
        # the general case: after an op x of the counterexample that left another value
        # (a write of u, or a read of u), v had to be written again before op ended, and
        # nothing could: every other writer of v completed before x began, began after
        # op ended, or is a cas from a value nothing could write after x
        for x in sorted(ce, key=lambda o: -o.complete_ns):
            if x is op or x.outcome != OK or x.complete_ns >= op.invoke_ns:
                continue
            u = _written(x) if x.f != "read" else x.value
            if x.f == "cas" and _observed(x) is UNRECORDED:
                u = _written(x)
            if u == v or (x.f == "read" and u is UNRECORDED):
                continue
            blocked = _no_writer_after(v, x, u, op, every_writer)
            if blocked is None:
                continue
            if x.f == "read":
                since = f"{who(x.process)} read {show_value(u)} (completed at " \
                        f"{ms(x.complete_ns)})"
            else:
                wrote = "write" if x.f == "write" else "cas"
                since = (f"the {wrote} of {show_value(u)} by {who(x.process)} completed at "
                         f"{ms(x.complete_ns)}")
            why = "".join(f"; {who(c.process)}'s {model.describe(c)} (from "
                          f"{ms(c.invoke_ns)}) needs {show_value(_observed(c))}, which "
                          "nothing could write by then" for c in blocked)
            return (f"{did} {at} although {since}, and no write of {show_value(v)} can "
                    f"take effect after that{why}.")
    return None


def _no_writer_after(v: Any, x: LinOp, u: Any, op: LinOp, writers: Sequence[LinOp]
                     ) -> list[LinOp] | None:
    """Return the cas ops that could write ``v`` after ``x`` (which left the register
    holding ``u``) and before ``op`` completed but need a value nothing could write there
    (nor, in turn, what those writers need), or None if some writer of ``v`` can: one
    that did not complete before ``x`` began and began before ``op`` completed."""

    def after(y: LinOp) -> bool:
        return (y is not op and y.invoke_ns < op.complete_ns
                and not (y.outcome == OK and y.complete_ns < x.invoke_ns))

    def possible(t: Any, seen: frozenset[Any]) -> bool:
        """Whether the register can come to hold ``t`` after x and before op ends."""
        if t == u:
            return True
        for y in writers:
            if _written(y) != t or not after(y):
                continue
            e = _observed(y) if y.f == "cas" else UNRECORDED
            if e is UNRECORDED or (e not in seen and possible(e, seen | {t})):
                return True
        return False

    blocked = []
    for c in writers:
        if _written(c) != v or not after(c):
            continue
        e = _observed(c) if c.f == "cas" else UNRECORDED
        if e is UNRECORDED or possible(e, frozenset({v})):
            return None
        blocked.append(c)
    return blocked


def explain(ce: Sequence[LinOp], part: Sequence[LinOp], model: Model, clock: Clock,
            minimal: bool = True) -> str:
    """Return one paragraph saying why the counterexample ``ce`` (of the ops ``part``) is
    not linearizable and listing its operations (as ``clock`` names points)."""
    ops = sorted(ce, key=lambda o: (o.invoke_ns, o.index))
    head = model.headline(ops, part, clock) or _headline(ops, part, model, clock) or (
        f"These {len(ops)} operations cannot be put in any order that respects real time "
        f"and the {model.name} model's rules, whatever the other operations did."
        if len(ops) != 1 else "This operation cannot take effect at any point of its "
        f"interval under the {model.name} model's rules, whatever the other operations did.")
    listed = "; ".join(f"{who(o.process)} {model.describe(o)} {clock.span(o)}"
                       for o in ops[:MAX_LISTED])
    if len(ops) > MAX_LISTED:
        listed += f"; and {len(ops) - MAX_LISTED} more"
    what = "minimal counterexample" if minimal else "counterexample (not fully shrunk)"
    count = f"{len(ops)} operation{'' if len(ops) == 1 else 's'}"
    return f"{head} The {what}, {count}: {listed}."


def explain_prefix(order: Sequence[LinOp], stuck: LinOp | None, model: Model, clock: Clock,
                   total: int) -> str:
    """Return a sentence on how far the search got in a part it could not decide."""
    text = (f"The search stopped at the deadline; the longest linearizable prefix it found "
            f"orders {len(order)} of {total} operations")
    if stuck is not None:
        text += (f" and could not get past {who(stuck.process)} {model.describe(stuck)} "
                 f"{clock.span(stuck)}")
    return text + "."

"""What a person reads about a non-linearizable part: a minimal counterexample found by
shrinking, and a one-paragraph explanation of it (pure, no I/O).

A counterexample is a set S of a part's operations that cannot be linearized *whatever
the other operations did*: S's operations keep their recorded intervals and outcomes,
every other operation of the part is unconstrained (it may have taken effect at any time,
or never: :func:`relaxed`). Dropping the others outright would not do: without the write
of 1, a read of 1 is a "violation" of its own, which explains nothing. Under this reading
non-linearizability only grows with S, so greedy delta debugging finds a 1-minimal S:
drop chunks of operations (halving the chunk size) while the rest stays
non-linearizable, then single operations. Then S is not linearizable even on its own
(the others never happening is one of their options), and relaxing any one of its
operations makes it linearizable (a smallest such S is NP-hard to find; this one is
usually a handful of operations: a stale read and the writes that make it stale).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from replicalab.checkers.accounting import FINAL
from replicalab.checkers.linmodels import UNKNOWN, LinOp, Model, show_value

MAX_LISTED = 20
"""Operations a paragraph lists (a counterexample not fully shrunk can be long)."""
Verdict = Callable[[list[LinOp], float | None], int]
"""``verdict(ops, deadline_s)`` -> 1 linearizable, 0 not, -1 unknown."""


def relaxed(sub: Sequence[LinOp], part: Sequence[LinOp]) -> list[LinOp]:
    """Return ``sub`` plus every other op of ``part`` made unconstrained: an ``info`` op
    invoked before anything else (it may take effect at any time, or never). Reads among
    the others are left out (an unconstrained read constrains nothing)."""
    inside = {o.index for o in sub}
    t = min((o.invoke_ns for o in part), default=0) - 1
    return list(sub) + [replace(o, outcome="info", invoke_ns=t) for o in part
                        if o.index not in inside and o.f != "read" and o.outcome != "fail"]


def _near(ops: Sequence[LinOp], focus: LinOp) -> list[LinOp]:
    """Return ``ops`` nearest ``focus`` in time first: overlapping its interval, then by
    the gap between the intervals (an ``info`` op's interval has no end)."""
    lo = focus.invoke_ns
    hi = focus.complete_ns if focus.outcome == "ok" else lo

    def gap(o: LinOp) -> int:
        end = o.complete_ns if o.outcome == "ok" else None
        if end is not None and end < lo:
            return lo - end
        return max(0, o.invoke_ns - hi)

    return sorted(ops, key=lambda o: (gap(o), abs(o.invoke_ns - lo), o.index))


def shrink(ops: Sequence[LinOp], verdict: Verdict, deadline_s: float | None,
           focus: LinOp | None = None) -> tuple[list[LinOp], bool]:
    """Return (a counterexample, whether it is 1-minimal): a subset of the
    non-linearizable ``ops`` that stays non-linearizable (``verdict(subset, deadline_s)``
    is 0) and is shrunk until removing any one op makes it linearizable, or as far as
    ``deadline_s`` (``time.monotonic()`` s) allowed.

    With a ``focus`` (the op the search could not get past) it first grows a set from
    the 8, 16, 32 ... ops nearest the focus in time until that set is not linearizable,
    so the expensive checks run on a few ops rather than the whole part; then it drops
    chunks of halving size, then single ops.
    """
    cur = list(ops)

    def still_bad(cand: list[LinOp]) -> bool | None:
        if deadline_s is not None and time.monotonic() > deadline_s:
            return None
        if not cand:
            return False
        v = verdict(cand, deadline_s)
        return None if v < 0 else v == 0

    if focus is not None:
        near = _near(cur, focus)
        k = 8
        while k < len(near):
            bad = still_bad(near[:k])
            if bad:
                cur = near[:k]
                break
            if bad is None and deadline_s is not None and time.monotonic() > deadline_s:
                return cur, False
            k *= 2
    chunk = len(cur) // 2
    while chunk > 1:
        i = 0
        while i < len(cur):
            bad = still_bad(cur[:i] + cur[i + chunk:])
            if bad is None:
                return cur, False
            if bad:
                cur = cur[:i] + cur[i + chunk:]
            else:
                i += chunk
        chunk //= 2
    changed = True
    while changed:
        changed = False
        i = 0
        while i < len(cur):
            bad = still_bad(cur[:i] + cur[i + 1:])
            if bad is None:
                return cur, False
            if bad:
                cur = cur[:i] + cur[i + 1:]
                changed = True
            else:
                i += 1
    return cur, True


def who(process: int) -> str:
    """Return how a process is named in an explanation."""
    return "the final read" if process == FINAL else f"process {process}"


def _span(op: LinOp, t0_ns: int) -> str:
    a = (op.invoke_ns - t0_ns) / 1e6
    if op.outcome != "ok":
        return f"from {a:,.1f} ms (outcome unknown)"
    return f"at {a:,.1f}–{(max(op.complete_ns, op.invoke_ns) - t0_ns) / 1e6:,.1f} ms"


def _written(op: LinOp) -> Any:
    return op.value[1] if op.f == "cas" else op.value


def _observed(op: LinOp) -> Any:
    """Return the value ``op`` needs the register to hold (read: the value; cas: the
    expected one), or UNKNOWN if it needs nothing."""
    if op.f == "read":
        return op.value
    if op.f == "cas":
        return op.value[0]
    return UNKNOWN


def _headline(ce: Sequence[LinOp], part: Sequence[LinOp], model: Model,
              t0_ns: int) -> str | None:
    """Return the sentence naming why the counterexample ``ce`` (of the ops ``part``)
    fails, for register-like ops (None when no simple pattern fits)."""
    if not all(op.f in ("read", "write", "cas") for op in ce):
        return None

    def ms(ns: int) -> str:
        return f"{(ns - t0_ns) / 1e6:,.1f} ms"

    inside = {o.index for o in ce}
    writers = [op for op in ce if op.f in ("write", "cas")]
    every_writer = [op for op in part if op.f in ("write", "cas") and op.outcome != "fail"]
    for op in sorted(ce, key=lambda o: (-o.invoke_ns, o.index)):
        v = _observed(op)
        if v is UNKNOWN or op.outcome != "ok":
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
                if w.outcome != "ok" or _written(w) == v or w.complete_ns >= op.invoke_ns:
                    continue
                if w.f == "cas" and _observed(w) == v:
                    return (f"{did} {at} although {who(w.process)}'s {model.describe(w)} "
                            f"completed at {ms(w.complete_ns)}: {show_value(v)}, written "
                            "once, was already overwritten.")
                early = [r for r in ce if r is not op and r.outcome == "ok"
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
        if len(of_v) == 1 and of_v[0].outcome == "ok":
            # v was written once; another value seen after v certainly existed means v
            # had been replaced, and nothing writes it again
            x = of_v[0]
            for r in sorted(ce, key=lambda o: -o.complete_ns):
                u = _observed(r)
                if (r is op or r.f != "read" or r.outcome != "ok" or u == v
                        or r.complete_ns >= op.invoke_ns):
                    continue
                if x.index in inside and x.complete_ns < r.invoke_ns:
                    since = f"after the write of {show_value(v)} completed at " \
                            f"{ms(x.complete_ns)}"
                else:
                    first = [r0 for r0 in ce if r0 is not op and r0.outcome == "ok"
                             and _observed(r0) == v and r0.complete_ns < r.invoke_ns]
                    if not first:
                        continue
                    since = (f"after {who(first[0].process)} had read {show_value(v)} "
                             f"(completed at {ms(first[0].complete_ns)})")
                return (f"{did} {at} although {who(r.process)} read {show_value(u)} "
                        f"(completed at {ms(r.complete_ns)}) {since}: {show_value(v)}, "
                        "written once, cannot come back.")
        # the writes of v are all in the counterexample, done, and ordered before ...
        pinned = all(x.index in inside and x.outcome == "ok" for x in of_v)
        if not pinned:
            continue
        for w in sorted(writers, key=lambda w: -w.complete_ns):
            if (w is op or w.outcome != "ok" or _written(w) == v
                    or w.complete_ns >= op.invoke_ns):
                continue
            if all(x.complete_ns < w.invoke_ns for x in of_v):
                wrote = "write" if w.f == "write" else "cas"
                if v is None:
                    tail = " and nil cannot come back after a write"
                else:
                    tail = (f" and no write of {show_value(v)} can come after it (the last "
                            f"write of {show_value(v)} completed at "
                            f"{ms(max(x.complete_ns for x in of_v))}, before it began)")
                return (f"{did} {at} although the {wrote} of {show_value(_written(w))} by "
                        f"{who(w.process)} completed at {ms(w.complete_ns)}{tail}.")
        for r in ce:
            u = _observed(r)
            if (r is op or r.outcome != "ok" or u is UNKNOWN or u == v
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
    return None


def explain(ce: Sequence[LinOp], part: Sequence[LinOp], model: Model, t0_ns: int,
            minimal: bool = True) -> str:
    """Return one paragraph saying why the counterexample ``ce`` (of the ops ``part``) is
    not linearizable and listing its operations (times in ms since ``t0_ns``)."""
    ops = sorted(ce, key=lambda o: (o.invoke_ns, o.index))
    head = _headline(ops, part, model, t0_ns) or (
        f"These {len(ops)} operations cannot be put in any order that respects real time "
        f"and the {model.name} model's rules.")
    listed = "; ".join(f"{who(o.process)} {model.describe(o)} {_span(o, t0_ns)}"
                       for o in ops[:MAX_LISTED])
    if len(ops) > MAX_LISTED:
        listed += f"; and {len(ops) - MAX_LISTED} more"
    what = "minimal counterexample" if minimal else "counterexample (not fully shrunk)"
    count = f"{len(ops)} operation{'' if len(ops) == 1 else 's'}"
    return f"{head} The {what}, {count}: {listed}."


def explain_prefix(order: Sequence[LinOp], stuck: LinOp | None, model: Model, t0_ns: int,
                   total: int) -> str:
    """Return a sentence on how far the search got in a part it could not decide."""
    text = (f"The search stopped at the deadline; the longest linearizable prefix it found "
            f"orders {len(order)} of {total} operations")
    if stuck is not None:
        text += (f" and could not get past {who(stuck.process)} {model.describe(stuck)} "
                 f"{_span(stuck, t0_ns)}")
    return text + "."

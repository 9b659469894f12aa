"""Brute force for the linearizability tests: every order of a few operations, any model,
and the counterexample semantics of ``checkers/linearizability/explain.py`` built from its
definition (not from the checker's code), so the checker is compared with an independent answer."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from replicalab.checkers.linearizability.ops import UNRECORDED, LinOp


def brute_force(ops: list[LinOp], model: Any, init: Any = None, use_init: bool = False) -> bool:
    """Return whether some order of ``ops`` is a legal run of ``model`` that respects real
    time: every ``ok`` op placed, each ``info`` or ``optional`` op placed or left out,
    ``fail`` ops and reads that did not complete ``ok`` left out; op a comes before op b
    when a took effect inside its interval (``ok``, ``optional`` when placed) and
    completed before b was invoked. Starts from ``init`` when ``use_init``, else from
    ``model.init()``."""
    reads = model.reads
    live = [o for o in ops if o.outcome != "fail"
            and not (o.f in reads and o.outcome != "ok")]

    def before(x: LinOp, y: LinOp) -> bool:
        return x.outcome in ("ok", "optional") and x.complete_ns < y.invoke_ns

    def search(placed: frozenset[int], skipped: frozenset[int], state: Any) -> bool:
        rest = [o for o in live if o.index not in placed and o.index not in skipped]
        if all(o.outcome != "ok" for o in rest):
            return True
        for o in rest:
            # an op may go next if nothing left (placed later) had to precede it
            if any(before(x, o) for x in rest if x is not o):
                continue
            legal, new = model.step(state, o)
            if legal and search(placed | {o.index}, skipped, new):
                return True
        # or one that may not have happened did not
        return any(o.outcome != "ok" and search(placed, skipped | {o.index}, state)
                   for o in rest)

    return search(frozenset(), frozenset(), init if use_init else model.init())


def _written(o: LinOp) -> Any:
    return o.value[1] if o.f == "cas" else o.value


def relaxed_bad(kept: list[LinOp], ops: list[LinOp], model: Any, window: bool) -> bool:
    """Return whether ``kept`` (a subset of ``ops``) is a counterexample: not linearizable
    whatever the other ops did — each other ``ok`` op took effect inside its interval or
    not at all, each ``info`` op at any time after its invoke or never, an op invoked after
    every kept op completed left out. With ``window`` (the register models), only the
    ops overlapping the kept ops' window count, the register starting from nil or any
    value written by an op invoked before the window."""
    inside = {o.index for o in kept}
    if not inside:
        return False
    lo = min(o.invoke_ns for o in kept)
    hi = max(o.complete_ns for o in kept)
    starts = {model.init()}
    cas: list[LinOp] = []
    use: list[LinOp] = []
    for o in ops:
        if o.outcome == "fail" or o.invoke_ns > hi:
            continue
        if o.index in inside:
            use.append(o)
            continue
        if window and o.invoke_ns < lo and o.f == "write":
            starts.add(model.intern_key(o.value))
        if window and o.invoke_ns < lo and o.f == "cas":
            cas.append(o)
        if o.outcome != "ok":
            use.append(o)
        elif not window or o.complete_ns >= lo:
            use.append(replace(o, outcome="optional"))
    if not window:
        return not brute_force(use, model)
    for _ in range(len(cas)):  # a cas from a possible start may have written its value
        for o in cas:
            if o.value[0] is UNRECORDED or model.intern_key(o.value[0]) in starts:
                starts.add(model.intern_key(o.value[1]))
    return not any(brute_force(use, model, s, use_init=True) for s in starts)


def counterexample_bad(kept: list[LinOp], ops: list[LinOp], model: Any) -> bool:
    """Return whether ``kept`` is a counterexample of ``ops`` as shrinking measures it:
    on its window for the register models, unless even all the ``ok`` ops are not seen
    failing on theirs (then, as for other models, on the whole part)."""
    window = (getattr(model, "encode", None) is not None
              and not any(o.f == "append" for o in ops))
    if window:
        everything = [o for o in ops if o.outcome == "ok"]
        window = relaxed_bad(everything, ops, model, window=True)
    return relaxed_bad(kept, ops, model, window=window)

"""From a linearizability check of a register history to ``results.json``: the verdict,
per key the counterexample and explanation, and the timeline the report draws.

Pure functions (no I/O). Times in the results are ms since the run's first invoke, the
origin the fault periods use too, so the report can shade nemesis periods on the timeline.
The timeline of a key keeps at most ``limit`` operations: for a key that is not
linearizable, the counterexample and the operations nearest it in time (its
neighbourhood); for a linearizable one, the run's first operations on it. So the page stays
small however long the history is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from replicalab.checkers.accounting import FINAL, run_start_ns
from replicalab.history import History, decode_value

MAX_TIMELINES = 4
"""Keys drawn in the report: the non-linearizable ones first (then unknown, then valid)."""
MAX_EXAMPLE_OPS = 64
"""Operations of a counterexample listed in results.json (a minimal one has a few)."""


@dataclass(frozen=True)
class TimelineOp:
    """One operation as the timeline draws it (times in ms since the run started).

    ``complete_ms`` is None for an operation whose outcome is unknown (``info``: it may
    take effect at any time after its invoke); ``lin_rank`` is its place in the checker's
    linearization and ``lin_ms`` a time at which it can take effect in that order, if the
    checker placed it; ``offending`` marks an operation of the counterexample.
    """

    row: int
    process: int
    f: str
    type: str
    value: str | None
    expect: str | None
    invoke_ms: float
    complete_ms: float | None
    lin_ms: float | None = None
    lin_rank: int | None = None
    offending: bool = False


def short_value(value: str | None) -> str:
    """Return a probe value as ``seq.writer`` (the part that names it), ``nil`` for None."""
    if value is None:
        return "nil"
    pv = decode_value(value)
    return f"{pv.seq}.{pv.writer}" if pv is not None else value


def linearization_points(order: Sequence[int], invoke_ns: Sequence[int],
                         complete_ns: Sequence[int | None]) -> dict[int, int]:
    """Return op -> a time (ns) inside its interval at which it takes effect, for ops in
    linearization ``order``: each point is the op's invoke or the previous point, whichever
    is later (a legal order never puts an op after one that invoked after it completed)."""
    points: dict[int, int] = {}
    last = None
    for i in order:
        t = invoke_ns[i] if last is None else max(invoke_ns[i], last)
        end = complete_ns[i]
        if end is not None and t > end:
            t = end  # not a legal order: draw the point where the op ends, do not hide it
        points[i] = t
        last = t
    return points


def neighbourhood(invoke_ms: Sequence[float], complete_ms: Sequence[float | None],
                  focus: Iterable[int], limit: int) -> list[int]:
    """Return up to ``limit`` op positions, in invoke order: every op of ``focus`` and the
    ops closest in time to the focus span (overlapping it first, then by gap); with no
    focus, the first ``limit`` ops."""
    n = len(invoke_ms)
    focus = sorted(set(focus))
    if not focus:
        return sorted(range(n), key=lambda i: (invoke_ms[i], i))[:limit]
    lo = min(invoke_ms[i] for i in focus)
    ends = [complete_ms[i] for i in focus if complete_ms[i] is not None]
    hi = max(ends) if ends else max(invoke_ms[i] for i in focus)
    hi = max(hi, lo)

    def gap(i: int) -> float:
        end = complete_ms[i]
        if end is not None and end < lo:
            return lo - end
        return max(0.0, invoke_ms[i] - hi)

    rest = sorted((i for i in range(n) if i not in set(focus)),
                  key=lambda i: (gap(i), abs(invoke_ms[i] - lo), i))
    keep = focus + rest[: max(0, limit - len(focus))]
    return sorted(keep, key=lambda i: (invoke_ms[i], i))


def timeline(key: str, valid: Any, ops: Sequence[TimelineOp], limit: int,
             shown_focus: Iterable[int] = ()) -> dict[str, Any]:
    """Return the timeline of one key: the window's ops (at most ``limit``), its span in
    ms and how many of the key's ops it leaves out."""
    focus = [i for i, op in enumerate(ops) if op.offending]
    focus += list(shown_focus)
    keep = neighbourhood([o.invoke_ms for o in ops], [o.complete_ms for o in ops], focus, limit)
    chosen = [ops[i] for i in keep]
    ends = [o.complete_ms for o in chosen if o.complete_ms is not None]
    t0 = min((o.invoke_ms for o in chosen), default=0.0)
    t1 = max([*ends, *(o.invoke_ms for o in chosen)], default=t0)
    return {"key": key, "valid": valid, "t0_ms": round(t0, 3), "t1_ms": round(t1, 3),
            "ops_total": len(ops), "ops_shown": len(chosen),
            "ops": [_op_json(o) for o in chosen]}


def _op_json(o: TimelineOp) -> dict[str, Any]:
    d = asdict(o)
    for k in ("invoke_ms", "complete_ms", "lin_ms"):
        if d[k] is not None:
            d[k] = round(d[k], 3)
    return d


def process_label(process: int) -> str:
    """Return how a process is named on the timeline (the final reads are ``final``)."""
    return "final" if process == FINAL else str(process)


def history_origin_ns(h: History) -> int:
    """Return the time origin of the results (the run's first invoke), in ns."""
    return run_start_ns(h)


MAX_PARTS = 100
"""Keys listed one by one in results.json (the non-linearizable ones first)."""
_RANK = {0: 0, -1: 1, 1: 2, 2: 3}
"""Order of the keys listed by verdict (``Verdict`` values): not linearizable, unknown,
linearizable, skipped."""


def timeline_ops(ops: Sequence[Any], t0_ns: int) -> list[TimelineOp]:
    """Return the checker's ops (``LinOp``) of one key as timeline ops, times in ms since
    ``t0_ns``; an ``info`` op has no completion (it may take effect at any time)."""
    out = []
    for op in ops:
        expect, value = op.value if op.f == "cas" else (None, op.value)
        done = op.outcome != "info" and op.complete_ns >= 0
        out.append(TimelineOp(
            row=op.index, process=op.process, f=op.f, type=op.outcome,
            value=None if value is None else str(value),
            expect=None if expect is None else str(expect),
            invoke_ms=(op.invoke_ns - t0_ns) / 1e6,
            complete_ms=(op.complete_ns - t0_ns) / 1e6 if done else None))
    return out


def part_results(ops: Sequence[Any], linearization: Sequence[int],
                 counterexample: Sequence[int] | None, t0_ns: int) -> list[TimelineOp]:
    """Return one key's ops (``LinOp``, in invoke order) as timeline ops with their
    linearization points and the counterexample marked (both given as ``LinOp.index``)."""
    tops = timeline_ops(ops, t0_ns)
    pos = {op.index: n for n, op in enumerate(ops)}
    bad = {pos[i] for i in (counterexample or ()) if i in pos}
    order = [pos[i] for i in linearization if i in pos]
    points = linearization_points(
        order, [op.invoke_ns for op in ops],
        [op.complete_ns if t.complete_ms is not None else None for op, t in zip(ops, tops,
                                                                                 strict=True)])
    rank = {n: r for r, n in enumerate(order)}
    return [TimelineOp(**{**asdict(o), "offending": n in bad, "lin_rank": rank.get(n),
                          "lin_ms": (points[n] - t0_ns) / 1e6 if n in points else None})
            for n, o in enumerate(tops)]


def linearizability_results(h: History, timeout_s: float, limit: int) -> dict[str, Any]:
    """Return ``{"linearizability": verdict and per-key parts, "timeline": [...]}`` for
    the register history ``h`` checked with the ``kv`` model within ``timeout_s``."""
    from replicalab.checkers.linearizability.from_history import (
        check_history,
        encode_history,
        history_key_ops,
        ops_from_history,
    )
    from replicalab.checkers.linearizability.ops import Verdict
    from replicalab.checkers.linearizability.registry import get_model

    kv = get_model("kv")  # resolved once: the object goes on from here
    try:
        cols = encode_history(h, kv)
    except (TypeError, OverflowError):
        cols = None  # values the interning cannot take: check_history takes the LinOp path
    result = check_history(h, model=kv, timeout_s=timeout_s, columns=cols)
    t0 = history_origin_ns(h)
    by_key: dict[Any, list[Any]] = {}

    def key_ops(key: Any) -> list[Any]:
        """The key's LinOps in invoke order, made only for the keys drawn or explained."""
        if key not in by_key:
            if cols is not None:
                ops = history_key_ops(h, cols, key)
            else:
                ops = [o for o in ops_from_history(h) if o.key == key]
            by_key[key] = sorted(ops, key=lambda o: (o.invoke_ns, o.index))
        return by_key[key]

    parts = sorted(result.parts, key=lambda p: (_RANK[p.verdict], str(p.key)))
    listed, timelines = [], []
    for part in parts:
        if len(listed) >= MAX_PARTS and len(timelines) >= MAX_TIMELINES:
            break
        valid = part.verdict.json()  # the JSON edge: true / false / "unknown"
        drawn = len(timelines) < MAX_TIMELINES and (
            part.verdict != Verdict.LINEARIZABLE or not timelines)
        # a key with no counterexample that is not drawn needs no LinOps: its entry lists
        # no ops
        tops = (part_results(key_ops(part.key), part.linearization or (),
                             part.counterexample, t0)
                if drawn or part.counterexample else [])
        if len(listed) < MAX_PARTS:
            listed.append({"key": str(part.key), "valid": valid, "ops": part.ops,
                           "counterexample": [_op_json(o) for o in tops if o.offending][
                               :MAX_EXAMPLE_OPS] or None,
                           "explanation": part.explanation})
        if drawn:
            timelines.append(timeline(str(part.key), valid, tops, limit))
    return {"linearizability": {
        "model": "kv", "valid": result.verdict.json(), "keys": len(parts), "ops": result.ops,
        "keys_not_linearizable": sum(p.verdict == Verdict.NOT_LINEARIZABLE
                                     for p in result.parts),
        "keys_unknown": sum(p.verdict == Verdict.UNKNOWN for p in result.parts),
        "timeout_s": timeout_s, "parts": listed, "parts_left_out": len(parts) - len(listed)},
        "timeline": timelines}

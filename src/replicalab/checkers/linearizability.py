"""Linearizability checking of register histories (pure, no I/O).

``check(ops, model="kv", timeout_s=60)`` splits the history into independent parts (one
per key for ``kv``: P-compositionality), searches each with Wing–Gong–Lowe's algorithm
(:mod:`replicalab.checkers.linsearch`) and returns a :class:`CheckResult`: ``valid`` True,
False or ``"unknown"`` (the deadline came first), and per part the linearization found
(or the longest linearizable prefix), a minimal counterexample and a plain-language
explanation (:mod:`replicalab.checkers.linexplain`). Models are in
:mod:`replicalab.checkers.linmodels`.

Semantics are Jepsen's: an ``ok`` op took effect inside its interval, a ``fail`` op never
did, an ``info`` op (or one that never completed) may have taken effect at any time after
its invoke or never, and reads that did not complete ``ok`` constrain nothing.

Memory is bounded: each part's memo cache holds at most ``cache_bytes`` worth of entries
(then it is emptied, which costs time, never a wrong verdict), and parts are searched one
after another, so peak memory is the history plus one part's cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from replicalab.checkers.linexplain import explain, explain_prefix, relaxed, shrink
from replicalab.checkers.linmodels import (
    UNKNOWN,
    LinOp,
    Model,
    event_order,
    get_model,
    prepare,
)
from replicalab.checkers.linsearch import (
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    search_model,
    search_part,
)
from replicalab.history import F_NAMES, NEMESIS, History

__all__ = ["UNKNOWN", "CheckResult", "LinOp", "PartResult", "check", "check_part",
           "ops_from_history"]

DEFAULT_CACHE_BYTES = 256 * 2**20
"""Memo cache budget per part (the one part being searched at a time)."""
SHRINK_TIMEOUT_S = 10.0
"""Most time spent shrinking one part's counterexample (then it is returned as it is)."""
SHRINK_GRACE_S = 1.0
"""How far past a check's deadline shrinking may go, all parts together."""

try:  # the native core (native/, built by make) when installed; pure Python otherwise
    from replicalab_native import search_part as _native_search_part
except ImportError:
    _native_search_part = None

search_core: Callable[..., tuple[int, list[int], int]] = _native_search_part or search_part
"""The register search core: ``linsearch.search_part`` or a native drop-in with the same
contract."""


@dataclass(frozen=True)
class PartResult:
    """The verdict on one independent part (one key of a ``kv`` history).

    ``valid`` is True, False or ``"unknown"``; ``ops`` counts the part's ops as given;
    ``linearization`` lists ``LinOp.index`` values in linearization order — all the ops
    that took effect when valid, the longest linearizable prefix found otherwise (None if
    the part was never searched); ``counterexample`` the indexes of a minimal
    non-linearizable subset (None unless not valid); ``explanation`` a paragraph saying
    why; ``check_s`` the time spent on the part in s (search and shrinking).
    """

    key: Any
    valid: bool | str
    ops: int
    linearization: list[int] | None
    counterexample: list[int] | None
    explanation: str | None
    check_s: float
    minimal: bool = True


@dataclass(frozen=True)
class CheckResult:
    """The verdict on a whole history: True only if every part is linearizable, False if
    one is not, else ``"unknown"``; ``ops`` counts the ops given; ``check_s`` in s."""

    model: str
    valid: bool | str
    ops: int
    parts: list[PartResult]
    check_s: float


def _cache_entries(n: int, cache_bytes: int) -> int:
    """Return how many memo entries of an ``n``-op part fit in ``cache_bytes`` (an entry
    is one Python int of n + 64 bits plus its set slot: about n / 8 + 100 bytes)."""
    return max(1024, cache_bytes // (n // 8 + 100))


def _verdict_of(model: Model, ops: list[LinOp], deadline_s: float | None,
                cache_bytes: int) -> tuple[int, list[LinOp], LinOp | None]:
    """Return (verdict 1/0/-1, linearization or longest prefix as LinOps, stuck op)."""
    encode = getattr(model, "encode", None)
    if encode is not None:
        enc = encode(ops)
        verdict, order, stuck = search_core(enc.kinds, enc.a, enc.b, enc.events, enc.init,
                                            deadline_s, _cache_entries(len(enc.ops), cache_bytes))
        kept = enc.ops
    else:
        kept = prepare(ops)

        def step(state: Any, i: int) -> tuple[bool, Any]:
            return model.step(state, kept[i])

        verdict, order, stuck = search_model(len(kept), event_order(kept), step, model.init(),
                                             deadline_s, _cache_entries(len(kept), cache_bytes))
    return verdict, [kept[i] for i in order], kept[stuck] if stuck >= 0 else None


def check_part(model: Model, key: Any, ops: Sequence[LinOp], deadline_s: float | None = None,
               t0_ns: int | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
               shrink_timeout_s: float = SHRINK_TIMEOUT_S,
               shrink_deadline_s: float | None = None) -> PartResult:
    """Return the verdict on one part (``ops`` of one key), with its counterexample and
    explanation when it is not linearizable; times in explanations are ms since
    ``t0_ns`` (default: the part's first invoke). The search stops at ``deadline_s``,
    shrinking after ``shrink_timeout_s`` or at ``shrink_deadline_s`` (``time.monotonic()``
    values), whichever is first; then the counterexample is returned as it stands."""
    started = time.monotonic()
    ops = list(ops)
    if t0_ns is None:
        t0_ns = min((o.invoke_ns for o in ops), default=0)
    verdict, order, stuck = _verdict_of(model, ops, deadline_s, cache_bytes)
    linearization = [o.index for o in order]
    if verdict == LINEARIZABLE:
        return PartResult(key, True, len(ops), linearization, None, None,
                          time.monotonic() - started)
    if verdict != NOT_LINEARIZABLE:
        return PartResult(key, "unknown", len(ops), linearization, None,
                          explain_prefix(order, stuck, model, t0_ns, len(ops)),
                          time.monotonic() - started)
    # shrinking may run past this part's share of the time (the verdict is known and
    # the counterexample is what a person needs) but not past shrink_deadline_s
    now = time.monotonic()
    end = now + shrink_timeout_s
    if shrink_deadline_s is not None:
        end = min(end, shrink_deadline_s)

    kept = prepare(ops)

    def sub_verdict(sub: list[LinOp], dl: float | None) -> int:
        return _verdict_of(model, relaxed(sub, kept), dl, cache_bytes)[0]

    ce, minimal = shrink(kept, sub_verdict, end, focus=stuck)
    ce.sort(key=lambda o: (o.invoke_ns, o.index))
    return PartResult(key, False, len(ops), linearization, [o.index for o in ce],
                      explain(ce, kept, model, t0_ns, minimal), time.monotonic() - started, minimal)


def check(ops: Sequence[LinOp], model: str | Model = "kv", timeout_s: float | None = None,
          deadline_s: float | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
          progress: Callable[[int, int], None] | None = None,
          t0_ns: int | None = None) -> CheckResult:
    """Return the linearizability verdict on ``ops`` under ``model`` (a name or a Model).

    The search stops at ``timeout_s`` from now or at ``deadline_s`` (a
    ``time.monotonic()`` value), whichever is first: parts decided by then keep their
    verdicts, the others are ``"unknown"`` with the longest prefix found. With a
    deadline each part first gets a fair share of the time left (smallest parts first),
    then the undecided ones share the rest, so most keys get decided. ``progress``
    is called with (parts done, parts total). Raises ValueError for ops the model cannot
    take.
    """
    started = time.monotonic()
    m = get_model(model)
    if timeout_s is not None:
        limit = started + timeout_s
        deadline_s = limit if deadline_s is None else min(deadline_s, limit)
    parts = m.partition(list(ops))
    if t0_ns is None:
        t0_ns = min((o.invoke_ns for o in ops), default=0)
    results: list[PartResult | None] = [None] * len(parts)
    order = sorted(range(len(parts)), key=lambda j: len(parts[j][1]))
    done = 0
    if deadline_s is None:
        for j in order:
            results[j] = check_part(m, parts[j][0], parts[j][1], None, t0_ns, cache_bytes)
            done += 1
            if progress is not None:
                progress(done, len(parts))
    else:
        # two passes: first each part gets a fair share of the time left, so one hard key
        # cannot keep easy ones undecided; then the undecided ones share what remains
        shrink_until = deadline_s + SHRINK_GRACE_S
        deferred = []
        for n, j in enumerate(order):
            now = time.monotonic()
            share = now + max(0.0, deadline_s - now) / (len(order) - n)
            r = check_part(m, parts[j][0], parts[j][1], min(share, deadline_s), t0_ns,
                           cache_bytes, shrink_deadline_s=shrink_until)
            results[j] = r
            if r.valid == "unknown":
                deferred.append(j)
            else:
                done += 1
                if progress is not None:
                    progress(done, len(parts))
        for j in deferred:
            if time.monotonic() < deadline_s:
                r = check_part(m, parts[j][0], parts[j][1], deadline_s, t0_ns, cache_bytes,
                               shrink_deadline_s=shrink_until)
                if r.valid != "unknown" or len(r.linearization or ()) >= len(
                        results[j].linearization or ()):
                    results[j] = r
            done += 1
            if progress is not None:
                progress(done, len(parts))
    final = [r for r in results if r is not None]
    verdicts = [r.valid for r in final]
    valid: bool | str = (False if False in verdicts else
                         "unknown" if "unknown" in verdicts else True)
    return CheckResult(m.name, valid, len(ops), final, time.monotonic() - started)


_CHECKED_F = {"read", "write", "cas"}


def ops_from_history(h: History) -> list[LinOp]:
    """Return the read, write and cas ops of a replicalab History as LinOps (one per row,
    ``index`` = the row; nemesis ops and other kinds are left out).

    An op still ``invoke`` (never completed) becomes ``info``. A cas is ``(expected, new)``
    from its ``expects`` and ``values``; a cas recorded without its expected value (an
    older history) is ``(UNKNOWN, new)`` and checks as a write. Raises
    ValueError for an op on several keys (the register models take one key per op).
    """
    out: list[LinOp] = []
    proc, typ, fcol = h.process, h.type, h.f
    inv, comp = h.invoke_ns, h.complete_ns
    for i in range(len(h)):
        if proc[i] == NEMESIS:
            continue
        f = F_NAMES[fcol[i]]
        if f not in _CHECKED_F:
            continue
        keys, values = h.keys[i], h.values[i]
        if len(keys) != 1:
            raise ValueError(f"row {i}: a {f} of {len(keys)} keys; the linearizability models "
                             "check one key per op (a register workload's history)")
        t = typ[i]
        outcome = "ok" if t == 1 else "fail" if t == 2 else "info"
        if f == "cas":
            expects = h.expects[i] if i < len(h.expects) else ()
            value: Any = (expects[0] if expects else UNKNOWN, values[0] if values else None)
        else:
            value = values[0] if values else None
        out.append(LinOp(index=i, process=int(proc[i]), f=f, key=keys[0], value=value,
                         outcome=outcome, invoke_ns=int(inv[i]),
                         complete_ns=int(comp[i])))
    return out

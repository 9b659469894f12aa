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

With the native core installed (``replicalab_native``, built by ``make``) and a shipped
model, the whole history goes to it at once as int64 columns (:func:`encode_columns`,
``replicalab_native.check_kv``): Jepsen's preparation, the partition, event ordering and
every part's search run natively with the same results as the Python pipeline, which
stays the reference (and runs whenever ``search_core`` is the pure-Python one).
:func:`check_history` checks a recorded History the same way without a LinOp per row:
:func:`encode_history` builds the same columns from the History's own (natively when
the core has ``encode_register_history``), and LinOps are made only for the keys that
need an explanation.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import numpy as np

from replicalab.checkers.linexplain import explain, explain_prefix, relaxed, shrink
from replicalab.checkers.linmodels import (
    KV,
    UNKNOWN,
    CasRegister,
    LinOp,
    Model,
    Register,
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

__all__ = ["SKIPPED", "UNKNOWN", "CheckResult", "Columns", "LinOp", "PartResult", "check",
           "check_history", "check_part", "encode_columns", "encode_history", "history_key_ops",
           "history_op", "native_available", "ops_from_history"]

DEFAULT_CACHE_BYTES = 256 * 2**20
"""Memo cache budget per part (the one part being searched at a time)."""
SHRINK_TIMEOUT_S = 10.0
"""Most time spent shrinking one part's counterexample (then it is returned as it is)."""
SHRINK_GRACE_S = 1.0
"""How far past a check's deadline shrinking may go, all parts together."""

SKIPPED = "skipped"
"""A part's verdict when ``fail_fast`` stopped before searching it (left unchecked)."""

try:  # the native core (native/, built by make) when installed; pure Python otherwise
    from replicalab_native import search_part as _native_search_part
except ImportError:
    _native_search_part = None
try:  # the whole-history entry (an older build of the native core may lack it)
    from replicalab_native import check_kv as _native_check_kv
except ImportError:
    _native_check_kv = None
try:  # the History encoder (an older build of the native core may lack it)
    from replicalab_native import encode_register_history as _native_encode_history
except ImportError:
    _native_encode_history = None

search_core: Callable[..., tuple[int, list[int], int]] = _native_search_part or search_part
"""The register search core: ``linsearch.search_part`` or a native drop-in with the same
contract."""


@dataclass(frozen=True)
class PartResult:
    """The verdict on one independent part (one key of a ``kv`` history).

    ``valid`` is True, False, ``"unknown"`` or ``"skipped"`` (``fail_fast`` stopped before
    the part was searched: it was left unchecked); ``ops`` counts the part's ops as given;
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
    one is not, else ``"unknown"``; ``ops`` counts the ops given; ``check_s`` in s; with
    ``fail_fast`` the parts after the first one not linearizable are ``"skipped"``."""

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
    return _part_result(model, key, ops, verdict, order, stuck, t0_ns, cache_bytes,
                        shrink_timeout_s, shrink_deadline_s, started)


def _part_result(model: Model, key: Any, ops: list[LinOp], verdict: int, order: list[LinOp],
                 stuck: LinOp | None, t0_ns: int, cache_bytes: int, shrink_timeout_s: float,
                 shrink_deadline_s: float | None, started: float,
                 searched_s: float = 0.0) -> PartResult:
    """Return the PartResult of a part searched to (verdict, order, stuck): its
    counterexample shrunk and explained when not linearizable, the prefix explained when
    unknown; ``check_s`` is the time since ``started`` plus ``searched_s`` (a search timed
    elsewhere)."""
    linearization = [o.index for o in order]
    if verdict == LINEARIZABLE:
        return PartResult(key, True, len(ops), linearization, None, None,
                          time.monotonic() - started + searched_s)
    if verdict != NOT_LINEARIZABLE:
        return PartResult(key, "unknown", len(ops), linearization, None,
                          explain_prefix(order, stuck, model, t0_ns, len(ops)),
                          time.monotonic() - started + searched_s)
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
                      explain(ce, kept, model, t0_ns, minimal),
                      time.monotonic() - started + searched_s, minimal)


_KIND = {"read": 0, "write": 1, "cas": 2}
_OUTCOME = {"ok": 0, "fail": 2}
_SHIPPED = (KV, CasRegister, Register)
_OK, _INFO, _FAIL = 0, 1, 2
_NATIVE_VERDICT = {1: True, 0: False, -1: "unknown", 2: SKIPPED}


@dataclass(frozen=True)
class Columns:
    """A history as ``replicalab_native.check_kv`` takes it: one row per op in the order
    given, each column ``bytes`` of int64 (see :func:`encode_columns`); ``keys[k]`` is the
    key behind key id ``k``; ``t0_ns`` the earliest invoke (0 if none)."""

    keys: list[Any]
    key: bytes
    kind: bytes
    a: bytes
    b: bytes
    outcome: bytes
    invoke_ns: bytes
    complete_ns: bytes
    index: bytes
    t0_ns: int

    def args(self) -> tuple[bytes, ...]:
        """Return the eight columns in ``check_kv``'s argument order."""
        return (self.key, self.kind, self.a, self.b, self.outcome, self.invoke_ns,
                self.complete_ns, self.index)


def encode_columns(ops: Sequence[LinOp], model: str | Model = "kv") -> Columns:
    """Return ``ops`` as int64 columns for the native core: key ids and values interned
    in first-seen order (value 0 is None, a register's nil; a cas's unrecorded expected
    value is -1), kind 0 read / 1 write / 2 cas, outcome 0 ok / 1 info / 2 fail, times in
    ns. Raises ValueError as the model's ``partition`` does for ops it cannot take, and
    TypeError or OverflowError for times or indexes that are not int64."""
    m = get_model(model)
    if not ops:
        empty = b""
        return Columns([], empty, empty, empty, empty, empty, empty, empty, empty, 0)
    # column by column, each a comprehension or a C-level map: this encoding is the part
    # of a native check that runs in Python, so it is kept to a few cheap passes
    keyc = [o.key for o in ops]
    fc = [o.f for o in ops]
    vc = [o.value for o in ops]
    oc = [o.outcome for o in ops]
    invc = [o.invoke_ns for o in ops]
    kind_of = {f: _KIND[f] for f in m.allowed}
    kinds = list(map(kind_of.get, fc))
    bad = kinds.index(None) if None in kinds else len(kinds)
    cas = [i for i, k in enumerate(kinds) if k == 2] if 2 in kinds else []
    bad = min([bad, *(i for i in cas if not (isinstance(vc[i], tuple) and len(vc[i]) == 2))])
    if bad < len(kinds):  # the first op the model cannot take, as partition names it
        m._check_ops([ops[bad]])  # type: ignore[attr-defined]  # raises
    if cas:
        av, bv = vc[:], [None] * len(vc)
        for i in cas:
            av[i], bv[i] = vc[i]
        vals = dict.fromkeys(chain((None,), av, (bv[i] for i in cas)))
    else:
        av, bv = vc, None
        vals = dict.fromkeys(chain((None,), av))
    vid = {v: n for n, v in enumerate(vals)}  # first-seen ids, None (nil) is 0
    acol = list(map(vid.__getitem__, av))
    bcol = list(map(vid.__getitem__, bv)) if cas else [0] * len(vc)
    for i in cas:
        if av[i] is UNKNOWN:
            acol[i] = -1  # an unrecorded expected value: legal in every state
    keys = list(dict.fromkeys(keyc))
    if len(keys) > 1 and not isinstance(m, KV):
        m.partition(ops)  # raises: the single-register models take one key
    kid = {k: n for n, k in enumerate(keys)}
    ocol = list(map(_OUTCOME.get, oc, repeat(_INFO)))
    return Columns(keys=keys, key=array("q", list(map(kid.__getitem__, keyc))).tobytes(),
                   kind=array("q", kinds).tobytes(), a=array("q", acol).tobytes(),
                   b=array("q", bcol).tobytes(), outcome=array("q", ocol).tobytes(),
                   invoke_ns=array("q", invc).tobytes(),
                   complete_ns=array("q", [o.complete_ns for o in ops]).tobytes(),
                   index=array("q", [o.index for o in ops]).tobytes(), t0_ns=min(invc))


def native_available(model: str | Model = "kv") -> bool:
    """Return whether :func:`check` runs ``model`` through the native whole-history core:
    it is installed, ``search_core`` is the native one (tests swap in the pure-Python one
    to get the reference path) and the model is one of the shipped ones."""
    return (_native_check_kv is not None and _native_search_part is not None
            and search_core is _native_search_part
            and type(get_model(model)) in _SHIPPED)


def _check_native(ops_at: Callable[[list[int]], list[LinOp]], m: Model, cols: Columns,
                  deadline_s: float | None, cache_bytes: int,
                  progress: Callable[[int, int], None] | None,
                  t0_ns: int, fail_fast: bool) -> list[PartResult]:
    """Return every part's result with the searches run by ``replicalab_native.check_kv``
    (same verdicts, orders and stuck ops as the Python pipeline), then counterexamples
    shrunk and explanations written as :func:`check_part` does. ``ops_at(rows)`` returns
    the LinOps of column rows: it is called only for the parts that are not
    linearizable (or unknown), once per part."""
    raw = _native_check_kv(*cols.args(), deadline_s=deadline_s, cache_bytes=cache_bytes,
                           fail_fast=fail_fast, progress=progress)
    index = np.frombuffer(cols.index, dtype=np.int64)
    key_ids = None
    shrink_until = None if deadline_s is None else deadline_s + SHRINK_GRACE_S
    out = []
    for kid, n_ops, verdict, order_b, stuck, seconds in raw:
        key = cols.keys[kid] if cols.keys else None
        order = np.frombuffer(order_b, dtype=np.uint32)
        v = _NATIVE_VERDICT[verdict]
        if v is True:
            out.append(PartResult(key, True, n_ops, index[order].tolist(), None, None,
                                  seconds))
        elif v == SKIPPED:
            out.append(PartResult(key, SKIPPED, n_ops, None, None, None, 0.0))
        else:
            if key_ids is None:
                key_ids = np.frombuffer(cols.key, dtype=np.int64)
            rows = np.flatnonzero(key_ids == kid).tolist()
            part = ops_at(rows)
            by_row = dict(zip(rows, part, strict=True))
            out.append(_part_result(m, key, part, verdict, [by_row[r] for r in order.tolist()],
                                    by_row[stuck] if stuck >= 0 else None, t0_ns, cache_bytes,
                                    SHRINK_TIMEOUT_S, shrink_until, time.monotonic(),
                                    seconds))
    return out


def check(ops: Sequence[LinOp], model: str | Model = "kv", timeout_s: float | None = None,
          deadline_s: float | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
          progress: Callable[[int, int], None] | None = None,
          t0_ns: int | None = None, fail_fast: bool = False) -> CheckResult:
    """Return the linearizability verdict on ``ops`` under ``model`` (a name or a Model).

    The search stops at ``timeout_s`` from now or at ``deadline_s`` (a
    ``time.monotonic()`` value), whichever is first: parts decided by then keep their
    verdicts, the others are ``"unknown"`` with the longest prefix found. With a
    deadline each part first gets a fair share of the time left (smallest parts first),
    then the undecided ones share the rest, so most keys get decided. ``progress``
    is called with (parts done, parts total). With ``fail_fast`` the check stops at the
    first part found not linearizable (parts are searched smallest first): the parts not
    searched yet are ``"skipped"`` and the history's verdict is False. Raises ValueError
    for ops the model cannot take.
    """
    started = time.monotonic()
    m = get_model(model)
    if timeout_s is not None:
        limit = started + timeout_s
        deadline_s = limit if deadline_s is None else min(deadline_s, limit)
    ops = list(ops)
    if ops and native_available(m):
        try:
            cols = encode_columns(ops, m)
        except (TypeError, OverflowError):
            cols = None  # times or indexes that are not int64: the Python path takes them
        if cols is not None:
            final = _check_native(lambda rows: [ops[r] for r in rows], m, cols, deadline_s,
                                  cache_bytes, progress,
                                  cols.t0_ns if t0_ns is None else t0_ns, fail_fast)
            return CheckResult(m.name, _overall(final), len(ops), final,
                               time.monotonic() - started)
    parts = m.partition(ops)
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
            if fail_fast and results[j].valid is False:
                break
    else:
        # two passes: first each part gets a fair share of the time left, so one hard key
        # cannot keep easy ones undecided; then the undecided ones share what remains
        shrink_until = deadline_s + SHRINK_GRACE_S
        deferred = []
        stop = False
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
            if fail_fast and r.valid is False:
                stop = True
                break
        for j in deferred:
            if stop:
                break
            if time.monotonic() < deadline_s:
                r = check_part(m, parts[j][0], parts[j][1], deadline_s, t0_ns, cache_bytes,
                               shrink_deadline_s=shrink_until)
                if r.valid != "unknown" or len(r.linearization or ()) >= len(
                        results[j].linearization or ()):
                    results[j] = r
            done += 1
            if progress is not None:
                progress(done, len(parts))
            if fail_fast and results[j].valid is False:
                stop = True
    final = [r if r is not None else PartResult(key, SKIPPED, len(part), None, None, None, 0.0)
             for r, (key, part) in zip(results, parts, strict=True)]
    return CheckResult(m.name, _overall(final), len(ops), final, time.monotonic() - started)


def _overall(parts: list[PartResult]) -> bool | str:
    """Return a history's verdict from its parts': False if one is not linearizable, True
    if all are, else "unknown"."""
    verdicts = [p.valid for p in parts]
    if any(v is False for v in verdicts):
        return False
    return True if all(v is True for v in verdicts) else "unknown"


def check_history(h: History, model: str | Model = "kv", timeout_s: float | None = None,
                  deadline_s: float | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
                  progress: Callable[[int, int], None] | None = None,
                  t0_ns: int | None = None, fail_fast: bool = False,
                  columns: Columns | None = None) -> CheckResult:
    """Return the linearizability verdict on a replicalab History under ``model``: the
    same CheckResult as ``check(ops_from_history(h), model, ...)`` with the same options
    (indexes are History rows), built without a LinOp per row when the native core runs
    the model: the History's columns are encoded by :func:`encode_history` (or given as
    ``columns``, encoded from ``h`` beforehand) and LinOps are made only for the keys
    that need an explanation (not linearizable or unknown). Raises ValueError as
    ``check`` and ``ops_from_history`` do."""
    started = time.monotonic()
    m = get_model(model)
    if columns is None and native_available(m) and len(h):
        try:
            columns = encode_history(h, m)
        except (TypeError, OverflowError):
            columns = None  # values the interning cannot take: the LinOp path takes them
    elif columns is not None:
        _check_model_takes(h, columns, m)
    if columns is None or not native_available(m) or not columns.kind:
        return check(ops_from_history(h), m, timeout_s, deadline_s, cache_bytes, progress,
                     t0_ns, fail_fast)
    if timeout_s is not None:
        limit = started + timeout_s
        deadline_s = limit if deadline_s is None else min(deadline_s, limit)
    index = np.frombuffer(columns.index, dtype=np.int64)

    def ops_at(rows: list[int]) -> list[LinOp]:
        return [history_op(h, i) for i in index[rows].tolist()]

    final = _check_native(ops_at, m, columns, deadline_s, cache_bytes, progress,
                          columns.t0_ns if t0_ns is None else t0_ns, fail_fast)
    return CheckResult(m.name, _overall(final), len(index), final, time.monotonic() - started)


def _check_model_takes(h: History, cols: Columns, m: Model) -> None:
    """Raise ValueError as :func:`encode_history` does if ``m`` cannot take the ops of
    ``cols`` (encoded from ``h``, possibly for another model)."""
    kinds = np.frombuffer(cols.kind, dtype=np.int64)
    if (("cas" not in m.allowed and bool((kinds == 2).any()))
            or (len(cols.keys) > 1 and not isinstance(m, KV))):
        encode_columns(ops_from_history(h), m)  # raises, naming the op or the keys


def history_key_ops(h: History, cols: Columns, key: Any) -> list[LinOp]:
    """Return the LinOps of ``key``'s rows of ``h`` in row order (``cols`` encoded from
    ``h`` by :func:`encode_history`), as :func:`ops_from_history` makes them; [] for a key
    ``cols`` does not have."""
    try:
        kid = cols.keys.index(key)
    except ValueError:
        return []
    key_ids = np.frombuffer(cols.key, dtype=np.int64)
    index = np.frombuffer(cols.index, dtype=np.int64)
    return [history_op(h, i) for i in index[key_ids == kid].tolist()]


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
    proc, fcol = h.process, h.f
    for i in range(len(h)):
        if proc[i] == NEMESIS or F_NAMES[fcol[i]] not in _CHECKED_F:
            continue
        out.append(history_op(h, i))
    return out


def history_op(h: History, row: int) -> LinOp:
    """Return row ``row`` of ``h`` (a read, write or cas) as the LinOp
    :func:`ops_from_history` makes of it; raises ValueError for an op on several keys."""
    f = F_NAMES[h.f[row]]
    keys, values = h.keys[row], h.values[row]
    if len(keys) != 1:
        raise ValueError(f"row {row}: a {f} of {len(keys)} keys; the linearizability models "
                         "check one key per op (a register workload's history)")
    t = h.type[row]
    outcome = "ok" if t == 1 else "fail" if t == 2 else "info"
    if f == "cas":
        expects = h.expects[row] if row < len(h.expects) else ()
        value: Any = (expects[0] if expects else UNKNOWN, values[0] if values else None)
    else:
        value = values[0] if values else None
    return LinOp(index=row, process=int(h.process[row]), f=f, key=keys[0], value=value,
                 outcome=outcome, invoke_ns=int(h.invoke_ns[row]),
                 complete_ns=int(h.complete_ns[row]))


# F_NAMES codes 0, 1, 2 are read, write, cas: the History's f column is the kind column
assert F_NAMES[:3] == ("read", "write", "cas")
_OUTCOME_OF_TYPE = np.array([_INFO, _OK, _FAIL, _INFO], dtype=np.int64)
"""Outcome code by History type code (invoke, ok, fail, info): a never-completed op is info."""
_NIL_T = (None,)
_UNKNOWN_T = (UNKNOWN,)


def _pick(seq: list[Any], rows: list[int] | None) -> list[Any]:
    """Return ``seq``'s items at ``rows`` (all of ``seq`` when None), at C speed."""
    if rows is None:
        return seq
    if len(rows) == 1:
        return [seq[rows[0]]]
    return list(itemgetter(*rows)(seq)) if rows else []


def _intern_python(h: History, rows: list[int] | None, kinds: np.ndarray
                   ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]:
    """Return (keys in first-seen order, key ids, a, b) as encode_columns would make them
    from ``ops_from_history(h)``, for the kept ``rows``: the interning when the native
    encoder is missing. Raises ValueError as ops_from_history for an op on several keys."""
    n = len(kinds)
    keysl = _pick(h.keys, rows)
    kd = dict.fromkeys(keysl)  # 1-tuples: distinct tuples are distinct keys
    if any(len(k) != 1 for k in kd):
        ops_from_history(h)  # raises, naming the first op on several keys
    keys = [k[0] for k in kd]
    if len(keys) == 1:
        keycol = np.zeros(n, np.int64)
    else:
        kid = {k: i for i, k in enumerate(kd)}
        keycol = np.fromiter(map(kid.__getitem__, keysl), np.int64, n)
    valsl = _pick(h.values, rows)
    cas = np.flatnonzero(kinds == 2).tolist()
    # intern the tuples (each row's as recorded) then map each distinct tuple to its
    # value: two C-level passes over the rows instead of one Python step per row
    if cas:
        av = valsl[:]
        expects, ne = h.expects, len(h.expects)
        for p in cas:
            r = p if rows is None else rows[p]
            e = expects[r] if r < ne else ()
            av[p] = e[:1] if e else _UNKNOWN_T  # a cas's a is its expected value
        td = dict.fromkeys(chain((_NIL_T,), av, (valsl[p] for p in cas)))
    else:
        av = valsl
        td = dict.fromkeys(chain((_NIL_T,), av))
    vid: dict[Any, int] = {}
    tid = {t: vid.setdefault(t[0] if t else None, len(vid)) for t in td}
    acol = np.fromiter(map(tid.__getitem__, av), np.int64, n)
    bcol = np.zeros(n, np.int64)
    if cas:
        bcol[cas] = list(map(tid.__getitem__, (valsl[p] for p in cas)))
        unknown = [p for p in cas if av[p] is _UNKNOWN_T]
        if unknown:
            acol[unknown] = -1
    return keys, keycol, acol, bcol


def encode_history(h: History, model: str | Model = "kv") -> Columns:
    """Return the int64 columns of ``h`` for the native core, byte for byte those of
    ``encode_columns(ops_from_history(h), model)`` (rows = the History's read, write and
    cas rows of client processes, ``index`` = the History row), built from the History's
    columns without making a LinOp per row. Raises ValueError as those two do (an op on
    several keys, an op or several keys the model cannot take), TypeError if the History
    holds values that are not hashable."""
    m = get_model(model)
    if _native_encode_history is not None:
        try:
            cols = _encode_native(h)
        except TypeError:  # items that are not tuples: the Python interning takes them
            cols = None
        if cols is not None:
            _check_model_takes(h, cols, m)
            return cols
    fcol = _column(h, "f")
    keep = fcol <= 2  # read, write, cas
    keep &= _column(h, "process") != NEMESIS
    if keep.all():
        rows = None
        kinds = fcol.astype(np.int64)
        typ, inv, comp = _column(h, "type"), _column(h, "invoke_ns"), _column(h, "complete_ns")
        index = np.arange(len(kinds), dtype=np.int64)
    else:
        rows = np.flatnonzero(keep)
        kinds = fcol[rows].astype(np.int64)
        typ = _column(h, "type")[rows]
        inv, comp = _column(h, "invoke_ns")[rows], _column(h, "complete_ns")[rows]
        index = rows.astype(np.int64)
    if not len(kinds):
        empty = b""
        return Columns([], empty, empty, empty, empty, empty, empty, empty, empty, 0)
    keys, keycol, a, b = _intern_python(h, None if rows is None else rows.tolist(), kinds)
    cols = Columns(keys=keys, key=keycol.tobytes(), kind=kinds.tobytes(), a=a.tobytes(),
                   b=b.tobytes(), outcome=_OUTCOME_OF_TYPE[typ].tobytes(),
                   invoke_ns=inv.tobytes(), complete_ns=comp.tobytes(), index=index.tobytes(),
                   t0_ns=int(inv.min()))
    _check_model_takes(h, cols, m)
    return cols


def _encode_native(h: History) -> Columns:
    """Return :func:`encode_history`'s columns (any model) made by the native encoder in
    one pass per column; raises ValueError as ops_from_history for an op on several keys,
    TypeError for keys or values that are not tuples."""
    (keys, bad, key, kind, a, b, outcome, inv, comp, index,
     t0_ns) = _native_encode_history(h.process.tobytes(), h.type.tobytes(), h.f.tobytes(),
                                     h.invoke_ns.tobytes(), h.complete_ns.tobytes(), h.keys,
                                     h.values, h.expects, NEMESIS, UNKNOWN)
    if bad >= 0:
        ops_from_history(h)  # raises, naming the first op on several keys
    return Columns(keys, key, kind, a, b, outcome, inv, comp, index, t0_ns)


def _column(h: History, name: str) -> np.ndarray:
    """Return numeric column ``name`` of ``h`` as a numpy copy: a view would keep the
    History's array exporting its buffer (then it cannot grow) for as long as anything,
    an exception's traceback say, holds it."""
    return np.array(getattr(h, name))



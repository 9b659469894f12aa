"""A recorded replicalab History as the checker takes it: LinOps (:func:`ops_from_history`,
:func:`history_op`) or, without a LinOp per row, the native core's int64 columns
(:func:`encode_history`), natively when the core has ``encode_register_history`` (pure).

The History's read, write and cas rows of client processes are the ops (nemesis rows and
other kinds are left out); an op still ``invoke`` (never completed) is ``info``; a cas is
``(expected, new)`` from its ``expects`` and ``values`` (``(UNRECORDED, new)`` when an
older history did not record the expected value).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from replicalab.checkers.linearizability import checker as lin
from replicalab.checkers.linearizability.columns import Columns, encode_columns, int64s
from replicalab.checkers.linearizability.explain import Clock
from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.ops import UNRECORDED, LinOp
from replicalab.checkers.linearizability.registry import get_model
from replicalab.history import F_NAMES, NEMESIS, History

try:  # the History encoder (an older build of the native core may lack it)
    from replicalab_native import encode_register_history as _native_encode_history
except ImportError:
    _native_encode_history = None

_OK, _INFO, _FAIL = 0, 1, 2


def check_history(h: History, model: str | Model = "kv", timeout_s: float | None = None,
                  deadline_s: float | None = None,
                  cache_bytes: int = lin.DEFAULT_CACHE_BYTES,
                  progress: Callable[[int, int], None] | None = None,
                  t0_ns: int | None = None, fail_fast: bool = False,
                  columns: Columns | None = None) -> lin.CheckResult:
    """Return the linearizability verdict on a replicalab History under ``model``: the
    same CheckResult as ``check(ops_from_history(h), model, ...)`` with the same options
    (indexes are History rows), built without a LinOp per row when the native core runs
    the model: the History's columns are encoded by :func:`encode_history` (or given as
    ``columns``, encoded from ``h`` beforehand) and LinOps are made only for the keys
    that need an explanation (not linearizable or unknown). Raises ValueError as
    ``check`` and ``ops_from_history`` do."""
    started = time.monotonic()
    m = get_model(model)
    native = lin.native_available(m) and m.native == "register"
    if columns is None and native and len(h):
        try:
            columns = encode_history(h, m)
        except (TypeError, OverflowError):
            columns = None  # values the interning cannot take: the LinOp path takes them
    elif columns is not None:
        check_model_takes(h, columns, m)
    if columns is None or not native or not columns.kind:
        return lin.check(ops_from_history(h), m, timeout_s, deadline_s, cache_bytes, progress,
                         t0_ns, fail_fast)
    if timeout_s is not None:
        limit = started + timeout_s
        deadline_s = limit if deadline_s is None else min(deadline_s, limit)
    index = int64s(columns.index)

    def ops_at(rows: list[int]) -> list[LinOp]:
        return [history_op(h, index[r]) for r in rows]

    clock = Clock(columns.t0_ns if t0_ns is None else t0_ns)
    r = lin.check_columns(columns, m, ops_at, deadline_s, cache_bytes, progress, clock,
                          fail_fast)
    return replace(r, check_s=time.monotonic() - started)


def check_model_takes(h: History, cols: Columns, m: Model) -> None:
    """Raise ValueError as :func:`encode_history` does if ``m`` cannot take the ops of
    ``cols`` (encoded from ``h``, possibly for another model)."""
    kinds = np.frombuffer(cols.kind, dtype=np.int64)
    if (("cas" not in m.ops and bool((kinds == 2).any()))
            or (len(cols.keys) > 1 and not m.keyed)):
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
    older history) is ``(UNRECORDED, new)`` and checks as a write. Raises
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
        value: Any = (expects[0] if expects else UNRECORDED, values[0] if values else None)
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
_UNRECORDED_T = (UNRECORDED,)


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
            av[p] = e[:1] if e else _UNRECORDED_T  # a cas's a is its expected value
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
        unknown = [p for p in cas if av[p] is _UNRECORDED_T]
        if unknown:
            acol[unknown] = -1
    return keys, keycol, acol, bcol


def encode_history(h: History, m: Model) -> Columns:
    """Return the int64 columns of ``h`` for the native core, byte for byte those of
    ``encode_columns(ops_from_history(h), model)`` (rows = the History's read, write and
    cas rows of client processes, ``index`` = the History row), built from the History's
    columns without making a LinOp per row. Raises ValueError as those two do (an op on
    several keys, an op or several keys the model cannot take), TypeError if the History
    holds values that are not hashable."""
    if _native_encode_history is not None:
        try:
            cols = _encode_native(h)
        except TypeError:  # items that are not tuples: the Python interning takes them
            cols = None
        if cols is not None:
            check_model_takes(h, cols, m)
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
    check_model_takes(h, cols, m)
    return cols


def _encode_native(h: History) -> Columns:
    """Return :func:`encode_history`'s columns (any model) made by the native encoder in
    one pass per column; raises ValueError as ops_from_history for an op on several keys,
    TypeError for keys or values that are not tuples."""
    (keys, bad, key, kind, a, b, outcome, inv, comp, index,
     t0_ns) = _native_encode_history(h.process.tobytes(), h.type.tobytes(), h.f.tobytes(),
                                     h.invoke_ns.tobytes(), h.complete_ns.tobytes(), h.keys,
                                     h.values, h.expects, NEMESIS, UNRECORDED)
    if bad >= 0:
        ops_from_history(h)  # raises, naming the first op on several keys
    return Columns(keys, key, kind, a, b, outcome, inv, comp, index, t0_ns)


def _column(h: History, name: str) -> np.ndarray:
    """Return numeric column ``name`` of ``h`` as a numpy copy: a view would keep the
    History's array exporting its buffer (then it cannot grow) for as long as anything,
    an exception's traceback say, holds it."""
    return np.array(getattr(h, name))



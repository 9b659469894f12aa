"""The ops of a history file (``history.read.FileOp``) as a model's LinOps (pure).

Names are mapped to the model's (``get`` -> ``read`` for kv), values shaped as its
``step`` takes them (``Model.file_value``), and every op checked against the model: a
problem is one line naming the file and the line of the op's invoke. A register history
the native reader gave as columns (``history.read.read_register_log``) becomes LinOps
straight from them (:func:`ops_from_columns`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from replicalab.checkers.linearizability.columns import Columns, int64s
from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.ops import UNRECORDED, LinOp, linop_slots
from replicalab.errors import MODEL
from replicalab.history.read import FileOp, HistoryFileError


def ops_from_file(path: Path, ops: Sequence[FileOp], model: Model) -> list[LinOp]:
    """Return ``ops`` as LinOps of ``model`` (``index`` = the line of the invoke); raises
    HistoryFileError (``path:line: ...``) for the first op the model cannot take."""
    out = []
    names: dict[str, str] = {}  # a history has a few names: each mapped once
    canonical = model.canonical
    shape = model.file_value
    takes = set(model.ops)
    value_problem = model.value_problem
    add = out.append
    new = object.__new__
    s0, s1, s2, s3, s4, s5, s6, s7 = linop_slots()  # LinOp(...) at half the cost
    for row in ops:
        # a slice, not ``*_``: a starred target makes a list for every op
        line, process, name, key, value, outcome, invoke_ns, complete_ns = row[:8]
        f = names.get(name) or names.setdefault(name, canonical(name))
        op = new(LinOp)
        s0(op, line)
        s1(op, process)
        s2(op, f)
        s3(op, key)
        s4(op, shape(f, value))
        s5(op, outcome)
        s6(op, invoke_ns)
        s7(op, complete_ns)
        if f not in takes or value_problem(op):
            raise HistoryFileError(f"{path}:{line}: {model.why_not(op)}", MODEL)
        add(op)
    return out


_NAMES = ("read", "write", "cas")
_OUTCOMES = ("ok", "info", "fail")
_FIELDS = ("index", "process", "f", "key", "value", "outcome", "invoke_ns", "complete_ns")

try:  # the same LinOps made natively (an eighth of the instructions; older cores lack it)
    from replicalab_native import register_linops as _native_linops
except ImportError:
    _native_linops = None


def ops_from_columns(cols: Columns, process: bytes, values: Sequence[object]) -> list[LinOp]:
    """Return the LinOps of a register history file the native reader gave as columns
    (:func:`~replicalab.checkers.linearizability.columns.file_columns` of them), the
    ops' ``process`` column and ``values[id]`` the value behind an id: the LinOps
    :func:`ops_from_file` makes of the file's ops (a cas's value ``(expected, new)``, an
    unrecorded expected value ``UNRECORDED``; times and index the lines)."""
    if _native_linops is not None:
        return _native_linops(LinOp, _FIELDS, cols.kind, cols.a, cols.b, cols.outcome,
                              process, cols.invoke_ns, cols.complete_ns, cols.index,
                              list(values), _NAMES, _OUTCOMES, UNRECORDED)
    kinds, a, b = int64s(cols.kind), int64s(cols.a), int64s(cols.b)
    out = []
    add = out.append
    new = object.__new__
    s0, s1, s2, s3, s4, s5, s6, s7 = linop_slots()
    for kind, x, y, outcome, proc, invoke, complete, index in zip(
            kinds, a, b, int64s(cols.outcome), int64s(process), int64s(cols.invoke_ns),
            int64s(cols.complete_ns), int64s(cols.index), strict=True):
        op = new(LinOp)
        s0(op, index)
        s1(op, proc)
        s2(op, _NAMES[kind])
        s3(op, None)
        s4(op, (UNRECORDED if x < 0 else values[x], values[y]) if kind == 2 else values[x])
        s5(op, _OUTCOMES[outcome])
        s6(op, invoke)
        s7(op, complete)
        add(op)
    return out

"""The ops of a history file (``history.read.FileOp``) as a model's LinOps (pure).

Names are mapped to the model's (``get`` -> ``read`` for kv), values shaped as its
``step`` takes them (``Model.file_value``), and every op checked against the model: a
problem is one line naming the file and the line of the op's invoke.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.ops import LinOp
from replicalab.history.read import FileOp, HistoryFileError


def ops_from_file(path: Path, ops: Sequence[FileOp], model: Model) -> list[LinOp]:
    """Return ``ops`` as LinOps of ``model`` (``index`` = the line of the invoke); raises
    HistoryFileError (``path:line: ...``) for the first op the model cannot take."""
    out = []
    canonical = model.canonical
    shape = model.file_value
    takes = set(model.ops)
    value_problem = model.value_problem
    for o in ops:
        f = canonical(o.f)
        op = LinOp(o.line, o.process, f, o.key, shape(f, o.value), o.outcome, o.invoke_ns,
                   o.complete_ns)
        if f not in takes or value_problem(op):
            raise HistoryFileError(f"{path}:{o.line}: {model.why_not(op)}")
        out.append(op)
    return out

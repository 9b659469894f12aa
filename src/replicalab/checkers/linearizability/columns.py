"""A history as the native core takes it: flat int64 columns, one row per op (pure).

:func:`encode_columns` turns LinOps into :class:`Columns` for a model's native machine:
``register`` (the register models, ``replicalab_native.check_kv``) or another machine
(``replicalab_native.check_machine``: ``append``, ``set``, ``fifo-queue``, ``counter``,
``mutex``). :func:`native_check` runs them. Nothing here needs numpy: a short ``replicalab
check`` does not import it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from itertools import chain, repeat
from typing import Any, NamedTuple

from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.ops import UNRECORDED, LinOp
from replicalab.checkers.linearizability.register_models import CasRegister

try:  # the native core (native/, built by make) when installed; pure Python otherwise
    import replicalab_native as _native
except ImportError:
    _native = None

_KIND = {"read": 0, "write": 1, "cas": 2}
OUTCOME_CODE = {"ok": 0, "info": 1, "fail": 2, "optional": 3}
_INFO = 1


class Columns(NamedTuple):
    """A history as the native core takes it: one row per op in the order given, each
    column ``bytes`` of int64 (see :func:`encode_columns`); ``keys[k]`` is the key behind
    key id ``k``; ``t0_ns`` the earliest invoke (0 if none); ``machine`` the native machine
    and ``table`` what it needs besides the columns (None for ``register``). (A named
    tuple: ``replicalab check`` makes this class on every start.)"""

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
    machine: str = "register"
    table: list[Any] | None = None

    def args(self) -> tuple[bytes, ...]:
        """Return the eight columns in ``check_kv``'s argument order."""
        return (self.key, self.kind, self.a, self.b, self.outcome, self.invoke_ns,
                self.complete_ns, self.index)

    def rows(self) -> int:
        """Return the number of rows."""
        return len(self.kind) // 8

    def with_outcomes(self, outcome: bytes) -> Columns:
        """Return these columns with another outcome column."""
        return self._replace(outcome=outcome)

    def select(self, rows: Sequence[int]) -> Columns:
        """Return the columns of ``rows`` only (in that order; these columns themselves
        when ``rows`` are all of them in order): one part of a history, its key and
        value ids kept as they are."""
        if len(rows) == self.rows() and list(rows) == list(range(len(rows))):
            return self

        def pick(col: bytes) -> bytes:
            v = memoryview(col).cast("q")
            return array("q", [v[r] for r in rows]).tobytes()

        return self._replace(key=pick(self.key), kind=pick(self.kind), a=pick(self.a),
                       b=pick(self.b), outcome=pick(self.outcome),
                       invoke_ns=pick(self.invoke_ns), complete_ns=pick(self.complete_ns),
                       index=pick(self.index))


def _empty(machine: str) -> Columns:
    e = b""
    return Columns([], e, e, e, e, e, e, e, e, 0, machine)


def native_machine(model: Model, ops: Sequence[LinOp]) -> str | None:
    """Return the native machine that searches ``ops`` under ``model``, or None when the
    core is missing, does not have it, or the model names none."""
    if _native is None:
        return None
    pick = getattr(model, "native_machine", None)
    machine = pick(ops) if pick is not None else model.native
    if machine is None:
        return None
    if machine == "register":
        return machine if hasattr(_native, "check_kv") else None
    machines = getattr(_native, "MACHINES", ())
    return machine if machine in machines else None


def encode_columns(ops: Sequence[LinOp], model: Model, machine: str = "register",
                   one_part: bool = False) -> Columns:
    """Return ``ops`` as int64 columns for ``machine``. For ``register``: key ids and
    values interned in first-seen order (value 0 is None, a register's nil; a cas's
    unrecorded expected value is -1), kind 0 read / 1 write / 2 cas; for another machine
    kind/a/b/table from ``model.native_columns``. Outcome 0 ok / 1 info / 2 fail /
    3 optional, times in ns. Raises ValueError for an op the model cannot take, TypeError
    or OverflowError for times, indexes or counter values that are not int64. With
    ``one_part`` the ops are one part whatever their keys (key id 0 for all)."""
    if not ops:
        return _empty(machine)
    # column by column, each a comprehension or a C-level map: this encoding is the part
    # of a native check that runs in Python, so it is kept to a few cheap passes
    keyc = [None] * len(ops) if one_part else [o.key for o in ops]
    if machine == "register":
        kind_b, a_b, b_b = _register_columns(ops, model)
        table = None
    else:
        model.check_ops(ops)
        nc = model.native_columns(ops)
        kind_b, a_b, b_b = (array("q", nc.kind).tobytes(), array("q", nc.a).tobytes(),
                            array("q", nc.b).tobytes())
        table = nc.table
    keys = list(dict.fromkeys(keyc))
    if len(keys) > 1 and not model.keyed:
        model.partition(ops)  # raises: the single-object models take one key
    kid = {k: n for n, k in enumerate(keys)}
    invc = [o.invoke_ns for o in ops]
    ocol = list(map(OUTCOME_CODE.get, [o.outcome for o in ops], repeat(_INFO)))
    return Columns(keys=keys, key=array("q", list(map(kid.__getitem__, keyc))).tobytes(),
                   kind=kind_b, a=a_b, b=b_b, outcome=array("q", ocol).tobytes(),
                   invoke_ns=array("q", invc).tobytes(),
                   complete_ns=array("q", [o.complete_ns for o in ops]).tobytes(),
                   index=array("q", [o.index for o in ops]).tobytes(), t0_ns=min(invc),
                   machine=machine, table=table)


def file_columns(args: Sequence[bytes], model: Model) -> Columns | None:
    """Return the native reader's columns of a history file (``FileHistory.columns``,
    one register: key, kind, a, b, outcome, invoke, complete, index) as ``model``'s
    :class:`Columns`, or None when the model does not encode a file's ops that way (the
    reader makes them as :func:`encode_columns` does for the cas-register model and for
    the register model, which takes its reads and writes alike)."""
    kind = type(model)
    if (not isinstance(model, CasRegister) or model.tuples or model.keyed
            or model.empty_is_nil or model.native != "register" or model.aliases
            or kind.file_value is not CasRegister.file_value
            or kind.intern_key is not CasRegister.intern_key
            or not set(model.ops) <= set(_KIND)):
        return None
    key, kind_b, a, b, outcome, invoke, complete, index = args
    if not kind_b:
        return _empty("register")
    return Columns([None], key, kind_b, a, b, outcome, invoke, complete, index,
                   min(memoryview(invoke).cast("q")), "register")


def takes_every_op(cols: Columns, model: Model) -> bool:
    """Return whether ``model`` takes every op of a file's :func:`file_columns` (the
    reader made them only of reads, writes and cas whose values fit the cas-register
    model: the register model takes no cas)."""
    return "cas" in model.ops or 2 not in memoryview(cols.kind).cast("q")


def _register_columns(ops: Sequence[LinOp], model: Model) -> tuple[bytes, bytes, bytes]:
    """Return the kind, a and b columns of register ops (values interned first-seen)."""
    fc = [o.f for o in ops]
    vc = [o.value for o in ops]
    kind_of = {f: _KIND[f] for f in model.ops if f in _KIND}
    kinds = list(map(kind_of.get, fc))
    bad = kinds.index(None) if None in kinds else len(kinds)
    cas = [i for i, k in enumerate(kinds) if k == 2] if 2 in kinds else []
    bad = min([bad, *(i for i in cas if not (isinstance(vc[i], tuple) and len(vc[i]) == 2))])
    if bad < len(kinds):  # the first op the model cannot take, as it names it
        model.check_ops([ops[bad]])  # raises
    if cas:
        av, bv = vc[:], [None] * len(vc)
        for i in cas:
            av[i], bv[i] = vc[i]
    else:
        av, bv = vc, None
    if getattr(model, "empty_is_nil", False):  # kv: "" and nil are one value
        av = [None if v == "" else v for v in av]
        if bv is not None:
            bv = [None if v == "" else v for v in bv]
    vals = dict.fromkeys(chain((None,), av, (bv[i] for i in cas) if cas else ()))
    vid = {v: n for n, v in enumerate(vals)}  # first-seen ids, None (nil) is 0
    acol = list(map(vid.__getitem__, av))
    bcol = list(map(vid.__getitem__, bv)) if cas else [0] * len(vc)
    for i in cas:
        if av[i] is UNRECORDED:
            acol[i] = -1  # an unrecorded expected value: legal in every state
    return (array("q", kinds).tobytes(), array("q", acol).tobytes(),
            array("q", bcol).tobytes())


NativePart = tuple[int, int, int, bytes, int, float]
"""One part of a native check: (key id, ops, verdict, order rows as uint32 bytes, stuck
row or -1, seconds)."""


def native_check(cols: Columns, deadline_s: float | None, cache_bytes: int,
                 fail_fast: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> list[NativePart]:
    """Return the native core's result on every part of ``cols`` (parts in first-seen key
    order; see ``replicalab_native.check_kv``)."""
    if cols.machine == "register":
        return _native.check_kv(*cols.args(), deadline_s=deadline_s, cache_bytes=cache_bytes,
                                fail_fast=fail_fast, progress=progress)
    return _native.check_machine(cols.machine, *cols.args(), table=cols.table,
                                 deadline_s=deadline_s, cache_bytes=cache_bytes,
                                 fail_fast=fail_fast, progress=progress)


def uint32s(b: bytes) -> list[int]:
    """Return the native-order uint32 values in ``b`` (an order the core returned)."""
    return memoryview(b).cast("I").tolist() if b else []


def int64s(b: bytes) -> list[int]:
    """Return the native-order int64 values in ``b`` (a column)."""
    return memoryview(b).cast("q").tolist() if b else []

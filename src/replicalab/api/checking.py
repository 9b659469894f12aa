"""Checking a recorded history under a model: linearizability (kv, cas-register, register,
set, fifo-queue, counter, mutex: ``checkers/linearizability``) or transactional isolation
(list-append, rw-register: ``checkers/txn``, Elle style).

:func:`open_history` reads one history — a run directory, a Jepsen EDN / JSON lines / log
file, a ``History`` or a :class:`~replicalab.api.runs.Run` — and settles its model: the one
given if the history fits it (else :class:`ParameterError` naming ``model``), else the
history's own (a transactional history's list-append or rw-register, a queue run's
fifo-queue, kv otherwise). :func:`check` decides it and returns a :class:`CheckReport`.
Nothing here imports numpy or pyarrow unless the history is a run directory: a check of a
file starts in a fraction of a second.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import Outcome, Table
from replicalab.api.progress import ticking
from replicalab.api.words import plural
from replicalab.errors import MODEL, InputError
from replicalab.records import record

MAX_LISTED_OPS = 64
"""Ops of one counterexample listed in :meth:`CheckReport.to_json` (a minimal one has a
few)."""
MAX_ROWS = 20
"""Keys listed one per row in :meth:`CheckReport.outcome`'s table (the rest are counted)."""
MAX_SHOWN = 3
"""Anomalies explained per type in :meth:`CheckReport.outcome` (to_json carries more)."""
ENGINES = ("auto", "native", "python")
"""Engines of the transactional checker: the native core when built, or the pure-Python
reference (``REPLICALAB_TXN_ENGINE`` chooses when none is given)."""
_SNIFF_BYTES = 256 * 1024
_TXN = (r':f\s+:txn\b|"f"\s*:\s*"txn"|:(?:invoke|ok|fail|info)\s+:txn\b'
        r'|\[\[:(?:append|r|w)\s|\[\["(?:append|r|w)",')
"""A transactional history: ``:f :txn``, or Elle's micro-ops (its README's histories have
no ``:f``). Patterns here are compiled on first use (re's cache): compiling this one took
a few ms of every ``check``'s start, and a history without "txn" or "[[" never needs it."""
_RW = r'\[:w\s|\["w",'
FILE_FORMS = "a run directory, a Jepsen EDN history, a JSON lines export or Jepsen log lines"


@record
class HistoryToCheck:
    """One history read and ready to check under ``model`` (its name): ``path`` where it
    came from (None: a History object), ``ops`` how many operations it holds (-1: not
    counted before the check, a transactional file the native core reads), ``note`` a line
    to say before its result. The rest is how the checker takes it."""

    path: Path | None
    model: str
    ops: int
    note: str | None = None
    _lin: Any = field(default=None, repr=False)
    _txn: Any = field(default=None, repr=False)
    _given: bool = field(default=True, repr=False)  # the model was named, not the history's own

    @property
    def transactional(self) -> bool:
        """Return whether its model is transactional (list-append, rw-register)."""
        return self._txn is not None

    @property
    def long(self) -> bool:
        """Return whether its check may take long enough to show progress."""
        return self._lin is not None and (self._lin.columns is not None or self.ops >= 10_000)


@record
class _Lin:
    """A history for the linearizability checker: ``ops`` (LinOps), or a History with its
    encoded ``columns``, or a file's ops as the native reader ``encoded`` them (their
    LinOps made by ``make_ops`` only if a check needs them: :meth:`all_ops`); ``clock``
    how explanations name points; the model object."""

    model: Any
    clock: Any
    ops: list[Any] | None = None
    history: Any = None
    columns: Any = None
    encoded: Any = None
    make_ops: Callable[[], list[Any]] | None = None

    def all_ops(self) -> list[Any]:
        """Return the history's LinOps (an encoded file's made on the first call)."""
        if self.ops is None:
            self.ops = self.make_ops()
        return self.ops


@record
class _Txn:
    """A history for the transactional checker: ``what`` (a file's or a run's path, or a
    History) and how T<n> is named (``line``: the op on line n of a file; ``row``: row n
    of a run's history)."""

    what: Any
    naming: str
    engine: str


@record
class CheckReport:
    """The verdict on one history: ``path`` (None: a History object), ``model``,
    ``valid`` (True, False or "unknown": the timeout ran out first), ``ops`` (operations
    checked; transactions for a transactional model), ``check_s`` (seconds the check took),
    ``note`` (a line to say first), ``result`` (the checker's own result: a
    ``CheckResult`` with per-key ``parts``, or a ``TxnCheckResult`` with ``anomalies``)."""

    path: Path | None
    model: str
    valid: bool | str
    ops: int
    check_s: float
    result: Any = field(repr=False)
    note: str | None = None
    transactional: bool = False
    names_lines: bool = False
    """Transactions are named T<n> after the line of their invoke (a file) rather than
    the row of the history."""
    _item: HistoryToCheck | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """Return the result as ``replicalab check --json`` prints it: for
        linearizability the verdict, counts, time (``check_s`` rounded, ``check_ns``
        unrounded) and, per key not linearizable, its counterexample and explanation; for
        transactions Elle's result map (``valid``, ``anomaly_types``, ``not``,
        ``also_not``, ``anomalies``...)."""
        if self.transactional:
            from replicalab.checkers.txn import result_json as txn_json

            return {"path": str(self.path), **txn_json(self.result)}
        return _lin_json(self)

    def outcome(self) -> Outcome:
        """Return the report as ``replicalab check`` prints it: a table of the keys (the
        title alone for one object) and the lines after it (each key's explanation; for
        transactions the anomalies, the models ruled out and those that may hold)."""
        if self.transactional:
            return Outcome(self.to_json(), remarks=_txn_lines(self))
        return _lin_outcome(self)

    def to_pandas(self) -> Any:
        """Return a DataFrame: for linearizability one row per key (``key``, ``valid``,
        ``ops``, ``check_s``); for transactions one row per anomaly (``type``, ``txns``,
        ``explanation``)."""
        import pandas as pd

        if self.transactional:
            doc = self.to_json()
            return pd.DataFrame([{"type": typ, "txns": a["txns"],
                                  "explanation": " ".join(a["explanation"])}
                                 for typ, ans in doc["anomalies"].items() for a in ans],
                                columns=["type", "txns", "explanation"])
        return pd.DataFrame([{"key": p.key, "valid": p.verdict.json(), "ops": p.ops,
                              "check_s": p.check_s} for p in self.result.parts],
                            columns=["key", "valid", "ops", "check_s"])


def models() -> dict[str, str]:
    """Return every checker model's name with one line saying what it checks: the
    linearizability models, then the transactional ones."""
    from replicalab.checkers.linearizability.registry import model_names, summary

    return {name: summary(name) for name in model_names()}


def _source(history: Any) -> Any:
    """Return a Run's path, a path as a Path, a History as it is."""
    if hasattr(history, "path") and hasattr(history, "results"):  # a Run
        return Path(history.path)
    if isinstance(history, Path):
        return history
    if isinstance(history, str | os.PathLike):
        return Path(history)
    return history


def open_history(history: Any, model: str | None = None) -> HistoryToCheck:
    """Return ``history`` (a run directory, a history file, a ``History`` or a ``Run``)
    read and ready for :func:`check` under ``model`` (None: the history's own). Raises
    :class:`ParameterError` naming ``model`` for a model that does not exist or does not
    fit the history (transactions under a register model, reads and writes under a
    transactional one, an op it cannot take whose fix is another model), ValueError naming
    the file and line of malformed input or a path that is not a history."""
    from replicalab.checkers.linearizability.registry import (
        MODELS,
        is_transactional,
        unknown_model,
    )

    # a name the registry holds, or an installed package's (looked up, loaded: a package
    # that fails to load says so in one line)
    if model is not None and not is_transactional(model) and model not in MODELS:
        raise ParameterError("model", unknown_model(model).removeprefix("unknown model "))
    item = _open_source(_source(history), model)
    item._given = model is not None
    return item


def _open_source(source: Any, model: str | None) -> HistoryToCheck:
    """Return :func:`open_history`'s item for a History, a run directory or a file."""
    from replicalab.checkers.linearizability.registry import is_transactional

    if not isinstance(source, Path):
        return _open_history_object(source, model)
    if source.is_dir():
        return _open_run(source, model)
    if not source.exists():
        raise ValueError(f"{source} does not exist; pass {FILE_FORMS}")
    head, data = _head(source)
    if not head.strip():  # nothing to check is not "valid, 0 ops"
        raise ValueError(f"{source} holds no operations; pass a history with at least one "
                         "(Jepsen EDN, JSON lines, Jepsen log lines or Porcupine's JSON)")
    # every form _TXN finds holds "txn" or "[[": a plain substring test spares most files
    # the regular expression's scan
    txn = ("txn" in head or "[[" in head) and re.search(_TXN, head) is not None
    own = ("rw-register" if re.search(_RW, head) else "list-append") if txn else "kv"
    chosen = model or own
    if is_transactional(chosen) != txn:
        if not txn:  # malformed input, or nothing to check, says so first
            from replicalab.history.read import read_ops

            if not read_ops(source).ops:
                raise ValueError(f"{source} holds no operations; pass a history with at "
                                 "least one (Jepsen EDN, JSON lines, Jepsen log lines or "
                                 "Porcupine's JSON)")
        raise ParameterError("model", _misfit(chosen, source, txn), MODEL)
    if txn:
        return _open_txn_file(source, chosen)
    try:
        return _open_lin_file(source, chosen, data)
    except InputError as err:  # it names its file and line
        raise _located(err, "", chosen, model is not None) from None


def _head(path: Path) -> tuple[str, bytes | None]:
    """Return the file's first ``_SNIFF_BYTES`` as text, and its bytes when that is the
    whole file (read once: the reader takes them)."""
    try:
        with path.open("rb") as f:
            # read(n) makes an n-byte buffer first: a small file is read at its size
            small = os.fstat(f.fileno()).st_size < _SNIFF_BYTES
            data = f.read() if small else f.read(_SNIFF_BYTES)
    except OSError as err:
        raise ValueError(f"{path}: cannot read it ({err.strerror})") from None
    whole = data if small and len(data) < _SNIFF_BYTES else None
    return data.decode("utf-8", errors="replace"), whole


def _located(err: ValueError, where: object, model: str, given: bool) -> ValueError:
    """Return ``err`` (input ``model`` cannot take) said at ``where`` ("": it names its
    own file and line): a :class:`ParameterError` naming ``model`` when its fix names the
    model that would take the input, else a ValueError. ``given``: the caller named the
    model (else it is the history's own)."""
    at = f"{where}: " if where else ""
    if isinstance(err, InputError) and err.names("model"):
        own = "" if given else " (not given: the history's own)"
        return err.naming("model", f"{model!r}{own} does not fit {at}")
    return ValueError(f"{at}{err}") if at else err


def _misfit(model: str, where: object, transactions: bool) -> str:
    """Return why ``model`` does not fit a history that holds ``transactions`` or not."""
    if transactions:
        return (f"{model!r} checks single operations, but {where} holds transactions: check "
                "it with {model} list-append or rw-register (or give no {model}: a history "
                "is checked with its own)")
    return (f"{model!r} checks transactions, but {where} holds single operations (reads, "
            "writes, ...): check it with {model} kv, cas-register or register (or give no "
            "{model}: a history is checked with its own)")


def _open_lin_file(path: Path, name: str, data: bytes | None = None) -> HistoryToCheck:
    from replicalab.checkers.linearizability.explain import Clock
    from replicalab.checkers.linearizability.from_file import ops_from_file
    from replicalab.checkers.linearizability.registry import get_model
    from replicalab.history.read import read_ops

    m = get_model(name)
    item = _open_register_log(path, name, m, data) if m.native == "register" else None
    if item is not None:
        return item
    fh = read_ops(path, tuples=m.tuples, data=data)
    if not fh.ops:
        raise ValueError(f"{path} holds no operations; pass a history with at least one "
                         "(Jepsen EDN, JSON lines, Jepsen log lines or Porcupine's JSON)")
    ops = ops_from_file(path, fh.ops, m)  # raises for an op the model cannot take
    t0 = min((o.invoke_ns for o in ops), default=0)
    return HistoryToCheck(path, name, len(ops), _lin=_Lin(m, Clock(t0, lines=not fh.timed),
                                                          ops=ops))


def _open_register_log(path: Path, name: str, m: Any, data: bytes | None
                       ) -> HistoryToCheck | None:
    """Return a Jepsen log file of one register read natively into the columns the
    search takes, its LinOps made only if a check needs them (a part not linearizable,
    or undecided); None when the native reader or the model (``m``) leaves the file to
    the ops' path: another form, a problem to name, an op the model does not take."""
    from replicalab.checkers.linearizability.columns import file_columns, takes_every_op
    from replicalab.checkers.linearizability.explain import Clock
    from replicalab.checkers.linearizability.from_file import ops_from_columns
    from replicalab.history.read import read_register_log

    found = read_register_log(path, data)
    if found is None:
        return None
    (*args, process), values = found
    cols = file_columns(args, m)
    if cols is None or not cols.rows() or not takes_every_op(cols, m):
        return None
    return HistoryToCheck(path, name, cols.rows(), _lin=_Lin(
        m, Clock(cols.t0_ns, lines=True), encoded=cols,
        make_ops=lambda: ops_from_columns(cols, process, values)))


def _engine(engine: str | None) -> str:
    chosen = engine or os.environ.get("REPLICALAB_TXN_ENGINE", "auto")
    if chosen not in ENGINES:
        raise ParameterError("engine", f"{chosen!r}: use auto, native or python "
                                       "(REPLICALAB_TXN_ENGINE too)")
    return chosen


def _open_txn_file(path: Path, name: str) -> HistoryToCheck:
    # read when checked: the native core reads the file itself, and both engines name a
    # malformed line then
    return HistoryToCheck(path, name, -1, _txn=_Txn(path, "line", _engine(None)))


def _run_columns(path: Path) -> tuple[set[str], dict[str, Any]]:
    """Return the operation names of a run's client ops and its config."""
    import json  # loaded where a run's config is read: a history file needs none

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(path / "history.parquet", columns=["f", "process"])
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path / 'history.parquet'} cannot be read ({err}); pass a run "
                         "directory written by replicalab") from None
    client = t.filter(pc.greater_equal(t["process"], 0))
    fs = {str(f) for f in pc.unique(client["f"].cast("string")).to_pylist()}
    return fs, config if isinstance(config, dict) else {}


def _run_txn_model(path: Path, config: dict[str, Any]) -> str:
    """Return a transactional run's own model: its workload's name, else what its first
    writing micro-op says (``w``: rw-register)."""
    spec = config.get("spec") if isinstance(config.get("spec"), dict) else {}
    named = config.get("workload") or spec.get("workload")
    if named in ("list-append", "rw-register"):
        return str(named)
    from replicalab.history import load_history
    from replicalab.history.core import F_NAMES

    h, _ = load_history(path)
    for i in range(len(h)):
        for value in h.values[i] if h.f[i] == F_NAMES.index("txn") else ():
            if value.startswith(("append ", "w ")):
                return "list-append" if value.startswith("append ") else "rw-register"
    return "list-append"


def _open_run(path: Path, model: str | None) -> HistoryToCheck:
    from replicalab.api import runkind
    from replicalab.checkers.linearizability.registry import is_transactional

    if (path / "queue.parquet").exists():
        return _open_queue(path, model)
    runkind.kind(path, "check")  # a run directory with a history, or one line saying why
    fs, config = _run_columns(path)
    if not fs:
        raise ValueError(f"{path} holds no client operations; nothing to check")
    txn = "txn" in fs
    chosen = model or (_run_txn_model(path, config) if txn else "kv")
    if is_transactional(chosen) != txn:
        raise ParameterError("model", _misfit(chosen, path, txn), MODEL)
    if txn:
        return _open_txn_run(path, chosen)
    return _open_lin_run(path, chosen, model is not None)


def _open_txn_run(path: Path, name: str) -> HistoryToCheck:
    return HistoryToCheck(path, name, -1, _txn=_Txn(path, "row", _engine(None)))


def _open_lin_run(path: Path, name: str, given: bool) -> HistoryToCheck:
    """Return a run directory's History with its columns for the register models."""
    from replicalab.history import load_history

    h, _ = load_history(path)
    return _lin_history(h, name, path, given)


def _lin_history(h: Any, name: str, path: Path | None, given: bool) -> HistoryToCheck:
    from replicalab.checkers.linearizability.explain import Clock
    from replicalab.checkers.linearizability.from_history import encode_history, ops_from_history
    from replicalab.checkers.linearizability.registry import get_model

    m = get_model(name)
    where = path if path is not None else "the history"
    if m.native != "register":
        raise ParameterError("model", f"{name!r} does not fit {where}: a replicalab history "
                                      "holds reads, writes and cas: check it with {model} kv, "
                                      "cas-register or register", MODEL)
    try:
        # the encoding raises what ops_from_history raises (an op on several keys), here,
        # before any search; what a narrower model refuses is raised by the check
        cols = encode_history(h, m)
        t0 = cols.t0_ns
    except (TypeError, OverflowError):
        cols = None  # values the interning cannot take: the LinOp path takes them
        t0 = int(h.column("invoke_ns").min()) if len(h) else 0
    except ValueError as err:
        raise _located(err, where, name, given) from None
    if cols is None:
        ops = ops_from_history(h)
        return HistoryToCheck(path, name, len(ops), _lin=_Lin(m, Clock(t0), ops=ops))
    return HistoryToCheck(path, name, len(h), _lin=_Lin(m, Clock(t0), history=h, columns=cols))


def _open_history_object(h: Any, model: str | None) -> HistoryToCheck:
    """Return a History (in memory) ready to check: transactions if it holds ``txn``
    rows, else register operations."""
    from replicalab.checkers.linearizability.registry import is_transactional
    from replicalab.history.core import F_NAMES

    client = [i for i in range(len(h)) if h.process[i] >= 0]
    if not client:
        raise ValueError("the history holds no client operations; nothing to check")
    txn = any(h.f[i] == F_NAMES.index("txn") for i in client)
    chosen = model or ("list-append" if txn else "kv")
    if is_transactional(chosen) != txn:
        raise ParameterError("model", _misfit(chosen, "the history", txn), MODEL)
    if not txn:
        return _lin_history(h, chosen, None, model is not None)
    return HistoryToCheck(None, chosen, -1, _txn=_Txn(h, "row", _engine(None)))


def _open_queue(path: Path, model: str | None) -> HistoryToCheck:
    """Return a queue run's sends and deliveries as fifo-queue ops."""
    import json

    from replicalab.api import runkind
    from replicalab.checkers.linearizability.explain import Clock
    from replicalab.checkers.linearizability.from_queue import queue_ops
    from replicalab.checkers.linearizability.registry import get_model
    from replicalab.queues.record import load_log

    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    config = config if isinstance(config, dict) else {}
    spec = config.get("spec") if isinstance(config.get("spec"), dict) else {}
    info = config.get("queue") if isinstance(config.get("queue"), dict) else {}
    fifo = bool(info.get("fifo"))
    if model != "fifo-queue" and not (model is None and fifo):
        # a standard queue redelivers and reorders: no model is its own
        try:
            runkind.kind(path, "check")
        except ValueError as err:
            why = f"{err}; or check its sends and deliveries as a FIFO queue: {{model}} fifo-queue"
            given = "not given" if model is None else f"{model!r} does not fit"
            raise ParameterError("model", f"{given}: {why}", MODEL) from None
    groups = int(spec.get("groups", 1)) if fifo else 1
    ops = queue_ops(load_log(path), groups)
    t0 = min((o.invoke_ns for o in ops), default=0)
    note = None if fifo else (
        f"{path}: its queue is not a FIFO queue ({info.get('kind', 'standard')}): a "
        "visibility-timeout queue redelivers and reorders, so the fifo-queue model is "
        "expected to fail on it (see docs/linearizability.md)")
    return HistoryToCheck(path, "fifo-queue", len(ops), note,
                          _lin=_Lin(get_model("fifo-queue"), Clock(t0), ops=ops))


def check(history: Any, model: str | None = None, timeout: str | float = "60s", *,
          fail_fast: bool = False, engine: str | None = None,
          progress: Callable[[int, int], None] | None = None,
          consistency_models: str | Sequence[str] | None = None,
          anomalies: str | Sequence[str] | None = None,
          wfr_keys: bool = False) -> CheckReport:
    """Return the :class:`CheckReport` of ``history`` (a run directory, a Jepsen EDN /
    JSON lines / log file, a ``History``, a ``Run``, or what :func:`open_history` returned)
    under ``model``: a linearizability model (kv, cas-register, register, set, fifo-queue,
    counter, mutex) or a transactional one (list-append, rw-register); None: the history's
    own. After ``timeout`` (text such as ``"60s"`` or seconds) the verdict is unknown.
    ``fail_fast``: stop at the first key that is not linearizable. ``engine`` (auto,
    native, python) is the transactional checker's, and so are Elle's options:
    ``consistency_models`` the models the history should satisfy (names, or one
    comma-separated string; None: strict-serializable; "none": none), ``anomalies``
    further anomalies to report, ``wfr_keys`` (rw-register) a transaction's write of a key
    follows its read of it. ``progress(done, total)`` is told of the keys checked. Raises
    :class:`ParameterError` naming the parameter, ValueError for malformed input."""
    started = time.monotonic()
    deadline_s = started + seconds(timeout, "timeout")
    item = history if isinstance(history, HistoryToCheck) else open_history(history, model)
    if isinstance(history, HistoryToCheck) and model not in (None, item.model):
        raise ParameterError("model", f"{model!r}: the history was opened for model "
                                      f"{item.model!r}; open it again with this one")
    asked = consistency_models is not None or anomalies is not None or wfr_keys
    # loaded for transactions, or to refuse a name Elle does not know: a register check
    # does not import the transactional checker
    opts = (txn_options(consistency_models, anomalies, wfr_keys)
            if item._txn is not None or asked else None)
    if item._txn is not None:
        return _check_txn(item, deadline_s, engine, opts)
    return _check_lin(item, deadline_s, fail_fast, progress)


def txn_options(consistency_models: str | Sequence[str] | None = None,
                anomalies: str | Sequence[str] | None = None, wfr_keys: bool = False) -> Any:
    """Return the transactional checker's options (``checkers.txn.Options``) for Elle's
    ``consistency_models``, ``anomalies`` and ``wfr_keys`` (see :func:`check`); raises
    :class:`ParameterError` naming the one that holds an unknown name."""
    from replicalab.checkers.txn.run import options

    def joined(names: str | Sequence[str] | None) -> str | None:
        return names if names is None or isinstance(names, str) else ",".join(names)

    try:
        return options(joined(consistency_models), joined(anomalies), wfr_keys)
    except ValueError as err:
        raise ParameterError("anomalies" if "anomal" in str(err) else "consistency_models",
                             str(err)) from None


def check_many(histories: Sequence[Any], model: str | None = None,
               timeout: str | float = "60s", *, fail_fast: bool = False,
               engine: str | None = None, bars: Any = None,
               **txn: Any) -> Iterator[CheckReport]:
    """Yield the :class:`CheckReport` of each of ``histories`` in order, as :func:`check`
    gives it, every history opened before any is checked (bad input raises first);
    ``txn``: :func:`check`'s ``consistency_models``, ``anomalies``, ``wfr_keys``.
    ``bars``: an object whose ``bar(label)`` shows the progress of a history that may take
    a while. (Sharing many histories out over both CPUs of a shared 2-core machine made
    the 102 etcd histories slower: 1.29 s against 1.03 s, medians of 8 at load 5.5.)"""
    timeout = seconds(timeout, "timeout")  # parsed once, not per history
    if any(v is not None and v is not False for v in txn.values()):
        txn_options(**txn)  # an unknown name says so before any history is read
    items = [h if isinstance(h, HistoryToCheck) else open_history(h, model) for h in histories]
    for item in items:
        if bars is None or not item.long:
            yield check(item, timeout=timeout, fail_fast=fail_fast, engine=engine, **txn)
            continue
        name = item.path.name if item.path else "history"
        with ticking(f"check {name}", bars) as tick:
            yield check(item, timeout=timeout, fail_fast=fail_fast, engine=engine, **txn,
                        progress=lambda done, total: tick(
                            done / max(total, 1), f"{done:,} of {total:,} keys checked"))


def _check_lin(item: HistoryToCheck, deadline_s: float, fail_fast: bool,
               progress: Callable[[int, int], None] | None) -> CheckReport:
    from replicalab.checkers.linearizability.checker import check as check_ops

    lin = item._lin
    try:
        if lin.columns is not None:
            from replicalab.checkers.linearizability.from_history import check_history

            r = check_history(lin.history, lin.model, deadline_s=deadline_s,
                              progress=progress, t0_ns=lin.clock.t0_ns, fail_fast=fail_fast,
                              columns=lin.columns)
        elif lin.encoded is not None:
            from replicalab.checkers.linearizability.checker import check_encoded

            r = check_encoded(lin.encoded, lin.model, lin.all_ops, deadline_s, progress,
                              fail_fast, lin.clock)
        else:
            r = check_ops(lin.ops, lin.model, deadline_s=deadline_s, progress=progress,
                          fail_fast=fail_fast, clock=lin.clock)
    except ValueError as err:
        raise _located(err, item.path or "the history", item.model, item._given) from None
    return CheckReport(item.path, r.model, r.verdict.json(), r.ops, r.check_s, r, item.note,
                       _item=item)


def _check_txn(item: HistoryToCheck, deadline_s: float, engine: str | None,
               opts: Any) -> CheckReport:
    from replicalab.checkers.txn import TxnInputError
    from replicalab.checkers.txn.run import check_history, check_path
    from replicalab.history.read import HistoryFileError

    txn = item._txn
    chosen = _engine(engine) if engine is not None else txn.engine
    try:
        if isinstance(txn.what, Path):
            r, _ = check_path(txn.what, item.model, opts, deadline_s, chosen)
        else:
            r = check_history(txn.what, item.model, opts, deadline_s, chosen)
    except TxnInputError as err:
        where = (f"{item.path}:{err.index}" if txn.naming == "line"
                 else f"{item.path or 'the history'}: row {err.index}")
        raise _located(err, where, item.model, item._given) from None
    except HistoryFileError as err:  # it names its file and line
        raise _located(err, "", item.model, item._given) from None
    return CheckReport(item.path, item.model, r.valid, r.txns, r.check_s, r, item.note,
                       transactional=True, names_lines=txn.naming == "line", _item=item)


def _json_value(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_json_value(x) for x in v]
    if isinstance(v, frozenset | set):
        return sorted((_json_value(x) for x in v), key=repr)
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)


def _lin_json(report: CheckReport) -> dict[str, Any]:
    from replicalab.checkers.linearizability.ops import Verdict

    result = report.result
    lin = report._item._lin if report._item is not None else None
    clock = lin.clock
    bad = [p for p in result.parts if p.verdict == Verdict.NOT_LINEARIZABLE]
    if lin.columns is not None:  # LinOps only for the rows the counterexamples list
        from replicalab.checkers.linearizability.from_history import history_op

        by_index = {i: history_op(lin.history, i) for p in bad
                    for i in p.counterexample[:MAX_LISTED_OPS]}
    else:  # a file's LinOps exist already when a part is not linearizable
        by_index = {o.index: o for o in lin.all_ops()} if bad else {}

    def op_json(op: Any) -> dict[str, Any]:
        return {"index": op.index, "process": op.process, "f": op.f,
                "key": _json_value(op.key), "value": _json_value(op.value),
                "outcome": op.outcome, **clock.json(op)}

    unknown = [p for p in result.parts if p.verdict == Verdict.UNKNOWN]
    skipped = [p for p in result.parts if p.verdict == Verdict.SKIPPED]
    ce = [{"key": _json_value(p.key), "explanation": p.explanation, "minimal": p.minimal,
           "ops": [op_json(by_index[i]) for i in p.counterexample[:MAX_LISTED_OPS]]}
          for p in bad] or None
    return {
        "path": str(report.path), "model": result.model, "valid": result.verdict.json(),
        "ops": result.ops, "timed": not clock.lines,
        "keys": len(result.parts), "keys_not_linearizable": len(bad),
        "keys_unknown": len(unknown), "keys_skipped": len(skipped),
        "check_s": round(result.check_s, 3),
        "check_ns": int(result.check_s * 1e9),  # unrounded: sums over many histories
        "counterexample": ce,
        "partial": [{"key": _json_value(p.key), "prefix_ops": len(p.linearization or ()),
                     "ops": p.ops, "explanation": p.explanation} for p in unknown] or None,
        "parts": [{"key": _json_value(p.key), "valid": p.verdict.json(), "ops": p.ops,
                   "check_s": round(p.check_s, 3)} for p in result.parts],
    }


def _lin_outcome(r: CheckReport) -> Outcome:
    """Return one history's table (or title) and the explanation of each key not decided
    linearizable."""
    rank = {True: 2, False: 0, "unknown": 1}
    parts = sorted(r.result.parts, key=lambda p: (
        3 if p.verdict.name == "SKIPPED" else rank[p.verdict.json()], -p.ops, str(p.key)))
    title = (f"{r.path} ({r.model} model): {r.result.verdict.words}, {plural(r.ops, 'op')}, "
             f"{plural(len(parts), 'key')}, {r.check_s:.2f} s")
    tables, lines = [], []
    if len(parts) == 1 and parts[0].key is None:
        lines.append(title)  # one object: the title says it all
    else:
        t = Table(title, ["key", "verdict", "ops", "linearized ops", "check time"],
                  right=(2, 3, 4))
        for p in parts[:MAX_ROWS]:
            lin = "-" if p.linearization is None else f"{len(p.linearization):,}"
            t.add("(single object)" if p.key is None else str(p.key), p.verdict.words,
                  f"{p.ops:,}", lin, f"{p.check_s:.3f} s")
        tables.append(t)
    if len(parts) > MAX_ROWS:
        rest = [p.verdict.name for p in parts[MAX_ROWS:]]
        lines.append(f"... and {len(rest):,} more keys ("
                     f"{rest.count('LINEARIZABLE'):,} linearizable, "
                     f"{rest.count('UNKNOWN'):,} unknown, "
                     f"{rest.count('NOT_LINEARIZABLE'):,} not linearizable, "
                     f"{rest.count('SKIPPED'):,} skipped)")
    skipped = sum(p.verdict.name == "SKIPPED" for p in parts)
    if skipped:
        lines.append(f"{plural(skipped, 'key')} left unchecked: --fail-fast stopped at the first "
                     "key that is not linearizable")
    for p in parts:
        if p.verdict.json() is not True and p.explanation:
            lines += ["", f"key {p.key}: {p.explanation}" if p.key is not None
                      else p.explanation]
    return Outcome(r.to_json(), tables=tables, remarks=lines)


def _txn_lines(r: CheckReport) -> list[str]:
    """Return a transactional check in lines: verdict and what it was checked against,
    what was left out, the anomalies asked about and those found besides, the models
    ruled out and those that may hold, unfinished searches, a few anomalies explained."""
    t = r.result
    verdict = {True: "valid", False: "NOT valid", "unknown": "unknown"}[t.valid]
    asked = (", ".join(t.options.consistency_models) if t.options.consistency_models
             else "no model")
    if t.options.anomalies:
        asked += f" and {', '.join(t.options.anomalies)}"
    out = [f"{r.path} ({t.model}, checked against {asked}): {verdict}, {t.txns:,} "
           f"transactions, {t.check_s:.2f} s ({t.engine})"]
    skipped = {k: n for k, n in t.skipped.items() if n}
    if skipped:
        out.append("  left out: " + ", ".join(plural(n, f"{k} op") for k, n in skipped.items()))
    if r.names_lines:
        out.append("  T<n> is the transaction invoked (or completed, if never invoked) on "
                   "line n")
    if t.anomaly_types:
        out.append(f"  anomalies: {', '.join(t.anomaly_types)}")
    other = sorted(set(t.counts) - set(t.anomaly_types))
    if other:
        out.append(f"  also found (not asked about): {', '.join(other)}")
    if t.not_:
        out.append(f"  ruled out: {', '.join(t.not_)}"
                   + (f" (and so {', '.join(t.also_not)})" if t.also_not else ""))
    out.append(f"  may still hold: {', '.join(t.possible) if t.possible else 'none of the models'}")
    for u in t.unfinished:
        out.append(f"  search stopped ({u.limit}) in a component of {u.size:,} transactions "
                   f"before deciding {', '.join(u.classes)}: it might still hold one")
    for typ in t.anomaly_types + other:
        shown = t.anomalies.get(typ, [])
        for an in shown[:MAX_SHOWN]:
            out += ["", f"  {typ}: " + (an.explanation[0] if an.cycle is None else
                                        f"a cycle of {len(an.cycle)}")]
            out += [f"    {line}" for line in (an.explanation if an.cycle is not None else ())]
        if t.counts.get(typ, len(shown)) > MAX_SHOWN:
            out.append(f"  ... and {t.counts.get(typ, len(shown)) - MAX_SHOWN:,} more {typ} "
                       "(see --json)")
    return out

"""Choosing the engine and shaping the answer: :func:`check` runs the native core when it
is built and the pure-Python reference otherwise; :func:`check_file` reads a Jepsen/Elle
history file; :func:`check_history` a replicalab History; :func:`result_json` is Elle's
result map."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replicalab.checkers.txn.check import DEFAULT_MAX_STEPS, check_txns
from replicalab.checkers.txn.types import DEFAULT_OPTIONS, Options, Txn, TxnCheckResult

ENGINES = ("auto", "native", "python")


def native_core() -> Any:
    """Return the native module if it has the transaction core of this version, else
    None."""
    try:
        import replicalab_native as nat
    except ImportError:
        return None
    return nat if hasattr(nat, "txn_check2_cols") else None


def _engine(engine: str) -> Any:
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: use {', '.join(ENGINES)}")
    nat = native_core() if engine in ("auto", "native") else None
    if engine == "native" and nat is None:
        raise RuntimeError("the native core has no txn_check2_cols: rebuild native/ "
                           "(.venv/bin/pip install ./native)")
    return nat


def check(txns: list[Txn], model: str, opts: Options = DEFAULT_OPTIONS,
          deadline_s: float | None = None, engine: str = "auto",
          max_steps: int = DEFAULT_MAX_STEPS) -> TxnCheckResult:
    """Return the check of ``txns`` under ``model`` (``list-append``/``rw-register``) and
    ``opts`` by ``engine``: "native", "python" or "auto" (native when built and the
    options are ones it takes)."""
    nat = _engine(engine)
    if nat is not None and _native_takes(opts):
        from replicalab.checkers.txn.check import with_open_versions
        from replicalab.checkers.txn.native import check_native

        result = check_native(nat, txns, model, opts, deadline_s, max_steps)
        if model == "rw-register":
            result = with_open_versions(result, txns, opts, deadline_s, max_steps)
        return result
    return check_txns(txns, model, opts, deadline_s=deadline_s, max_steps=max_steps)


def _native_takes(opts: Options) -> bool:
    """Whether the native core implements the options (rw-register's version inference
    from process, real-time or a given transaction order is the reference's only)."""
    return not (opts.sequential_keys or opts.linearizable_keys
                or opts.transaction_order is not None)


def check_history(h: Any, model: str, opts: Options = DEFAULT_OPTIONS,
                  deadline_s: float | None = None, engine: str = "auto") -> TxnCheckResult:
    """Return the check of a replicalab History's ``txn`` rows (see :func:`check`)."""
    from replicalab.checkers.txn.prepare import from_history

    return check(from_history(h), model, opts, deadline_s, engine)


def check_file(path: Path, model: str, opts: Options = DEFAULT_OPTIONS,
               deadline_s: float | None = None, engine: str = "auto") -> TxnCheckResult:
    """Return the check of the Jepsen/Elle history file ``path`` (EDN, JSON lines):
    nemesis events and non-``:txn`` ops left out (counted in ``skipped``), histories of
    completions only and ops without ``:f`` (Elle's README) accepted. Raises
    ``history.read.HistoryFileError`` or TxnInputError naming the line."""
    nat = _engine(engine)
    # rw-register goes through transactions in Python: its version-order search needs them
    if (nat is not None and _native_takes(opts) and hasattr(nat, "txn_check2_edn")
            and model != "rw-register"):
        from replicalab.checkers.txn.native import check_edn

        if path.suffix.lower() == ".edn":
            return check_edn(path, model, opts, deadline_s)
    from replicalab.checkers.txn.prepare import from_file_ops
    from replicalab.history.read import read_ops

    fh = read_ops(path, lone_completions=True, default_f="txn")
    txns, other = from_file_ops(fh.ops)
    r = check(txns, model, opts, deadline_s, engine)
    r.skipped = {"non-client": fh.skipped, "non-txn": other}
    return r


def options(consistency_models: str | None = None, anomalies: str | None = None,
            wfr_keys: bool = False) -> Options:
    """Return the options of comma-separated names as the command line takes them:
    ``consistency_models`` (None: Elle's default, strict serializability; "" or
    "none": none), ``anomalies``; raises ValueError naming an unknown one."""
    from replicalab.checkers.txn import models

    cm: tuple[str, ...] | None = DEFAULT_OPTIONS.consistency_models
    if consistency_models is not None:
        names = [m.strip().lstrip(":") for m in consistency_models.split(",") if m.strip()]
        cm = None if names in ([], ["none"]) else tuple(models.validate(names))
    an = tuple(a.strip().lstrip(":") for a in (anomalies or "").split(",") if a.strip())
    known = set(models.depths())
    bad = [a for a in an if a not in known]
    if bad:
        raise ValueError(f"unknown anomaly {bad[0]!r}; known: "
                         f"{', '.join(models.ordered(known))}")
    return Options(cm, an, wfr_keys=wfr_keys)


def check_path(path: Path, model: str, opts: Options = DEFAULT_OPTIONS,
               deadline_s: float | None = None, engine: str = "auto"
               ) -> tuple[TxnCheckResult, str]:
    """Return the check of a run directory (its ``history.parquet``) or a Jepsen/Elle
    history file, and how its transactions are named (``"row"``: T<n> is row n of the
    run's history; ``"line"``: the op on line n of the file). Raises ValueError (one
    line: a path that is neither, a malformed file) or TxnInputError."""
    from replicalab.history.read import HistoryFileError

    if path.is_dir():
        if not (path / "history.parquet").exists():
            raise ValueError(f"{path} holds no history.parquet: pass a run directory "
                             "(runs/<UTC time>-<workload>-<store>) or a Jepsen/Elle EDN "
                             "history")
        return check_run(path, model, opts, deadline_s, engine), "row"
    if not path.exists():
        raise ValueError(f"{path} does not exist; pass a run directory or a Jepsen/Elle "
                         "EDN history")
    try:
        return check_file(path, model, opts, deadline_s, engine), "line"
    except HistoryFileError as err:
        raise ValueError(str(err)) from None


def check_run(path: Path, model: str, opts: Options = DEFAULT_OPTIONS,
              deadline_s: float | None = None, engine: str = "auto") -> TxnCheckResult:
    """Return the check of a run directory's ``txn`` rows (native: decoded from the
    Arrow buffers; raises TxnInputError naming the row)."""
    nat = _engine(engine)
    if (nat is not None and _native_takes(opts) and hasattr(nat, "txn_check2_rows")
            and model != "rw-register"):  # as check_file
        import pyarrow as pa
        import pyarrow.parquet as pq

        from replicalab.checkers.txn.native import check_table

        cols = ["f", "type", "process", "invoke_ns", "complete_ns", "keys", "values"]
        try:
            table = pq.read_table(path / "history.parquet", columns=cols)
        except (OSError, pa.ArrowInvalid) as err:
            raise ValueError(f"{path / 'history.parquet'} is malformed: {err}") from None
        return check_table(table, model, opts, deadline_s)
    from replicalab.history import load_history

    h, _ = load_history(path)
    return check_history(h, model, opts, deadline_s, engine)


def result_json(result: TxnCheckResult) -> dict[str, Any]:
    """Return Elle's result map (see ``TxnCheckResult.to_json``)."""
    return result.to_json()

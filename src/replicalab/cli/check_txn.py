"""``replicalab check --model list-append|rw-register``: transactional isolation of
recorded runs (``history.parquet``) and Jepsen/Elle EDN histories, Elle style.

Exit status as ``check``: 0 no anomaly, 1 anomalies, 3 a cycle search could not finish
(and nothing was found), 2 bad input (one line naming the line and the problem).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

MAX_SHOWN = 3
"""Anomalies explained per type in the terminal (--json carries up to MAX_PER_TYPE)."""


def load(path: Path, model: str, engine: str) -> tuple[Any, str]:
    """Return (what to check, how T<n> is named) for PATH: transactions (``"row"`` for a
    run directory, ``"line"`` for a file), a run's pyarrow Table for the native core
    (``"table"``), or the file's path for the native reader (``"line"``); raises
    ValueError with one line."""
    from replicalab.checkers.txn import TxnInputError, from_file_ops, from_history

    if path.is_dir():
        from replicalab.history import load_history

        if not (path / "history.parquet").exists():
            from replicalab.cli import rundir

            rundir.kind(path, "check")  # raises its one line naming what the path is
        from replicalab.checkers.txn.run import native_core

        nat = native_core()
        if engine != "python" and nat is not None and hasattr(nat, "txn_check_rows"):
            import pyarrow as pa
            import pyarrow.parquet as pq

            try:  # the native core decodes the rows from the Arrow buffers
                cols = ["f", "type", "process", "invoke_ns", "complete_ns", "keys", "values"]
                return pq.read_table(path / "history.parquet", columns=cols), "table"
            except (OSError, pa.ArrowInvalid) as err:
                raise ValueError(f"{path / 'history.parquet'} is malformed: {err}") from None
        h, _ = load_history(path)
        try:
            return from_history(h), "row"
        except TxnInputError as err:
            raise ValueError(f"{path}: row {err.index}: {err}") from None
    if not path.exists():
        raise ValueError(f"{path} does not exist; pass a run directory or a Jepsen/Elle EDN "
                         "history")
    from replicalab.checkers.txn.run import native_core

    if engine != "python" and native_core() is not None:
        return path, "line"  # the native core reads the file itself
    from replicalab.history.read import read_ops

    fh = read_ops(path)
    try:
        return from_file_ops(fh.ops), "line"
    except TxnInputError as err:
        raise ValueError(f"{path}:{err.index}: {err}") from None


def _show(path: Path, r: Any, naming: str) -> None:
    from replicalab.cli.output import say

    verdict = {True: "valid", False: "NOT valid", "unknown": "unknown"}[r.valid]
    say(f"{path} ({r.model}): {verdict}, {r.txns:,} transactions, {r.check_s:.2f} s "
        f"({r.engine})")
    if naming == "line":
        say("  T<n> is the transaction invoked on line n")
    if r.anomaly_types:
        say(f"  anomalies: {', '.join(r.anomaly_types)}")
        say(f"  ruled out: {', '.join(r.not_)}"
            + (f" (and so {', '.join(r.also_not)})" if r.also_not else ""))
    say(f"  may still hold: {', '.join(r.possible) if r.possible else 'none of the models'}")
    for u in r.unfinished:
        say(f"  search stopped in a component of {u.size:,} transactions ({u.variant} "
            f"graph) before finishing {', '.join(u.might_hold)}: it might still hold one")
    for typ in r.anomaly_types:
        ans = r.anomalies[typ]
        for an in ans[:MAX_SHOWN]:
            say("")
            say(f"  {typ}: " + (an.explanation[0] if an.cycle is None else
                                f"a cycle of {len(an.cycle)}"))
            if an.cycle is not None:
                for line in an.explanation:
                    say(f"    {line}")
        if len(ans) > MAX_SHOWN:
            say(f"  ... and {len(ans) - MAX_SHOWN} more {typ} (see --json)")


def run(paths: list[Path], model: str, timeout_s: float, as_json: bool,
        engine: str | None = None) -> int:
    """Check every PATH; print the results; return the exit status (0, 1 or 3).
    ``engine`` "native", "python" or "auto"; None: ``$REPLICALAB_TXN_ENGINE`` or auto
    (the benchmark times the pure-Python reference through it)."""
    import os

    engine = engine or os.environ.get("REPLICALAB_TXN_ENGINE", "auto")
    if engine not in ("auto", "native", "python"):
        from replicalab.cli.errors import fail

        fail(f"REPLICALAB_TXN_ENGINE={engine!r}: use auto, native or python")
    from replicalab.checkers.txn import TxnInputError, check, result_json
    from replicalab.cli.errors import fail

    loaded = []
    for path in paths:
        try:
            loaded.append((path, *load(path, model, engine)))
        except ValueError as err:
            fail(str(err))
    docs, codes = [], []
    for path, what, naming in loaded:
        deadline = time.monotonic() + timeout_s
        try:
            if isinstance(what, Path):
                from replicalab.checkers.txn.native import check_file

                r = check_file(what, model, deadline)
            elif naming == "table":
                from replicalab.checkers.txn.native import check_table

                r = check_table(what, model, deadline)
            else:
                r = check(what, model, deadline_s=deadline, engine=engine)
        except TxnInputError as err:
            where = f"{path}:{err.index}" if naming == "line" else f"{path}: row {err.index}"
            fail(f"{where}: {err}")
        codes.append(0 if r.valid is True else 1 if r.valid is False else 3)
        if as_json:
            docs.append({"path": str(path), **result_json(r)})
        else:
            _show(path, r, naming)
    if as_json:
        sys.stdout.write(json.dumps({"results": docs}) + "\n")
        sys.stdout.flush()
    return 1 if 1 in codes else 3 if 3 in codes else 0

"""``replicalab check --model list-append|rw-register``: transactional isolation of
recorded runs (``history.parquet``) and Jepsen/Elle EDN histories, Elle style. Parses,
calls ``checkers.txn.run.check_path`` per path, renders.

Exit status as ``check``: 0 valid, 1 invalid, 3 unknown (a search stopped, or the
dependency graph is empty, and nothing forbidden was found), 2 bad input (one line
naming the line and the problem).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

MAX_SHOWN = 3
"""Anomalies explained per type in the terminal (--json carries up to MAX_PER_TYPE)."""


def _show(path: Path, r: Any, naming: str) -> None:
    from replicalab.cli.output import say

    verdict = {True: "valid", False: "NOT valid", "unknown": "unknown"}[r.valid]
    asked = (", ".join(r.options.consistency_models) if r.options.consistency_models
             else "no model")
    say(f"{path} ({r.model}, checked against {asked}"
        + (f" and {', '.join(r.options.anomalies)}" if r.options.anomalies else "")
        + f"): {verdict}, {r.txns:,} transactions, {r.check_s:.2f} s ({r.engine})")
    skipped = {k: n for k, n in r.skipped.items() if n}
    if skipped:
        say("  left out: " + ", ".join(f"{n:,} {k} op{'s' if n != 1 else ''}"
                                       for k, n in skipped.items()))
    if naming == "line":
        say("  T<n> is the transaction invoked (or completed, if never invoked) on line n")
    if r.anomaly_types:
        say(f"  anomalies: {', '.join(r.anomaly_types)}")
    other = sorted(set(r.counts) - set(r.anomaly_types))
    if other:
        say(f"  also found (not asked about): {', '.join(other)}")
    if r.not_:
        say(f"  ruled out: {', '.join(r.not_)}"
            + (f" (and so {', '.join(r.also_not)})" if r.also_not else ""))
    say(f"  may still hold: {', '.join(r.possible) if r.possible else 'none of the models'}")
    for u in r.unfinished:
        say(f"  search stopped ({u.limit}) in a component of {u.size:,} transactions before "
            f"deciding {', '.join(u.classes)}: it might still hold one")
    for typ in r.anomaly_types + other:
        ans = r.anomalies.get(typ, [])
        for an in ans[:MAX_SHOWN]:
            say("")
            say(f"  {typ}: " + (an.explanation[0] if an.cycle is None else
                                f"a cycle of {len(an.cycle)}"))
            if an.cycle is not None:
                for line in an.explanation:
                    say(f"    {line}")
        if len(ans) > MAX_SHOWN:
            say(f"  ... and {r.counts[typ] - MAX_SHOWN:,} more {typ} (see --json)")


def run(paths: list[Path], model: str, timeout_s: float, as_json: bool,
        consistency_models: str | None = None, anomalies: str | None = None,
        wfr_keys: bool = False, engine: str | None = None) -> int:
    """Check every PATH; print the results; return the exit status (0, 1 or 3).
    ``engine`` "native", "python" or "auto"; None: ``$REPLICALAB_TXN_ENGINE`` or auto
    (the benchmark times the pure-Python reference through it)."""
    import os

    from replicalab.checkers.txn import TxnInputError, result_json
    from replicalab.checkers.txn.run import ENGINES, check_path, options
    from replicalab.cli.errors import fail

    engine = engine or os.environ.get("REPLICALAB_TXN_ENGINE", "auto")
    if engine not in ENGINES:
        fail(f"REPLICALAB_TXN_ENGINE={engine!r}: use auto, native or python")
    try:
        opts = options(consistency_models, anomalies, wfr_keys)
    except ValueError as err:
        flag = "--anomalies" if "anomaly" in str(err) else "--consistency-models"
        fail(f"{flag}: {err}")
    docs, codes = [], []
    for path in paths:
        try:
            r, naming = check_path(path, model, opts, time.monotonic() + timeout_s, engine)
        except TxnInputError as err:
            fail(f"{path}:{err.index}: {err}" if not path.is_dir()
                 else f"{path}: row {err.index}: {err}")
        except ValueError as err:
            fail(str(err))
        codes.append(0 if r.valid is True else 1 if r.valid is False else 3)
        if as_json:
            docs.append({"path": str(path), **result_json(r)})
        else:
            _show(path, r, naming)
    if as_json:
        sys.stdout.write(json.dumps({"results": docs}) + "\n")
        sys.stdout.flush()
    return 1 if 1 in codes else 3 if 3 in codes else 0

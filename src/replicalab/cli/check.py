"""``replicalab check``: is a recorded history linearizable, and if not, which operations
prove it.

Each PATH is a replicalab run directory (``history.parquet``), a Jepsen EDN history or our
JSON lines export. Exit status: 0 every history is linearizable, 1 one is not, 3 one could
not be decided before ``--timeout`` (and none is known not to be), 2 bad input.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import parse_duration_s

MODELS = ("register", "cas-register", "kv")
MAX_ROWS = 20
"""Keys listed one per row in the terminal table (the rest are counted)."""
MAX_LISTED_OPS = 64
"""Ops of one counterexample listed in --json (a minimal one has a few)."""


def register(app: typer.Typer) -> None:
    """Add ``replicalab check`` to the root app."""
    app.command(name="check")(check)


def _load(path: Path, model: str) -> tuple[Any, int]:
    """Return (what to check, time origin in ns) of one PATH: a run directory's History
    with its encoded columns (checked by ``check_history``, LinOps made only for the keys
    that need an explanation), or the LinOps of an EDN / JSON lines file (indexes are its
    lines); raises ValueError with one line naming the path (and the line of a file) and
    what was expected."""
    from replicalab.checkers.linearizability import encode_history, ops_from_history
    from replicalab.cli import rundir
    from replicalab.history import load_history
    from replicalab.history.read import read_history

    if path.is_dir():
        rundir.kind(path, "check")
        h, _ = load_history(path)
        try:
            # the kv encoding raises what ops_from_history raises (an op on several keys),
            # here, before any search; what a narrower model refuses is raised by the check
            source: Any = (h, encode_history(h, "kv"))
        except (TypeError, OverflowError):
            source = ops_from_history(h)  # values the interning cannot take
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    elif path.exists():
        h, ids = read_history(path, independent=model == "kv")
        source = [replace(o, index=ids[o.index]) for o in ops_from_history(h)]
    else:
        raise ValueError(f"{path} does not exist; pass a run directory, a Jepsen EDN history "
                         "or a JSON lines export")
    inv = h.column("invoke_ns")
    return source, int(inv.min()) if len(inv) else 0


def _json_value(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_json_value(x) for x in v]
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)


def _op_json(op: Any, t0_ns: int) -> dict[str, Any]:
    done = op.outcome == "ok"
    return {"index": op.index, "process": op.process, "f": op.f, "key": _json_value(op.key),
            "value": _json_value(op.value), "outcome": op.outcome,
            "invoke_ms": round((op.invoke_ns - t0_ns) / 1e6, 3),
            "complete_ms": round((op.complete_ns - t0_ns) / 1e6, 3) if done else None}


def result_json(path: Path, ops: list[Any], result: Any, t0_ns: int) -> dict[str, Any]:
    """Return the ``--json`` entry of one checked history: verdict, counts, time and, for
    each key that is not linearizable, its counterexample and explanation."""
    by_index = {o.index: o for o in ops}
    bad = [p for p in result.parts if p.valid is False]
    unknown = [p for p in result.parts if p.valid == "unknown"]
    skipped = [p for p in result.parts if p.valid == "skipped"]
    ce = [{"key": _json_value(p.key), "explanation": p.explanation, "minimal": p.minimal,
           "ops": [_op_json(by_index[i], t0_ns) for i in p.counterexample[:MAX_LISTED_OPS]]}
          for p in bad] or None
    return {
        "path": str(path), "model": result.model, "valid": result.valid, "ops": result.ops,
        "keys": len(result.parts), "keys_not_linearizable": len(bad),
        "keys_unknown": len(unknown), "keys_skipped": len(skipped),
        "check_s": round(result.check_s, 3),
        "counterexample": ce,
        "partial": [{"key": _json_value(p.key), "prefix_ops": len(p.linearization or ()),
                     "ops": p.ops, "explanation": p.explanation} for p in unknown] or None,
        "parts": [{"key": _json_value(p.key), "valid": p.valid, "ops": p.ops,
                   "check_s": round(p.check_s, 3)} for p in result.parts],
    }


_WORDS = {True: "linearizable", False: "NOT linearizable", "unknown": "unknown",
          "skipped": "skipped (unchecked)"}
_RANK = {False: 0, "unknown": 1, True: 2, "skipped": 3}


def _show_result(path: Path, result: Any) -> None:
    """Print one history's table and the explanation of each key that is not decided
    linearizable."""
    parts = sorted(result.parts, key=lambda p: (_RANK.get(p.valid, 1), -p.ops, str(p.key)))
    keys = f"{len(parts):,} key{'' if len(parts) == 1 else 's'}"
    t = TableData(f"{path} ({result.model} model): {_WORDS[result.valid]}, "
                  f"{result.ops:,} ops, {keys}, {result.check_s:.2f} s",
                  ["key", "verdict", "ops", "linearized ops", "check time"], right=(2, 3, 4))
    for p in parts[:MAX_ROWS]:
        lin = "-" if p.linearization is None else f"{len(p.linearization):,}"
        t.add("(single register)" if p.key is None else str(p.key), _WORDS[p.valid],
              f"{p.ops:,}", lin, f"{p.check_s:.3f} s")
    show(t)
    if len(parts) > MAX_ROWS:
        rest = parts[MAX_ROWS:]
        say(f"... and {len(rest):,} more keys ("
            f"{sum(p.valid is True for p in rest):,} linearizable, "
            f"{sum(p.valid == 'unknown' for p in rest):,} unknown, "
            f"{sum(p.valid is False for p in rest):,} not linearizable, "
            f"{sum(p.valid == 'skipped' for p in rest):,} skipped)")
    skipped = sum(p.valid == "skipped" for p in parts)
    if skipped:
        say(f"{skipped:,} key{'' if skipped == 1 else 's'} left unchecked: --fail-fast stopped "
            "at the first key that is not linearizable")
    for p in parts:
        if p.valid is True or not p.explanation:
            continue
        say("")
        say(f"key {p.key}: {p.explanation}" if p.key is not None else p.explanation)


def check(
    paths: Annotated[list[Path], typer.Argument(
        help="Run directories, Jepsen EDN histories (one op map per line or one vector of "
             "maps) or JSON lines exports.", show_default=False, metavar="PATH")],
    model: Annotated[str, typer.Option(
        help="register (read/write), cas-register (read/write/cas) or kv (a cas register "
             "per key, checked key by key).")] = "kv",
    timeout: Annotated[str, typer.Option(
        help="Time allowed per history (e.g. 60s, 5m); then the verdict is unknown, with "
             "every key decided so far and the longest linearizable prefix of the others.",
    )] = "60s",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    fail_fast: Annotated[bool, typer.Option(
        "--fail-fast", help="Stop at the first key that is not linearizable; the other keys "
                            "are left unchecked (listed as skipped).")] = False,
) -> None:
    """Check histories for linearizability (Jepsen semantics: ok happened inside its
    interval, fail never happened, info may have happened at any time after its invoke).

    For each history that is not linearizable it prints a minimal counterexample and what
    it means. Exit status: 0 all linearizable, 1 one is not, 3 one is unknown (timeout),
    2 bad input. With --fail-fast a history stops at its first key that is not
    linearizable: its verdict is still "not linearizable", the keys not searched are
    "skipped" in the table and in --json.

    Example: replicalab check runs/20261122T010203Z-register-sim-primary --model kv
    """
    from replicalab.checkers.linearizability import check as run_check
    from replicalab.checkers.linearizability import check_history, history_op

    if model not in MODELS:
        fail(f"--model {model!r}: use register, cas-register or kv")
    try:
        timeout_s = parse_duration_s(timeout, "--timeout")
    except ValueError as err:
        fail(str(err))
    loaded = []
    for path in paths:  # read everything first: bad input is reported before any search
        try:
            loaded.append((path, *_load(path, model)))
        except ValueError as err:
            fail(str(err))
    docs, verdicts = [], []
    for path, source, t0_ns in loaded:
        started = time.monotonic()
        with progress_bar(f"check {path.name}", enabled=not as_json) as tick:
            def progress(done: int, total: int, tick: Any = tick) -> None:
                tick(done / max(total, 1), f"{done:,} of {total:,} keys checked")
            try:
                if isinstance(source, tuple):  # a run directory: (History, columns)
                    h, cols = source
                    result = check_history(h, model, deadline_s=started + timeout_s,
                                           progress=progress, t0_ns=t0_ns,
                                           fail_fast=fail_fast, columns=cols)
                else:
                    result = run_check(source, model, deadline_s=started + timeout_s,
                                       progress=progress, t0_ns=t0_ns, fail_fast=fail_fast)
            except ValueError as err:
                fail(f"{path}: {err}")
        verdicts.append(result.valid)
        if as_json:
            if isinstance(source, tuple):  # LinOps only for the rows --json lists
                ops = [history_op(source[0], i) for p in result.parts if p.valid is False
                       for i in p.counterexample[:MAX_LISTED_OPS]]
            else:
                ops = source
            docs.append(result_json(path, ops, result, t0_ns))
        else:
            _show_result(path, result)
    if as_json:
        sys.stdout.write(json.dumps({"results": docs}) + "\n")
        sys.stdout.flush()
    code = 1 if False in verdicts else 3 if "unknown" in verdicts else 0
    raise typer.Exit(code)

"""``replicalab check``: is a recorded history linearizable, and if not, which operations
prove it.

Each PATH is a replicalab run directory (``history.parquet``; a queue run's
``queue.parquet`` with ``--model fifo-queue``), a Jepsen EDN history, our JSON lines
export or Jepsen's log lines. The model is resolved once, here, from the registry
(``checkers/linearizability/registry.py``), which also gives ``--help`` its list. Exit
status: 0 every history is linearizable, 1 one is not, 3 one could not be decided before
``--timeout`` (and none is known not to be), 2 bad input.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.timeparse import parse_duration_s
from replicalab.cli.words import plural

PLAIN_PARAMETERS = True
"""Its options are strings, paths and flags: cli/main.py converts them without Typer's
Pydantic adapters, whose import would be a good part of a short check's start-up."""
MAX_ROWS = 20
"""Keys listed one per row in the terminal table (the rest are counted)."""
MAX_LISTED_OPS = 64
"""Ops of one counterexample listed in --json (a minimal one has a few)."""


def _model_help() -> str:
    from replicalab.checkers.linearizability.registry import MODELS

    listed = "; ".join(f"{name} ({cls.summary})" for name, cls in MODELS.items())
    return (f"The data type to check against: {listed}; or transactions: list-append, "
            "rw-register (Elle-style isolation anomalies, see docs/transactions.md).")


def register(app: typer.Typer) -> None:
    """Add ``replicalab check`` to the root app (its ``--model`` help lists the registry
    as it is now: a model registered later shows when the command is loaded again)."""
    check.__annotations__["model"] = Annotated[str, typer.Option(help=_model_help())]
    app.command(name="check")(check)


class Loaded:
    """One PATH read and ready to check: ``ops`` (LinOps) or a History with its encoded
    columns; ``clock`` how explanations name points; ``note`` a line to print first."""

    def __init__(self, path: Path, clock: Any, ops: list[Any] | None = None,
                 history: Any = None, columns: Any = None, note: str | None = None) -> None:
        self.path, self.clock, self.ops = path, clock, ops
        self.history, self.columns, self.note = history, columns, note


def _load(path: Path, model: Any) -> Loaded:
    """Return one PATH read for ``model``; raises ValueError with one line naming the
    path (and the line of a file) and what was expected."""
    from replicalab.checkers.linearizability.explain import Clock

    if path.is_dir():
        if (path / "queue.parquet").exists():
            return _load_queue(path, model)
        return _load_run(path, model)
    if not path.exists():
        raise ValueError(f"{path} does not exist; pass a run directory, a Jepsen EDN history, "
                         "a JSON lines export or Jepsen log lines")
    from replicalab.checkers.linearizability.from_file import ops_from_file
    from replicalab.history.read import read_ops

    fh = read_ops(path, tuples=model.tuples)
    if not fh.ops:  # nothing to check is not "linearizable, 0 ops"
        raise ValueError(f"{path} holds no operations; pass a history with at least one "
                         "(Jepsen EDN, JSON lines, Jepsen log lines or Porcupine's JSON)")
    ops = ops_from_file(path, fh.ops, model)
    t0 = min((o.invoke_ns for o in ops), default=0)
    return Loaded(path, Clock(t0, lines=not fh.timed), ops=ops)


def _load_run(path: Path, model: Any) -> Loaded:
    """Return a run directory's History with its columns for the register models."""
    from replicalab.checkers.linearizability.explain import Clock
    from replicalab.checkers.linearizability.from_history import encode_history, ops_from_history
    from replicalab.cli import rundir
    from replicalab.history import load_history

    rundir.kind(path, "check")
    if model.native != "register":
        raise ValueError(f"{path}: a run's history holds reads, writes and cas; check it "
                         "with --model kv, cas-register or register")
    h, _ = load_history(path)
    try:
        # the encoding raises what ops_from_history raises (an op on several keys),
        # here, before any search; what a narrower model refuses is raised by the check
        cols = encode_history(h, model)
        t0 = cols.t0_ns
    except (TypeError, OverflowError):
        cols = None  # values the interning cannot take: the LinOp path takes them
        t0 = int(h.column("invoke_ns").min()) if len(h) else 0
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    if cols is None:
        return Loaded(path, Clock(t0), ops=ops_from_history(h))
    return Loaded(path, Clock(t0), history=h, columns=cols)


def _load_queue(path: Path, model: Any) -> Loaded:
    """Return a queue run's sends and deliveries as fifo-queue ops."""
    from replicalab.checkers.linearizability.explain import Clock
    from replicalab.checkers.linearizability.from_queue import queue_ops
    from replicalab.cli import rundir
    from replicalab.queues.record import load_log

    if model.name != "fifo-queue":
        try:
            rundir.kind(path, "check")
        except ValueError as err:
            raise ValueError(f"{err}; or check its sends and deliveries as a FIFO queue: "
                             "--model fifo-queue") from None
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    config = config if isinstance(config, dict) else {}
    spec = config.get("spec") if isinstance(config.get("spec"), dict) else {}
    info = config.get("queue") if isinstance(config.get("queue"), dict) else {}
    fifo = bool(info.get("fifo"))
    groups = int(spec.get("groups", 1)) if fifo else 1
    ops = queue_ops(load_log(path), groups)
    t0 = min((o.invoke_ns for o in ops), default=0)
    note = None if fifo else (
        f"{path}: its queue is not a FIFO queue ({info.get('kind', 'standard')}): a "
        "visibility-timeout queue redelivers and reorders, so the fifo-queue model is "
        "expected to fail on it (see docs/linearizability.md)")
    return Loaded(path, Clock(t0), ops=ops, note=note)


def _json_value(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_json_value(x) for x in v]
    if isinstance(v, frozenset | set):
        return sorted((_json_value(x) for x in v), key=repr)
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)


def _op_json(op: Any, clock: Any) -> dict[str, Any]:
    return {"index": op.index, "process": op.process, "f": op.f, "key": _json_value(op.key),
            "value": _json_value(op.value), "outcome": op.outcome, **clock.json(op)}


def result_json(path: Path, ops: list[Any], result: Any, clock: Any) -> dict[str, Any]:
    """Return the ``--json`` entry of one checked history: verdict, counts, time and, for
    each key that is not linearizable, its counterexample and explanation."""
    from replicalab.checkers.linearizability.ops import Verdict

    by_index = {o.index: o for o in ops}
    bad = [p for p in result.parts if p.verdict == Verdict.NOT_LINEARIZABLE]
    unknown = [p for p in result.parts if p.verdict == Verdict.UNKNOWN]
    skipped = [p for p in result.parts if p.verdict == Verdict.SKIPPED]
    ce = [{"key": _json_value(p.key), "explanation": p.explanation, "minimal": p.minimal,
           "ops": [_op_json(by_index[i], clock) for i in p.counterexample[:MAX_LISTED_OPS]]}
          for p in bad] or None
    return {
        "path": str(path), "model": result.model, "valid": result.verdict.json(),
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


def _rank(v: Any) -> int:
    return {0: 0, -1: 1, 1: 2, 2: 3}[int(v)]


def _show_result(path: Path, result: Any, model: Any) -> None:
    """Print one history's table and the explanation of each key that is not decided
    linearizable."""
    from replicalab.checkers.linearizability.ops import Verdict
    from replicalab.cli.output import TableData, say, show

    parts = sorted(result.parts, key=lambda p: (_rank(p.verdict), -p.ops, str(p.key)))
    title = (f"{path} ({result.model} model): {result.verdict.words}, "
             f"{plural(result.ops, 'op')}, {plural(len(parts), 'key')}, "
             f"{result.check_s:.2f} s")
    if len(parts) == 1 and parts[0].key is None:
        say(title)  # one object: the title says it all
    else:
        t = TableData(title, ["key", "verdict", "ops", "linearized ops", "check time"],
                      right=(2, 3, 4))
        for p in parts[:MAX_ROWS]:
            lin = "-" if p.linearization is None else f"{len(p.linearization):,}"
            t.add("(single object)" if p.key is None else str(p.key), p.verdict.words,
                  f"{p.ops:,}", lin, f"{p.check_s:.3f} s")
        show(t)
    if len(parts) > MAX_ROWS:
        rest = parts[MAX_ROWS:]
        count = {v: sum(p.verdict == v for p in rest) for v in Verdict}
        say(f"... and {len(rest):,} more keys ("
            f"{count[Verdict.LINEARIZABLE]:,} linearizable, "
            f"{count[Verdict.UNKNOWN]:,} unknown, "
            f"{count[Verdict.NOT_LINEARIZABLE]:,} not linearizable, "
            f"{count[Verdict.SKIPPED]:,} skipped)")
    skipped = sum(p.verdict == Verdict.SKIPPED for p in parts)
    if skipped:
        say(f"{skipped:,} key{'' if skipped == 1 else 's'} left unchecked: --fail-fast stopped "
            "at the first key that is not linearizable")
    for p in parts:
        if p.verdict == Verdict.LINEARIZABLE or not p.explanation:
            continue
        say("")
        say(f"key {p.key}: {p.explanation}" if p.key is not None else p.explanation)


def _check_one(item: Loaded, model: Any, deadline_s: float, fail_fast: bool,
               as_json: bool) -> Any:
    """Return the CheckResult of one loaded PATH (progress on stderr when not --json)."""
    from replicalab.checkers.linearizability.checker import check as run_check

    def run(progress: Any) -> Any:
        if item.columns is not None:
            from replicalab.checkers.linearizability.from_history import check_history

            return check_history(item.history, model, deadline_s=deadline_s,
                                 progress=progress, t0_ns=item.clock.t0_ns,
                                 fail_fast=fail_fast, columns=item.columns)
        return run_check(item.ops, model, deadline_s=deadline_s, progress=progress,
                         fail_fast=fail_fast, clock=item.clock)

    if as_json or (len(item.ops or ()) < 10_000 and item.columns is None):
        return run(None)  # over in milliseconds: no progress bar to set up
    from replicalab.cli.progress import progress_bar

    with progress_bar(f"check {item.path.name}", enabled=True) as tick:
        def progress(done: int, total: int) -> None:
            tick(done / max(total, 1), f"{done:,} of {total:,} keys checked")
        return run(progress)


def check(
    paths: Annotated[list[Path], typer.Argument(
        help="Run directories, Jepsen EDN histories (one op map per line or one vector of "
             "maps), JSON lines exports or Jepsen log lines (INFO jepsen.util - 3 :invoke "
             ":read nil).", show_default=False, metavar="PATH")],
    model: str = "kv",
    timeout: Annotated[str, typer.Option(
        help="Time allowed per history (e.g. 60s, 5m); then the verdict is unknown, with "
             "every key decided so far and the longest linearizable prefix of the others.",
    )] = "60s",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    fail_fast: Annotated[bool, typer.Option(
        "--fail-fast", help="Stop at the first key that is not linearizable; the other keys "
                            "are left unchecked (listed as skipped).")] = False,
    consistency_models: Annotated[str | None, typer.Option(
        "--consistency-models", help="list-append / rw-register: the models the history "
                                     "should satisfy, comma-separated, as Elle's "
                                     ":consistency-models (default strict-serializable; "
                                     "'none' for none).", show_default=False)] = None,
    anomalies: Annotated[str | None, typer.Option(
        "--anomalies", help="list-append / rw-register: further anomalies to report, "
                            "comma-separated, as Elle's :anomalies (G0,G1c,...).",
        show_default=False)] = None,
    wfr_keys: Annotated[bool, typer.Option(
        "--wfr-keys", help="rw-register: a transaction's write of a key follows its read "
                           "of it in the key's version order (Elle's :wfr-keys?).")] = False,
) -> None:
    """Check histories for linearizability (Jepsen semantics: ok happened inside its
    interval, fail never happened, info may have happened at any time after its invoke).

    For each history that is not linearizable it prints a 1-minimal counterexample (drop
    any one of its operations and the rest can be linearized) and what it means; a
    history without times is ordered by its lines, and the explanation names lines.
    Exit status: 0 all linearizable, 1 one is not, 3 one is unknown (timeout), 2 bad
    input. With --fail-fast a history stops at its first key that is not linearizable:
    its verdict is still "not linearizable", the keys not searched are "skipped" in the
    table and in --json.

    Example: replicalab check runs/20261122T010203Z-register-sim-primary --model kv
    """
    from replicalab.checkers.linearizability.ops import Verdict
    from replicalab.checkers.linearizability.registry import get_model

    if model in ("list-append", "rw-register"):  # transactions: their own checker
        from replicalab.cli.check_txn import run as run_txn

        try:
            txn_timeout_s = parse_duration_s(timeout, "--timeout")
        except ValueError as err:
            fail(str(err))
        raise typer.Exit(run_txn(paths, model, txn_timeout_s, as_json, consistency_models,
                                 anomalies, wfr_keys))
    try:
        m = get_model(model)  # resolved once: the object goes everywhere from here
    except ValueError:
        from replicalab.checkers.linearizability.registry import MODELS

        fail(f"--model {model!r}: use one of {', '.join(MODELS)}")
    try:
        timeout_s = parse_duration_s(timeout, "--timeout")
    except ValueError as err:
        fail(str(err))
    loaded = []
    for path in paths:  # read everything first: bad input is reported before any search
        try:
            loaded.append(_load(path, m))
        except ValueError as err:
            fail(str(err))
    docs, verdicts = [], []
    for item in loaded:
        started = time.monotonic()
        try:
            result = _check_one(item, m, started + timeout_s, fail_fast, as_json)
        except ValueError as err:
            fail(f"{item.path}: {err}")
        verdicts.append(result.verdict)
        if as_json:
            if item.columns is not None:  # LinOps only for the rows --json lists
                from replicalab.checkers.linearizability.from_history import history_op

                ops = [history_op(item.history, i) for p in result.parts
                       if p.verdict == Verdict.NOT_LINEARIZABLE
                       for i in p.counterexample[:MAX_LISTED_OPS]]
            else:
                ops = item.ops
            docs.append(result_json(item.path, ops, result, item.clock))
        else:
            if item.note:
                from replicalab.cli.output import say

                say(item.note)
            _show_result(item.path, result, m)
    if as_json:
        sys.stdout.write(json.dumps({"results": docs}) + "\n")
        sys.stdout.flush()
    code = (1 if Verdict.NOT_LINEARIZABLE in verdicts else
            3 if Verdict.UNKNOWN in verdicts else 0)
    raise typer.Exit(code)

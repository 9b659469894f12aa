"""``replicalab check``: is a recorded history linearizable (or, for transactions, free of
isolation anomalies), and if not, which operations prove it.

Parses the options, opens each PATH and checks it with ``replicalab.api.checking``, prints
the result. Exit status: 0 every history is valid, 1 one is not, 3 one could not be
decided before ``--timeout`` (and none is known not to be), 2 bad input. Its options are
plain, so :func:`fast` parses a command line of them without Typer (whose import is a good
part of a short check's start-up); ``--help`` and anything else go through Typer.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replicalab.api import checking as api
from replicalab.api.durations import seconds
from replicalab.cli.errors import fail, said
from replicalab.cli.output import say, show
from replicalab.cli.progress import Bars
from replicalab.cli.timeparse import warnings_as_notes

_VALUED = {"--model": "model", "--timeout": "timeout",
           "--consistency-models": "consistency_models", "--anomalies": "anomalies"}
_FLAGS = {"--json": "as_json", "--fail-fast": "fail_fast", "--wfr-keys": "wfr_keys"}


def run(paths: list[Path], model: str | None = None, timeout: str = "60s",
        as_json: bool = False, fail_fast: bool = False, consistency_models: str | None = None,
        anomalies: str | None = None, wfr_keys: bool = False) -> int:
    """Check every PATH and print the results; return the exit status (0, 1 or 3; bad
    input exits 2 with one line)."""
    try:
        with warnings_as_notes():
            seconds(timeout, "timeout")
        reports = []
        for r in api.check_many(paths, model, timeout, fail_fast=fail_fast,
                                bars=None if as_json else Bars(),
                                consistency_models=consistency_models, anomalies=anomalies,
                                wfr_keys=wfr_keys):
            reports.append(r)
            if as_json:
                continue
            if r.note:
                say(r.note)
            shown = r.outcome()
            show(shown.tables)
            if shown.remarks:  # one write for a history's lines, not one each
                say("\n".join(shown.remarks))
    except ValueError as err:
        fail(said(err, {"engine": "REPLICALAB_TXN_ENGINE"}))
    if as_json:
        import json  # only --json prints it

        sys.stdout.write(json.dumps({"results": [r.to_json() for r in reports]}) + "\n")
        sys.stdout.flush()
    valid = [r.valid for r in reports]
    return 1 if False in valid else 3 if "unknown" in valid else 0


def fast(args: list[str]) -> Callable[[], int] | None:
    """Return the command for ``args`` (what follows ``check``) when they are PATHs and
    this command's own options, each given once (``--model kv`` or ``--model=kv``), else
    None: Typer then parses them (``--help``, a mistake and its message)."""
    given: dict[str, Any] = {}
    paths: list[Path] = []
    rest = iter(args)
    for arg in rest:
        name, eq, value = arg.partition("=")
        if name in _VALUED and name.startswith("--"):
            if not eq:
                value = next(rest, "-")
            if value.startswith("-") or _VALUED[name] in given:
                return None
            given[_VALUED[name]] = value
        elif arg in _FLAGS and _FLAGS[arg] not in given:
            given[_FLAGS[arg]] = True
        elif arg.startswith("-") or not arg:
            return None
        else:
            paths.append(Path(arg))
    return (lambda: run(paths, **given)) if paths else None


def register(app: Any) -> None:
    """Add ``replicalab check`` to the root Typer app (its ``--model`` help lists the
    models as they are now: a model registered later shows when the command is loaded
    again)."""
    from typing import Annotated

    import typer

    listed = "; ".join(f"{name} ({what})" for name, what in api.models().items())

    def check(
        paths: Annotated[list[Path], typer.Argument(
            help="Run directories, Jepsen EDN histories (one op map per line or one vector "
                 "of maps), JSON lines exports or Jepsen log lines (INFO jepsen.util - 3 "
                 ":invoke :read nil).", show_default=False, metavar="PATH")],
        model: Annotated[str | None, typer.Option(
            help=f"The model to check against: {listed}. Default: the history's own "
                 "(transactions: list-append or rw-register; a queue run: fifo-queue; else "
                 "kv).", show_default=False)] = None,
        timeout: Annotated[str, typer.Option(
            help="Time allowed per history (e.g. 60s, 5m); then the verdict is unknown, "
                 "with every key decided so far and the longest linearizable prefix of the "
                 "others.")] = "60s",
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")
                           ] = False,
        fail_fast: Annotated[bool, typer.Option(
            "--fail-fast", help="Stop at the first key that is not linearizable; the other "
                                "keys are left unchecked (listed as skipped).")] = False,
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
            "--wfr-keys", help="rw-register: a transaction's write of a key follows its "
                               "read of it in the key's version order (Elle's "
                               ":wfr-keys?).")] = False,
    ) -> None:
        raise typer.Exit(run(paths, model, timeout, as_json, fail_fast, consistency_models,
                             anomalies, wfr_keys))

    check.__doc__ = CHECK_HELP
    app.command(name="check")(check)


CHECK_HELP = """Check histories for linearizability (Jepsen semantics: ok happened inside its
    interval, fail never happened, info may have happened at any time after its invoke),
    or transactions for isolation anomalies (list-append, rw-register, as Elle does).

    For each history that is not linearizable it prints a 1-minimal counterexample (drop
    any one of its operations and the rest can be linearized) and what it means; a
    history without times is ordered by its lines, and the explanation names lines.
    Without --model a history is checked with its own model; a model that does not fit it
    is refused. Exit status: 0 all valid, 1 one is not, 3 one is unknown (timeout), 2 bad
    input. With --fail-fast a history stops at its first key that is not linearizable:
    its verdict is still "not linearizable", the keys not searched are "skipped" in the
    table and in --json.

    Example: replicalab check runs/20261122T010203Z-register-sim-primary --model kv
    """

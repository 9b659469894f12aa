"""Entry point: the Typer app, one command per verb, and the error policy."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from replicalab import __version__
from replicalab.cli import (
    check,
    clt,
    counter,
    hlc,
    load,
    placement,
    placement_live,
    queue,
    scorecard,
    watch,
)
from replicalab.cli.cluster import cluster_app
from replicalab.cli.compare import compare
from replicalab.cli.demo import demo
from replicalab.cli.errors import DEBUG, err_console, fail
from replicalab.cli.export import export
from replicalab.cli.model import model_app
from replicalab.cli.probe import probe, report
from replicalab.cluster import process

app = typer.Typer(
    name="replicalab",
    help="A lab for replicated data: measure what consistency and latency a store gives "
         "its clients.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help is printed as written: "[[fault]]" and "replicalab[ray]" stay
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version.", callback=_print_version, is_eager=True)] = False,
) -> None:
    DEBUG["on"] = debug


app.command()(probe)
app.command()(report)
app.command()(demo)
app.command()(export)
app.command()(compare)
app.add_typer(model_app, name="model")
app.add_typer(cluster_app, name="cluster")
for _module in (check, counter, clt, hlc, load, placement, placement_live, queue, scorecard,
                watch):
    _module.register(app)


def main() -> None:
    """Run the CLI: bad input exits 2 with one line, Ctrl-C (or SIGTERM, the same) 130,
    tracebacks only with --debug; every process a command started and did not hand over is
    stopped however the command ends."""
    process.install_signal_handlers()
    try:
        _run()
    finally:
        with process.signals_held():
            process.stop_all()


def _run() -> None:
    # Typer's command-line exceptions come from click (vendored in newer Typer): recognise
    # them by shape rather than by import so any Typer release works.
    try:
        code = app(standalone_mode=False)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as e:
        if hasattr(e, "format_message"):
            fail(" ".join(e.format_message().split()))
        if type(e).__name__ == "Abort":
            fail("interrupted", 130)
        if hasattr(e, "exit_code"):
            sys.exit(e.exit_code)
        if DEBUG["on"] or "--debug" in sys.argv:
            err_console.print_exception()
        fail(f"{type(e).__name__}: {e} (run with --debug for the traceback)", 1)
    if code == 130:  # Typer turns a KeyboardInterrupt inside a command into exit code 130
        fail("interrupted", 130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

"""Entry point: one registry line per verb (:data:`VERBS`), and the error policy.

Verbs are loaded lazily (``replicalab --help`` lists them without importing any), the Typer
app (``cli/app.py``) is made on first use, and a verb module may parse a command line of
its plain options itself (``fast(args)``; anything else goes to Typer), so that
``replicalab check FILE`` imports neither the other verbs nor Typer.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

from replicalab.cli.errors import DEBUG, fail

YOUNG_OBJECTS = 50_000
"""Allocations between two collections of the youngest generation while a command runs
(Python's default: 700). A check makes tens of thousands of short-lived ops that
reference counting frees; collecting every 700 of them walked them for nothing (2 % of
``check`` on the 102 etcd histories). Cycles are still collected, a few MB later."""


class Verb(NamedTuple):
    """One top-level command: ``name``, the ``module`` that defines it and the ``summary``
    the root ``--help`` lists (so listing needs no import). (A named tuple: every command
    makes this class first, and a frozen dataclass's generated methods cost 0.8 ms.)

    On first use the module is imported and attached to a fresh app: through its
    ``register(app)`` when it has one, else its attribute ``<name>_app`` (a Typer group)
    or ``<name>`` (a command function). Several lines may share a name: their modules are
    loaded in order."""

    name: str
    module: str
    summary: str = ""


VERBS: tuple[Verb, ...] = (
    Verb("probe", "replicalab.cli.probe", "Probe a store's consistency as its clients see it."),
    Verb("report", "replicalab.cli.probe",
         "Re-check a saved run from its history and re-render its report."),
    Verb("demo", "replicalab.cli.probe",
         "Reproduce seed 003 §2.1.1 on the simulated SimpleDB and show the report."),
    Verb("export", "replicalab.cli.export",
         "Export a run's history as invoke/completion events (Jepsen EDN or JSON lines)."),
    Verb("compare", "replicalab.cli.compare",
         "Start each store as a 3-node cluster on the same regions and compare them."),
    Verb("check", "replicalab.cli.check",
         "Check histories for linearizability, with a minimal counterexample."),
    Verb("watch", "replicalab.cli.watch",
         "Run the seed-001 microbenchmark suite every interval against storage backends."),
    Verb("dashboard", "replicalab.cli.watch",
         "Serve the watch samples as a page on 127.0.0.1."),
    Verb("model", "replicalab.cli.model",
         "Predict protocol performance and staleness before building."),
    Verb("cluster", "replicalab.cli.cluster", "Start, inspect and stop real local clusters."),
    Verb("hosts", "replicalab.cli.hosts",
         "Make, inspect and remove emulated hosts reached over SSH."),
    Verb("counter", "replicalab.cli.counter",
         "Bounded Counters: numeric invariants (value >= bound) over replicated stores."),
    Verb("clt", "replicalab.cli.clt",
         "Cloud Latency Tester: all-pairs RTT and quorum latency over agents."),
    Verb("hlc", "replicalab.cli.hlc",
         "Hybrid logical clocks: align multi-node traces, reproduce the seed figures."),
    Verb("load", "replicalab.cli.load",
         "Open-loop load: offered rate, ramp until failure, SLA search."),
    Verb("placement", "replicalab.cli.placement",
         "Data placement (seed 002): where each object should live as access moves."),
    Verb("queue", "replicalab.cli.queue",
         "Visibility-timeout queues: duplicate deliveries and the strategies against them."),
    Verb("scorecard", "replicalab.cli.scorecard",
         "Measure seed 001's chart for each store (latency, durability, consistency)."),
)
"""Every verb of the CLI, in the order ``--help`` lists them."""


def main() -> None:
    """Run the CLI: bad input exits 2 with one line, Ctrl-C (or SIGTERM, the same) 130,
    tracebacks only with --debug; every process a command started and did not hand over is
    stopped however the command ends."""
    # start-up makes long-lived objects only (modules, classes, functions): no collection
    # can free any of them, so none runs until the command's own work (see _run)
    gc.disable()
    from replicalab.api import lifecycle

    lifecycle.install_signal_handlers()
    try:
        _run()
    except SystemExit as done:
        if done.code == 130:  # interrupted: what it recorded is saved; end within the second
            lifecycle.exit_now(130)
        raise
    finally:
        with lifecycle.signals_held():
            lifecycle.stop_all()


def entry() -> None:
    """The ``replicalab`` command (and ``python -m replicalab.cli.main``): :func:`main`, left
    without tearing the interpreter down (``lifecycle.run_to_exit``). (:func:`main` itself
    raises SystemExit, for callers in the same process.)"""
    from replicalab.api import lifecycle

    lifecycle.run_to_exit(main)


def _fast(argv: list[str]) -> Callable[[], int] | None:
    """Return the command of ``argv`` when its verb's module parses it itself (its
    ``fast(args)``; plain options only), else None (Typer parses it)."""
    modules = [v.module for v in VERBS if argv and v.name == argv[0]]
    if len(modules) != 1:
        return None
    fast = getattr(importlib.import_module(modules[0]), "fast", None)
    return None if fast is None else fast(argv[1:])


_APP: list[Any] = []


def typer_app() -> Any:
    """Return the root Typer app over :data:`VERBS` (``cli/app.py``), made on first use."""
    if not _APP:
        _APP.append(importlib.import_module("replicalab.cli.app").make_app(VERBS))
    return _APP[0]


def load_verb(name: str) -> Any:
    """Return the click command of verb ``name`` (importing its modules), or None for a
    name no line of :data:`VERBS` has."""
    return importlib.import_module("replicalab.cli.app").load_verb(name, VERBS)


def __getattr__(name: str) -> Any:
    # ``from replicalab.cli.main import app``: the Typer app, made on first use
    if name == "app":
        return typer_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _run() -> None:
    # Typer's command-line exceptions come from click (vendored in newer Typer): recognise
    # them by shape rather than by import so any Typer release works.
    try:
        try:
            command = _fast(sys.argv[1:])
        finally:
            # what the command has loaded (modules, classes) lives to the end: the garbage
            # collections its work sets off (a check's thousands of ops) need not walk it
            gc.freeze()
            gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])
            gc.enable()
        code = command() if command is not None else typer_app()(standalone_mode=False)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as e:
        if type(e).__name__ == "NoArgsIsHelpError":
            # `replicalab queue` alone asks for its help: print it as --help does (its
            # message is the help text), not squashed into one "error: Usage:" line
            ctx = getattr(e, "ctx", None)
            sys.stdout.write((ctx.get_help() if ctx is not None else e.format_message())
                             + "\n")
            sys.exit(0)
        if hasattr(e, "format_message"):
            from replicalab.api.catalog import url_parameter_hint

            # `probe --isolation serializable`: Click suggests --duration, --spacing
            fail(url_parameter_hint(getattr(e, "option_name", "") or "")
                 or " ".join(e.format_message().split()))
        if type(e).__name__ == "PluginError":  # an installed package fails to load: bad input
            fail(str(e))
        if type(e).__name__ == "Abort":
            fail("interrupted", 130)
        if hasattr(e, "exit_code"):
            sys.exit(e.exit_code)
        if DEBUG["on"] or "--debug" in sys.argv:
            from replicalab.cli.errors import stderr_console

            stderr_console().print_exception()
        fail(f"{type(e).__name__}: {e} (run with --debug for the traceback)", 1)
    from replicalab.cli.errors import flush_notes

    flush_notes()  # a command that printed nothing still says what is deprecated
    if code == 130:  # Typer turns a KeyboardInterrupt inside a command into exit code 130
        fail("interrupted", 130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    entry()

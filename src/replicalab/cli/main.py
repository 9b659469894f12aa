"""Entry point: the Typer app, one registry line per verb, and the error policy.

Verbs are loaded lazily: ``replicalab --help`` lists them from :data:`VERBS` without
importing any, and ``replicalab check FILE`` imports ``cli/check.py`` and nothing of the
other verbs (numpy, pyarrow, the stores...), so a short command starts in a fraction of
a second. A verb is one line of :data:`VERBS` naming its module (see :class:`Verb`).
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from replicalab import __version__
from replicalab.cli.errors import DEBUG, fail


@dataclass(frozen=True)
class Verb:
    """One top-level command: ``name``, the ``module`` that defines it and the ``summary``
    the root ``--help`` lists (so listing needs no import).

    On first use the module is imported and attached to a fresh app: through its
    ``register(app)`` when it has one (it may add several commands, or attach sub-commands
    to a group another line registers), else its attribute ``<name>_app`` (a Typer group)
    or ``<name>`` (a command function). Several lines may share a name: their modules are
    loaded in order (``placement`` and the ``placement live`` sub-commands)."""

    name: str
    module: str
    summary: str = ""


VERBS: tuple[Verb, ...] = (
    Verb("probe", "replicalab.cli.probe", "Probe a store's consistency as its clients see it."),
    Verb("report", "replicalab.cli.probe",
         "Re-check a saved run from its history and re-render its report."),
    Verb("demo", "replicalab.cli.demo",
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
    Verb("placement", "replicalab.cli.placement_live"),
    Verb("queue", "replicalab.cli.queue",
         "Visibility-timeout queues: duplicate deliveries and the strategies against them."),
    Verb("scorecard", "replicalab.cli.scorecard",
         "Measure seed 001's chart for each store (latency, durability, consistency)."),
)
"""Every verb of the CLI, in the order ``--help`` lists them."""


def _summaries() -> dict[str, str]:
    out: dict[str, str] = {}
    for v in VERBS:
        out.setdefault(v.name, v.summary)
    return out


def load_verb(name: str) -> Any:
    """Return the click command of verb ``name`` (importing its modules), or None for a
    name no line of :data:`VERBS` has."""
    modules = [v.module for v in VERBS if v.name == name]
    if not modules:
        return None
    sub = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False,
                      add_completion=False)
    for path in modules:
        module = importlib.import_module(path)
        if hasattr(module, "register"):
            module.register(sub)
        elif hasattr(module, f"{name}_app"):
            sub.add_typer(getattr(module, f"{name}_app"), name=name)
        else:
            sub.command(name=name)(getattr(module, name))
    from replicalab.cli.metavars import word_metavars

    cmd = word_metavars(typer.main.get_group(sub).commands.get(name))
    if cmd is not None and any(getattr(importlib.import_module(m), "PLAIN_PARAMETERS", False)
                               for m in modules):
        _plain_parameters(cmd)
    return cmd


class _Plain:
    """Coercion of a parameter typed ``str``, ``Path``, ``list[Path]`` or ``bool``, as
    Typer's runtime coercion gives it but without building a Pydantic adapter: importing
    Pydantic for that costs a short command a sizeable share of its start-up."""

    def __init__(self, make: Any, many: bool) -> None:
        self.make, self.many = make, many

    def coerce(self, value: Any, param: Any = None, ctx: Any = None) -> Any:
        """Return ``value`` (a string or strings from the command line) as the type."""
        if value is None:
            return () if self.many else None
        if self.many:
            return [self.make(v) for v in value]
        return self.make(value)


def _plain_parameters(cmd: Any) -> None:
    """Give ``cmd``'s plainly typed parameters :class:`_Plain` coercion (a verb module
    asks with ``PLAIN_PARAMETERS = True``); others keep Typer's."""
    from pathlib import Path

    makers = {str: str, Path: Path, bool: bool}

    def plain(param: Any) -> Any:
        annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        many = getattr(annotation, "__origin__", None) is list
        target = annotation.__args__[0] if many else annotation
        if target in makers and getattr(param, "_runtime_param", False) is None:
            param._runtime_param = _Plain(makers[target], many)
        return param

    for param in getattr(cmd, "params", ()):
        plain(param)
    made = cmd.get_help_option  # --help is made when a context asks for it
    cmd.get_help_option = lambda ctx: None if (o := made(ctx)) is None else plain(o)


class LazyGroup(typer.core.TyperGroup):
    """The root group: lists the verbs of :data:`VERBS` and imports a verb's module only
    when that verb runs or its own ``--help`` is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_parameters(self)  # --debug, --version: flags, no adapter needed

    def list_commands(self, ctx: Any) -> list[str]:
        """Return the verb names, registry order (then any command added eagerly)."""
        names = list(_summaries())
        return names + [n for n in self.commands if n not in names]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """Return verb ``cmd_name``'s command, loading its module on first use."""
        cmd = self.commands.get(cmd_name)
        if cmd is None:
            cmd = load_verb(cmd_name)
            if cmd is not None:
                self.commands[cmd_name] = cmd
        return cmd

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """List the verbs with their registry summaries, importing none of them."""
        from typer._click.utils import make_default_short_help

        summaries = _summaries()
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for n in names:
            cmd = self.commands.get(n)
            if cmd is not None and n not in summaries:
                rows.append((n, cmd.get_short_help_str(limit)))
            else:
                rows.append((n, make_default_short_help(summaries[n], limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    name="replicalab",
    cls=LazyGroup,
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


def main() -> None:
    """Run the CLI: bad input exits 2 with one line, Ctrl-C (or SIGTERM, the same) 130,
    tracebacks only with --debug; every process a command started and did not hand over is
    stopped however the command ends."""
    from replicalab.cluster import process

    process.install_signal_handlers()
    try:
        _run()
    except SystemExit as done:
        if done.code == 130:  # interrupted: what it recorded is saved; end within the second
            process.exit_now(130)
        raise
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
        if type(e).__name__ == "NoArgsIsHelpError":
            # `replicalab queue` alone asks for its help: print it as --help does (its
            # message is the help text), not squashed into one "error: Usage:" line
            ctx = getattr(e, "ctx", None)
            sys.stdout.write((ctx.get_help() if ctx is not None else e.format_message())
                             + "\n")
            sys.exit(0)
        if hasattr(e, "format_message"):
            from replicalab.stores.url import url_parameter_hint

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
            from replicalab.cli.errors import err_console

            err_console.print_exception()
        fail(f"{type(e).__name__}: {e} (run with --debug for the traceback)", 1)
    from replicalab.cli.errors import flush_notes

    flush_notes()  # a command that printed nothing still says what is deprecated
    if code == 130:  # Typer turns a KeyboardInterrupt inside a command into exit code 130
        fail("interrupted", 130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

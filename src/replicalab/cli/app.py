"""The Typer app of the command line (:func:`make_app`): the root group that lists the
verbs of the registry ``cli/main.py`` hands over without importing them and loads a verb's
module when it runs. Imported only when a command needs Typer (``replicalab check`` with
plain options does not: see ``cli/main.py``)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from replicalab import __version__
from replicalab.cli.errors import DEBUG, forget_notes


def _summaries(verbs: Sequence[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in verbs:
        out.setdefault(v.name, v.summary)
    return out


def load_verb(name: str, verbs: Sequence[Any]) -> Any:
    """Return the click command of verb ``name`` (importing its modules), or None for a
    name no line of ``verbs`` (``cli/main.py``'s registry) has."""
    modules = [v.module for v in verbs if v.name == name]
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

    return word_metavars(typer.main.get_group(sub).commands.get(name))


class LazyGroup(typer.core.TyperGroup):
    """The root group: lists the verbs of its registry (``verbs``, set by
    :func:`make_app`) and imports a verb's module only when that verb runs or its own
    ``--help`` is asked for."""

    verbs: Sequence[Any] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

    def list_commands(self, ctx: Any) -> list[str]:
        """Return the verb names, registry order (then any command added eagerly)."""
        names = list(_summaries(self.verbs))
        return names + [n for n in self.commands if n not in names]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """Return verb ``cmd_name``'s command, loading its module on first use."""
        cmd = self.commands.get(cmd_name)
        if cmd is None:
            cmd = load_verb(cmd_name, self.verbs)
            if cmd is not None:
                self.commands[cmd_name] = cmd
        return cmd

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """List the verbs with their registry summaries, importing none of them."""
        from typer._click.utils import make_default_short_help

        summaries = _summaries(self.verbs)
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


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit(0)


def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version.", callback=_print_version, is_eager=True)] = False,
) -> None:
    DEBUG["on"] = debug
    forget_notes()


def make_app(verbs: Sequence[Any]) -> typer.Typer:
    """Return the root Typer app over the registry ``verbs``."""
    app = typer.Typer(
        name="replicalab",
        cls=type("Root", (LazyGroup,), {"verbs": tuple(verbs)}),
        help="A lab for replicated data: measure what consistency and latency a store gives "
             "its clients.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # help is printed as written: "[[fault]]" and "replicalab[ray]" stay
        rich_markup_mode=None,
    )
    app.callback()(_root)
    return app

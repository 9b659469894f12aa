"""The Typer app of the command line (:func:`make_app`): the root group that lists the
verbs of the registry ``cli/main.py`` hands over without importing them, loads a verb's
module when it runs, and converts plainly typed options without Pydantic. Imported only
when a command needs Typer (``replicalab check`` with plain options does not: see
``cli/main.py``)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from replicalab import __version__
from replicalab.cli.errors import DEBUG


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
    """The root group: lists the verbs of its registry (``verbs``, set by
    :func:`make_app`) and imports a verb's module only when that verb runs or its own
    ``--help`` is asked for."""

    verbs: Sequence[Any] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_parameters(self)  # --debug, --version: flags, no adapter needed

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

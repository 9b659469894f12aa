"""Placeholders in ``--help`` that read as words: ``--store URL``, ``--duration DURATION``,
``--clients N``, ``--out DIR``, not Typer's ``<str>``, ``<int>``, ``<list[str]>``.

:func:`word_metavars` gives every option of a command (and its sub-commands)
that has no placeholder of its own one from its meaning: a store or queue URL is ``URL``, a
string whose default is a duration (``30s``) is ``DURATION``, a whole number ``N``, another
number ``NUMBER``, a path ``PATH`` (``DIR`` for ``--out``), any other text its own name in
capitals (``--regions REGIONS``, ``--policy POLICY``). An argument shows its name in
capitals, as click shows one: ``report [OPTIONS] RUN_DIR``, ``check [OPTIONS] PATH...``, and
``RUN_DIR`` alone in the arguments list (Typer 0.2x writes ``{RUN_DIR}`` in the usage line
and ``RUN_DIR <path>``, ``PATH <list[Path]>`` in the list).
"""

from __future__ import annotations

import re
from typing import Any

URL_NAMES = {"store", "queue", "central", "url", "urls", "ray", "server"}
DIR_NAMES = {"out", "root", "dir", "db_dir"}
DURATION_NAMES = {"think", "stuck", "sync", "apply", "sla_p99", "duration", "timeout",
                  "interval", "step_duration", "max_duration", "check_timeout"}
_DURATION = re.compile(r"^\s*[0-9]*\.?[0-9]+\s*(ms|s|m|h|d)\s*$")


def _word(param: Any) -> str | None:
    """Return the placeholder ``param`` should show (None: leave it as it is)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    name = (param.name or "").lower()
    desc = getattr(param, "type_descriptor", None)
    kind = param.bare_type().lower() if hasattr(param, "bare_type") else ""
    default = param.default
    if name in URL_NAMES:
        return "URL"
    if getattr(desc, "is_choice", False):
        return None  # Typer lists the choices
    if desc is not None and getattr(desc, "is_path", False):
        return "DIR" if name in DIR_NAMES else "PATH"
    if kind in ("int", "integer"):
        return "N"
    if kind == "float":
        return "NUMBER"
    if name in DURATION_NAMES or (isinstance(default, str) and _DURATION.match(default)):
        return "DURATION"
    longs = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    shown = longs[0].lstrip("-").replace("-", "_") if longs else name
    return shown.upper() or None


_PLAIN: dict[type, type] = {}


def _usage(param: Any, ctx: Any) -> list[str]:
    name = param.metavar or (param.name or "arg").upper()
    name = name if param.required else f"[{name}]"
    return [name + ("..." if param.nargs != 1 else "")]


def _plain(argument: Any) -> None:
    """Make ``argument`` show as click shows one: its name in the usage line (``KIND``,
    ``[KIND]``, ``PATH...``) and no ``<type>`` beside it in the arguments list."""
    cls = type(argument)
    if cls not in _PLAIN:
        _PLAIN[cls] = type(f"Plain{cls.__name__}", (cls,), {
            "display_type_rich": lambda self, ctx=None: None,
            "get_usage_pieces": _usage})
    argument.__class__ = _PLAIN[cls]


def word_metavars(command: Any) -> Any:
    """Give the options and arguments of ``command`` (and of its sub-commands) word
    placeholders where they have none; return ``command``."""
    for param in getattr(command, "params", []):
        if getattr(param, "param_type_name", "") == "argument":
            param.metavar = param.metavar or (param.name or "arg").upper()
            _plain(param)
            continue
        if param.metavar is not None:
            continue
        word = _word(param)
        if word is not None:
            param.metavar = word
    for sub in getattr(command, "commands", {}).values():
        word_metavars(sub)
    return command

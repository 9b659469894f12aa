"""One-line errors with exit code 2 for bad input; tracebacks only with --debug.

The stderr console (:func:`stderr_console`) is made on first use: importing Rich costs tens of
ms, which a command that prints no error (``replicalab --help``) should not pay.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

DEBUG = {"on": False}
_CONSOLE: list[Any] = []
_NOTES: list[str] = []


def note(text: str) -> None:
    """Queue ``note: text`` for stderr (a deprecation, not an error): printed before the
    command's first output, dropped if the command ends on bad input (its one error line
    says all)."""
    if text not in _NOTES:
        _NOTES.append(text)


def forget_notes() -> None:
    """Drop the queued notes: a command starts with none (run in one process after another,
    as a notebook or the tests do, an earlier command's note is not this one's)."""
    _NOTES.clear()


def flush_notes() -> None:
    """Print the queued notes on stderr, once each."""
    while _NOTES:
        sys.stderr.write(f"note: {_NOTES.pop(0)}\n")
    sys.stderr.flush()


def said(err: BaseException, flags: dict[str, str] | None = None) -> str:
    """Return an API error or deprecation in the command line's words: one that names a
    parameter (``api/errors.py``) names its option instead, ``--model`` for ``model``
    (``flags`` maps the parameters whose option is spelt otherwise)."""
    parameter = getattr(err, "parameter", None)
    if parameter is None or not hasattr(err, "said_as") or parameter.startswith("-"):
        return str(err)

    def option(name: str) -> str:
        return (flags or {}).get(name) or "--" + name.replace("_", "-")

    return str(err.said_as(option(parameter), option))


def stderr_console() -> Any:
    """Return the Rich console on stderr (markup, highlighting and emoji off: text is
    printed as given), made on first use."""
    if not _CONSOLE:
        from rich.console import Console

        _CONSOLE.append(Console(stderr=True, highlight=False, soft_wrap=True, markup=False,
                                emoji=False))
    return _CONSOLE[0]


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on one line to stderr and exit with ``code``; the message is
    printed literally (brackets in a name or a hint are kept)."""
    from rich.text import Text

    if code == 2:
        _NOTES.clear()  # bad input: one line, the error
    else:
        flush_notes()
    line = " ".join(str(message).split())  # one line, whatever the message held
    stderr_console().print(Text.assemble(("error:", "bold red"), " ", line))
    sys.exit(code)

"""One-line errors with exit code 2 for bad input; tracebacks only with --debug."""

from __future__ import annotations

import sys
from typing import NoReturn

from rich.console import Console
from rich.text import Text

err_console = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)
DEBUG = {"on": False}


class UserError(Exception):
    """Bad input: the message names the problem and the fix; exit code 2."""


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on one line to stderr and exit with ``code``; the message is
    printed literally (brackets in a name or a hint are kept)."""
    line = " ".join(str(message).split())  # one line, whatever the message held
    err_console.print(Text.assemble(("error:", "bold red"), " ", line))
    sys.exit(code)

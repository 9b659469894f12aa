"""One-line errors with exit code 2 for bad input; tracebacks only with --debug."""

from __future__ import annotations

import sys

from rich.console import Console

err_console = Console(stderr=True, highlight=False, soft_wrap=True)
DEBUG = {"on": False}


class UserError(Exception):
    """Bad input: the message names the problem and the fix; exit code 2."""


def fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` on one line to stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {message}", markup=True, emoji=False)
    sys.exit(code)

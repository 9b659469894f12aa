"""A Rich progress bar with ETA for long runs (silent when not on a terminal)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from replicalab.cli.errors import err_console


@contextmanager
def progress_bar(label: str, enabled: bool = True) -> Iterator[Callable[[float], None]]:
    """Yield a callback taking the completed fraction (0..1) of the run."""
    if not enabled or not err_console.is_terminal:
        yield lambda _fraction: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task(label, total=1.0)
        yield lambda fraction: bar.update(task, completed=fraction)

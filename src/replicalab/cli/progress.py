"""Progress of long runs, on stderr: what the command is doing now, how much is done, ETA.

:func:`progress_bar` yields a :class:`Tick`. Call it with the fraction of the work done
(0..1), and with what is being done now when that changes: ``tick(0.4, "etcd: latency
probe")``. On a terminal it is a Rich bar (description, bar, percent, elapsed, ETA) that
moves with the work; not on a terminal (piped, CI logs) it prints one line once the run has
gone on for a second, then one per phase, one every minute of a long phase and one at the
end (a run over within a second prints none). The ETA comes from the measured speed
(``api/progress.py``): the work done over the last :data:`SPEED_WINDOW_S` seconds (the whole
run until then), so a slow start (imports, a server starting) or a change of pace does not
skew it. A run interrupted
(Ctrl-C, or SIGTERM acting as one) never says "finished", even when the command caught the
interrupt to save what it had (:mod:`replicalab.runtime.interrupts`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from replicalab.api import lifecycle
from replicalab.api.progress import Speed
from replicalab.api.words import fmt_s
from replicalab.cli.errors import flush_notes, stderr_console

HEARTBEAT_S = 60.0
"""Piped output: a line at least this often during one long phase."""
QUIET_S = 1.0
"""Piped output: a run that ends within this many seconds prints no progress lines."""


class Tick:
    """The progress callback: ``tick(fraction)`` or ``tick(fraction, "what now")``."""

    def __init__(self, label: str, bar: Any, clock: object = time.monotonic
                 ) -> None:
        self.label = label
        self.what = ""
        self.done = 0.0
        self._bar = bar
        self._task = bar.add_task(label, total=1.0, eta="") if bar is not None else None
        if bar is not None:
            bar.refresh()  # drawn now, not at the next tick of Rich's thread (late when busy)
        self._clock = clock
        self._t0 = self._now()
        self._last_line = self._t0
        self._said = False  # piped: a run refused before it starts prints only its error
        self._cut = ""  # why the run stopped before its end ("" = it did not)
        self._interrupts = lifecycle.interrupts()  # more at the end: the run was interrupted
        self._speed = Speed(self._t0)

    estimates = True
    """False for work whose pace says nothing of what is left (servers starting): no ETA."""

    def eta(self) -> float | None:
        """Return the seconds left at the measured speed (``api/progress.py``'s
        :class:`Speed`), None when this work makes no estimates."""
        return self._speed.eta_s(self._now()) if self.estimates else None

    def _now(self) -> float:
        return float(self._clock())  # type: ignore[operator]

    def _line(self, what: str) -> None:
        elapsed = self._now() - self._t0
        eta = self.eta()
        left = ("" if eta is None or self.done >= 1 or self._cut
                else f", about {fmt_s(eta)} left")
        from rich.text import Text  # Rich loads with the first bar: a short command skips it

        stderr_console().print(Text(f"{self.label}: {what} ({100 * self.done:.0f}% done, "
                               f"{fmt_s(elapsed)} elapsed{left})"))
        self._last_line = self._now()

    def __call__(self, fraction: float, what: str | None = None) -> None:
        """Record ``fraction`` of the work done (it never goes back) and what is done now."""
        self.done = max(self.done, min(1.0, max(0.0, float(fraction))))
        changed = what is not None and what != self.what
        if changed:
            self.what = what or ""
        self._speed.add(self._now(), self.done)
        if self._bar is not None and self._task is not None:
            eta = self.eta()
            desc = f"{self.label}: {self.what}" if self.what else self.label
            self._bar.update(self._task, completed=self.done, description=desc,
                             eta="" if eta is None else f"ETA {fmt_s(eta)}")
        elif self._said and (changed or self._now() - self._last_line >= HEARTBEAT_S):
            self._line(self.what or "running")
        elif not self._said and self._now() - self._t0 >= QUIET_S:
            self._said = True
            self._line(self.what or "running")

    phase = __call__

    def interrupted(self, why: str = "interrupted") -> None:
        """Record that the run stopped before its end (Ctrl-C, a failed store): the last
        line then says so, with the share really done, never "finished (100% done)"."""
        self._cut = why

    def finish(self) -> None:
        """Say that the run ended (piped output only; a terminal bar simply goes): finished
        at 100%, or, after :meth:`interrupted` or an interrupt this process received
        meanwhile, cut short at the share it reached."""
        if not self._cut and lifecycle.interrupts() > self._interrupts:
            self._cut = "interrupted"
        if self._cut:
            if self._bar is None and self._said:
                self._line(f"{self._cut}, stopped before the end")
            return
        self.done = 1.0  # the block ended without an error: the work is done
        if self._bar is None and self._said:
            self._line("finished")


class _Silent(Tick):
    def __init__(self) -> None:  # no output at all (--json, or turned off)
        self.label, self.what, self.done, self._cut = "", "", 0.0, ""

    def __call__(self, fraction: float, what: str | None = None) -> None:
        self.done = max(self.done, min(1.0, max(0.0, float(fraction))))

    def finish(self) -> None:
        return


@contextmanager
def progress_bar(label: str, enabled: bool = True, estimates: bool = True) -> Iterator[Tick]:
    """Yield a :class:`Tick` for a run described by ``label`` (e.g. ``compare on dc3``);
    ``estimates`` False shows no ETA (see :attr:`Tick.estimates`)."""
    flush_notes()  # the command got past its checks: its deprecation notes, then progress
    if not enabled:
        yield _Silent()
        return
    if not stderr_console().is_terminal:
        tick = Tick(label, None)
        tick.estimates = estimates
        yield tick
        tick.finish()  # not after an error: the error line says it all
        return
    # the description wraps rather than ending in "…" on a narrow terminal
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Column

    with Progress(TextColumn("{task.description}", table_column=Column(overflow="fold")),
                  BarColumn(),
                  TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(),
                  TextColumn("{task.fields[eta]}"), console=stderr_console(),
                  transient=True) as bar:
        tick = Tick(label, bar)
        tick.estimates = estimates
        yield tick



class Bars:
    """Progress bars for runs the API starts and labels (``api/progress.py``): ``bar(label)``
    is :func:`progress_bar` with this command's settings (off under ``--json``)."""

    def __init__(self, enabled: bool = True, estimates: bool = True) -> None:
        self.enabled, self.estimates = enabled, estimates

    def bar(self, label: str) -> Any:
        """Return the progress bar context of a run described by ``label``."""
        return progress_bar(label, self.enabled, self.estimates)

"""Progress of a run started from Python: in a Jupyter notebook an HTML progress bar that
updates in place (an IPython display handle, no terminal escape codes, no widget library
needed); on a terminal a Rich bar on stderr; elsewhere nothing."""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

UPDATE_S = 0.25
"""Notebook bar: at most one update per this many wall seconds (each is a message to the
front end), besides the first and the last."""


def in_notebook() -> bool:
    """Return True when running in a Jupyter kernel (IPython with a kernel attached)."""
    ip = sys.modules.get("IPython")
    if ip is None:
        return False
    shell = ip.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def bar_html(label: str, fraction: float, what: str = "", elapsed_s: float = 0.0) -> str:
    """Return the notebook bar as HTML: a ``<progress>`` element with the label, percent
    done and elapsed wall seconds (every text escaped)."""
    import html  # its entity table is loaded for a notebook's bar only

    pct = 100.0 * min(1.0, max(0.0, fraction))
    text = f"{label}: {what}" if what else label
    return (f'<div class="replicalab-progress"><progress value="{pct:.1f}" max="100" '
            f'style="width:40ex"></progress> <span>{html.escape(text)} — {pct:.0f}% '
            f"({elapsed_s:.1f} s)</span></div>")


SPEED_WINDOW_S = 20.0
"""The ETA's speed is measured over this many recent seconds of the run."""


def measured_eta_s(samples: Sequence[tuple[float, float]], now_s: float,
                   window_s: float = SPEED_WINDOW_S) -> float | None:
    """Return the seconds left at the speed measured over the last ``window_s`` seconds of
    ``samples`` ((time s, fraction done) in time order, the latest last): (1 - done) /
    speed; None while less than a second of work has been seen or none was done in it."""
    if len(samples) < 2:
        return None
    t1, d1 = samples[-1]
    t0, d0 = next(((t, d) for t, d in samples if t >= now_s - window_s), samples[0])
    if t0 >= t1:  # the window holds one sample: take the one before it
        t0, d0 = samples[-2]
    if now_s - samples[0][0] < 1.0 or d1 <= d0 or t1 <= t0:
        return None
    return (1 - min(d1, 1.0)) * (t1 - t0) / (d1 - d0)


class Speed:
    """How fast a run goes, for its ETA: its recent (time s, fraction done) samples, at
    most ten a second, over the last :data:`SPEED_WINDOW_S` seconds."""

    def __init__(self, t0_s: float) -> None:
        self.samples: deque[tuple[float, float]] = deque([(t0_s, 0.0)])

    def add(self, now_s: float, done: float) -> None:
        """Record that ``done`` (a fraction) of the work is done at ``now_s`` seconds."""
        if self.samples[-1][1] != done:
            if len(self.samples) > 1 and now_s - self.samples[-1][0] < 0.1:
                self.samples.pop()  # at most ten samples a second, however often it ticks
            self.samples.append((now_s, done))
        # keep one sample older than the window: the speed spans the whole window
        while len(self.samples) > 2 and self.samples[1][0] < now_s - SPEED_WINDOW_S:
            self.samples.popleft()

    def eta_s(self, now_s: float) -> float | None:
        """Return the seconds left at ``now_s`` at the speed measured (see
        :func:`measured_eta_s`)."""
        return measured_eta_s(self.samples, now_s)


class NotebookBar:
    """A progress callback ``bar(fraction, what=None)`` drawn as HTML in the notebook."""

    def __init__(self, label: str, display: Callable[..., Any], make_html: Callable[[str], Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.what, self.done = label, "", 0.0
        self._html, self._clock = make_html, clock
        self._t0 = self._last = clock()
        self.handle = display(make_html(bar_html(label, 0.0)), display_id=True)
        self.updates = 1
        self._cut = ""  # why the run stopped before its end ("" = it did not)

    def __call__(self, fraction: float, what: str | None = None) -> None:
        """Record ``fraction`` (0..1) done; redraw if due."""
        self.done = max(self.done, min(1.0, float(fraction)))
        if what is not None:
            self.what = what
        now = self._clock()
        if now - self._last >= UPDATE_S:
            self._draw(now)

    def _draw(self, now: float) -> None:
        self._last = now
        self.updates += 1
        self.handle.update(self._html(bar_html(self.label, self.done, self.what,
                                               now - self._t0)))

    def cut_short(self, why: str) -> None:
        """Record that the run stopped before its end: the last state says ``why``."""
        self._cut = why

    def close(self, outcome: str = "done") -> None:
        """Draw the last state, saying how the run ended (``done`` or why it stopped)."""
        outcome = self._cut or outcome
        if outcome == "done":
            self.done = 1.0
        self.what = outcome
        self._draw(self._clock())


@contextmanager
def progress(label: str, enabled: bool | None = None) -> Iterator[Callable[..., None] | None]:
    """Yield a progress callback for a run described by ``label``: a notebook bar in
    Jupyter, a Rich bar on a terminal, None elsewhere or when ``enabled`` is False (None:
    decide by where we run)."""
    if enabled is False or (enabled is None and not in_notebook()
                            and not sys.stderr.isatty()):
        yield None
        return
    if in_notebook():
        from IPython.display import HTML, display

        bar = NotebookBar(label, display, HTML)
        outcome = "stopped"
        try:
            yield bar
            outcome = "done"
        finally:
            bar.close(outcome)
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as rich_bar:
        task = rich_bar.add_task(label, total=1.0)

        def tick(fraction: float, what: str | None = None) -> None:
            rich_bar.update(task, completed=min(1.0, fraction),
                            description=f"{label}: {what}" if what else label)
        yield tick


Progress = Any
"""How a run started through the API shows its progress: None (a bar in a notebook or on a
terminal, when there is one), True or False (a bar, or none), a callable told ``(fraction
done, what now)``, or an object whose ``bar(label)`` makes a context manager yielding such
a callable (the command line's own bars, labelled by the API)."""


@contextmanager
def ticking(label: str, how: Progress) -> Iterator[Callable[..., None] | None]:
    """Yield the progress callback of a run described by ``label``: ``how.bar(label)``'s,
    ``how`` itself when it is a callable, else the bar :func:`progress` gives (or None)."""
    if hasattr(how, "bar"):
        with how.bar(label) as tick:
            yield tick
        return
    if callable(how):
        yield how
        return
    with progress(label, how) as bar:
        yield bar


def cut_short(tick: Any, why: str) -> None:
    """Tell a progress bar that its run stopped before its end (its last state says
    ``why``, never "done")."""
    for name in ("cut_short", "interrupted"):
        if hasattr(tick, name):
            getattr(tick, name)(why)
            return


class Phases:
    """A run made of named phases of known relative weight (e.g. seconds expected): each
    phase's own 0..1 progress moves the whole bar by its share, and names what is done."""

    def __init__(self, tick: Callable[..., None], plan: Sequence[tuple[str, float]]) -> None:
        self.tick = tick
        self.names = [name for name, _ in plan]
        total = sum(max(w, 0.0) for _, w in plan) or 1.0
        self._start: dict[str, float] = {}
        self._share: dict[str, float] = {}
        acc = 0.0
        for name, w in plan:
            self._start[name], self._share[name] = acc / total, max(w, 0.0) / total
            acc += max(w, 0.0)

    def start(self, name: str) -> Callable[[float], None]:
        """Say phase ``name`` began; return its callback taking the phase's own fraction."""
        lo, share = self._start[name], self._share[name]
        self.tick(lo, name)

        def within(fraction: float, what: str | None = None) -> None:
            self.tick(lo + share * min(1.0, max(0.0, fraction)))
        return within

"""How many interrupts (Ctrl-C, or SIGTERM acting as one) this process has received.

Several handlers take SIGINT in turn (Python's own, asyncio's, the virtual loop's deferral,
a save that must not be cut half way), and code that catches the interrupt to save what it
recorded often carries on normally. The deferring handlers and the runtimes' ``run`` call
:func:`note` (Python's and asyncio's own handlers are left in place: asyncio cancels its main
task only under Python's), so that a command can tell afterwards that it was interrupted: a
progress line then never says "finished" for a run cut short.
"""

from __future__ import annotations

import signal

_COUNT = [0]


def note() -> None:
    """Count one interrupt received by this process."""
    _COUNT[0] += 1


def count() -> int:
    """Return how many interrupts this process has received so far."""
    return _COUNT[0]


def is_default(handler: object) -> bool:
    """Return True if ``handler`` is Python's default SIGINT handler."""
    return handler is signal.default_int_handler

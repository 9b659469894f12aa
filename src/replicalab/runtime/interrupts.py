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
import sys
from types import FrameType
from typing import Any

STOP_WAIT_S = 5.0
"""After Ctrl-C (or the end of a run), how long at most worker processes get to stop and
send what they recorded (s); every wait for them ends as soon as each has answered or
exited. Load workers had 0.8 s and reader processes 2 s until 2026-11-30: beside a CPU hog
neither of two load workers had sent its record within 0.8 s, and the run kept an empty
history of a step that had written to the store."""

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


def _interrupt() -> None:
    raise KeyboardInterrupt


def stop_handler(stopping: list[bool]) -> Any:
    """Return a signal handler that stops the run at the first signal while
    ``stopping[0]`` is False (and sets it): KeyboardInterrupt from a callback of the running
    event loop's own, or right away when no loop runs."""

    def once(signum: int, frame: FrameType | None) -> None:
        if not stopping[0]:
            stopping[0] = True
            aio = sys.modules.get("asyncio")  # not imported: no loop runs (and a command
            try:                              # that runs none does not import it)
                loop = aio.get_running_loop() if aio else None
            except RuntimeError:
                loop = None
            if loop is None:  # no loop runs yet: stop right here
                raise KeyboardInterrupt
            # requests cut off mid-flight are expected at a stop; asyncio's notes on them
            # would read as a crash on stderr (logging: imported by asyncio)
            logging = sys.modules["logging"]
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)
            # not raised wherever the signal landed: in a weakref callback or a __del__,
            # Python prints the traceback and drops the exception, and the run goes on
            loop.call_soon_threadsafe(_interrupt)

    return once

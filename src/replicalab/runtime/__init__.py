"""One small API over real time (asyncio) and virtual time (a discrete-event loop).

Workload code reads the clock and sleeps only through a :class:`Runtime`, so the same
coroutine runs against a real server in real time and against the simulated store in
virtual time, where an hour of traffic takes seconds and a seed fixes the history.

The names below are imported on first use (PEP 562): a module that needs only
``runtime.interrupts`` or ``runtime.durations`` (a short ``replicalab check``) does not
pay for asyncio.
"""

from replicalab import lazy_exports

_WHERE = {"Runtime": "base", "Task": "base", "RealRuntime": "real", "VirtualRuntime": "virtual"}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

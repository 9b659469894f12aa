"""One small API over real time (asyncio) and virtual time (a discrete-event loop).

Workload code reads the clock and sleeps only through a :class:`Runtime`, so the same
coroutine runs against a real server in real time and against the simulated store in
virtual time, where an hour of traffic takes seconds and a seed fixes the history.
"""

from replicalab.runtime.base import Runtime, Task
from replicalab.runtime.real import RealRuntime
from replicalab.runtime.virtual import VirtualRuntime

__all__ = ["RealRuntime", "Runtime", "Task", "VirtualRuntime"]

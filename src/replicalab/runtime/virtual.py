"""Virtual time: a deterministic discrete-event loop that drives coroutines directly.

When nothing is ready the loop jumps to the next timer, so simulated hours take seconds.
Ties are broken by scheduling order, so the same program (and seed) gives the same run.
It is deliberately not asyncio: a sleep here is one heap push and one ``send``.

A step that would be the next thing to happen anyway runs at once: a sleep, a simulated
call's next hop (``continue_after``) or its completion (``resolve_later``) whose time
comes before every pending timer, while no other task is ready, moves the clock there and
carries on without a round through the heap. Nothing else could have run in between, so
the run (and every random draw, in its order) is the one the heap would have given; a
simulated call that meets no other event on its way costs no event at all. At most
``_SKIP_BUDGET`` such steps run back to back before one goes through the loop, which is
where Ctrl-C is acted on (a Ctrl-C also stops them at once).
"""

from __future__ import annotations

import signal
import threading
import types
from asyncio import CancelledError
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from heapq import heappop, heappush
from typing import Any, TypeVar

from replicalab.runtime import interrupts

T = TypeVar("T")


_SKIP_BUDGET = 256
"""Steps run at once in a row before one goes through the loop (see the module doc)."""


@types.coroutine
def _sleep(rt: VirtualRuntime, ns: int) -> Generator[int, None, None]:
    if rt._at_once(rt._now + ns):
        return
    yield ns


_STOP = [False]
"""Set by :func:`note_stop` (the SIGINT handler of a process that runs simulations as
jobs, see ``runtime.parallel``); every virtual loop of the process then stops."""


def note_stop(_sig: int = 0, _frame: Any = None) -> None:
    """Ask every virtual loop of this process to stop between events (KeyboardInterrupt),
    and code that checks :func:`stop_requested` to wind up: a SIGINT handler for worker
    processes, where an interrupt must not land in the middle of saving a run."""
    _STOP[0] = True
    interrupts.note()


def stop_requested() -> bool:
    """Return True once :func:`note_stop` has been called in this process."""
    return _STOP[0]


def _defer_sigint(flag: list[bool]) -> Any:
    """Make Ctrl-C set ``flag[0]`` instead of raising wherever the loop happens to be, and
    return the handler to restore (None when left alone: not the main thread, or a
    handler of the caller's own is installed). The loop raises KeyboardInterrupt between
    events, so a history is never left half-appended."""
    if (threading.current_thread() is not threading.main_thread()
            or not interrupts.is_default(signal.getsignal(signal.SIGINT))):
        return None

    def note(_sig: int, _frame: Any) -> None:
        flag[0] = True
        interrupts.note()

    return signal.signal(signal.SIGINT, note)


class VFuture:
    """A result that some callback will provide later, awaitable in virtual time."""

    __slots__ = ("_done", "_exc", "_result", "_rt", "_waiters")

    def __init__(self, rt: VirtualRuntime) -> None:
        self._rt = rt
        self._done = False
        self._result: Any = None
        self._exc: BaseException | None = None
        self._waiters: list[VTask] = []

    def done(self) -> bool:
        """Return True once a result or exception is set."""
        return self._done

    def set_result(self, value: Any) -> None:
        """Complete the future with ``value`` and wake its waiters (no-op if already done)."""
        if self._done:
            return
        self._done = True
        self._result = value
        self._wake()

    def set_exception(self, exc: BaseException) -> None:
        """Complete the future with ``exc`` and wake its waiters (no-op if already done)."""
        if self._done:
            return
        self._done = True
        self._exc = exc
        self._wake()

    def _wake(self) -> None:
        ready = self._rt._ready
        for task in self._waiters:
            task._waiting_on = None
            ready.append((task, None, None))
        self._waiters = []

    def result(self) -> Any:
        """Return the result, or raise the stored exception."""
        if self._exc is not None:
            raise self._exc
        return self._result

    def __await__(self) -> Generator[Any, None, Any]:
        if not self._done:
            yield self
        return self.result()


class VTask(VFuture):
    """A coroutine driven by the virtual loop; awaiting it returns the coroutine's result."""

    __slots__ = ("_coro", "_timed_out", "_token", "_waiting_on")

    def __init__(self, rt: VirtualRuntime, coro: Coroutine[Any, Any, Any]) -> None:
        super().__init__(rt)
        self._coro = coro
        self._token = 0
        self._waiting_on: VFuture | None = None
        self._timed_out = False

    def cancel(self) -> bool:
        """Throw CancelledError into the coroutine at its current await; False if done."""
        if self._done:
            return False
        self._token += 1  # invalidates a pending sleep wake-up
        if self._waiting_on is not None:
            waiters = self._waiting_on._waiters
            if self in waiters:
                waiters.remove(self)
            self._waiting_on = None
        self._rt._ready.append((self, None, CancelledError()))
        return True


class _Timer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


_FOR_GOOD = _Timer()
"""The handle of every ``schedule``d step: never cancelled."""


class VirtualRuntime:
    """Runtime in virtual time; ``now_ns`` starts at 0 and only moves when the loop jumps."""

    virtual = True

    def __init__(self) -> None:
        self._now = 0
        self._seq = 0
        self._heap: list[tuple[int, int, Any, Any, Any]] = []
        self._ready: deque[tuple[VTask, Any, BaseException | None]] = deque()
        self._live: set[VTask] = set()
        self._skips = _SKIP_BUDGET
        # set by a deferred Ctrl-C, checked between steps; a worker's is process-wide (the
        # native core reads this very list)
        self._interrupted = _STOP if signal.getsignal(signal.SIGINT) is note_stop else [False]

    def now_ns(self) -> int:
        """Return the virtual time in ns since the start of the run."""
        return self._now

    def sleep_ns(self, ns: int) -> Awaitable[None]:
        """Return an awaitable that resumes after ``ns`` virtual nanoseconds."""
        return _sleep(self, ns if ns > 0 else 0)

    def future(self) -> VFuture:
        """Return a new unresolved future bound to this loop."""
        return VFuture(self)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> VTask:
        """Start ``coro`` at the current virtual time and return its task."""
        task = VTask(self, coro)
        self._live.add(task)
        self._ready.append((task, None, None))
        return task

    async def gather(self, *aws: Awaitable[Any]) -> list[Any]:
        """Return the results of ``aws`` run concurrently, in order."""
        tasks = [a if isinstance(a, VFuture) else self.spawn(a) for a in aws]  # type: ignore[arg-type]
        return [await t for t in tasks]

    async def timeout(self, aw: Coroutine[Any, Any, T], ns: int) -> T:
        """Return ``aw``'s result or raise TimeoutError after ``ns`` virtual ns."""
        task = self.spawn(aw)
        timer = self.call_later(ns, self._expire, task)
        try:
            return await task
        except CancelledError:
            if task._timed_out:
                raise TimeoutError(f"timed out after {ns / 1e6:.3f} ms") from None
            raise
        finally:
            timer.cancel()
            if not task._done:
                task.cancel()

    @staticmethod
    def _expire(task: VTask) -> None:
        if not task._done:
            task._timed_out = True
            task.cancel()

    def call_later(self, ns: int, fn: Callable[..., Any], *args: Any) -> _Timer:
        """Schedule ``fn(*args)`` after ``ns`` virtual ns; return a handle with ``cancel()``."""
        timer = _Timer()
        self._seq += 1
        heappush(self._heap, (self._now + (ns if ns > 0 else 0), self._seq, timer, fn, args))
        return timer

    def schedule(self, ns: int, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule ``fn(*args)`` after ``ns`` virtual ns, for good (no handle: the
        simulator's own steps, which are never cancelled, skip making one)."""
        self._seq += 1
        heappush(self._heap, (self._now + (ns if ns > 0 else 0), self._seq, _FOR_GOOD, fn, args))

    def _at_once(self, when: int) -> bool:
        """Return True (and move the clock to ``when``) if a step due at ``when`` is the
        next thing that would happen: no task is ready and every timer is later."""
        if self._ready or self._interrupted[0]:
            return False
        heap = self._heap
        if heap and heap[0][0] <= when:
            return False
        if not self._skips:
            self._skips = _SKIP_BUDGET  # this one goes through the loop
            return False
        self._skips -= 1
        self._now = when
        return True

    def continue_after(self, ns: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` after ``ns`` virtual ns, for good; the caller's last action.

        When the step is the next thing that would happen anyway it runs at once with the
        clock moved forward (see the module doc), so nothing may follow this call.
        """
        when = self._now + (ns if ns > 0 else 0)
        if self._at_once(when):
            fn(*args)
            return
        self._seq += 1
        heappush(self._heap, (when, self._seq, _FOR_GOOD, fn, args))

    # resolve_later and reject_later are continue_after written out again on purpose (a
    # documented fast-path copy): the simulated stores answer every call through them, and
    # going through continue_after would add a Python call per simulated reply.
    def resolve_later(self, ns: int, fut: VFuture, value: Any) -> None:
        """Set ``fut``'s result ``value`` in ``ns`` virtual ns (nothing if it is done by
        then); the caller's last action, as for :meth:`continue_after`."""
        when = self._now + (ns if ns > 0 else 0)
        if self._at_once(when):
            fut.set_result(value)
            return
        self._seq += 1
        heappush(self._heap, (when, self._seq, _FOR_GOOD, fut.set_result, (value,)))

    def reject_later(self, ns: int, fut: VFuture, exc: BaseException) -> None:
        """Set ``fut``'s exception ``exc`` in ``ns`` virtual ns (nothing if it is done by
        then); the caller's last action, as for :meth:`continue_after`."""
        when = self._now + (ns if ns > 0 else 0)
        if self._at_once(when):
            fut.set_exception(exc)
            return
        self._seq += 1
        heappush(self._heap, (when, self._seq, _FOR_GOOD, fut.set_exception, (exc,)))

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run ``main`` until it completes and return its result (or raise its exception)."""
        root = self.spawn(main)
        ready = self._ready
        heap = self._heap
        if signal.getsignal(signal.SIGINT) is note_stop:
            self._interrupted = _STOP  # a worker: its Ctrl-C is noted process-wide
        interrupted = self._interrupted
        previous = _defer_sigint(interrupted)
        try:
            while not root._done:
                if interrupted[0]:
                    raise KeyboardInterrupt
                if ready:
                    task, value, exc = ready.popleft()
                    if task._done:
                        continue
                elif heap:
                    when, _, timer, target, arg = heappop(heap)
                    if timer is not None:
                        if not timer.cancelled:
                            self._now = when
                            target(*arg)
                        continue
                    if arg != target._token or target._done:
                        continue  # a stale wake-up: the task was cancelled or re-armed
                    self._now = when
                    task, value, exc = target, None, None
                else:
                    raise RuntimeError(
                        "virtual-time deadlock: the main coroutine waits on something that "
                        "nothing will ever complete")
                try:
                    req = task._coro.send(value) if exc is None else task._coro.throw(exc)
                except StopIteration as stop:
                    self._finish(task, stop.value, None)
                    continue
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as err:
                    self._finish(task, None, err)
                    continue
                if type(req) is int:
                    self._seq += 1
                    heappush(heap, (self._now + req, self._seq, None, task, task._token))
                elif isinstance(req, VFuture):
                    if req._done:
                        ready.append((task, None, None))
                    else:
                        task._waiting_on = req
                        req._waiters.append(task)
                else:
                    err = TypeError(f"virtual runtime cannot await {req!r}; "
                                    "use the runtime's sleep and futures")
                    ready.append((task, None, err))
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            self._close_all()
        return root.result()

    def _finish(self, task: VTask, value: Any, exc: BaseException | None) -> None:
        self._live.discard(task)
        if exc is None:
            task.set_result(value)
        else:
            task.set_exception(exc)

    def _close_all(self) -> None:
        for task in list(self._live):
            task._coro.close()
            task._done = True
        self._live.clear()

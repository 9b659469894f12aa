"""The consumer nemesis: what a queue run's faults do to a consumer and to the central store,
as seen from inside the consumer.

* **pause** (``pause consumer=K``) — the consumer stops dead and resumes with all its state,
  a claim it believes it holds included. In one process (``threads.py``) every await of the
  consumer (a sleep, a queue or store call) passes a pause point that holds it until the
  pause ends; a call in flight reaches the server, but its reply is seen only after the
  pause, as after a SIGSTOP. With consumer processes (``processes.py``) it is a real
  SIGSTOP/SIGCONT of the process.
* **skew** (``skew consumer=K ms=±X``) — the consumer's own clock, the one a lease is
  computed and judged on, reads ``X`` ms ahead (or behind) the run's clock. The record keeps
  the run's clock.
* **errors** (``errors store=central``) — the central store's operations fail at once and
  do not happen; **timeouts** — they happen, but the reply is lost: the caller hears an
  error ``ms`` after the call. Either way the caller sees ``Unavailable`` (outcome unknown).

A :class:`FaultPlan` holds the schedule on the run's clock (``t0_ns`` + the faults' times),
so a consumer process can be given the same plan as the runner. Crashes are the runner's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from replicalab.faults.schedule import Fault
from replicalab.queues.base import Delivery, QueueClient, QueueError
from replicalab.queues.record import CENTRAL_STORE, QueueLog
from replicalab.queues.spec import consumer_of
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_MS, NS_PER_S
from replicalab.stores.base import Client, ReadResult, StoreError, Unavailable, WriteResult

T = TypeVar("T")
NEVER_NS = 2**62  # the end of a fault that lasts the whole run
FAULT_ROWS = {"pause": "pause", "skew": "skew", "errors": "store_fault",
              "timeouts": "store_fault"}


@dataclass(frozen=True)
class Window:
    """One fault on the run's clock: action, consumer (None: the central store), start and
    end (ns), and its ms (skew: offset; timeouts: wait)."""

    action: str
    consumer: int | None
    start_ns: int
    end_ns: int
    ms: float

    def covers(self, now_ns: int) -> bool:
        """Return True while the fault is on at ``now_ns``."""
        return self.start_ns <= now_ns < self.end_ns


def windows(faults: Sequence[Fault], t0_ns: int) -> list[Window]:
    """Return the pause, skew and store faults of ``faults`` as windows from ``t0_ns``
    (crashes are left to the runner)."""
    out = []
    for f in faults:
        if f.action == "crash":
            continue
        end = NEVER_NS if math.isinf(f.for_s) else t0_ns + int(f.end_s * NS_PER_S)
        out.append(Window(f.action, consumer_of(f), t0_ns + int(f.at_s * NS_PER_S), end,
                          f.extra_ms))
    return out


class FaultPlan:
    """The windows a consumer consults: is it paused, how far off is its clock, is the
    central store failing."""

    def __init__(self, wins: Sequence[Window] = ()) -> None:
        self.windows = list(wins)

    def paused_until_ns(self, consumer: int, now_ns: int) -> int:
        """Return when the pause of ``consumer`` that covers ``now_ns`` ends, else -1."""
        ends = [w.end_ns for w in self.windows if w.action == "pause"
                and w.consumer == consumer and w.covers(now_ns)]
        return max(ends, default=-1)

    def skew_ns(self, consumer: int, now_ns: int) -> int:
        """Return how far ahead of the run's clock ``consumer``'s clock is at ``now_ns``."""
        return sum(int(w.ms * NS_PER_MS) for w in self.windows if w.action == "skew"
                   and w.consumer == consumer and w.covers(now_ns))

    def store_fault(self, now_ns: int) -> Window | None:
        """Return the central-store fault on at ``now_ns``, if any."""
        return next((w for w in self.windows if w.consumer is None and w.covers(now_ns)),
                    None)

    def to_json(self) -> str:
        """Return the plan as one JSON line (a consumer process's argument)."""
        return json.dumps([[w.action, w.consumer, w.start_ns, w.end_ns, w.ms]
                           for w in self.windows])

    @classmethod
    def from_json(cls, text: str) -> FaultPlan:
        """Return the plan :meth:`to_json` wrote (ValueError for anything else)."""
        try:
            return cls([Window(str(a), None if c is None else int(c), int(s), int(e),
                               float(m)) for a, c, s, e, m in json.loads(text)])
        except (ValueError, TypeError) as err:
            raise ValueError(f"--fault-plan is not a plan the runner wrote: {err}") from None


class Stall:
    """The pause points of one consumer: ``await stall.point()`` returns once the consumer
    is not paused."""

    def __init__(self, rt: Runtime, plan: FaultPlan, consumer: int) -> None:
        self.rt, self.plan, self.consumer = rt, plan, consumer

    async def point(self) -> None:
        """Hold the consumer until the pause covering now (if any) has ended."""
        for _ in range(len(self.plan.windows) + 1):  # each pass ends one pause at least
            until = self.plan.paused_until_ns(self.consumer, self.rt.now_ns())
            if until < 0:
                return
            await self.rt.sleep_ns(until - self.rt.now_ns())

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` between two pause points (its reply, or error, is seen after a
        pause that began while it was in flight)."""
        await self.point()
        try:
            out = await fn()
        except (QueueError, StoreError, OSError):
            await self.point()
            raise
        await self.point()
        return out


class StalledQueueClient:
    """A consumer's queue session whose calls pass its pause points."""

    def __init__(self, inner: QueueClient, stall: Stall) -> None:
        self.inner, self.stall = inner, stall

    async def send(self, body: str) -> str:
        """Send ``body`` (see :class:`QueueClient`)."""
        return await self.stall.call(lambda: self.inner.send(body))

    async def receive(self, max_messages: int, visibility_timeout_s: float) -> list[Delivery]:
        """Receive up to ``max_messages`` (see :class:`QueueClient`)."""
        return await self.stall.call(
            lambda: self.inner.receive(max_messages, visibility_timeout_s))

    async def delete(self, receipt: str) -> None:
        """Delete by receipt (see :class:`QueueClient`)."""
        await self.stall.call(lambda: self.inner.delete(receipt))

    async def change_visibility(self, receipt: str, timeout_s: float) -> None:
        """Change the visibility by receipt (see :class:`QueueClient`)."""
        await self.stall.call(lambda: self.inner.change_visibility(receipt, timeout_s))

    async def close(self) -> None:
        """Close the session."""
        await self.inner.close()


class FaultyCentralClient:
    """A consumer's central-store session: its calls pass the consumer's pause points and
    fail as the plan's store faults say."""

    def __init__(self, inner: Client, stall: Stall) -> None:
        self.inner, self.stall = inner, stall

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Read ``keys`` (see :class:`Client`)."""
        return await self._call(lambda: self.inner.read(keys, consistent=consistent))

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` if ``expect`` holds (see :class:`Client`)."""
        return await self._call(lambda: self.inner.write(values, expect=expect))

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` (see :class:`Client`)."""
        return await self._call(lambda: self.inner.delete(keys))

    async def close(self) -> None:
        """Close the session."""
        await self.inner.close()

    async def _call(self, op: Callable[[], Awaitable[T]]) -> T:
        rt = self.stall.rt
        await self.stall.point()
        t0 = rt.now_ns()
        fault = self.stall.plan.store_fault(t0)
        if fault is not None and fault.action == "errors":
            await self.stall.point()
            raise Unavailable("central store fault: errors (the operation did not reach the "
                              "store)")
        out = await self.stall.call(op)
        if fault is not None:  # timeouts: it happened; the reply is lost
            left = t0 + int(fault.ms * NS_PER_MS) - rt.now_ns()
            if left > 0:
                await rt.sleep_ns(left)
            await self.stall.point()
            raise Unavailable(f"central store fault: no reply in {fault.ms:g} ms (the "
                              "operation happened)")
        return out


def record_fault_windows(rt: Runtime, log: QueueLog, faults: tuple[Fault, ...],
                         process_of: Callable[[int], int] = lambda k: k) -> None:
    """Schedule a row per pause, skew and store fault, opened when it begins and closed
    when it ends (a fault still on when the run ends is closed with the run); crashes
    record themselves. ``process_of`` maps a consumer to the record's process id."""
    def begin(f: Fault) -> None:
        k = consumer_of(f)
        row = log.invoke(FAULT_ROWS[f.action], CENTRAL_STORE if k is None else process_of(k),
                         rt.now_ns(), note=f.label)
        if not math.isinf(f.for_s):
            rt.call_later(int(f.for_s * NS_PER_S), log.done, row, rt.now_ns() +
                          int(f.for_s * NS_PER_S))

    for f in faults:
        if f.action in FAULT_ROWS:
            rt.call_later(int(f.at_s * NS_PER_S), begin, f)

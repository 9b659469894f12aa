"""Fixed schedules of probe clients: slots on a grid, and what a client that fell behind does.

A probe client acts at slots ``start + k * period_ns``. When an operation outlasts its slot
(a stall, a partition, a timeout) the slots that passed meanwhile are *skipped*, not caught
up: the client acts once for the latest slot that is due and then keeps the grid. Catching
up would issue every missed slot back to back, a burst of operations that fail or succeed at
once and that weighs a second after a fault like the whole fault (see
``checkers/accounting.py::availability``, which counts time instead).
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from typing import Any

from replicalab.runtime import Runtime


class _Due:
    """An awaitable that is already done: the slot is due, no sleep."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())


_DUE = _Due()


def next_slot_ns(slot_ns: int, period_ns: int, now_ns: int) -> tuple[int, int]:
    """Return (the slot to act at next, how many slots were skipped) after acting at
    ``slot_ns`` when it is now ``now_ns`` (all in ns).

    The next slot is ``slot_ns + period_ns`` if that is not yet past; otherwise the latest
    slot of the grid at or before ``now_ns`` (due at once), and every earlier one is skipped.
    """
    if period_ns <= 0:
        raise ValueError(f"a schedule's period must be positive (got {period_ns} ns)")
    nxt = slot_ns + period_ns
    if now_ns <= nxt:
        return nxt, 0
    skipped = (now_ns - nxt) // period_ns
    return nxt + skipped * period_ns, skipped


class Slots:
    """A client's grid of slots on a runtime: ``await wait()`` sleeps until the next slot;
    ``advance()`` moves past the slot just used, skipping those already missed."""

    def __init__(self, rt: Runtime, period_ns: int, start_ns: int | None = None) -> None:
        if period_ns <= 0:
            raise ValueError(f"a schedule's period must be positive (got {period_ns} ns)")
        self.rt = rt
        self.period_ns = period_ns
        self.slot_ns = rt.now_ns() if start_ns is None else start_ns
        self.skipped = 0

    def wait(self) -> Awaitable[None]:
        """Return an awaitable that sleeps until the current slot (done at once when the
        slot is due or past)."""
        delay_ns = self.slot_ns - self.rt.now_ns()
        return self.rt.sleep_ns(delay_ns) if delay_ns > 0 else _DUE

    def advance(self) -> int:
        """Move to the next slot (skipping missed ones) and return its time in ns."""
        # next_slot_ns inlined: this runs once per probe operation
        period = self.period_ns
        nxt = self.slot_ns + period
        now = self.rt.now_ns()
        if now > nxt:
            skipped = (now - nxt) // period
            nxt += skipped * period
            self.skipped += skipped
        self.slot_ns = nxt
        return nxt

"""The hybrid logical clock (HLC) of Kulkarni et al., with bounded-offset rejection and packing.

A timestamp is ``(l, c)``: ``l`` is the largest physical time (in ticks of the clock's
resolution) this node has heard of, ``c`` counts events that share that ``l``.  Ordering is
lexicographic, so ``e hb f`` implies ``ts(e) < ts(f)`` and ``l`` never strays from the local
physical clock by more than the clock offset between nodes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

L_BITS = 48
C_BITS = 16
L_MAX = (1 << L_BITS) - 1
C_MAX = (1 << C_BITS) - 1


def _wall_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True, order=True, slots=True)
class Timestamp:
    """An HLC timestamp: ``l`` in ticks of the clock's resolution, ``c`` a counter."""

    l: int  # noqa: E741 - the paper's name
    c: int

    def pack(self, epoch: int = 0) -> int:
        """Return a 64-bit int: 48 bits of ``l - epoch`` then 16 bits of ``c``, order preserving.

        ``epoch`` (in ticks, default 0) lets microsecond Unix times fit: 2**48 µs is ~8.9 years,
        so pack them relative to a recent epoch or use a coarser resolution.
        Raises ValueError when a part does not fit its bits.
        """
        rel = self.l - epoch
        if not 0 <= rel <= L_MAX:
            raise ValueError(f"l - epoch = {rel} does not fit in {L_BITS} bits; "
                             "pass a recent epoch or use a coarser resolution")
        if not 0 <= self.c <= C_MAX:
            raise ValueError(f"c = {self.c} does not fit in {C_BITS} bits")
        return (rel << C_BITS) | self.c

    @classmethod
    def unpack(cls, x: int, epoch: int = 0) -> Timestamp:
        """Return the timestamp packed in the 64-bit int ``x`` (inverse of ``pack``)."""
        if not 0 <= x < (1 << (L_BITS + C_BITS)):
            raise ValueError(f"{x} is not a 64-bit packed HLC timestamp")
        return cls((x >> C_BITS) + epoch, x & C_MAX)


class ClockOffsetError(ValueError):
    """A remote timestamp lies further ahead of local physical time than the maximum offset."""


class HLC:
    """A thread-safe hybrid logical clock over a physical clock read in microseconds.

    ``resolution_us`` is the tick: physical time is read as ``physical_us() // resolution_us``
    ticks and ``Timestamp.l`` is in those ticks.  With ``max_offset_us`` set, ``update`` refuses
    a remote time more than that far ahead of local physical time and leaves the clock unchanged,
    so one node with a runaway clock cannot drag every clock in the system forward.
    """

    def __init__(self, physical_us: Callable[[], int] = _wall_us, *,
                 resolution_us: int = 1, max_offset_us: int | None = None) -> None:
        if resolution_us < 1:
            raise ValueError(f"resolution_us must be >= 1, got {resolution_us}")
        if max_offset_us is not None and max_offset_us < 0:
            raise ValueError(f"max_offset_us must be >= 0, got {max_offset_us}")
        self._read_us = physical_us
        self.resolution_us = resolution_us
        self.max_offset_us = max_offset_us
        self._lock = threading.Lock()
        self._l = -1  # below any physical time, so the first event gets (pt, 0)
        self._c = 0
        self._pt_us = 0

    def _pt_ticks(self) -> int:
        self._pt_us = int(self._read_us())
        return self._pt_us // self.resolution_us

    def now(self) -> Timestamp:
        """Return the timestamp of a local or send event (advances the clock)."""
        with self._lock:
            pt = self._pt_ticks()
            if pt > self._l:
                self._l, self._c = pt, 0
            else:
                self._c += 1
            return Timestamp(self._l, self._c)

    def update(self, remote: Timestamp) -> Timestamp:
        """Return the timestamp of a receive event carrying ``remote`` (advances the clock).

        Raises ClockOffsetError, leaving ``l`` and ``c`` unchanged, when ``remote.l`` is more
        than ``max_offset_us`` ahead of the local physical time.
        """
        with self._lock:
            pt = self._pt_ticks()
            if self.max_offset_us is not None:
                # the remote tick's start against the raw reading: quantisation never rejects
                ahead_us = remote.l * self.resolution_us - self._pt_us
                if ahead_us > self.max_offset_us:
                    raise ClockOffsetError(
                        f"remote time is {ahead_us} µs ahead of local physical time, more than "
                        f"the maximum offset {self.max_offset_us} µs")
            l_old = self._l
            l_new = max(l_old, remote.l, pt)
            if l_new == l_old and l_new == remote.l:
                c_new = max(self._c, remote.c) + 1
            elif l_new == l_old:
                c_new = self._c + 1
            elif l_new == remote.l:
                c_new = remote.c + 1
            else:
                c_new = 0
            self._l, self._c = l_new, c_new
            return Timestamp(l_new, c_new)

    def peek(self) -> Timestamp:
        """Return the last timestamp issued, (0, 0) before any (does not advance the clock)."""
        with self._lock:
            return Timestamp(max(self._l, 0), self._c)

    def physical_us(self) -> int:
        """Return the physical time in µs this clock read last (0 before the first event)."""
        with self._lock:
            return self._pt_us

    def to_us(self, ts: Timestamp) -> int:
        """Return ``ts.l`` converted from ticks to microseconds."""
        return ts.l * self.resolution_us

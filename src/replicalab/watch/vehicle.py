"""The store-driven vehicle of seed 002: it goes straight while reads and writes are equal
and steers left (more reads) or right (more writes) as the read/write ratio changes.

Pure functions: the watcher feeds the operations it saw, the terminal view draws the gauge.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_TURN_DEG = 30.0  # heading change per update at full lock


def steering(reads: int, writes: int) -> float:
    """Return the steering position in [-1, 1]: -1 full left (reads only), 0 straight
    (as many reads as writes, or no traffic), +1 full right (writes only)."""
    total = reads + writes
    return 0.0 if total == 0 else (writes - reads) / total


@dataclass
class Vehicle:
    """Steering from the last ``window`` operations seen, and the heading it drives to."""

    window: int = 50
    seen: deque[str] = field(default_factory=deque)
    heading_deg: float = 0.0

    def observe(self, ops: Iterable[str]) -> float:
        """Feed successful operations ("read"/"write"), turn by the new steering; return it."""
        for op in ops:
            self.seen.append(op)
            while len(self.seen) > self.window:
                self.seen.popleft()
        s = self.steer()
        self.heading_deg = (self.heading_deg + s * MAX_TURN_DEG + 180.0) % 360.0 - 180.0
        return s

    def steer(self) -> float:
        """Return the current steering position in [-1, 1]."""
        reads = sum(1 for op in self.seen if op == "read")
        return steering(reads, len(self.seen) - reads)


def gauge(steer: float, width: int = 21) -> str:
    """Return a one-line gauge ``L ----^---- R`` with the marker at ``steer`` in [-1, 1]."""
    width = max(width, 3) | 1  # odd, so straight ahead has a middle cell
    pos = round((min(max(steer, -1.0), 1.0) + 1.0) / 2.0 * (width - 1))
    cells = ["-"] * width
    cells[width // 2] = "|"
    cells[pos] = "^"
    return "L " + "".join(cells) + " R"


def direction(steer: float, dead_band: float = 0.05) -> str:
    """Return "left", "straight" or "right" for a steering position."""
    if steer < -dead_band:
        return "left"
    if steer > dead_band:
        return "right"
    return "straight"

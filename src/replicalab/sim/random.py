"""Seeded random streams with buffered draws (numpy Generator underneath, fast per draw)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_BLOCK = 8192


class _Block:
    """Values drawn ``_BLOCK`` at a time from one numpy sampler, handed out one by one."""

    __slots__ = ("_fill", "_i", "_values")

    def __init__(self, fill: Callable[[int], np.ndarray]) -> None:
        self._fill = fill
        self._values: list[float] = fill(_BLOCK).tolist()
        self._i = 0

    def next(self) -> float:
        i = self._i
        if i == _BLOCK:
            self._values = self._fill(_BLOCK).tolist()
            i = 0
        self._i = i + 1
        return self._values[i]


class Stream:
    """Draws from one numpy Generator in blocks: same seed, same sequence of draws.

    ``normal()`` returns a standard normal draw, ``uniform()`` one in [0, 1),
    ``exponential()`` a standard exponential (mean 1); each is a bound method of its block,
    so a draw costs one call.
    """

    __slots__ = ("exponential", "normal", "uniform")

    def __init__(self, rng: np.random.Generator) -> None:
        self.normal = _Block(rng.standard_normal).next
        self.uniform = _Block(rng.random).next
        self.exponential = _Block(rng.standard_exponential).next

    def index(self, n: int) -> int:
        """Return a uniform integer in [0, n)."""
        return int(self.uniform() * n)

"""Seeded random streams with buffered draws (numpy Generator underneath, fast per draw)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from replicalab_native import Stream as NativeStream
except ImportError:  # not built (make native): the Python stream draws the same numbers
    NativeStream = None

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


def new_stream(rng: np.random.Generator) -> Any:
    """Return a stream of ``rng``'s draws: the native one when it is built (the same
    numbers, a draw costs less; ``REPLICALAB_SIM_NATIVE=0`` turns it off), else
    :class:`Stream`."""
    if NativeStream is not None and os.environ.get("REPLICALAB_SIM_NATIVE", "1") != "0":
        return NativeStream(rng)
    return Stream(rng)

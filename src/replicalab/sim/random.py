"""Seeded random streams with buffered draws (numpy Generator underneath, fast per draw)."""

from __future__ import annotations

import numpy as np

_BLOCK = 8192


class Stream:
    """Draws from one numpy Generator in blocks: same seed, same sequence of draws."""

    __slots__ = ("_exp", "_ie", "_in", "_iu", "_norm", "_rng", "_unif")

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._norm = rng.standard_normal(_BLOCK).tolist()
        self._unif = rng.random(_BLOCK).tolist()
        self._exp = rng.standard_exponential(_BLOCK).tolist()
        self._in = self._iu = self._ie = 0

    def normal(self) -> float:
        """Return one standard normal draw."""
        i = self._in
        if i == _BLOCK:
            self._norm = self._rng.standard_normal(_BLOCK).tolist()
            i = 0
        self._in = i + 1
        return self._norm[i]

    def uniform(self) -> float:
        """Return one uniform draw in [0, 1)."""
        i = self._iu
        if i == _BLOCK:
            self._unif = self._rng.random(_BLOCK).tolist()
            i = 0
        self._iu = i + 1
        return self._unif[i]

    def exponential(self) -> float:
        """Return one standard exponential draw (mean 1)."""
        i = self._ie
        if i == _BLOCK:
            self._exp = self._rng.standard_exponential(_BLOCK).tolist()
            i = 0
        self._ie = i + 1
        return self._exp[i]

    def index(self, n: int) -> int:
        """Return a uniform integer in [0, n)."""
        return int(self.uniform() * n)

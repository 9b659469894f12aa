"""Is one latency distribution different from another? Bootstrap intervals, plain verdicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def bootstrap_diff(a: np.ndarray, b: np.ndarray, stat: Callable[[np.ndarray], Any] = np.mean,
                   resamples: int = 2000, seed: int = 1) -> tuple[float, float, float]:
    """Return (stat(a) - stat(b), 2.5 %, 97.5 % bootstrap bounds), resampling each side."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(a, float), np.asarray(b, float)
    ia = rng.integers(0, len(a), (resamples, len(a)))
    ib = rng.integers(0, len(b), (resamples, len(b)))
    diffs = stat(a[ia], axis=1) - stat(b[ib], axis=1)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return float(stat(a) - stat(b)), float(lo), float(hi)


def verdict(lo: float, hi: float) -> str:
    """Return "significant" when the 95 % interval excludes 0, else "not significant"."""
    return "significant" if lo > 0 or hi < 0 else "not significant"

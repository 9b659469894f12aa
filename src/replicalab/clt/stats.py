"""Order statistics of censored latency samples (pure).

A sample is an RTT in µs, or +inf when the ping timed out: the true value is only known to
exceed the timeout, and every observed value lies below it, so sorting +inf last puts each
censored sample exactly where its true value belongs. A quantile that lands among them is
therefore not an estimate but a bound: "above the timeout", reported as None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999)
BOX = (5.0, 25.0, 50.0, 75.0, 95.0)
"""Box plots as in the seed: whiskers at p5 and p95, box p25..p75, line at the median."""


def label(q: float) -> str:
    """Return the name of percentile ``q``: 50 -> 'p50', 99.999 -> 'p99.999'."""
    return f"p{q:g}"


def quantiles(samples_us: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Return nearest-rank percentiles ``qs`` (0-100] of ``samples_us`` in µs; +inf where the
    rank falls among censored samples, NaN for an empty sample."""
    x = np.sort(np.asarray(samples_us, dtype=float))
    n = len(x)
    if n == 0:
        return np.full(len(qs), np.nan)
    ranks = np.clip(np.ceil(np.asarray(qs, dtype=float) / 100.0 * n - 1e-9), 1, n).astype(int)
    return x[ranks - 1]


def ms(value_us: float) -> float | None:
    """Return µs as ms rounded to the µs, None for +inf (censored) or NaN (no data)."""
    if value_us is None or not math.isfinite(value_us):
        return None
    return round(float(value_us) / 1000.0, 3)


def summary(samples_us: np.ndarray, qs: Sequence[float] = PERCENTILES) -> dict:
    """Return n, timeouts, mean of the observed values and percentiles, all in ms
    (a percentile is None when it lies above the timeout)."""
    x = np.asarray(samples_us, dtype=float)
    observed = x[np.isfinite(x)]
    return {
        "n": len(x),
        "timeouts": int(len(x) - len(observed)),
        "mean_ms": ms(float(observed.mean())) if len(observed) else None,
        "p": {label(q): ms(v) for q, v in zip(qs, quantiles(x, qs), strict=True)},
        "box": {label(q): ms(v) for q, v in zip(BOX, quantiles(x, BOX), strict=True)},
    }


def exceedance_timeout(samples_us: np.ndarray, p: float) -> float:
    """Return the smallest observed value T (µs) with P(sample > T) <= ``p`` — the shortest
    failure-detector timeout whose false-positive rate on this sample is at most ``p``;
    +inf when more than a ``p`` fraction timed out, NaN for an empty sample."""
    x = np.sort(np.asarray(samples_us, dtype=float))
    n = len(x)
    if n == 0:
        return math.nan
    # index i keeps n - (i + 1) <= p * n values above x[i]
    i = max(0, math.ceil(n * (1.0 - p) - 1e-9) - 1)
    return float(x[min(i, n - 1)])


def cdf_points(samples_us: np.ndarray, max_points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Return (x_ms, F) of the empirical CDF of the observed values, thinned to at most
    ``max_points`` (the last point is kept); F counts censored samples in the total."""
    x = np.asarray(samples_us, dtype=float)
    n = len(x)
    obs = np.sort(x[np.isfinite(x)])
    if n == 0 or len(obs) == 0:
        return np.array([]), np.array([])
    f = np.arange(1, len(obs) + 1) / n
    if len(obs) > max_points:
        idx = np.unique(np.r_[np.linspace(0, len(obs) - 1, max_points).astype(int),
                              len(obs) - 1])
        obs, f = obs[idx], f[idx]
    return obs / 1000.0, f

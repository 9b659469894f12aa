"""Small statistics shared by checkers: Wilson intervals, Pearson, medians and CV."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z95 = 1.959963984540054


def wilson(successes: np.ndarray, totals: np.ndarray, z: float = Z95
           ) -> tuple[np.ndarray, np.ndarray]:
    """Return (lo, hi) Wilson score interval bounds (fractions) for each success/total pair."""
    n = np.asarray(totals, dtype=float)
    k = np.asarray(successes, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n > 0, k / n, np.nan)
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    """Return the Pearson correlation of two equal-length arrays (None if undefined)."""
    if len(x) < 2:
        return None
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    sx, sy = xs.std(), ys.std()
    if sx == 0 or sy == 0:
        return None
    return float(((xs - xs.mean()) * (ys - ys.mean())).mean() / (sx * sy))


def median_cv(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Return (median, coefficient of variation = sd/mean) of the non-None values."""
    v = np.array([x for x in values if x is not None], dtype=float)
    if len(v) == 0:
        return None, None
    mean = v.mean()
    cv = float(v.std(ddof=1) / mean) if len(v) > 1 and mean else None
    return float(np.median(v)), cv


def parse_ranges(text: str) -> list[tuple[float, float]]:
    """Return [(from_ms, to_ms)] parsed from ``"0-450,500-1000"`` (ValueError if malformed)."""
    out = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            a, b = float(lo), float(hi)
        except ValueError:
            raise ValueError(f"range {part.strip()!r} is not FROM-TO in ms, e.g. 0-450") from None
        if not sep or not (math.isfinite(a) and math.isfinite(b)) or a < 0 or b <= a:
            raise ValueError(f"range {part.strip()!r} must be FROM-TO with 0 <= FROM < TO")
        out.append((a, b))
    return out

"""Pure statistics over watch samples: percentiles per window, time series, histograms.

Percentiles use the nearest-rank definition (the value below or at which at least q % of
the samples lie), so every figure is a latency that was really observed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

QUANTILES = (("p50", 50.0), ("p99", 99.0), ("p999", 99.9))
# Log-spaced histogram edges: 10 bins per decade from 10 µs to 100 s.
BINS_PER_DECADE = 10
LOWEST_EDGE_MS = 0.01
DECADES = 7


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed operation: when it started (Unix seconds), which op, latency or error."""

    backend: str
    round: int
    t_s: float
    op: str
    latency_ms: float | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Return True if the operation succeeded (it then has a latency)."""
        return self.error is None


def round_line(samples: Sequence[Sample]) -> str:
    """Return one backend round as a log line: each operation's latency (ms) or error,
    the reason said once when every operation failed alike ("dead round 1: unavailable:
    connection refused (redis://127.0.0.1:1)")."""
    head = f"{samples[0].backend} round {samples[0].round}: "
    errors = {s.error for s in samples if not s.ok}
    if len(errors) == 1 and not any(s.ok for s in samples):
        return head + f"unavailable: {errors.pop()}"
    return head + ", ".join(f"{s.op} {s.latency_ms:.1f} ms" if s.ok and s.latency_ms is not None
                            else f"{s.op} error ({s.error})" for s in samples)


def percentile(sorted_ms: Sequence[float], q: float) -> float | None:
    """Return the nearest-rank ``q``-th percentile (0 < q <= 100) of ascending ``sorted_ms``
    in the same unit, or None when there are no values."""
    n = len(sorted_ms)
    if n == 0:
        return None
    rank = max(1, math.ceil(q / 100.0 * n - 1e-9))
    return float(sorted_ms[min(rank, n) - 1])


def summarize(latencies_ms: Iterable[float], errors: int = 0) -> dict[str, float | int | None]:
    """Return count, errors, ok fraction, mean, p50/p99/p99.9 and max of ``latencies_ms``
    (all in ms; None where there is no successful sample)."""
    v = sorted(latencies_ms)
    total = len(v) + errors
    out: dict[str, float | int | None] = {
        "count": total,
        "errors": errors,
        "ok_fraction": (len(v) / total) if total else None,
        "mean_ms": (sum(v) / len(v)) if v else None,
        "max_ms": v[-1] if v else None,
    }
    for label, q in QUANTILES:
        out[f"{label}_ms"] = percentile(v, q)
    return out


def window_start_s(now_s: float, window_s: float | None) -> float:
    """Return the earliest sample time (Unix s) inside a window of ``window_s`` ending at
    ``now_s``; ``None`` means all time."""
    return -math.inf if window_s is None else now_s - window_s


def window_summary(samples: Iterable[Sample], now_s: float, window_s: float | None
                   ) -> dict[str, dict[str, dict[str, float | int | None]]]:
    """Return ``{backend: {op: summarize(...)}}`` over the samples started within the window
    (``start <= t_s <= now_s``)."""
    lo = window_start_s(now_s, window_s)
    lat: dict[tuple[str, str], list[float]] = {}
    err: dict[tuple[str, str], int] = {}
    for s in samples:
        if not lo <= s.t_s <= now_s:
            continue
        key = (s.backend, s.op)
        lat.setdefault(key, [])
        err.setdefault(key, 0)
        if s.ok and s.latency_ms is not None:
            lat[key].append(s.latency_ms)
        else:
            err[key] += 1
    out: dict[str, dict[str, dict[str, float | int | None]]] = {}
    for (backend, op), values in sorted(lat.items()):
        out.setdefault(backend, {})[op] = summarize(values, err[(backend, op)])
    return out


def time_series(samples: Sequence[Sample], lo_s: float, hi_s: float, buckets: int = 120
                ) -> list[dict[str, float | int | None]]:
    """Return per-bucket ``{t_s, count, errors, p50_ms, p99_ms}`` for successful samples in
    [lo_s, hi_s], ``buckets`` equal slices (empty ones left out); t_s is the slice start."""
    width = max(hi_s - lo_s, 1e-9) / buckets
    slots: dict[int, list[Sample]] = {}
    for s in samples:
        if lo_s <= s.t_s <= hi_s:
            slots.setdefault(min(int((s.t_s - lo_s) / width), buckets - 1), []).append(s)
    return [_bucket(lo_s + i * width, slots[i]) for i in sorted(slots)]


def _bucket(t_s: float, group: Sequence[Sample]) -> dict[str, float | int | None]:
    v = sorted(s.latency_ms for s in group if s.ok and s.latency_ms is not None)
    return {"t_s": t_s, "count": len(group), "errors": len(group) - len(v),
            "p50_ms": percentile(v, 50.0), "p99_ms": percentile(v, 99.0)}


def histogram_edges_ms() -> list[float]:
    """Return the log-spaced bin edges in ms shared by every histogram."""
    return [LOWEST_EDGE_MS * 10 ** (i / BINS_PER_DECADE)
            for i in range(DECADES * BINS_PER_DECADE + 1)]


def histogram(latencies_ms: Iterable[float]) -> list[int]:
    """Return counts per bin of :func:`histogram_edges_ms`; values outside fall in the
    first or last bin."""
    nbins = DECADES * BINS_PER_DECADE
    counts = [0] * nbins
    for x in latencies_ms:
        i = (math.floor(math.log10(x / LOWEST_EDGE_MS) * BINS_PER_DECADE + 1e-9)
             if x > 0 else 0)
        counts[min(max(i, 0), nbins - 1)] += 1
    return counts

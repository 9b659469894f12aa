"""Open-loop arrival schedules: when each request is meant to start, independent of replies.

An open-loop generator decides every request's intended start time up front from the offered
rate, so a slow store cannot slow the arrivals down (the flaw of closed-loop testers that
"coordinated omission" names). ``uniform`` spaces requests exactly ``1/rate`` apart;
``poisson`` draws exponential gaps of mean ``1/rate`` from a seeded generator.
"""

from __future__ import annotations

import numpy as np

from replicalab.errors import ParameterError
from replicalab.runtime.base import NS_PER_S

PROCESSES = ("uniform", "poisson")
MAX_ARRIVALS = 50_000_000  # 400 MB of offsets: a bound on one schedule, not a target


def check_arrivals(process: str, rate_per_s: float, duration_s: float) -> None:
    """Raise ParameterError naming the first invalid arrival parameter (``arrivals``,
    ``rate``, ``duration``) and its fix."""
    if process not in PROCESSES:
        raise ParameterError("arrivals", f"{process!r}: use uniform or poisson")
    if not rate_per_s > 0:
        raise ParameterError("rate", f"{rate_per_s} must be positive (requests per second)")
    if not duration_s > 0:
        raise ParameterError("duration", f"{duration_s} s must be positive")
    if rate_per_s * duration_s > MAX_ARRIVALS:
        raise ParameterError("rate", f"x {{duration}} = {rate_per_s * duration_s:,.0f} "
                                     f"requests is more than {MAX_ARRIVALS:,}; lower the rate "
                                     "or shorten the run", {"duration": "duration"})


def arrival_offsets_ns(process: str, rate_per_s: float, duration_s: float,
                       seed: int) -> np.ndarray:
    """Return the intended start of every request, in ns from the start of the run (int64,
    sorted, all < ``duration_s``); ``seed`` makes Poisson schedules reproducible."""
    check_arrivals(process, rate_per_s, duration_s)
    end_ns = int(duration_s * NS_PER_S)
    if process == "uniform":
        count = int(np.ceil(rate_per_s * duration_s))
        offsets = (np.arange(count, dtype=np.float64) * (NS_PER_S / rate_per_s)).astype(np.int64)
        return offsets[offsets < end_ns]
    rng = np.random.default_rng(seed)
    # Draw a little more than the expected count, then top up: the tail is rarely needed.
    expected = rate_per_s * duration_s
    chunk = int(expected + 6 * np.sqrt(expected) + 16)
    gaps = rng.exponential(NS_PER_S / rate_per_s, size=chunk)
    times = np.cumsum(gaps)
    while times[-1] < end_ns:
        more = np.cumsum(rng.exponential(NS_PER_S / rate_per_s, size=chunk)) + times[-1]
        times = np.concatenate([times, more])
    return times[times < end_ns].astype(np.int64)


def split_rate(rate_per_s: float, workers: int) -> list[float]:
    """Return each worker's share of ``rate_per_s`` (equal shares summing to the total)."""
    if workers < 1:
        raise ParameterError("workers", f"{workers} must be at least 1")
    return [rate_per_s / workers] * workers

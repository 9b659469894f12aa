"""The latency checker's vectorised HdrHistogram helpers give exactly what the hdrh
library's own per-value methods give: the same counts (and encoding), mean and
percentiles, on random latency samples of every shape."""

from __future__ import annotations

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from replicalab.checkers.latency import (
    HIGHEST_US,
    LOWEST_US,
    SIGNIFICANT_FIGURES,
    mean_value,
    record_values,
    value_at_percentile,
)


@pytest.mark.parametrize("shape", ["small", "ms", "spread"])
def test_vectorised_histogram_equals_hdrh_value_by_value(shape):
    rng = np.random.default_rng(len(shape))
    for _ in range(2):
        n = int(rng.integers(1, 2000))
        if shape == "small":
            v = rng.integers(1, 60, n)  # the first bucket
        elif shape == "ms":
            v = rng.lognormal(10, 0.5, n).astype(np.int64)  # ~22 ms reads
        else:
            v = rng.lognormal(rng.uniform(0, 16), 3, n).astype(np.int64)
        v = np.clip(v, LOWEST_US, HIGHEST_US)
        ref = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)
        for x in v.tolist():
            ref.record_value(x)
        fast = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)
        record_values(fast, v)
        assert fast.encode() == ref.encode()
        assert (fast.total_count, fast.min_value, fast.max_value) == (
            ref.total_count, ref.min_value, ref.max_value)
        assert mean_value(fast) == ref.get_mean_value()
        for p in (0, 50, 99.9, 100):
            assert value_at_percentile(fast, p) == ref.get_value_at_percentile(p)


def test_empty_histogram():
    h = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)
    record_values(h, np.zeros(0, np.int64))
    assert mean_value(h) == h.get_mean_value() == 0.0
    assert value_at_percentile(h, 50) == h.get_value_at_percentile(50) == 0

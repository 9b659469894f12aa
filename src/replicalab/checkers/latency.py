"""Latency per (operation, consistency) as HdrHistograms, from a History."""

from __future__ import annotations

import numpy as np
from hdrh.histogram import HdrHistogram

from replicalab.history import CONSISTENCY_NAMES, F_NAMES, History

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_FIGURES = 3


def latency_histograms(h: History) -> dict[str, HdrHistogram]:
    """Return one HdrHistogram (values in µs) per "f/consistency" of completed client ops."""
    out: dict[str, HdrHistogram] = {}
    if not len(h):
        return out
    types = h.types()
    done = (types == 1) | (types == 2)
    done &= h.column("process") >= 0  # client ops: not the nemesis, not final reads
    f = h.column("f")
    cons = h.column("consistency")
    lat_us = (h.column("complete_ns") - h.column("invoke_ns")) // 1000
    for fc in np.unique(f[done]):
        for cc in np.unique(cons[done & (f == fc)]):
            sel = done & (f == fc) & (cons == cc)
            hist = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)
            record_values(hist, np.clip(lat_us[sel], LOWEST_US, HIGHEST_US))
            hist.set_tag(f"{F_NAMES[fc]}/{CONSISTENCY_NAMES[cc]}")
            out[f"{F_NAMES[fc]}/{CONSISTENCY_NAMES[cc]}"] = hist
    return out


def _counts(hist: HdrHistogram) -> np.ndarray:
    """Return the histogram's counts array as a numpy view (no copy)."""
    return np.ctypeslib.as_array(hist.counts)


def record_values(hist: HdrHistogram, values_us: np.ndarray) -> None:
    """Record every value of ``values_us`` (integers within the histogram's range) in
    ``hist``: exactly ``hist.record_value`` for each, computed for all at once."""
    if not len(values_us):
        return
    values, counts = np.unique(np.asarray(values_us, np.int64), return_counts=True)
    # HdrHistogram._counts_index_for, vectorised: the bucket is the bit length of
    # value | sub_bucket_mask (exact through float64: values are below 2**53)
    bits = np.frexp((values | hist.sub_bucket_mask).astype(np.float64))[1].astype(np.int64)
    bucket = bits - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub = values >> (bucket + hist.unit_magnitude)
    base = (bucket + 1) << hist.sub_bucket_half_count_magnitude
    index = base + sub - hist.sub_bucket_half_count
    if index.min() < 0 or index.max() >= hist.counts_len:
        raise ValueError("latency outside the histogram's range")
    np.add.at(_counts(hist), index, counts)
    hist.total_count += int(counts.sum())
    hist.min_value = min(hist.min_value, int(values[0]))
    hist.max_value = max(hist.max_value, int(values[-1]))


def mean_value(hist: HdrHistogram) -> float:
    """Return ``hist.get_mean_value()`` (µs) visiting only the indices that hold counts."""
    if not hist.total_count:
        return 0.0
    counts = _counts(hist)
    total = 0
    for i in np.flatnonzero(counts[: hist.counts_len]).tolist():
        top = hist.get_highest_equivalent_value(hist.get_value_from_index(i))
        total += int(counts[i]) * hist._hdr_median_equiv_value(top)
    return float(total) / hist.total_count


def value_at_percentile(hist: HdrHistogram, percentile: float) -> int:
    """Return ``hist.get_value_at_percentile(percentile)`` (µs) from a cumulative sum."""
    target = hist.get_target_count_at_percentile(percentile)
    running = np.cumsum(_counts(hist)[: hist.counts_len], dtype=np.int64)
    reached = np.flatnonzero(running >= target)
    if not len(reached):
        return 0
    value = hist.get_value_from_index(int(reached[0]))
    if percentile:
        return hist.get_highest_equivalent_value(value)
    return hist.get_lowest_equivalent_value(value)


def latency_summary(hists: dict[str, HdrHistogram]) -> dict[str, dict[str, float]]:
    """Return count, mean and p50/p90/p99/p99.9/max in ms for each histogram."""
    out = {}
    for name, hist in sorted(hists.items()):
        out[name] = {
            "count": int(hist.get_total_count()),
            "mean_ms": round(mean_value(hist) / 1000, 4),
            **{f"{label}_ms": round(value_at_percentile(hist, p) / 1000, 4)
               for label, p in (("p50", 50), ("p90", 90), ("p99", 99), ("p999", 99.9))},
            "max_ms": round(hist.get_max_value() / 1000, 4),
        }
    return out

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
            values, counts = np.unique(np.clip(lat_us[sel], LOWEST_US, HIGHEST_US),
                                       return_counts=True)
            for v, c in zip(values.tolist(), counts.tolist(), strict=True):
                hist.record_value(v, c)
            hist.set_tag(f"{F_NAMES[fc]}/{CONSISTENCY_NAMES[cc]}")
            out[f"{F_NAMES[fc]}/{CONSISTENCY_NAMES[cc]}"] = hist
    return out


def latency_summary(hists: dict[str, HdrHistogram]) -> dict[str, dict[str, float]]:
    """Return count, mean and p50/p90/p99/p99.9/max in ms for each histogram."""
    out = {}
    for name, hist in sorted(hists.items()):
        out[name] = {
            "count": int(hist.get_total_count()),
            "mean_ms": round(hist.get_mean_value() / 1000, 4),
            **{f"{label}_ms": round(hist.get_value_at_percentile(p) / 1000, 4)
               for label, p in (("p50", 50), ("p90", 90), ("p99", 99), ("p999", 99.9))},
            "max_ms": round(hist.get_max_value() / 1000, 4),
        }
    return out

"""Figures that put several stores' runs side by side (the Python API's comparisons)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from replicalab.report.plots import freshness_curve, plain


def freshness_panels(curves: Mapping[str, Mapping[str, Any]]) -> Figure:
    """Return one panel per store (``curves``: store -> a staleness run's ``freshness``):
    probability (0..1, shown in %) of reading the freshest value against time since the
    write started (ms), with the 95 % Wilson band, buckets merged as in the run's report
    (``plots.freshness_curve``); panels share both axes."""
    fig = Figure(figsize=(4.2 * max(1, len(curves)), 3.6), layout="constrained",
                 facecolor="white")
    axes = fig.subplots(1, max(1, len(curves)), sharex=True, sharey=True, squeeze=False)[0]
    drawn = {store: freshness_curve(c) for store, c in curves.items()}
    xmax = max((c["xmax_ms"] for c in drawn.values()), default=1000.0)
    for ax, (store, c) in zip(axes, drawn.items(), strict=False):
        ax.plot(c["x_ms"], c["p"], color="#1f77b4", linewidth=1.3,
                label=f"{c['width_ms']:g} ms buckets")
        ax.fill_between(c["x_ms"], c["lo"], c["hi"], color="#1f77b4", alpha=0.25, linewidth=0,
                        label="95 % band")
        ax.set_title(plain(store), fontsize=10)
        ax.set_xlim(0, xmax)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.set_xlabel("time since the write started (ms)")
        ax.legend(loc="lower right", frameon=False)
    axes[0].yaxis.set_major_formatter(PercentFormatter(1.0))
    axes[0].set_ylabel("probability of reading freshest value")
    return fig

"""Pure plotting helpers: results data in, :class:`matplotlib.figure.Figure` out.

Figures are built on :class:`~matplotlib.figure.Figure` directly, never through pyplot, so no
global backend state is touched: saving picks Agg for PNG and the SVG backend for SVG, which is
thread-safe and needs no display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter

from replicalab.checkers.stats import wilson

WIDE = (7.5, 3.8)
VERSION_COLORS = {"v0": "#7f7f7f", "v1": "#1f77b4", "v2": "#ff7f0e", "v3": "#2ca02c"}
ABCD_COLORS = {"A": "#2ca02c", "B": "#98df8a", "C": "#ffbb78", "D": "#d62728"}
MIN_READS_PER_BUCKET = 100
"""Below this mean bucket size the freshness curve is mostly noise, so buckets are merged
(up to 20x, which keeps the ~50 ms rise after a write visible)."""


def plain(text: str) -> str:
    """Return ``text`` with ``$`` escaped so matplotlib draws it literally, not as mathtext."""
    return str(text).replace("$", r"\$")


def _floats(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _new(figsize: tuple[float, float] = WIDE) -> tuple[Figure, Axes]:
    fig = Figure(figsize=figsize, layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def freshness_xmax_ms(t_ms: Sequence[float], total: Sequence[int], bucket_ms: float) -> float:
    """Return the x limit (ms) of the freshness plot: the bucket holding the 99.9th percentile
    of reads, rounded up to 100 ms, and at least 1000 ms, so rare late outliers don't squash
    the interesting first second."""
    t, n = np.asarray(t_ms, dtype=float), np.asarray(total, dtype=float)
    if n.sum() <= 0:
        return 1000.0
    order = np.argsort(t)
    cum = np.cumsum(n[order]) / n.sum()
    t_q = t[order][np.searchsorted(cum, 0.999)] + bucket_ms
    return float(max(1000.0, np.ceil(t_q / 100.0) * 100.0))


def freshness_curve(freshness: Mapping[str, Any]) -> dict[str, Any]:
    """Return the freshness curve as plotted: bucket centres ``x_ms``, probability ``p``
    (0..1) and its 95 % Wilson band ``lo``..``hi`` per bucket of ``width_ms`` (sparse 1 ms
    buckets merged so each holds about MIN_READS_PER_BUCKET reads), up to ``xmax_ms``."""
    bucket_ms = float(freshness["bucket_ms"])
    t = np.asarray(freshness["t_ms"], dtype=float)
    fresh = np.asarray(freshness["fresh"], dtype=float)
    total = np.asarray(freshness["total"], dtype=float)
    xmax = freshness_xmax_ms(t, total, bucket_ms)
    keep = t < xmax
    t, fresh, total = t[keep], fresh[keep], total[keep]
    per_bucket = total.sum() / (xmax / bucket_ms)
    factor = next((f for f in (1, 2, 5, 10) if per_bucket * f >= MIN_READS_PER_BUCKET), 20)
    width = bucket_ms * factor
    if factor == 1:
        p = _floats(freshness["p"])[keep]
        lo, hi = _floats(freshness["lo"])[keep], _floats(freshness["hi"])[keep]
        p[total == 0] = np.nan
    else:
        idx = (t // width).astype(int)
        fresh = np.bincount(idx, weights=fresh)
        total = np.bincount(idx, weights=total)
        t = np.arange(len(total)) * width
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(total > 0, fresh / np.where(total > 0, total, 1), np.nan)
        lo, hi = wilson(fresh, total)
    return {"x_ms": t + width / 2, "p": p, "lo": lo, "hi": hi, "width_ms": width,
            "xmax_ms": xmax}


def staleness_figure(freshness: Mapping[str, Any], consistency: str = "") -> Figure:
    """Return the paper's Figure 2: probability (0..1, shown in %) of reading the freshest value
    against time since the write started (ms), with its 95 % Wilson band. Sparse 1 ms buckets
    are merged into wider ones (named in the legend) so the curve is readable."""
    c = freshness_curve(freshness)
    width, xmax = c["width_ms"], c["xmax_ms"]
    fig, ax = _new()
    label = f"{plain(consistency)} read" if consistency else "read"
    ax.plot(c["x_ms"], c["p"], color="#1f77b4", linewidth=1.3,
            label=f"{label}, {width:g} ms buckets")
    ax.fill_between(c["x_ms"], c["lo"], c["hi"], color="#1f77b4", alpha=0.25, linewidth=0,
                    label="95 % band")
    ax.set_xlim(0, xmax)
    ax.set_ylim(-0.02, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("time since the write started (ms)")
    ax.set_ylabel("probability of reading freshest value")
    ax.legend(loc="lower right", frameon=False)
    return fig


def periods_figure(periods: Mapping[str, Any], faults: Sequence[Mapping[str, Any]] = ()) -> Figure:
    """Return the paper's Figure 3: per measurement period, the first time (ms after the write)
    freshness reaches 99 % and the last time it is below 100 %, against the period's start time
    in the run (s). Fault periods are shaded."""
    fig, ax = _new()
    start_s = _floats(periods["start_s"])
    for key, label, marker in (
        ("last_lt_100_ms", "last time < 100 %", "x"),
        ("first_ge_99_ms", "first time ≥ 99 %", "o"),
    ):
        ax.plot(start_s, _floats(periods[key]), marker, markersize=4, linestyle="none", label=label)
    shade_faults(ax, faults)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("start of measurement period in the run (s)")
    ax.set_ylabel("time since the write started (ms)")
    ax.legend(ncols=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig


def shade_faults(ax: Axes, faults: Sequence[Mapping[str, Any]]) -> None:
    """Shade each fault period (x in seconds of the run) with a legend entry per label."""
    shaded: set[str] = set()
    for fault in faults:
        name = plain(fault.get("label", "fault"))
        ax.axvspan(fault["start_ms"] / 1000, fault["end_ms"] / 1000, color="#d62728",
                   alpha=0.12, linewidth=0,
                   label=None if name in shaded else f"fault: {name}")
        shaded.add(name)


def availability_figure(avail: Mapping[str, Any],
                        faults: Sequence[Mapping[str, Any]] = ()) -> Figure:
    """Return the fraction of client time the store answered per window against the run
    time (s), the fraction of operations ok dashed beside it, with fault periods shaded."""
    fig, ax = _new((7.5, 3.2))
    t = np.asarray(avail["t_s"], dtype=float)
    ax.step(t, _floats(avail["ok_fraction"]), where="post", color="#1f77b4",
            label=f"time answered per {avail['window_s']:g} s window")
    if "ok_fraction_ops" in avail:
        ax.step(t, _floats(avail["ok_fraction_ops"]), where="post", color="#7f7f7f",
                linestyle="--", linewidth=1.0, label="operations ok")
    shade_faults(ax, faults)
    ax.set_ylim(-0.02, 1.05)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("time in the run (s)")
    ax.set_ylabel("available")
    ax.legend(ncols=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig


def k_staleness_figure(k: Sequence[int], count: Sequence[int]) -> Figure:
    """Return a bar chart of the number of reads (count) that were k versions behind
    (k = 0 is fresh); the y axis is logarithmic when counts span more than 100x."""
    fig, ax = _new((7.5, 3.0))
    counts = np.asarray(count, dtype=float)
    ax.bar([str(v) for v in k], counts, color="#1f77b4")
    positive = counts[counts > 0]
    if positive.size and positive.max() / positive.min() > 100:
        ax.set_yscale("log")
    ax.set_xlabel("versions behind the freshest value (k)")
    ax.set_ylabel("reads")
    return fig


def versions_figure(curve: Mapping[str, Any], window_ms: Sequence[float] = ()) -> Figure:
    """Return the paper's Figures 4-6 for one attribute: probability (shown in %) of reading each
    version v0, v1, ... against time since the cycle started (ms, bucket centres); the analysis
    window is shaded."""
    fig, ax = _new()
    t = np.asarray(curve["t_ms"], dtype=float)
    width = float(np.min(np.diff(t))) if t.size > 1 else 1.0
    empty = np.asarray(curve["total"]) == 0
    if len(window_ms) == 2:
        ax.axvspan(*window_ms, color="#000000", alpha=0.05, linewidth=0, label="analysis window")
    for name, probs in curve["versions"].items():
        p = _floats(probs)
        p[empty] = np.nan
        ax.plot(t + width / 2, p, linewidth=1.4, color=VERSION_COLORS.get(name), label=plain(name))
    ax.set_ylim(-0.02, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel(f"time since the cycle started (ms, {width:g} ms buckets)")
    ax.set_ylabel("probability of reading version")
    ax.legend(ncols=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig


def abcd_figure(bars: Sequence[tuple[str, Mapping[str, float]]]) -> Figure:
    """Return horizontal stacked bars, one per ``(label, {"A".."D": fraction})``, of the four
    outcomes of reading two elements (fractions 0..1, shown in %)."""
    fig, ax = _new((7.5, 1.2 + 0.45 * len(bars)))
    ax.grid(False)
    labels = [plain(label) for label, _ in bars][::-1]
    left = np.zeros(len(bars))
    for outcome, color in ABCD_COLORS.items():
        widths = np.array([abcd.get(outcome, 0.0) for _, abcd in bars][::-1])
        ax.barh(labels, widths, left=left, color=color, label=outcome, height=0.6)
        for y, (x0, w) in enumerate(zip(left, widths, strict=True)):
            if w >= 0.06:
                ax.text(x0 + w / 2, y, f"{w:.0%}", ha="center", va="center", fontsize="small")
        left += widths
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.legend(ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig


def latency_figure(latency: Mapping[str, Mapping[str, float]]) -> Figure:
    """Return a dot plot of p50, p99 and p99.9 latency (ms) per operation ("f/consistency"),
    on a log axis when the values span more than 20x."""
    fig, ax = _new((7.5, 1.3 + 0.4 * len(latency)))
    names = [plain(name) for name in latency][::-1]
    stats = list(latency.values())[::-1]
    values = []
    percentiles = (("p50_ms", "p50", "o"), ("p99_ms", "p99", "s"), ("p999_ms", "p99.9", "^"))
    for key, label, marker in percentiles:
        xs = [s[key] for s in stats]
        values += xs
        ax.plot(xs, names, marker, linestyle="none", markersize=6, label=label)
    if min(values) > 0 and max(values) / min(values) > 20:
        # Plain 1-2-5 labels: matplotlib's default 2x10^1 style is hard to read for latencies.
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.set_xlabel("latency (ms)")
    ax.legend(ncols=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig

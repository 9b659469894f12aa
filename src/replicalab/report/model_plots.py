"""Figures for the performance models: latency vs throughput curves."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from replicalab.models.base import Curve


def curves_figure(curves: Sequence[Curve], title: str = "",
                  ylabel: str = "mean latency (ms)") -> Figure:
    """Return latency (ms) vs throughput (requests/s) with one line per curve; a dotted
    vertical line marks each curve's maximum throughput."""
    fig = Figure(figsize=(7.5, 4.2), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    for c in curves:
        pts = [p for p in c.points if p.latency_ms is not None]
        (line,) = ax.plot([p.offered_rps for p in pts], [p.latency_ms for p in pts],
                          marker="o", markersize=2.5, linewidth=1.3,
                          label=c.label.replace("$", r"\$"))
        if c.max_throughput_rps and c.max_throughput_rps < float("inf"):
            ax.axvline(c.max_throughput_rps, color=line.get_color(), linestyle=":",
                       linewidth=0.9)
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title.replace("$", r"\$"), fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False, fontsize=8)
    return fig


def visibility_figure(t_ms: Sequence[float], curves: dict[str, Sequence[float]],
                      measured: tuple[Sequence[float], Sequence[float]] | None = None,
                      sampled: tuple[Sequence[float], Sequence[float]] | None = None
                      ) -> Figure:
    """Return P(consistent read) vs ms after the write committed, one line per curve, with
    optional measured points (t_ms, p) drawn as dots and the sampled points a comparison
    judged (t_ms, measured p) as rings."""
    fig = Figure(figsize=(7.5, 4.0), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    for label, p in curves.items():
        ax.plot(t_ms, p, linewidth=1.4, label=label.replace("$", r"\$"))
    if measured is not None:
        ax.plot(measured[0], measured[1], "o", markersize=2.5, alpha=0.7, label="measured")
    if sampled is not None and len(sampled[0]):
        ax.plot(sampled[0], sampled[1], "o", markersize=6, markerfacecolor="none",
                markeredgecolor="#333333", markeredgewidth=0.8, label="sampled t (judged)")
    ax.set_xlabel("time since the write was acknowledged (ms)")
    ax.set_ylabel("probability of a consistent read")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(frameon=False, fontsize=8)
    return fig


def freshness_overlay_figure(curves: dict[str, tuple[Sequence[float], Sequence[float]]],
                             xmax_ms: float) -> Figure:
    """Return P(fresh read) vs ms since the write started, one line per store (t_ms, p)."""
    fig = Figure(figsize=(7.5, 4.0), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    for label, (t, p) in curves.items():
        ax.plot(t, p, linewidth=1.3, label=label.replace("$", r"\$"))
    ax.set_xlim(0, xmax_ms)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("time since the write started (ms)")
    ax.set_ylabel("probability of reading the freshest value")
    ax.legend(frameon=False, fontsize=8)
    return fig

"""The page of ``model paxos-wan --against``: model, twin and real store side by side.

:func:`render_against_report` writes the HTML page of the results ``experiments/against.py``
makes, with a figure per leader (bars: model, twin, measured mean per client region at the lowest
offered rate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from replicalab.experiments.against import TOLERANCE, against_results, verdicts
from replicalab.models.paxos_wan_fit import Row
from replicalab.report.model_page import render_model_report

__all__ = ["TOLERANCE", "against_figure", "against_results", "render_against_report",
           "verdicts"]


def against_figure(rows: Sequence[Row]) -> Figure:
    """Return one panel per leader: model, twin and measured mean latency (ms) per client
    region at the lowest offered rate of the run."""
    low = min(r.offered_rps for r in rows)
    leaders = list(dict.fromkeys(r.leader for r in rows))
    fig = Figure(figsize=(7.5, 2.6 * len(leaders)), layout="constrained", facecolor="white")
    axes = fig.subplots(len(leaders), 1, squeeze=False)[:, 0]
    for ax, leader in zip(axes, leaders, strict=True):
        mine = [r for r in rows if r.leader == leader and r.offered_rps == low]
        xs = range(len(mine))
        for k, (label, get) in enumerate((("model", lambda r: r.model_ms),
                                          ("twin", lambda r: r.twin_ms),
                                          ("measured", lambda r: r.real_ms))):
            ax.bar([x + (k - 1) * 0.27 for x in xs], [get(r) or 0.0 for r in mine],
                   width=0.27, label=label)
        ax.set_xticks(list(xs), [r.region for r in mine])
        ax.set_ylabel("mean write latency (ms)")
        ax.set_title(f"leader {leader}, {low:g} writes/s", fontsize=10)
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(True, axis="y", color="#e5e5e5", linewidth=0.8)
        ax.set_axisbelow(True)
    axes[0].legend(frameon=False, fontsize=8, ncols=3)
    return fig


def render_against_report(results: Mapping[str, Any], rows: Sequence[Row],
                          run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (and its PNG) for an --against run; return its path."""
    figures = [("fig-against", "Mean write latency per client region: the model and twin "
                "with the fitted store delays beside the real store, at the lowest offered "
                "rate.", against_figure(rows))] if rows else []
    return render_model_report(results, run_dir, figures=figures, kind="comparison")

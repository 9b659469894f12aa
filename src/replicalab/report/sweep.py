"""The sweep workload's report section: seed 000's figures (total time to finish the fixed
number of requests against the number of clients, one curve per variant and item count, puts
and reads side by side) and the table of every point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from replicalab.report.page import Page, num
from replicalab.report.plots import plain

WRITES = ("put", "conditional put")
READS = ("eventual read", "consistent read")
_STYLE = {"put": ("#1f77b4", "o"), "conditional put": ("#ff7f0e", "s"),
          "eventual read": ("#2ca02c", "o"), "consistent read": ("#d62728", "s")}


def _label(variant: str, items: int) -> str:
    return f"{'single item' if items == 1 else f'{items:,} items'}, {variant}"


def sweep_figure(points: Sequence[Mapping[str, Any]]) -> Figure:
    """Return the seed-000 figure: total time (s) against clients, writes left, reads right,
    one curve per (variant, item count); the dashed curves are the fewest items."""
    fig = Figure(figsize=(9.0, 3.8), layout="constrained", facecolor="white")
    axes = fig.subplots(1, 2, sharey=False)
    counts = sorted({p["items"] for p in points})
    for ax, group, title in ((axes[0], WRITES, "PutAttribute"), (axes[1], READS,
                                                                  "GetAttribute")):
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        drawn = False
        for variant in group:
            for items in counts:
                pts = sorted((p for p in points if p["variant"] == variant
                              and p["items"] == items and p["total_s"]),
                             key=lambda p: p["clients"])
                if not pts:
                    continue
                color, marker = _STYLE[variant]
                ax.plot([p["clients"] for p in pts], [p["total_s"] for p in pts],
                        color=color, marker=marker, markersize=4,
                        linestyle="--" if items == counts[0] and len(counts) > 1 else "-",
                        label=plain(_label(variant, items)))
                drawn = True
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("clients (closed loop)")
        ax.set_ylabel("total time (s)")
        if drawn:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
                axis.set_minor_formatter(NullFormatter())
            ax.legend(fontsize=7, frameon=False)
        else:
            ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes,
                    color="#7f7f7f")
    return fig


def sweep_section(page: Page, r: Mapping[str, Any]) -> None:
    """Add the sweep's figure, its shape table and the table of every point to ``page``."""
    cfg = r["config"]["sweep"]
    page.heading("Thread sweep (cf. seed 000, multiple threads)")
    page.para(f"Each point: {cfg['total']:,} requests by closed-loop clients; reads run with "
              f"{cfg['writers']} background writers on the same items.")
    points = r["points"]
    if not points:
        page.para("No sweep point completed.", "muted")
        return
    page.figure("fig-sweep", "Total time to finish the requests against the number of "
                "clients (log-log); dashed: the fewest items.", sweep_figure(points))
    if r["shapes"]:
        page.table(["Variant", "Clients", "Time, fewest items / most items"],
                   [[s["variant"], s["clients"], num(s["time_ratio"], 3)]
                    for s in r["shapes"]],
                   caption="Above 1: one hot item is slower")
    page.table(["Variant", "Items", "Clients", "Total (s)", "Throughput (/s)", "Mean (ms)",
                "p50", "p99", "p99.9", "Failed", "Unknown"],
               [[p["variant"], f"{p['items']:,}", p["clients"], num(p["total_s"], 2),
                 num(p["throughput_per_s"], 1), num(p["mean_ms"], 2), num(p["p50_ms"], 2),
                 num(p["p99_ms"], 2), num(p["p999_ms"], 2), p["failed"], p["info"]]
                for p in points], caption="Every point", numeric_from=1)
    for variant, why in r["skipped"].items():
        page.para(f"{variant}: skipped ({why}).", "muted")

"""The report of a batch of probe runs (``probe --repeats/--sweep``): per sweep point the
merged figures (pooled fractions, per-run spread with the mean's 95 % confidence interval)
and the per-run series, one point per run (seed 003's Figure 3 for the staleness probe)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from replicalab.report.page import Page, esc, num, pct, write_page


def _point_label(point: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "all runs"


def figure_rows(merged: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """Return one table row per merged figure: the pooled fraction with its Wilson
    interval (for counted figures), then the per-run mean, its 95 % interval, sd, min,
    median, max and the number of runs."""
    rows = []
    for name, entry in merged.items():
        s = entry["spread"]
        fraction = "pooled" in entry
        fmt = (lambda x: pct(x)) if fraction else (lambda x: num(x, 3))
        pool = entry.get("pooled")
        pooled = "" if pool is None else (
            f"{pct(pool['p'])} [{pct(pool['ci95'][0])}, {pct(pool['ci95'][1])}] "
            f"({pool['count']:,}/{pool['total']:,})" if pool["p"] is not None else "n/a")
        ci = "" if s["ci95"] is None else f"[{fmt(s['ci95'][0])}, {fmt(s['ci95'][1])}]"
        rows.append([name, pooled, fmt(s["mean"]), ci, fmt(s["sd"]), fmt(s["min"]),
                     fmt(s["median"]), fmt(s["max"]), str(s["n"])])
    return rows


FIGURE_HEADER = ["figure", "pooled over runs", "mean of runs", "95 % CI of the mean", "sd",
                 "min", "median", "max", "runs"]


def series_figure(series: Mapping[str, Sequence[Sequence[float | None]]]) -> Figure:
    """Return the per-run series as points against the run number (a run with several
    measurement periods has several points at its number)."""
    fig = Figure(figsize=(8.0, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for (name, runs), marker in zip(series.items(), ("o", "x", "s", "^"), strict=False):
        xs, ys = [], []
        for i, points in enumerate(runs, start=1):
            for y in points:
                if y is not None:
                    xs.append(i)
                    ys.append(y)
        ax.plot(np.array(xs), np.array(ys, dtype=float), marker, markersize=4,
                linestyle="none", label=name)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("run")
    ax.set_ylabel("ms")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
    ax.legend(ncols=2, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig


def render_batch_report(summary: Mapping[str, Any], batch_dir: Path) -> Path:
    """Write ``batch_dir/report.html`` (and figures/*.png) for a batch; return its path."""
    page = Page()
    title = f"{summary['workload']} on {summary['store']}: batch of {summary['runs_done']} runs"
    page.heading(title, 1)
    seeds = summary["seeds"]
    page.para(f"{summary['runs_done']} of {summary['runs_planned']} runs done"
              f"{' (interrupted)' if summary['interrupted'] else ''}; seeds "
              f"{seeds[0]}–{seeds[-1]} at every point; each run is a probe of "
              f"{summary['duration_s']:g} s with its own run directory under runs/.")
    for k, point in enumerate(summary["points"]):
        label = _point_label(point["point"])
        page.heading(label)
        page.table(FIGURE_HEADER, figure_rows(point["merged"]),
                   caption="Pooled: every run's counts summed (Wilson 95 % interval); "
                           "mean of runs: each run's own figure, its 95 % interval from "
                           "Student's t over the runs.")
        if point["series"]:
            page.figure(f"fig-series-{k}", f"{label}: per run, "
                        + "; ".join(point["series"]) + " (one point per measurement period)",
                        series_figure(point["series"]))
        links = " ".join(f'<a href="runs/{esc(r["label"])}/report.html">{esc(r["label"])}</a>'
                         for r in point["runs"])
        page.add(f"<p>Runs: {links}</p>")
    return write_page(page, {"schema_version": summary["schema_version"], **summary}, title,
                      batch_dir)

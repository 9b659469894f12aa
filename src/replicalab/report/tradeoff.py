"""The report of a seed 003 §4 run (``replicalab load tradeoff``): the paper's Figures 7-12
drawn from the run's points, the observations judged on them, and one table row per point.

Figures (x: emulated clients = groups x clients per group):

* ``tradeoff-read-latency`` (Figure 7): read latency, mean / p95 / p99.9, eventual (solid)
  against consistent (dashed) reads in one figure, at the highest read ratio;
* ``tradeoff-ratio-latency`` (Figures 8 and 9): mean read and write latency per read ratio;
* ``tradeoff-throughput`` (Figure 10): successful requests per second, mean with min-max
  whiskers over the repeats;
* ``tradeoff-share`` (Figure 11): throughput as a share of the potential load;
* ``tradeoff-failures`` (Figure 12): failure rate, mean with min-max whiskers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from replicalab.report.page import Page, esc, num, pct, write_page
from replicalab.report.plots import _new

COLORS = {"eventual": "#1f77b4", "consistent": "#d62728"}
STYLES = {"eventual": "-", "consistent": "--"}
RATIO_MARKERS = ("o", "s", "^", "D", "v")


def _series(pts: Sequence[Mapping[str, Any]], ratio: float, consistency: str
            ) -> list[Mapping[str, Any]]:
    return sorted((p for p in pts if p["read_ratio"] == ratio
                   and p["consistency"] == consistency), key=lambda p: p["clients"])


def _lat(p: Mapping[str, Any], op: str, key: str) -> float:
    lat = p["latency"].get(op, {})
    return float(lat[key]) if lat.get("count") else float("nan")


def top_ratio(pts: Sequence[Mapping[str, Any]]) -> float:
    """Return the highest read ratio of the points (the paper's Figure 7 uses 99 %)."""
    return max(p["read_ratio"] for p in pts)


def read_latency_figure(pts: Sequence[Mapping[str, Any]]) -> Figure:
    """Return Figure 7: mean, p95 and p99.9 read latency (ms, log scale) against clients,
    eventual and consistent side by side, at the highest read ratio."""
    fig, ax = _new((7.5, 4.2))
    ratio = top_ratio(pts)
    for consistency in ("eventual", "consistent"):
        s = _series(pts, ratio, consistency)
        if not s:
            continue
        xs = [p["clients"] for p in s]
        for key, label, marker in (("mean_ms", "mean", "o"), ("p95_ms", "p95", "s"),
                                   ("p999_ms", "p99.9", "^")):
            ax.plot(xs, [_lat(p, "read", key) for p in s], STYLES[consistency],
                    marker=marker, color=COLORS[consistency], label=f"{consistency} {label}")
    ax.set_yscale("log")
    ax.set_xlabel("emulated clients")
    ax.set_ylabel("read response time (ms)")
    ax.set_title(f"read ratio {100 * ratio:g} %, failed requests excluded", fontsize=9)
    ax.legend(fontsize=8, ncols=2)
    return fig


def ratio_latency_figure(pts: Sequence[Mapping[str, Any]], consistency: str = "eventual"
                         ) -> Figure:
    """Return Figures 8 and 9: mean read (solid) and write (dotted) latency (ms) against
    clients, one line per read ratio, for ``consistency`` reads."""
    fig, ax = _new()
    ratios = sorted({p["read_ratio"] for p in pts}, reverse=True)
    for i, ratio in enumerate(ratios):
        s = _series(pts, ratio, consistency)
        xs = [p["clients"] for p in s]
        marker = RATIO_MARKERS[i % len(RATIO_MARKERS)]
        ax.plot(xs, [_lat(p, "read", "mean_ms") for p in s], "-", marker=marker,
                color="#1f77b4", label=f"read, {100 * ratio:g} % reads")
        if ratio < 1:
            ax.plot(xs, [_lat(p, "write", "mean_ms") for p in s], ":", marker=marker,
                    color="#2ca02c", label=f"write, {100 * ratio:g} % reads")
    ax.set_xlabel("emulated clients")
    ax.set_ylabel("mean response time (ms)")
    ax.set_title(f"{consistency} reads", fontsize=9)
    ax.legend(fontsize=8, ncols=2)
    return fig


def _whiskers(ax: Any, pts: Sequence[Mapping[str, Any]], key: str, scale: float = 1.0,
              offset_frac: float = 0.006) -> None:
    ratio = top_ratio(pts)
    span = max(p["clients"] for p in pts) or 1
    for k, consistency in enumerate(("eventual", "consistent")):
        s = [p for p in _series(pts, ratio, consistency) if p[key]["mean"] is not None]
        if not s:
            continue
        # the two series a hair apart, so overlapping whiskers stay visible
        xs = [p["clients"] + (k - 0.5) * offset_frac * span for p in s]
        mean = [scale * p[key]["mean"] for p in s]
        lo = [m - scale * p[key]["min"] for m, p in zip(mean, s, strict=True)]
        hi = [scale * p[key]["max"] - m for m, p in zip(mean, s, strict=True)]
        ax.errorbar(xs, mean, yerr=[lo, hi], fmt=STYLES[consistency], marker="o",
                    color=COLORS[consistency], capsize=3, label=consistency)
    ax.set_xlabel("emulated clients")
    ax.set_title(f"read ratio {100 * ratio:g} %; whiskers: min and max over the repeats",
                 fontsize=9)
    ax.legend(fontsize=8)


def throughput_figure(pts: Sequence[Mapping[str, Any]]) -> Figure:
    """Return Figure 10: successful requests per second against clients, with whiskers."""
    fig, ax = _new()
    _whiskers(ax, pts, "throughput_rps")
    ax.set_ylabel("processed requests / s")
    return fig


def share_figure(pts: Sequence[Mapping[str, Any]]) -> Figure:
    """Return Figure 11: throughput as a share (%) of the potential load."""
    fig, ax = _new()
    _whiskers(ax, pts, "throughput_pct")
    ax.set_ylabel("throughput (% of potential)")
    return fig


def failure_figure(pts: Sequence[Mapping[str, Any]]) -> Figure:
    """Return Figure 12: failure rate (%) against clients, with whiskers."""
    fig, ax = _new()
    _whiskers(ax, pts, "failure_rate", scale=100.0)
    ax.set_ylabel("failed requests (%)")
    return fig


FIGURES = (
    ("fig-tradeoff-read-latency", "Figure 7: read response time, eventual against consistent "
     "reads (mean, p95, p99.9).", read_latency_figure),
    ("fig-tradeoff-ratio-latency", "Figures 8 and 9: mean read and write response time at "
     "each read ratio.", ratio_latency_figure),
    ("fig-tradeoff-throughput", "Figure 10: processed requests per second.", throughput_figure),
    ("fig-tradeoff-share", "Figure 11: throughput as a share of the potential load.",
     share_figure),
    ("fig-tradeoff-failures", "Figure 12: request failure rate.", failure_figure),
)


def render_tradeoff_report(results: Mapping[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (self-contained) and the PNG figures under
    ``run_dir/figures``; return the HTML path."""
    page = Page()
    page.add(f'<h1>replicalab load tradeoff <span class="sub">· seed 003 §4 · '
             f'{esc(results["store"])}</span></h1>')
    plan = results["plan"]
    page.para(f"{len(plan['groups'])} loads of {', '.join(str(g) for g in plan['groups'])} "
              f"groups x {plan['clients_per_group']} clients at {plan['client_rate_per_s']:g} "
              f"request/s each, read ratios {', '.join(f'{r:g}' for r in plan['read_ratios'])}, "
              f"{plan['repeats']} repeats of {plan['step_duration_s']:g} s; "
              f"{results['runtime']} time; store as run: {results['placed_store']}.")
    if not results["complete"]:
        page.para(f"Incomplete: {len(results['cells'])} steps done"
                  + (f" ({results['error']})" if results["error"] else "") + ".")
    page.table(["Observation (seed 003 §4)", "Holds", "Evidence"],
               [[o["claim"], {True: "yes", False: "no", None: "n/a"}[o["holds"]],
                 o["evidence"]] for o in results["observations"]],
               caption="The paper's observations, judged on this run", numeric_from=3)
    pts = results["points"]
    if pts:
        for fig_id, caption, make in FIGURES:
            page.figure(fig_id, caption, make(pts))
        page.table(
            ["Read ratio", "Consistency", "Clients", "Offered /s", "Throughput /s",
             "% of potential", "Failure rate", "Read mean ms", "Read p95 ms",
             "Read p99.9 ms", "Write mean ms"],
            [[f"{p['read_ratio']:g}", p["consistency"], p["clients"],
              num(p["offered_per_s"], 0), num(p["throughput_rps"]["mean"], 1),
              num(p["throughput_pct"]["mean"], 1), pct(p["failure_rate"]["mean"]),
              num(_lat(p, "read", "mean_ms"), 1), num(_lat(p, "read", "p95_ms"), 1),
              num(_lat(p, "read", "p999_ms"), 1), num(_lat(p, "write", "mean_ms"), 1)]
             for p in pts],
            caption="Points: means over the repeats; latency from the merged histograms",
            numeric_from=2)
    return write_page(page, results, f"replicalab · tradeoff · {results['store']}", run_dir)

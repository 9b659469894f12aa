"""Figures and the HTML report of ``replicalab hlc bench`` (seed 002's trace-sync figures)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from replicalab.hlc.bench import series
from replicalab.report.page import Page, esc, write_page


def _axes(title: str, xlabel: str) -> tuple[Figure, Any]:
    fig = Figure(figsize=(7.5, 4.0), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("alignment error (1 − adjustment / skew)")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    return fig, ax


def _curve(ax: Any, rows: Sequence[Mapping[str, Any]], x: str, label: str) -> None:
    xs = [r[x] for r in rows]
    line, = ax.plot(xs, [r["median"] for r in rows], marker="o", markersize=3, label=label)
    ax.fill_between(xs, [r["p25"] for r in rows], [r["p75"] for r in rows],
                    color=line.get_color(), alpha=0.18, linewidth=0)


def error_vs_length_figure(rows: Sequence[Mapping[str, Any]], cfg: Mapping[str, Any]) -> Figure:
    """Return the figure of error against log length, one curve per message probability
    (median over repetitions, interquartile band)."""
    lo, hi = cfg["latency_ticks"]
    fig, ax = _axes(f"{cfg['nodes']} logs, skew {cfg['skew_ticks']} ticks, latency {lo}–{hi} "
                    f"ticks, event chance {cfg['p_event']}", "log length (ticks)")
    for p, group in series(rows, "p_message", "length_ticks").items():
        _curve(ax, group, "length_ticks", f"message chance {p}")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    if ax.lines:
        ax.legend(frameon=False, fontsize=9)
    return fig


def error_vs_latency_figure(rows: Sequence[Mapping[str, Any]], cfg: Mapping[str, Any]
                            ) -> Figure:
    """Return the figure of error against message latency, one curve per skew, with a dotted
    line where latency equals the skew (median over repetitions, interquartile band)."""
    fig, ax = _axes(f"{cfg['nodes']} logs of {cfg['latency_length_ticks']} ticks, message chance "
                    f"{cfg['latency_p_message']}", "message latency (ticks)")
    for skew, group in series(rows, "skew_ticks", "latency_ticks").items():
        _curve(ax, group, "latency_ticks", f"skew {skew} ticks")
        ax.axvline(skew, color=ax.lines[-1].get_color(), linestyle=":", linewidth=1)
    ax.set_ylim(0, 1.05)
    if ax.lines:
        ax.legend(frameon=False, fontsize=9)
    return fig


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def render_hlc_bench_report(results: Mapping[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` and ``run_dir/figures/*.png`` for an hlc bench run;
    return the HTML path."""
    cfg = results["config"]
    page = Page()
    page.add('<h1>replicalab hlc bench <span class="sub">· trace synchronisation with HLC '
             "(seed 002)</span></h1>")
    page.para(
        f"Synthetic traces of {cfg['nodes']} nodes whose clocks are skewed by known amounts, "
        "stamped by real hybrid logical clocks. Each log is aligned against the node that drives "
        "HLC by the smallest shift that puts no event's HLC ahead of its aligned physical time "
        f"(n − 1 two-log alignments). Every point: {cfg['reps']} repetitions (seeds from "
        f"{cfg['seed']}); line = median, band = 25th–75th percentile.")
    page.heading("Error against log length")
    page.figure("fig-error-vs-length", "Longer logs and more frequent messages give more "
                "causal links to align by; the error stops falling near min latency / skew.",
                error_vs_length_figure(results["error_vs_length"], cfg))
    page.heading("Error against message latency")
    page.figure("fig-error-vs-latency", "Dotted lines: latency = skew. From there on HLC "
                "cannot improve the alignment at all (error 100%).",
                error_vs_latency_figure(results["error_vs_latency"], cfg))
    for title, rows, cols in (
            ("Error against log length", results["error_vs_length"],
             ("p_message", "length_ticks")),
            ("Error against latency", results["error_vs_latency"],
             ("skew_ticks", "latency_ticks"))):
        page.table([*cols, "median", "mean", "p25", "p75", "truth in bounds"],
                   [[r[cols[0]], r[cols[1]], _pct(r["median"]), _pct(r["mean"]),
                     _pct(r["p25"]), _pct(r["p75"]), _pct(r["truth_in_bounds"])]
                    for r in rows], caption=title, numeric_from=0)
    page.add("<p class=\"muted\">“truth in bounds”: share of nodes whose true offset lay in the "
             "interval the message pairs give (should be 100%). Command: "
             f"<code>{esc(results.get('command', 'replicalab hlc bench'))}</code></p>")
    return write_page(page, results, "replicalab · hlc bench", run_dir)

"""The HTML report of ``replicalab placement live``: a migration policy moving objects on a
running multi-region store, beside the static twins of the same objects in the same run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from replicalab.report.page import Page, esc, num, write_page
from replicalab.report.placement import policy_color, time_axes

_MANAGED = policy_color("cog")
_STATIC = policy_color("static")


def _floats(values: list[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def latency_figure(results: Mapping[str, Any]) -> Figure:
    """Return mean access latency per window (ms) for the managed objects and their static
    twins, with the settled period shaded."""
    w = results["windows"]
    step = results["config"]["window_s"]
    edges = np.append(_floats([x["t_s"] for x in w]), w[-1]["t_s"] + step) if w else [0.0]
    fig, ax = time_axes("mean access latency per window", "latency (ms)")
    ax.axvspan(results["settled_from_s"], edges[-1], color="#ebebeb", zorder=0,
               label="settled (compared)")
    ax.stairs(_floats([x["managed_mean_ms"] for x in w]), edges, color=_MANAGED,
              linewidth=1.8, baseline=None, label=f"{results['policy']} (managed objects)")
    ax.stairs(_floats([x["static_mean_ms"] for x in w]), edges, color=_STATIC,
              linewidth=1.8, baseline=None, label="static twins")
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False, fontsize=9)
    return fig


def migrations_figure(results: Mapping[str, Any]) -> Figure:
    """Return migrations completed per window (count)."""
    w = results["windows"]
    fig, ax = time_axes("migrations completed per window", "migrations")
    ax.bar([x["t_s"] for x in w], [x["migrations"] for x in w],
           width=results["config"]["window_s"] * 0.9, align="edge", color=_MANAGED)
    return fig


def share_figure(results: Mapping[str, Any]) -> Figure:
    """Return the share of managed objects each region owns at the end (0-1)."""
    regions = results["deployment"]["regions"]
    fig, ax = time_axes("managed objects owned per region at the end", "share of objects")
    ax.set_xlabel("region")
    ax.bar(regions, results["final_share"], color=_MANAGED)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylim(0, 1)
    return fig


def render_placement_live_report(results: Mapping[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` and its figures for a ``placement live`` run; return
    the HTML path."""
    cfg, dep = results["config"], results["deployment"]
    policy = results["policy"]
    page = Page()
    page.add('<h1>replicalab placement live <span class="sub">· live data migration '
             f"(seed 002) · {esc(policy)} on {esc(dep['kind'])}</span></h1>")
    clock = "virtual time" if dep.get("clock") == "virtual" else "wall-clock time"
    page.para(
        f"{len(dep['regions'])} regions ({esc(', '.join(dep['regions']))}; matrix "
        f"{esc(dep['region_set'])}), {cfg['clients']} clients per region, {cfg['objects']} "
        f"object ids, {cfg['duration_s']:g} s of {clock}, {cfg['write_share']:.0%} writes, "
        f"seed {cfg['seed']}. Every object id exists twice: once managed by the policy, which "
        "moves it by copying it to the new owner and switching the ownership directory with "
        "a conditional write, and once as a static twin that stays at its home region. Both "
        "get the same traffic, so the difference is the policy's.")
    verdict = ("no acknowledged write was lost" if not results["lost_writes"] else
               f"{results['lost_writes']} acknowledged writes were LOST")
    page.para(
        f"After settling (from {results['settled_from_s']:g} s): {esc(policy)} "
        f"{num(results['managed_mean_ms'])} ms mean vs static {num(results['static_mean_ms'])} "
        f"ms, ratio {num(results['ratio'], 2)}; {results['migrations_moved']} migrations "
        f"({num(results['migrations_per_1k'], 1)} per 1,000 accesses); {verdict}; "
        f"{results['unknown_reads']} reads of a value nobody wrote.")
    page.heading("Latency over time")
    page.figure("fig-latency", "Mean latency of acknowledged accesses per window, by the "
                "window the access was invoked in. Shaded: the settled period the summary "
                "compares.", latency_figure(results))
    page.heading("Migrations over time")
    page.figure("fig-migrations", "Migrations that completed in each window.",
                migrations_figure(results))
    page.heading("Where the objects ended")
    page.figure("fig-share", "Share of the managed objects each region owns at the end "
                "(static twins stay spread over their homes).", share_figure(results))
    page.heading("Summary")
    ops = results.get("ops", {})
    page.table(["placement", "mean ms", "p99 ms", "migrations /1k", "lost writes"],
               [[policy, num(results["managed_mean_ms"]), num(results["managed_p99_ms"]),
                 num(results["migrations_per_1k"], 2), str(results["lost_writes"])],
                ["static", num(results["static_mean_ms"]), num(results["static_p99_ms"]),
                 "0", str(results["lost_writes"])]],
               caption=f"Settled period. Operations: {ops.get('ok', 0):,} ok, "
                       f"{ops.get('fail', 0):,} failed, {ops.get('info', 0):,} unknown; "
                       f"{results['redirects']:,} redirects to a moved object's new owner, "
                       f"{results['recoveries']:,} stuck migrations finished or undone by a "
                       "client.")
    for note in results.get("notes", []):
        page.para(f"Note: {esc(note)}", cls="muted")
    page.add("<p class=\"muted\">Command: "
             f"<code>{esc(results.get('command', 'replicalab placement live'))}</code></p>")
    return write_page(page, results, f"replicalab · placement live · {policy}", run_dir)

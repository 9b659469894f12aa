"""Figures and the HTML report of ``replicalab placement simulate`` (seed 002's migration
policies): latency, migrations and ownership balance over time per policy, and the table of
final metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from replicalab.placement.policies import policy_class
from replicalab.report.page import Page, esc, num, write_page
from replicalab.report.plots import plain

_EXTRA = ("#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22")


def policy_color(name: str) -> str:
    """Return the colour of policy ``name``'s curves: the one its class declares, so every
    figure of a report (and of different reports) matches; a spare one if it has none."""
    try:
        return policy_class(name).color or _EXTRA[0]
    except ValueError:
        return _EXTRA[0]


def _is_bound(name: str) -> bool:
    """Return True for a policy that knows the future (the oracle): a bound, drawn dotted."""
    try:
        return policy_class(name).needs_requests
    except ValueError:
        return False


def _style(entries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Return matplotlib line styles per policy label: colour by policy name, dashed when the
    load-balancing filter is on, dotted for the oracle (a policy that knows the future);
    repeated names get spare colours."""
    seen: dict[str, int] = {}
    out = {}
    for e in entries:
        name, label = e["name"], e["policy"]
        k = seen.get(name, 0)
        seen[name] = k + 1
        color = policy_color(name) if k == 0 else _EXTRA[(k - 1) % len(_EXTRA)]
        style = ":" if _is_bound(name) else "--" if "balance" in e["params"] else "-"
        out[label] = {"color": color, "linestyle": style, "linewidth": 1.6}
    return out


def time_axes(title: str, ylabel: str) -> tuple[Figure, Any]:
    """Return a (figure, axes) pair styled as every placement figure, x labelled time (s)."""
    fig = Figure(figsize=(7.5, 3.9), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(plain(title), fontsize=11)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    return fig, ax


def series_figure(entries: Sequence[Mapping[str, Any]], key: str, title: str, ylabel: str,
                  share: bool = False) -> Figure:
    """Return a figure of ``series[key]`` against time, one line per policy."""
    fig, ax = time_axes(title, ylabel)
    styles = _style(entries)
    for e in entries:
        s = e["series"]
        y = np.array([np.nan if v is None else v for v in s[key]], dtype=float)
        ax.plot(s["t_s"], y, label=plain(e["policy"]), **styles[e["policy"]])
    ax.set_ylim(bottom=0)
    if share:
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylim(0, 1.02)
    if entries:
        ax.legend(frameon=False, fontsize=8, ncols=2)
    return fig


def _fmt(x: Any, digits: int = 1) -> str:
    return "n/a" if x is None else num(x, digits)


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def render_placement_report(results: Mapping[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` and ``run_dir/figures/*.png`` for a placement run;
    return the HTML path."""
    cfg = results["config"]
    entries = results["policies"]
    page = Page()
    page.add('<h1>replicalab placement simulate <span class="sub">· data-migration policies '
             f"(seed 002) · workload {esc(cfg['workload'])}</span></h1>")
    page.para(
        f"{cfg['objects']:,} objects on {len(cfg['region_names'])} regions ({cfg['regions']}), "
        f"{cfg['requests']:,} accesses over {cfg['duration_s']:g} s, seed {cfg['seed']}. "
        "Objects start at a random region (the same for every policy); each access is served "
        "by the object's owner and costs the requester's round trip to it; then the policy "
        "may move the object. Steady state: the last 20% of the run. Ping-pong: a migration "
        f"back to a region the object left within {cfg['pingpong_ms'] / 1000:g} s.")
    page.heading("Latency over time")
    page.figure("fig-latency", "Mean access latency per time bucket. Dotted: the oracle "
                "(best placement per decision window, knowing the future); dashed: with the "
                "load-balancing filter.",
                series_figure(entries, "mean_latency_ms", "mean access latency",
                              "latency (ms)"))
    page.figure("fig-p99", "99th-percentile access latency per time bucket.",
                series_figure(entries, "p99_latency_ms", "p99 access latency", "latency (ms)"))
    page.heading("Migrations over time")
    page.figure("fig-migrations", "Migrations per 1,000 accesses in each time bucket.",
                series_figure(entries, "migrations_per_1k", "migrations",
                              "migrations per 1,000 accesses"))
    page.heading("Ownership balance")
    page.figure("fig-imbalance", "Imbalance: objects owned by the most loaded region minus "
                "the least loaded, at the end of each bucket (seed 002's disbalance graph).",
                series_figure(entries, "imbalance_objects", "ownership imbalance",
                              "objects (most − least loaded region)"))
    page.figure("fig-max-share", "The largest share of all objects one region owns.",
                series_figure(entries, "max_share", "largest region's share of the objects",
                              "share of objects", share=True))
    page.heading("Final metrics")
    has_sharers = any("on_sharers" in e for e in entries)
    header = ["policy", "mean ms", "p99 ms", "steady ms", "gain vs static ms",
              "gap to oracle ms", "migrations /1k", "ping-pong /1k", "max share",
              "imbalance"]
    if has_sharers:
        header.append("owner is a sharer")
    rows = []
    for e in entries:
        row = [e["policy"], _fmt(e["mean_latency_ms"]), _fmt(e["p99_latency_ms"]),
               _fmt(e["steady_latency_ms"]), _fmt(e.get("gain_vs_static_ms")),
               _fmt(e.get("gap_to_oracle_ms")), _fmt(e["migrations_per_1k"], 2),
               _fmt(e["pingpong_per_1k"], 2), _pct(e["max_share"]),
               str(e["imbalance_objects"])]
        if has_sharers:
            row.append(_pct(e.get("on_sharers")))
        rows.append(row)
    page.table(header, rows, caption="Over the whole run unless marked steady (last 20%).")
    if has_sharers:
        page.para("“owner is a sharer”: of the objects used by 2 or 3 regions, the share that "
                  "end owned by one of them (100%: locked into one sharer).", cls="muted")
    page.add("<p class=\"muted\">Command: "
             f"<code>{esc(results.get('command', 'replicalab placement simulate'))}</code></p>")
    return write_page(page, results, f"replicalab · placement · {cfg['workload']}", run_dir)

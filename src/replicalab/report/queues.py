"""HTML reports of queue runs and comparisons: what happened to every message, duplicate
deliveries against consumers per backend, and each strategy's duplicate processing and cost."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from replicalab.report.page import Page, esc, num, write_page
from replicalab.report.plots import _new, plain

STRATEGY_COLORS = {"none": "#d62728", "tag": "#ff7f0e", "central": "#2ca02c",
                   "central-lease": "#9467bd", "central-detect": "#1f77b4"}
FAULT_COLORS = {"crash": "#d62728", "pause": "#ff7f0e", "skew": "#9467bd",
                "store_fault": "#8c564b"}

SUMMARY_ROWS = (
    ("messages (acknowledged sends)", "messages"),
    ("· committed once", "committed_once"),
    ("· committed more than once", "committed_more_than_once"),
    ("· dead-lettered without a commit", "dead_lettered_without_commit"),
    ("· lost (acknowledged, never committed)", "lost"),
    ("· not reached (run cut short first)", "not_reached"),
    ("deliveries", "deliveries"),
    ("duplicate deliveries", "duplicate_deliveries"),
    ("most deliveries of one message", "max_deliveries_of_one_message"),
    ("processings", "processing"), ("duplicate processing", "duplicate_processing"),
    ("processing cut short", "interrupted_processing"),
    ("committed results (effects in the store)", "results"),
    ("duplicate results", "duplicate_results"),
    ("commits the consumers recorded as landed", "consumer_logged_results"),
    ("effects agree with the consumers' record", "effects_agree_with_log"),
    ("commits refused by the fence", "fenced_commits"),
    ("commits of unknown outcome to their consumer", "uncertain_results"),
    ("distinct results after filtering", "filtered_results"),
    ("unexpected (delivered, never sent)", "unexpected"),
    ("dead-lettered (all)", "dead_lettered"),
    ("overlapping leases (pairs)", "overlapping_leases"),
    ("stale deletes refused", "stale_deletes_refused"),
    ("stale visibility changes refused", "stale_changes_refused"),
    ("stale receipts accepted", "stale_receipts_accepted"),
    ("central-store ops per message", "store_ops_per_message"),
    ("effect-store ops per message", "effect_store_ops_per_message"),
    ("queue ops per message", "queue_ops_per_message"),
    ("added latency before processing (ms)", "added_latency_ms"),
    ("throughput (messages/s)", "throughput_per_s"),
    ("exactly once", "exactly_once"),
)
"""The run's summary as (label, key) rows; the five rows marked "·" add up to the first."""


def _cell(v: Any) -> str:
    if v is None:
        return "not decided (run cut short)"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return num(v, 2)
    return str(v)


def summary_cells(s: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Return the rows of a run's summary as (label, text): the figures of SUMMARY_ROWS that
    the summary holds, processing cut short with what cut it (a crash, the end of the run),
    and whether the effects were read from the store."""
    rows = []
    for label, key in SUMMARY_ROWS:
        if key not in s:
            continue
        text = _cell(s[key])
        by = s.get("interrupted_processing_by") or {}
        if key == "interrupted_processing" and by:
            text += (f" (by {next(iter(by))})" if len(by) == 1 else " (by " + ", ".join(
                f"{why}: {n}" for why, n in by.items()) + ")")
        elif key == "results" and s.get("results_from") == "consumer record":
            text += " (from the consumers' record: the store was not read back)"
        elif key == "effects_agree_with_log" and s[key] is None:
            text = "not checked (the store was not read back)"
        rows.append((label, text))
    return rows


def fault_text(f: Mapping[str, Any]) -> str:
    """Return a fault of the spec as words, e.g. ``pause consumer 1 at 3 s for 10 s``."""
    if f.get("consumer") is not None:
        target = f"consumer {f['consumer']}"
    elif f.get("store") is not None:
        target = f"{f['store']} store"
    else:
        target = f"consumer {f['node']}"
    extra = {"skew": f" {f.get('extra_ms', 0):+g} ms", "timeouts":
             f" after {f.get('extra_ms', 0):g} ms"}.get(f["action"], "")
    span = "to the end" if f.get("for_s") is None else f"for {f['for_s']:g} s"
    return f"{f['action']} {target}{extra} at {f['at_s']:g} s {span}"


def histogram_figure(hist: Mapping[str, Mapping[str, int]]) -> Figure:
    """Return bars: how many messages were delivered / processed k times."""
    fig, ax = _new()
    width = 0.4
    every: set[int] = set()
    for j, (name, color) in enumerate((("deliveries", "#1f77b4"), ("processing", "#2ca02c"))):
        h = hist.get(name, {})
        ks = sorted(int(k) for k in h)
        every.update(ks)
        bars = ax.bar([k + (j - 0.5) * width for k in ks], [h[str(k)] for k in ks], width,
                      color=color, label=f"{name}")
        ax.bar_label(bars, fontsize=7)  # a log axis hides how small the tail is
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.7)
    ax.set_xticks(sorted(every), [str(k) for k in sorted(every)])
    ax.set_xlabel("times delivered / processed (k)")
    ax.set_ylabel("messages")
    ax.legend(fontsize=8)
    return fig


_NOISE = ("replicas", "regions", "node_regions")


def short_url(url: str) -> str:
    """Return ``url`` without the cluster-placement parameters ``cluster up`` adds, so a
    legend names the backend and what distinguishes it (e.g. ``sim://sqs?fifo=1``)."""
    base, _, query = url.partition("?")
    kept = [p for p in query.split("&") if p and p.split("=", 1)[0] not in _NOISE]
    return base + ("?" + "&".join(kept) if kept else "")


def _consumer_axis(ax: Any, counts: Sequence[int]) -> None:
    """Log-2 consumer axis labelled with the counts run (1, 4, 16), not powers of two."""
    ax.set_xscale("log", base=2)
    ticks = sorted(set(counts))
    ax.set_xticks(ticks, [str(c) for c in ticks])
    ax.minorticks_off()
    ax.set_xlabel("consumers")


def duplicates_figure(runs: Sequence[Mapping[str, Any]]) -> Figure:
    """Return duplicate deliveries (% of messages) against consumers, one line per backend
    and strategy."""
    fig, ax = _new()
    lines: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for r in runs:
        s = r["summary"]
        pct = 100 * s["duplicate_deliveries"] / s["messages"] if s["messages"] else 0.0
        lines[(r["queue"], r["strategy"])].append((r["consumers"], pct))
    backends = sorted({q for q, _ in lines})
    for (queue, strategy), pts in sorted(lines.items()):
        pts.sort()
        k = backends.index(queue)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="os^vD"[k % 5],
                linestyle=("-", "--", ":", "-.")[k % 4], color=STRATEGY_COLORS.get(strategy),
                label=plain(f"{short_url(queue)} · {strategy}"))
    _consumer_axis(ax, [r["consumers"] for r in runs])
    ax.set_ylabel("duplicate deliveries (% of messages)")
    ax.legend(fontsize=7)
    return fig


def strategies_figure(runs: Sequence[Mapping[str, Any]]) -> Figure:
    """Return, per strategy and consumer count, duplicate processing (% of messages, left)
    and central-store operations per message (right)."""
    fig = Figure(figsize=(9.0, 3.8), layout="constrained", facecolor="white")
    left, right = fig.subplots(1, 2)
    by: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for r in runs:
        s = r["summary"]
        pct = 100 * s["duplicate_processing"] / s["messages"] if s["messages"] else 0.0
        by[r["strategy"]].append((r["consumers"], pct, s["store_ops_per_message"]))
    for strategy, pts in by.items():
        agg: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for c, d, cost in pts:
            agg[c].append((d, cost))
        cs = sorted(agg)
        color = STRATEGY_COLORS.get(strategy)
        left.plot(cs, [sum(d for d, _ in agg[c]) / len(agg[c]) for c in cs], marker="o",
                  color=color, label=strategy)
        right.plot(cs, [sum(x for _, x in agg[c]) / len(agg[c]) for c in cs], marker="s",
                   color=color, label=strategy)
    for ax, label in ((left, "duplicate processing (% of messages)"),
                      (right, "central-store ops per message")):
        _consumer_axis(ax, [r["consumers"] for r in runs])
        ax.set_ylabel(label)
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.legend(fontsize=7)
    return fig


def _shade_faults(ax: Any, faults: Sequence[Mapping[str, Any]], end_s: float) -> None:
    """Shade each fault window on ``ax`` (one legend entry per kind of fault)."""
    named: set[str] = set()
    for f in faults:
        kind = f["kind"]
        stop = end_s if f.get("end_s") is None else f["end_s"]
        ax.axvspan(f["start_s"], max(stop, f["start_s"]), color=FAULT_COLORS.get(kind, "#999"),
                   alpha=0.15, linewidth=0, label=None if kind in named else kind)
        named.add(kind)


def timeline_figure(runs: Sequence[tuple[str, Mapping[str, Any], Sequence[Mapping[str, Any]]]]
                    ) -> Figure:
    """Return, against time (s from the run's first operation), committed results so far
    (top) and duplicate results and commits refused by the fence so far (bottom), one line
    per run (label, checker timeline, fault windows); the first run's faults are shaded."""
    fig = Figure(figsize=(7.5, 4.6), layout="constrained", facecolor="white")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    end_s = 0.0
    for label, tl, _ in runs:
        bin_s = float(tl.get("bin_s", 1.0))
        n = len(tl.get("results", []))
        end_s = max(end_s, n * bin_s)
        x = [(b + 1) * bin_s for b in range(n)]
        color = STRATEGY_COLORS.get(label.split(" ")[0])
        top.step(x, np.cumsum(tl.get("results", [])), where="post", linewidth=1.2,
                 color=color, label=plain(label))
        bottom.step(x, np.cumsum(tl.get("duplicate_results", [0] * n)), where="post",
                    linewidth=1.4, color=color, label=plain(f"{label}: duplicate results"))
        if any(tl.get("fenced_commits", [])):
            bottom.step(x, np.cumsum(tl["fenced_commits"]), where="post", linewidth=1.0,
                        linestyle="--", color=color,
                        label=plain(f"{label}: refused by the fence"))
    for ax in (top, bottom):
        if runs:
            _shade_faults(ax, runs[0][2], end_s)
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(fontsize=7)
    top.set_ylabel("results committed")
    bottom.set_ylabel("so far")
    bottom.set_xlabel("time since the run's first operation (s)")
    return fig


def render_queue_report(results: Mapping[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` for one queue run (and its figures); return its path."""
    page = Page()
    spec, s = results["spec"], results["summary"]
    page.add(f'<h1>replicalab queue <span class="sub">· {esc(spec["strategy"])} · '
             f'{esc(spec["queue"])}</span></h1>')
    for note in results.get("notes", []):
        page.para(note)
    page.table(["Setting", "Value"], [
        ["queue", results["queue"]["url"]], ["strategy", spec["strategy"]],
        ["central store", (results.get("central") or {}).get("url", "—")],
        ["consumers", spec["consumers"]], ["messages", spec["messages"]],
        ["visibility timeout (s)", spec["visibility_s"]],
        ["processing median (ms)", spec["process_ms"]],
        ["slow processings", f'{spec["slow_fraction"]:g} of them take {spec["slow_s"]:g} s'],
        ["faults", "; ".join(fault_text(f) for f in spec["faults"]) or "none"],
        ["clock", s["clock"]], ["seed", spec["seed"]]], caption="Configuration")
    page.table(["Measure", "Value"], [list(row) for row in summary_cells(s)],
               caption="Every message accounted for" + (
                   " (PARTIAL: the run was cut short)" if s.get("partial") else ""))
    page.figure("fig-queue-deliveries", "How many messages were delivered and processed k "
                "times.", histogram_figure(results["checker"]["histograms"]))
    checker = results["checker"]
    if "timeline" in checker:
        page.figure("fig-queue-timeline", "Results committed so far (top); duplicate results "
                    "and commits refused by the fence so far (bottom); fault windows shaded.",
                    timeline_figure([(spec["strategy"], checker["timeline"],
                                      checker.get("faults", []))]))
    for name in ("lost", "dead_lettered_without_commit", "unexpected", "duplicated",
                 "duplicated_results", "effects_log_disagreements"):
        if results["checker"].get(name):
            page.para(f"{name} (first 100): " + ", ".join(results["checker"][name]))
    return write_page(page, results, f"replicalab · queue · {spec['queue']}", run_dir)


def render_compare_report(results: Mapping[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` for a comparison (backends x strategies x consumers)
    with its two figures; return its path."""
    page = Page()
    page.add('<h1>replicalab queue compare <span class="sub">· '
             f'{esc(", ".join(results["queues"]))}</span></h1>')
    runs = results["runs"]
    ratio = {(r["queue"], r["strategy"], r["consumers"]): r["ratio"]
             for r in results.get("ratios", [])}
    page.table(["Queue", "Strategy", "Consumers", "Dup deliveries", "Dup processing",
                "Dup results", "Fenced", "Lost", "Dead, no commit", "Store ops/msg",
                "Added ms", "Msgs/s", "vs none"],
               [[r["queue"], r["strategy"], r["consumers"], r["summary"]["duplicate_deliveries"],
                 r["summary"]["duplicate_processing"], r["summary"]["duplicate_results"],
                 r["summary"].get("fenced_commits", 0),
                 r["summary"]["lost"], r["summary"].get("dead_lettered_without_commit", 0),
                 num(r["summary"]["store_ops_per_message"], 2),
                 num(r["summary"]["added_latency_ms"], 1),
                 num(r["summary"]["throughput_per_s"], 2),
                 num(ratio.get((r["queue"], r["strategy"], r["consumers"])), 2)]
                for r in runs], caption="Every run", numeric_from=2)
    page.figure("fig-queue-duplicates", "Duplicate deliveries against consumers, per "
                "backend.", duplicates_figure(runs))
    page.figure("fig-queue-strategies", "Each strategy's duplicate processing and its cost "
                "in central-store operations per message.", strategies_figure(runs))
    if any(r.get("timeline") for r in runs) and results["spec"].get("faults"):
        page.figure("fig-queue-timeline", "Results committed so far (top), duplicate results "
                    "and commits refused by the fence so far (bottom), for each run; the fault "
                    "windows shaded.",
                    timeline_figure([(f"{r['strategy']} c{r['consumers']} "
                                      f"{short_url(r['queue'])}", r["timeline"],
                                      r.get("faults", [])) for r in runs
                                     if r.get("timeline")]))
    return write_page(page, results, "replicalab · queue compare", run_dir)

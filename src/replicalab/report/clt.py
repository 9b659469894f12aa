"""The CLT report: one self-contained HTML page (inline SVG figures, values escaped)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from replicalab.clt import analysis, stats
from replicalab.clt.records import Records
from replicalab.report.page import Page, esc, write_page
from replicalab.report.plots import _new, plain

GROUP_COLORS = {"self": "#2ca02c", "same region": "#1f77b4", "cross region": "#ff7f0e"}
_PCT = ("p50", "p90", "p99", "p99.9", "p99.99", "p99.999")


def _ms(v: float | None, digits: int = 3) -> str:
    """Return a ms value for a table: '> timeout' for a censored percentile."""
    return "> timeout" if v is None else f"{v:,.{digits}f}"


def _box_stats(label: str, s: Mapping[str, Any], cap_ms: float) -> dict[str, Any]:
    b = s["box"]

    def v(x: float | None) -> float:
        return cap_ms if x is None else x
    return {"label": plain(label), "med": v(b["p50"]), "q1": v(b["p25"]), "q3": v(b["p75"]),
            "whislo": v(b["p5"]), "whishi": v(b["p95"]),
            "mean": s["mean_ms"] if s["mean_ms"] is not None else np.nan, "fliers": []}


def box_figure(items: Sequence[tuple[str, Mapping[str, Any]]], cap_ms: float, title: str,
               colors: Sequence[str] | None = None) -> Figure:
    """Return box plots (box p25-p75, line median, whiskers p5/p95, triangle mean) in ms."""
    fig, ax = _new((max(4.0, 0.55 * len(items) + 2.0), 3.8))
    bxp = [_box_stats(k, s, cap_ms) for k, s in items]
    art = ax.bxp(bxp, showmeans=True, patch_artist=True, widths=0.6,
                 meanprops={"marker": "^", "markerfacecolor": "#2ca02c",
                            "markeredgecolor": "#2ca02c"},
                 medianprops={"color": "black"})
    for i, patch in enumerate(art["boxes"]):
        patch.set_facecolor(colors[i] if colors else "#aec7e8")
    ax.set_ylabel("round-trip latency (ms)")
    ax.set_title(plain(title), fontsize=10)
    ax.tick_params(axis="x", labelrotation=60 if len(items) > 6 else 0, labelsize=8)
    return fig


def windows_figure(w: Mapping[str, Any]) -> Figure:
    """Return mean RTT per window over schedule time, one line per pair."""
    fig, ax = _new()
    t = np.asarray(w["t_s"], dtype=float)
    for key, series in w["pairs"].items():
        y = np.array([np.nan if v is None else v for v in series["mean_ms"]], dtype=float)
        ax.plot(t + w["window_s"] / 2, y, marker="o", markersize=3, linewidth=1,
                label=plain(key))
    ax.set_xlabel(f"time in the run (s), windows of {w['window_s']:g} s")
    ax.set_ylabel("mean RTT (ms)")
    if len(w["pairs"]) <= 12:
        ax.legend(fontsize=7, ncols=2)
    return fig


def _group_samples(rec: Records, regions: Mapping[str, str]) -> dict[str, np.ndarray]:
    out: dict[str, list[np.ndarray]] = {}
    for node, remote in analysis.pairs(rec):
        g = analysis.group_of(node, remote, regions)
        out.setdefault(g, []).append(analysis.pair_rtts(rec, node, remote))
    return {g: np.concatenate(v) for g, v in out.items()}


def histogram_figure(groups: Mapping[str, np.ndarray]) -> Figure:
    """Return histograms of the observed RTTs per group (ms, log count axis)."""
    fig, ax = _new()
    finite = [x[np.isfinite(x)] / 1000.0 for x in groups.values()]
    allx = np.concatenate(finite) if finite else np.array([])
    if len(allx):
        bins = np.linspace(allx.min(), np.quantile(allx, 0.9999), 120)
        for (g, _), x in zip(groups.items(), finite, strict=True):
            ax.hist(x, bins=bins, histtype="step", linewidth=1.2, label=plain(g),
                    color=GROUP_COLORS.get(g))
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax.set_xlabel("round-trip latency (ms), up to the pooled p99.99")
    ax.set_ylabel("pings")
    return fig


def cdf_figure(series: Mapping[str, np.ndarray], xlabel: str = "round-trip latency (ms)"
               ) -> Figure:
    """Return empirical CDFs, one line per series (censored samples count in the total)."""
    fig, ax = _new()
    for name, x in series.items():
        xs, f = stats.cdf_points(x)
        if len(xs):
            ax.step(xs, f, where="post", linewidth=1.2, label=plain(name),
                    color=GROUP_COLORS.get(name))
    ax.set_xlabel(plain(xlabel))
    ax.set_ylabel("fraction of pings")
    ax.set_ylim(0, 1.01)
    ax.legend(fontsize=8)
    return fig


def _header(page: Page, r: Mapping[str, Any]) -> None:
    nodes = r["nodes"]
    regions = r.get("regions") or {}
    cards = {
        "Nodes": ", ".join(f"{n} ({regions.get(n, '-')})" for n in nodes),
        "Rate": f"{r['rate_hz']:g} rounds/s per node",
        "Pings": f"{r['rows']:,} ({r['pooled']['timeouts']:,} timeouts)",
        "Ping timeout": f"{r['timeout_ms']:g} ms",
        "Self-loop": "yes" if r["self_loop"] else "no",
        "Wall time": f"{r.get('wall_s', 0):g} s",
    }
    body = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in cards.items())
    page.add('<h1>replicalab report <span class="sub">· Cloud Latency Tester</span></h1>'
             f'<dl class="summary">{body}</dl>')
    notes = list(r.get("notes") or []) + [f"error: {e}" for e in r.get("errors") or []]
    if notes:
        page.add('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")


def _matrix(page: Page, r: Mapping[str, Any]) -> None:
    po = r.get("proxy_overhead")
    m = r.get("matrix")
    if not m and not po:
        return
    page.heading("Injected latency and proxy overhead")
    if po:
        page.table(["Link", "p50 (ms)", "p99 (ms)"], [
            [f"{po['pinger']} → {po['peer']} direct", _ms(po["direct_p50_ms"]),
             _ms(po["direct_p99_ms"])],
            [f"{po['pinger']} → {po['peer']} through a zero-latency proxy",
             _ms(po["proxied_p50_ms"]), _ms(po["proxied_p99_ms"])],
            ["proxy overhead", _ms(po["overhead_p50_ms"]), _ms(po["overhead_p99_ms"])],
            [f"{po['pinger']} → {po['peer']} through a proxy injecting "
             f"{analysis.CALIBRATION_RTT_MS:g} ms RTT", _ms(po["emulated_10ms_p50_ms"]), ""],
            ["overhead of a delayed link: that link minus its injected RTT",
             _ms(po["floor_p50_ms"]), ""]],
            caption="Calibration links, measured in the same rounds as everything else")
    if m:
        page.para(f"Median RTT per pair against the RTT injected with Toxiproxy; a pair "
                  f"matches within {m['tolerance_ms']:g} ms plus the proxy overhead measured "
                  "in the same run (for a delayed link: what the 10 ms calibration link "
                  "measured beyond 10 ms). All match: "
                  f"{'yes' if m['all_ok'] else 'no'}.")
        page.table(["Pair", "Injected (ms)", "Measured p50 (ms)", "Difference (ms)",
                    "Allowed (ms)", "Match"],
                   [[x["pair"], f"{x['injected_ms']:g}", _ms(x["measured_p50_ms"]),
                     _ms(x["diff_ms"]), _ms(x["allowed_ms"]), "yes" if x["ok"] else "NO"]
                    for x in m["rows"]])


def _pairs(page: Page, r: Mapping[str, Any], rec: Records) -> None:
    page.heading("Round-trip latency per pair")
    rows = [[k, p["group"], f"{p['n']:,}", f"{p['timeouts']:,}", _ms(p["mean_ms"]),
             *(_ms(p["p"][q]) for q in _PCT)] for k, p in r["pairs"].items()]
    for name, s in [("pooled", r["pooled"])] + [(g, s) for g, s in r["groups"].items()]:
        rows.append([name, "", f"{s['n']:,}", f"{s['timeouts']:,}", _ms(s["mean_ms"]),
                     *(_ms(s["p"][q]) for q in _PCT)])
    page.table(["Pair", "Group", "Pings", "Timeouts", "Mean (ms)",
                *(f"{q} (ms)" for q in _PCT)], rows, numeric_from=2,
               caption="Nearest-rank percentiles; timeouts count as values above the timeout")
    cap = r["timeout_ms"]
    items = [(k, p) for k, p in r["pairs"].items()]
    page.figure("fig-clt-pairs", "Box plots per pair: box p25–p75, line the median, whiskers "
                "p5 and p95, triangle the mean (as in the seed's summary figure).",
                box_figure(items, cap, "per pair",
                           [GROUP_COLORS.get(p["group"], "#aec7e8") for _, p in items]))
    groups = list(r["groups"].items())
    page.figure("fig-clt-groups", "Box plots per group: talking to oneself, inside one "
                "region, across regions.",
                box_figure(groups, cap, "per group",
                           [GROUP_COLORS.get(g, "#aec7e8") for g, _ in groups]))
    samples = _group_samples(analysis.measured(rec), r.get("regions") or {})
    page.figure("fig-clt-hist", "Histogram of round-trip latency per group.",
                histogram_figure(samples))
    page.figure("fig-clt-cdf", "CDF of round-trip latency per group.", cdf_figure(samples))
    w = r["windows"]
    page.figure("fig-clt-windows", f"Mean RTT per pair over {w['window_s']:g}-second windows "
                "of the schedule.", windows_figure(w))


def _quorum(page: Page, r: Mapping[str, Any], rec: Records) -> None:
    q = r.get("quorum")
    if not q:
        return
    page.heading("Quorum latency")
    own = "its own response costs a self-ping" if q["self_loop"] else \
        "its own vote is free (latency 0)"
    page.para(f"For every round of every node: the time until k of the {q['n']} nodes "
              f"responded ({own}). NQ is the single peer-to-peer ping without a quorum. "
              "Rounds with fewer than k responses within the timeout count as above it.")
    items = [(q["single"]["label"], q["single"])] + [(x["label"], x) for x in q["by_k"]]
    page.table(["Quorum", "Rounds", "Short of k", *(f"{p} (ms)" for p in _PCT)],
               [[lbl, f"{s['n']:,}", f"{s['timeouts']:,}", *(_ms(s["p"][p]) for p in _PCT)]
                for lbl, s in items])
    page.figure("fig-clt-quorum", "Quorum latency: NQ single pings, Qk/n waits for k of n.",
                box_figure(items, r["timeout_ms"], "quorums"))
    page.para("Tail: majority quorum against a single pair. Majority beats single pair at "
              f"p99.999: {'yes' if q['majority_beats_single_tail'] else 'no'}.")
    page.table(["Percentile", f"Majority Q{q['majority_k']}/{q['n']} (ms)",
                "Single pair (ms)", "Single / majority"],
               [[t["q"], _ms(t["majority_ms"]), _ms(t["single_ms"]),
                 "" if t["ratio"] is None else f"{t['ratio']:g}×"] for t in q["tail"]])
    from replicalab.clt import quorum as qmod
    nodes = list(r["nodes"])
    real = analysis.measured(rec)  # calibration links are not part of any quorum
    series = {"NQ": real.select(real.node != real.remote).rtt_us}
    for k in sorted({qmod.majority(len(nodes)), len(nodes)}):
        series[f"Q{k}/{len(nodes)}"] = qmod.pooled(real, nodes, k, bool(r["self_loop"]))
    page.figure("fig-clt-quorum-cdf", "CDF of single-pair, majority and all-node latency.",
                cdf_figure(series))


def _spikes_fd(page: Page, r: Mapping[str, Any]) -> None:
    sp = r["spikes"]
    page.heading("Spikes")
    page.para(f"A spike is a ping above {sp['factor']:g}× its pair's median (timeouts "
              f"included): {sp['total']:,} of {r['rows']:,} pings "
              f"({100 * sp['fraction']:.3f}%).")
    page.table(["Pair", "Median (ms)", "Threshold (ms)", "Spikes", "Fraction"],
               [[k, _ms(v["median_ms"]), _ms(v["threshold_ms"]), f"{v['count']:,}",
                 f"{100 * v['fraction']:.3f}%"] for k, v in sp["pairs"].items()])
    if sp["top"]:
        page.table(["Pair", "Round", "Time (s)", "RTT (ms)"],
                   [[t["pair"], t["round"], f"{t['t_s']:.2f}", _ms(t["rtt_ms"])]
                    for t in sp["top"]], caption="Largest spikes")
    fd = r["failure_detector"]
    page.heading("Failure-detector timeout")
    page.para("The shortest timeout whose false-positive rate, on the RTTs measured here, stays "
              "at or below p: a detector that suspects a live peer when its heartbeat's round "
              "trip exceeds the timeout. 'Worst pair' is the timeout that is safe for every "
              "pair. Rows resting on fewer than 10 expected exceedances are marked.")
    rows = []
    for pooled, worst in zip(fd["pooled"], fd["worst_pair"], strict=False):
        rows.append([f"{pooled['p']:g}", _ms(pooled["timeout_ms"]), _ms(worst["timeout_ms"]),
                     worst["pair"], f"{pooled['expected_exceedances']:,.1f}",
                     "" if pooled["reliable"] else "few samples"])
    page.table(["False-positive rate p", "Timeout, pooled (ms)", "Timeout, worst pair (ms)",
                "Worst pair", "n·p (pooled)", ""], rows)


def _lag(page: Page, r: Mapping[str, Any]) -> None:
    lag = r["lag"]
    page.heading("Schedule lag")
    page.para(f"Open loop: every round has a fixed intended send time; latency counts from "
              f"it, so a late send cannot hide queueing. Lag = actual − intended send time. A "
              f"node falls behind when its lag p99 exceeds the {lag['period_ms']:g} ms period "
              f"or it sent fewer rounds than planned. Fell behind: "
              f"{'yes' if lag['behind'] else 'no'}.")
    page.table(["Node", "Rounds sent", "Planned", "p50 (ms)", "p99 (ms)", "p99.9 (ms)",
                "Max (ms)", "Sent > 1 ms late", "Behind"],
               [[n, f"{v['rounds_sent']:,}", f"{v['rounds_planned']:,}", _ms(v["p50_ms"]),
                 _ms(v["p99_ms"]), _ms(v["p99.9_ms"]), _ms(v["max_ms"]),
                 f"{100 * v['late_over_1ms']:.2f}%", "yes" if v["behind"] else "no"]
                for n, v in lag["nodes"].items()])


def _offsets(page: Page, r: Mapping[str, Any]) -> None:
    off = r.get("clock_offsets")
    if not off:
        return
    page.heading("Clock offsets recovered from the HLC trace logs")
    if "error" in off:
        page.para(f"The trace logs could not be aligned: {off['error']}")
        return
    page.para(f"hlc.align estimated, from the agents' HLC logs alone ({off['messages']:,} "
              f"matched messages), how far each clock is behind the node driving HLC time "
              f"({off['driver']}). The true offset is skew(driver) − skew(node).")
    page.table(["Node", "Injected skew (ms)", "True offset (ms)", "Recovered (ms)",
                "Error (ms)", "Bounds from messages (ms)"],
               [[x["node"], f"{x['skew_ms']:g}", _ms(x["true_offset_ms"]),
                 _ms(x["recovered_offset_ms"]), _ms(x["error_ms"]),
                 f"[{_ms(x['low_ms'])}, {_ms(x['high_ms'])}]"] for x in off["nodes"]])


def render_clt_report(results: dict[str, Any], rec: Records, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (and figures/*.png) for a CLT run; return its path."""
    page = Page()
    _header(page, results)
    _matrix(page, results)
    if len(analysis.measured(rec)):
        _pairs(page, results, rec)
        _quorum(page, results, rec)
        _spikes_fd(page, results)
    _lag(page, results)
    _offsets(page, results)
    return write_page(page, results, "replicalab · clt", run_dir)

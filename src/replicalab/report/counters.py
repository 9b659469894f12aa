"""The HTML report of a counter bench: the figures of seed 004 §V from results.json.

Figures (each also saved as a PNG): throughput vs mean latency as clients grow, one panel per
number of counters (seed Figures 6 and 10); median latency by client region at low load
(Figure 9, left); latency over time while the rights run out (Figure 9, middle); decrements
in excess of the bound vs clients (Figure 9, right); decrements per data centre over time
through a partition or the loss of a data centre (§IV-E), with the rights accounted for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from replicalab.report.page import Page, esc, num, write_page
from replicalab.report.plots import WIDE, plain

COLORS = {"weak": "#7f7f7f", "strong": "#d62728", "client-based": "#1f77b4",
          "server-based": "#ff7f0e", "server-based+batch": "#2ca02c"}
MARKERS = {"weak": "s", "strong": "^", "client-based": "o", "server-based": "D",
           "server-based+batch": "v"}
LABELS = {"weak": "Weak", "strong": "Strong", "client-based": "BCclt",
          "server-based": "BCsrv-nobatch", "server-based+batch": "BCsrv"}


def _new() -> tuple[Figure, Axes]:
    fig = Figure(figsize=WIDE, layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def _log_y(ax: Axes) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    # label only the 2s and 5s between the decades: every minor label would overlap
    ax.yaxis.set_minor_formatter(FuncFormatter(
        lambda v, _pos: f"{v:g}" if v > 0 and f"{v:.0e}"[0] in "25" else ""))
    ax.tick_params(axis="y", which="minor", labelsize=7)


def _points(results: Mapping[str, Any], experiment: str) -> list[Mapping[str, Any]]:
    return [p for p in results.get("points", []) if p["spec"]["experiment"] == experiment]


def _by_config(points: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for p in points:
        out.setdefault(p["spec"]["config"], []).append(p)
    for ps in out.values():
        ps.sort(key=lambda p: p["spec"]["clients"])
    return out


def throughput_figure(points: Sequence[Mapping[str, Any]], counters: int) -> Figure:
    """Return mean latency (all operations, ms) against throughput (successful ops/s), one
    line per configuration, points labelled by their client count."""
    fig, ax = _new()
    for config, ps in _by_config(points).items():
        x = [p["throughput_ops_s"] for p in ps]
        y = [p["latency_ms"]["all"]["mean"] or np.nan for p in ps]
        ax.plot(x, y, marker=MARKERS.get(config, "o"), color=COLORS.get(config),
                label=plain(LABELS.get(config, config)))
        for xi, yi, p in zip(x, y, ps, strict=True):
            ax.annotate(str(p["spec"]["clients"]), (xi, yi), textcoords="offset points",
                        xytext=(3, 3), fontsize=7, color="#555555")
    ax.set_xlabel("throughput (successful operations/s)")
    ax.set_ylabel("mean latency, all operations (ms)")
    ax.set_title(f"{counters} counter{'s' if counters != 1 else ''}: throughput vs latency",
                 fontsize=10)
    _log_y(ax)
    ax.legend(fontsize=8)
    return fig


def regions_figure(points: Sequence[Mapping[str, Any]], dcs: Sequence[str]) -> Figure:
    """Return grouped bars of the median latency (ms) per client region and configuration."""
    fig, ax = _new()
    by = _by_config(points)
    width = 0.8 / max(1, len(by))
    xs = np.arange(len(dcs))
    for i, (config, ps) in enumerate(by.items()):
        reg = ps[0]["latency_by_region_ms"]
        y = [reg.get(dc, {}).get("p50") or 0.0 for dc in dcs]
        ax.bar(xs + i * width - 0.4 + width / 2, y, width, color=COLORS.get(config),
               label=plain(LABELS.get(config, config)))
    ax.set_xticks(xs, [plain(d) for d in dcs])
    ax.set_ylabel("median latency (ms)")
    ax.set_xlabel("client region")
    ax.legend(fontsize=8)
    return fig


def exhaust_figure(series: Mapping[str, Sequence[Any]]) -> Figure:
    """Return each operation's latency (ms, log scale) against its start time (s), successes
    and refusals (no rights left) in two colours."""
    fig, ax = _new()
    t = np.asarray(series["t_s"], dtype=float)
    lat = np.asarray(series["latency_ms"], dtype=float)
    outcome = np.asarray(series["outcome"])
    for name, color, label in (("ok", "#1f77b4", "decrement done"),
                               ("insufficient", "#d62728", "refused: no rights left")):
        m = outcome == name
        if m.any():
            ax.scatter(t[m], lat[m], s=4, color=color, label=label, alpha=0.6, linewidths=0)
    other = ~np.isin(outcome, ["ok", "insufficient"])
    if other.any():
        ax.scatter(t[other], lat[other], s=8, color="#000000", marker="x", label="other failure")
    _log_y(ax)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("latency (ms)")
    ax.legend(fontsize=8, markerscale=3)
    return fig


def violations_figure(points: Sequence[Mapping[str, Any]]) -> Figure:
    """Return decrements in excess of the bound (from the final value) against clients."""
    fig, ax = _new()
    for config, ps in _by_config(points).items():
        ax.plot([p["spec"]["clients"] for p in ps],
                [p["violations"]["final_excess"] for p in ps],
                marker=MARKERS.get(config, "o"), color=COLORS.get(config),
                label=plain(LABELS.get(config, config)))
    ax.set_xlabel("clients")
    ax.set_ylabel("decrements in excess of the bound")
    ax.legend(fontsize=8)
    return fig


DC_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


def fault_figure(p: Mapping[str, Any], dcs: Sequence[str], bin_s: float = 0.25) -> Figure:
    """Return successful decrements per second in each data centre (bins of ``bin_s``)
    over the point, refusals (no rights) dotted, the fault's window shaded."""
    fig, ax = _new()
    ser, fault = p["series"], p.get("fault") or {}
    stride = ser["stride"][0]
    t = np.asarray(ser["t_s"], dtype=float)
    outcome = np.asarray(ser["outcome"])
    dc = np.asarray(ser["dc"])
    end = float(t.max()) if len(t) else 1.0
    edges = np.arange(0.0, end + bin_s, bin_s)
    mid = (edges[:-1] + edges[1:]) / 2
    for i, name in enumerate(dcs):
        color = DC_COLORS[i % len(DC_COLORS)]
        for what, style, label in (("ok", "-", "done"), ("insufficient", ":", "refused")):
            m = (dc == name) & (outcome == what)
            if m.any():
                rate = np.histogram(t[m], edges)[0] * stride / bin_s
                ax.plot(mid, rate, style, color=color, linewidth=1.2,
                        label=plain(f"{name} {label}"))
    if fault.get("start_s") is not None:
        stop = fault.get("end_s") or end
        what = ("cut off" if fault["kind"] == "partition"
                else "lost; rights recovered at the end")
        ax.axvspan(fault["start_s"], stop, color="#d62728", alpha=0.08,
                   label=plain(f"{fault['dc']} {what}"))
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("decrements per second")
    ax.legend(fontsize=7, ncol=2)
    return fig


def _fault_rows(points: Sequence[Mapping[str, Any]], dcs: Sequence[str]) -> list[list[object]]:
    rows: list[list[object]] = []
    for p in points:
        s, f, r = p["spec"], p.get("fault") or {}, p.get("rights") or {}
        eff = p.get("fault_effects") or {}
        lost = s["fault"] == "dc-loss"
        rows.append([s["fault"], LABELS.get(s["config"], s["config"]), f.get("dc", ""),
                     f"{num(f.get('start_s'), 1)}–{num(f.get('end_s'), 1)}",
                     " / ".join(str(eff.get("ok_during_by_dc", {}).get(d, 0)) for d in dcs),
                     " / ".join(str(eff.get("refused_during_by_dc", {}).get(d, 0))
                                for d in dcs),
                     eff.get("transfers_across_during", ""), eff.get("sync_failures", ""),
                     r.get("granted", ""), r.get("used", ""), r.get("acked_decrements", ""),
                     r.get("held_by_lost_at_loss", "") if lost else "",
                     r.get("recovered", "") if lost else "",
                     r.get("written_off", "") if lost else "",
                     p["violations"]["final_excess"], p["violations"]["acked_excess"]])
    return rows


def _failed(p: Mapping[str, Any]) -> str:
    o = p["outcomes"]
    parts = [f"{o[k]:,} {k}" for k in ("insufficient", "contended", "unavailable", "unknown",
                                       "error", "down") if o.get(k)]
    return ", ".join(parts) or "0"


def _row(p: Mapping[str, Any], dcs: Sequence[str]) -> list[object]:
    s = p["spec"]
    lat = p["latency_ms"]["all"]
    reg = p["latency_by_region_ms"]
    return [s["experiment"], LABELS.get(s["config"], s["config"]), s["clients"], s["counters"],
            f"{p['ops']:,}", _failed(p), num(p["throughput_ops_s"]), num(lat["p50"], 2),
            num(lat["p99"], 2), " / ".join(num(reg.get(d, {}).get("p50"), 1) for d in dcs),
            p["violations"]["final_excess"], p["violations"]["observed_below"],
            "n/a (not converged)" if p["violations"]["drift"] is None
            else p["violations"]["drift"]]


def render_counter_report(results: Mapping[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` and ``run_dir/figures/*.png`` for a counter bench;
    return the HTML path."""
    page = Page()
    spec = results["spec"]
    dcs = results["dcs"]
    page.add(f'<h1>replicalab counter bench <span class="sub">· {esc(results["title"])}'
             "</span></h1>")
    page.para(f"Closed-loop clients with {spec['think_ms']:g} ms think time, spread evenly over "
              f"{', '.join(dcs)}; {spec['inc_fraction'] * 100:g}% increments; "
              f"{spec['duration_s']:g} s per point; data centres synchronise every "
              f"{spec['sync_ms']:g} ms. Names as in seed 004: BCclt = client-based, BCsrv = "
              "server-based with batching, BCsrv-nobatch = without.")
    if notes := results.get("notes"):
        page.add('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    tp = _points(results, "throughput")
    for k in sorted({p["spec"]["counters"] for p in tp}):
        ps = [p for p in tp if p["spec"]["counters"] == k]
        page.heading(f"Throughput vs latency, {k} counter{'s' if k != 1 else ''}")
        page.figure(f"fig-throughput-{k}",
                    "Mean latency of all operations (successful or failed, as in the seed) "
                    "against successful operations per second; labels give the clients "
                    "(cf. seed Figures 6 and 10).", throughput_figure(ps, k))
    if reg := _points(results, "regions"):
        rtt = results["rtt_to_home_ms"]
        page.heading("Latency by client region at low load")
        page.figure("fig-regions",
                    f"Median latency per client region with {reg[0]['spec']['clients']} "
                    f"clients (cf. seed Figure 9). Strong's store is in {results['home']}; "
                    "the dc3 round trip to it is "
                    + ", ".join(f"{d} {rtt[d]:g} ms" for d in dcs) + ".",
                    regions_figure(reg, dcs))
    if ex := _points(results, "exhaust"):
        p = ex[0]
        page.heading("Exhausting the rights")
        page.figure("fig-exhaust",
                    f"{LABELS.get(p['spec']['config'], p['spec']['config'])}, "
                    f"{p['spec']['clients']} clients decrementing a counter that starts at "
                    f"{p['spec']['initial']:,}: latency of each operation over time "
                    "(cf. seed Figure 9). Spikes are decrements that waited for rights from "
                    "another DC; once every right is used, decrements fail locally and fast."
                    + (f" Every {p['series']['stride'][0]}th operation is drawn."
                       if p["series"]["stride"][0] > 1 else ""),
                    exhaust_figure(p["series"]))
    if vi := _points(results, "violations"):
        page.heading("Invariant preservation")
        page.figure("fig-violations",
                    f"Decrements in excess of the bound (from the final merged value) when "
                    f"clients only decrement a counter starting at {vi[0]['spec']['initial']:,} "
                    "(cf. seed Figure 9).", violations_figure(vi))
    faulted = [p for p in results.get("points", []) if p["spec"].get("fault")]
    if faulted:
        page.heading("Faults between data centres")
        page.para("Seed 004 §IV-E: during a partition both sides go on using the rights they "
                  "hold, and none can be transferred across it; the rights of a lost data "
                  "centre are unavailable until it is retired and they are recovered from its "
                  "final state (counters/recovery.py). Clients only decrement a counter "
                  "until every right is used.")
        for p in faulted:
            if p.get("series") is None:
                continue
            s = p["spec"]
            fid = f"fig-{s['fault']}-{s['config']}".replace("+", "-")
            page.figure(fid, f"{s['fault']}, {LABELS.get(s['config'], s['config'])}, "
                        f"{s['clients']} clients from {s['initial']:,}: successful decrements "
                        "per second in each data centre (solid) and refusals for want of rights "
                        "(dotted); the fault's window shaded.", fault_figure(p, dcs))
        page.table(["Fault", "Config", "DC", "Window (s)", "Done inside " + "/".join(dcs),
                    "Refused inside", "Transfers across", "Failed syncs", "Granted", "Used",
                    "Acked decrements", "Lost DC held", "Recovered", "Written off",
                    "Excess (final)", "Excess (acks)"], _fault_rows(faulted, dcs),
                   caption="Rights in counter units: granted = initial slack + increments; "
                   "used = decrements the stores recorded (equal to the acknowledged ones "
                   "when none was lost or invented)", numeric_from=4)
    rows = [_row(p, dcs) for p in results.get("points", [])]
    if rows:
        page.table(["Experiment", "Config", "Clients", "Counters", "Ops", "Failed",
                    "Throughput (ops/s)", "p50 (ms)", "p99 (ms)",
                    "p50 by region " + "/".join(dcs) + " (ms)", "Excess (final)",
                    "Seen below bound", "Drift"],
                   rows, caption="Every point (latency over all operations; excess = "
                   "decrements that took a counter below its bound; drift = final value minus "
                   "what the acknowledged operations imply)", numeric_from=2)
    return write_page(page, results, f"replicalab · counter bench · {results['title']}",
                      run_dir)

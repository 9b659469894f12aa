"""The HTML report of a load run: per-step throughput, errors and latency (response time
from the intended start vs service time from the send), the SLA answer and the cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from replicalab.report.page import Page, esc, num, pct, write_page
from replicalab.report.plots import _new


def _p(step: Mapping[str, Any], name: str, key: str) -> float:
    lat = step["latency"].get(name, {})
    return float(lat[key]) if lat.get("count") else float("nan")


def latency_figure(steps: Sequence[Mapping[str, Any]], sla_p99_ms: float | None) -> Figure:
    """Return p50/p99 response and service time (ms, log scale) against offered rate."""
    fig, ax = _new()
    rates = [s["rate_per_s"] for s in steps]
    order = sorted(range(len(steps)), key=lambda i: rates[i])
    xs = [rates[i] for i in order]
    for name, style in (("response/all", "-"), ("service/all", "--")):
        for key, color in (("p50_ms", "#1f77b4"), ("p99_ms", "#d62728")):
            ys = [_p(steps[i], name, key) for i in order]
            ax.plot(xs, ys, style, marker="o", color=color,
                    label=f"{name.split('/')[0]} {key.removesuffix('_ms')}")
    if sla_p99_ms is not None:
        ax.axhline(sla_p99_ms, color="#2ca02c", linestyle=":", label="SLA p99")
    ax.set_yscale("log")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("latency (ms)")
    ax.legend(fontsize=8)
    return fig


def throughput_figure(steps: Sequence[Mapping[str, Any]]) -> Figure:
    """Return throughput as % of offered load and error rate (%) against offered rate."""
    fig, ax = _new()
    order = sorted(range(len(steps)), key=lambda i: steps[i]["rate_per_s"])
    xs = [steps[i]["rate_per_s"] for i in order]
    ax.plot(xs, [steps[i]["throughput_pct"] for i in order], marker="o",
            label="throughput (% of offered)")
    ax.plot(xs, [100 * steps[i]["error_rate"] for i in order], marker="s", color="#d62728",
            label="error rate (%)")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("%")
    ax.legend(fontsize=8)
    return fig


def render_load_report(results: Mapping[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (self-contained) and PNG figures; return the HTML path."""
    page = Page()
    page.add(f'<h1>replicalab load <span class="sub">· {esc(results["mode"])} · '
             f'{esc(results["store"])}</span></h1>')
    if notes := results.get("notes"):
        page.add('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    cfg = results["config"]
    page.table(["Setting", "Value"], [
        ["arrivals", f"paced: {cfg['groups']} groups x {cfg['clients_per_group']} clients "
                     f"at {cfg['client_rate_per_s']:g}/s each" if cfg.get("groups")
         else cfg["arrivals"]], ["read ratio", cfg["read_ratio"]],
        ["keyspace", cfg["keyspace"]], ["max in flight (per worker)", cfg["max_in_flight"]],
        ["consistency", cfg["consistency"]], ["client", cfg["client"]],
        ["workers", cfg["workers"].get("workers")], ["seed", cfg["seed"]]],
        caption="Configuration")
    steps = results["steps"]
    if results.get("stopped"):
        page.para(results["stopped"])
    if sla := results.get("sla"):
        best = sla["best_rate_per_s"]
        page.para(f"SLA p99 < {sla['sla_p99_ms']:g} ms: " + (
            f"highest rate meeting it {best:g}/s" if best is not None
            else "no rate tried meets it") + ("" if sla["monotone"] else
                                              " (p99 was not monotone in the rate)"))
    page.table(
        ["Offered /s", "Throughput /s", "% of offered", "Errors", "Timeouts", "Busy",
         "Refused", "Unsent", "Resp p50 ms", "Resp p99 ms", "Serv p50 ms", "Serv p99 ms",
         "Failure"],
        [[num(s["rate_per_s"], 1), num(s["throughput_rps"], 1), num(s["throughput_pct"], 1),
          pct(s["error_rate"]), *(s["counts"]["errors"][k] for k in
                                  ("timeout", "busy", "refused", "unsent")),
          num(_p(s, "response/all", "p50_ms"), 2), num(_p(s, "response/all", "p99_ms"), 2),
          num(_p(s, "service/all", "p50_ms"), 2), num(_p(s, "service/all", "p99_ms"), 2),
          s.get("failure", "")] for s in steps],
        caption="Steps. Response time counts from each request's intended start (coordinated "
                "omission corrected); service time from its actual send.")
    if len(steps) > 1:
        page.figure("fig-load-latency", "Latency against offered rate.",
                    latency_figure(steps, sla["sla_p99_ms"] if sla else None))
        page.figure("fig-load-throughput", "Throughput and errors against offered rate.",
                    throughput_figure(steps))
    if c := results.get("cost"):
        page.table(["Cost", "Value"], [
            ["price table", c["prices"]],
            ["total", f"{c['total']:.6f} {c['currency']}"],
            ["per operation", "n/a" if c["per_operation"] is None
             else f"{c['per_operation']:.3e} {c['currency']}"],
            ["per hour at this rate", f"{c['per_hour']:.4f} {c['currency']}"]],
            caption="Cost of the successful requests")
    workers = [(k, w) for k, s in enumerate(steps) for w in s["workers"]]
    if workers and len(steps[0]["workers"]) > 1:
        page.table(["Step", "Worker", "Host", "Runtime", "wall − monotonic (ns)", "drift (ns)",
                    "OK"],
                   [[k, w["worker"], w["hostname"], w["runtime"],
                     w["clock"]["wall_minus_mono_ns"], w["clock"]["drift_ns"],
                     w["counts"]["ok"]] for k, w in workers], caption="Workers and clocks")
    return write_page(page, results, f"replicalab · load · {results['store']}", run_dir)

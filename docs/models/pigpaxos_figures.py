"""Figures and tables of docs/models/pigpaxos.md.

Run from the repository root:  .venv/bin/python docs/models/pigpaxos_figures.py
Writes docs/models/img/pigpaxos-lan.png and pigpaxos-scaling.png and prints the Markdown
tables quoted in the page (model seed 0, twin seed 1, 10 000 rounds per load; about a minute).

``--failure`` makes only the failed-relay-group figure, docs/models/img/pigpaxos-failure.png,
and prints its table (twin seed 1; about two minutes): the seed's "one relay group
experiencing a failure on every operation for 10 seconds".
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from matplotlib.figure import Figure

from replicalab.models import pigpaxos as pp
from replicalab.models.base import Curve
from replicalab.models.twins.pigpaxos import Timeline, simulate, timeline
from replicalab.report.model_plots import curves_figure

IMG = Path(__file__).parent / "img"
FRACTIONS = [0.02, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.96]
TWIN_FRACTIONS = [0.1, 0.3, 0.5, 0.7, 0.8, 0.9]
SEED, ROUNDS = 1, 10_000
SIZES = (5, 9, 15, 25, 35, 49, 75, 99)


def _save(fig: Figure, name: str) -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG / name, dpi=130)
    print(f"wrote {IMG / name}")


def _loads(cap: float, fractions: list[float]) -> list[float]:
    return [round(cap * f) for f in fractions]


def _table(model: Curve, twin: Curve) -> None:
    print("| load (req/s) | utilisation | model mean (ms) | twin mean (ms) | gap | "
          "model p99 (ms) | twin p99 (ms) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for m, t in zip(model.points, twin.points, strict=True):
        if m.latency_ms is None or t.latency_ms is None:
            print(f"| {m.offered_rps:,.0f} | {m.utilisation:.2f} | saturated | | | | |")
            continue
        gap = (m.latency_ms - t.latency_ms) / t.latency_ms
        print(f"| {m.offered_rps:,.0f} | {m.utilisation:.2f} | {m.latency_ms:.3f} | "
              f"{t.latency_ms:.3f} | {100 * gap:+.1f}% | {m.p99_ms:.2f} | {t.p99_ms:.2f} |")


def lan_figure() -> None:
    """PigPaxos 25 and 99 nodes (3 relay groups) against the Paxos baseline, with the twin."""
    curves = []
    for n in (25, 99):
        p = pp.PigPaxosParams(n=n)
        curves.append(pp.curve(p, _loads(pp.max_throughput_rps(p), FRACTIONS)))
    for n in (25, 99):
        cap = pp.paxos_max_throughput_rps(n)
        curves.append(pp.paxos_curve(n, _loads(cap, FRACTIONS)))
    p25 = pp.PigPaxosParams(n=25)
    twin = simulate(p25, _loads(pp.max_throughput_rps(p25), TWIN_FRACTIONS), SEED, ROUNDS)
    curves.append(twin)
    fig = curves_figure(curves, "PigPaxos (3 relay groups) vs Paxos, LAN, m_s = m_d = 0.01 ms")
    fig.axes[0].set_ylim(0, 6)  # Paxos' climb to saturation would flatten everything else
    _save(fig, "pigpaxos-lan.png")


def scaling_figure() -> None:
    """Maximum throughput vs cluster size: PigPaxos (3 relay groups) and Paxos."""
    rows = pp.scaling_table(list(range(5, 100, 2)))
    fig = Figure(figsize=(7.5, 4.2), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    ns = [r["n"] for r in rows]
    ax.plot(ns, [r["pigpaxos_rps"] for r in rows], marker="o", markersize=2.5,
            label="PigPaxos, 3 relay groups")
    ax.plot(ns, [r["paxos_rps"] for r in rows], marker="o", markersize=2.5, label="Paxos")
    ax.set_yscale("log")
    ax.set_xlabel("cluster size (nodes)")
    ax.set_ylabel("maximum throughput (requests/s)")
    ax.set_title("R_max = n_p / (busiest node's work per round)", fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    _save(fig, "pigpaxos-scaling.png")


def tables() -> None:
    """Print the tables of the page."""
    print("\n### Maximum throughput (requests/s)\n")
    print("| n | PigPaxos | Paxos | ratio | bottleneck |")
    print("|---:|---:|---:|---:|---|")
    for r in pp.scaling_table(SIZES):
        print(f"| {r['n']} | {r['pigpaxos_rps']:,.0f} | {r['paxos_rps']:,.0f} | "
              f"{r['ratio']:.2f} | {r['bottleneck']} |")
    for p in (pp.PigPaxosParams(n=25), pp.PigPaxosParams(n=99)):
        loads = _loads(pp.max_throughput_rps(p), TWIN_FRACTIONS)
        print(f"\n### {pp.describe(p)}: model vs twin (seed {SEED}, {ROUNDS} rounds)\n")
        _table(pp.curve(p, loads), simulate(p, loads, SEED, ROUNDS))
    print("\n### WAN aws5, one relay group per region (twin, 2 000 rounds)\n")
    print("| n | leader | model mean (ms) | twin mean (ms) | leader->region msgs/round | "
          "Paxos would send |")
    print("|---:|---|---:|---:|---:|---:|")
    for n, lead in ((5, "VA"), (15, "VA"), (25, "VA"), (25, "JP")):
        p = pp.PigPaxosParams(n=n, regions="aws5", leader=lead)
        lay = pp.layout(p)
        paxos = sum(g for r, g in lay.groups if r != lay.leader_region)
        m = pp.curve(p, [2000.0]).points[0]
        t = simulate(p, [2000.0], SEED, 2000).points[0]
        print(f"| {n} | {lead} | {m.latency_ms:.2f} | {t.latency_ms:.2f} | "
              f"{t.extra['cross_region_out_per_round']:.0f} | {paxos} |")
    print("\n### Stragglers: relays wait for half their members (n=49, 3 000 req/s)\n")
    base = pp.PigPaxosParams(n=49)
    for p in (base, replace(base, relay_wait_fraction=0.5)):
        m = pp.curve(p, [3000.0]).points[0]
        print(f"- relay_wait_fraction={p.relay_wait_fraction}: {m.latency_ms:.3f} ms "
              f"(p99 {m.p99_ms:.3f} ms)")


# The seed's failure experiment: 30 s at a fixed load, a relay group down from 10 to 20 s.
RUN_S, FAIL_FROM_S, FAIL_TO_S, BIN_S = 30.0, 10.0, 20.0, 0.5
FAILURE_LOAD_RPS = 5000.0  # 30 % of the healthy capacity (16,667 req/s)
FAILURES = [
    ("3 relay groups of 8, one whole group down (the seed's)",
     pp.PigPaxosParams(n=25, failed_group=0)),
    ("1 relay group of 24, 1 node down, relays wait for all 23 members",
     pp.PigPaxosParams(n=25, relay_groups=1, failed_group=0, failed_nodes=1)),
    ("1 relay group of 24, 1 node down, relays wait for half their members",
     pp.PigPaxosParams(n=25, relay_groups=1, relay_wait_fraction=0.5, failed_group=0,
                       failed_nodes=1)),
]


def _healthy(p: pp.PigPaxosParams) -> pp.PigPaxosParams:
    return replace(p, failed_group=None, failed_nodes=None)


def failure_figure() -> None:
    """Twin timelines of the failures (solid) with the model's means healthy and failed
    (dashed), latency above and commits per second below; prints the table of the page."""
    fig = Figure(figsize=(8.5, 6.2), layout="constrained", facecolor="white")
    lat_ax, tput_ax = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    rows = []
    for label, p in FAILURES:
        tl: Timeline = timeline(p, FAILURE_LOAD_RPS, RUN_S, FAIL_FROM_S, FAIL_TO_S, SEED, BIN_S)
        ok = pp.curve(_healthy(p), [FAILURE_LOAD_RPS]).points[0]
        bad = pp.curve(p, [FAILURE_LOAD_RPS]).points[0]
        (line,) = lat_ax.plot(tl.t_s, tl.mean_ms, linewidth=1.3, label=label)
        lat_ax.plot([0, FAIL_FROM_S, FAIL_FROM_S, FAIL_TO_S, FAIL_TO_S, RUN_S],
                    [ok.latency_ms, ok.latency_ms, bad.latency_ms, bad.latency_ms,
                     ok.latency_ms, ok.latency_ms], linestyle="--", linewidth=0.9,
                    color=line.get_color())
        tput_ax.plot(tl.t_s, [c / 1000 for c in tl.commits_rps], linewidth=1.1,
                     color=line.get_color())
        rows.append((label, ok, bad, tl))
    for ax in (lat_ax, tput_ax):
        ax.axvspan(FAIL_FROM_S, FAIL_TO_S, color="#d62728", alpha=0.07)
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.spines[["top", "right"]].set_visible(False)
    lat_ax.set_ylim(0, None)
    lat_ax.set_ylabel("mean latency (ms)")
    lat_ax.set_title(f"PigPaxos n=25 at {FAILURE_LOAD_RPS:,.0f} req/s, failure from "
                     f"{FAIL_FROM_S:g} to {FAIL_TO_S:g} s: twin (solid), model (dashed)",
                     fontsize=10)
    lat_ax.legend(fontsize=7, frameon=False)
    tput_ax.set_ylabel("commits (1000/s)\n(the same arrivals in all three)")
    tput_ax.set_xlabel("time (s)")
    tput_ax.set_ylim(0, 2 * FAILURE_LOAD_RPS / 1000)
    _save(fig, "pigpaxos-failure.png")
    print(f"\n### A failed relay group at {FAILURE_LOAD_RPS:,.0f} req/s (twin seed {SEED}, "
          f"{RUN_S:g} s, bins of {BIN_S:g} s, {BIN_S:g} s left out at each edge)\n")
    print("| failure | model healthy (ms) | twin healthy (ms) | model failed (ms) | "
          "twin failed (ms) | gap failed | model capacity failed (req/s) | re-routes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, ok, bad, tl in rows:
        inside, outside = tl.phase_mean_ms(True, BIN_S), tl.phase_mean_ms(False, BIN_S)
        gap = (bad.latency_ms - inside) / inside
        p = dict(FAILURES)[label]
        print(f"| {label} | {ok.latency_ms:.3f} | {outside:.3f} | {bad.latency_ms:.3f} | "
              f"{inside:.3f} | {100 * gap:+.1f}% | {pp.max_throughput_rps(p):,.0f} | "
              f"{tl.reroutes:,} |")


if __name__ == "__main__":
    if "--failure" in sys.argv[1:]:
        failure_figure()
    else:
        lan_figure()
        scaling_figure()
        tables()
        failure_figure()

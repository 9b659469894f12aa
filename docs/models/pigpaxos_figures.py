"""Figures and tables of docs/models/pigpaxos.md.

Run from the repository root:  .venv/bin/python docs/models/pigpaxos_figures.py
Writes docs/models/img/pigpaxos-lan.png and pigpaxos-scaling.png and prints the Markdown
tables quoted in the page (model seed 0, twin seed 1, 10 000 rounds per load; about a minute).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from matplotlib.figure import Figure

from replicalab.models import pigpaxos as pp
from replicalab.models.base import Curve
from replicalab.models.twins.pigpaxos import simulate
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


if __name__ == "__main__":
    lan_figure()
    scaling_figure()
    tables()

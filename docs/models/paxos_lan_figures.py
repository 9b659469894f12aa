"""Figures and tables of docs/models/quorum.md and docs/models/paxos-lan.md.

Run from the repository root:  .venv/bin/python docs/models/paxos_lan_figures.py
Writes docs/models/img/quorum-*.png and paxos-lan-*.png and prints the Markdown tables quoted
in the pages (queue simulation 200,000 rounds per load, seed 1; twin 20,000 rounds per load,
seed 1; about two minutes on 2 cores). ``--tables`` prints the tables only (seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

from matplotlib.figure import Figure

from replicalab.models import paxos_lan as lan
from replicalab.models import paxos_lan_queue as lanq
from replicalab.models.base import Curve
from replicalab.models.orderstats import NormalRtt, order_stat_mean_ms
from replicalab.models.twins.paxos_lan import simulate
from replicalab.report.model_plots import curves_figure

IMG = Path(__file__).parent / "img"
FRACTIONS = [0.05, 0.2, 0.35, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.96]
TWIN_FRACTIONS = [0.1, 0.25, 0.4, 0.55, 0.7, 0.75]
SEED, ROUNDS, TWIN_ROUNDS = 1, 200_000, 20_000
PART1 = {"mu_ms_ms": 0.01, "mu_md_ms": 0.01, "sigma_ms_ms": 0.002, "sigma_md_ms": 0.002}


def _save(fig: Figure, name: str) -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG / name, dpi=130)
    print(f"wrote {IMG / name}")


def _loads(p: lan.PaxosLanParams, fractions: list[float]) -> list[float]:
    return [round(lan.max_throughput_rps(p) * f) for f in fractions]


def part1_table() -> None:
    """Seed part 1 and 1.5: one synchronous client, network only."""
    print("| N | q | replies waited for | E[r_(q-1)] (ms) | latency (ms) | throughput (rounds/s) "
          "| vs N=3 |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    base = lan.throughput_one_client_rps(lan.PaxosLanParams(n=3, **PART1))
    for n in (3, 4, 5, 6, 7, 9, 35, 36):
        p = lan.PaxosLanParams(n=n, **PART1)
        x = lan.throughput_one_client_rps(p)
        print(f"| {n} | {p.quorum} | {p.needed} of {p.contacted} | {lan.quorum_reply_ms(p):.4f} "
              f"| {lan.network_only_latency_ms(p):.4f} | {x:,.1f} | {100 * (x / base - 1):+.2f}% |")


def part2_table() -> None:
    """Seed part 2: maximum throughput and the 3 -> 5 degradation with queues."""
    p3, p5 = lan.PaxosLanParams(n=3), lan.PaxosLanParams(n=5)
    print("| measure | N=3 | N=5 | 3 -> 5 |")
    print("|---|---:|---:|---:|")
    rows = [("max throughput (rounds/s)", lan.max_throughput_rps),
            ("one client, network only (rounds/s)", lan.throughput_one_client_rps)]
    for c in (1, 4, 8, 16, 64):
        rows.append((f"{c} closed-loop clients (rounds/s)",
                     lambda p, c=c: lan.closed_loop_throughput_rps(p, c)))
    for name, fn in rows:
        a, b = fn(p3), fn(p5)
        print(f"| {name} | {a:,.0f} | {b:,.0f} | {100 * (1 - b / a):.1f}% loss |")


def fpaxos_table() -> None:
    cases = [lan.PaxosLanParams(n=7), lan.PaxosLanParams(n=9),
             lan.PaxosLanParams(n=9, q2=3, talk_to="all"),
             lan.PaxosLanParams(n=9, q2=3, talk_to="quorum")]
    top = lan.max_throughput_rps(cases[0])
    print("| configuration | max throughput (rounds/s) | latency at 10 / 25 / 50 / 70 % of "
          "Paxos-7 max (ms, seed formula) | same, refined |")
    print("|---|---:|---|---|")
    for p in cases:
        lat = [lan.latency_ms(p, f * top) for f in (0.1, 0.25, 0.5, 0.7)]
        ref = [lan.latency_ms(p, f * top, refined=True) for f in (0.1, 0.25, 0.5, 0.7)]
        print(f"| {lan.label(p)} | {lan.max_throughput_rps(p):,.0f} | "
              + " / ".join(f"{v:.3f}" for v in lat) + " | "
              + " / ".join(f"{v:.3f}" for v in ref) + " |")


def validation_table() -> None:
    print("| N | load (% of max) | seed formula (ms) | refined (ms) | queue sim (ms) | "
          "twin (ms) | seed vs twin | refined vs twin |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (3, 5, 7, 9):
        p = lan.PaxosLanParams(n=n)
        loads = _loads(p, TWIN_FRACTIONS)
        seed, ref = lan.curve(p, loads), lan.curve(p, loads, refined=True)
        tw = simulate(p, loads, SEED, TWIN_ROUNDS)
        for f, x, s, r, t in zip(TWIN_FRACTIONS, loads, seed.points, ref.points, tw.points,
                                 strict=True):
            q = lanq.simulate_queue(p, x, ROUNDS, SEED)
            assert s.latency_ms and r.latency_ms and t.latency_ms and q.latency_ms
            print(f"| {n} | {100 * f:.0f} | {s.latency_ms:.3f} | {r.latency_ms:.3f} | "
                  f"{q.latency_ms:.3f} | {t.latency_ms:.3f} | "
                  f"{100 * (s.latency_ms / t.latency_ms - 1):+.1f}% | "
                  f"{100 * (r.latency_ms / t.latency_ms - 1):+.1f}% |")


def quorum_figure() -> None:
    """Part 1.5: the quorum reply's mean RTT vs cluster size, even and odd."""
    fig = Figure(figsize=(7.5, 4.2), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.spines[["top", "right"]].set_visible(False)
    d = NormalRtt(0.447, (0.0476 ** 2 + 2 * 0.002 ** 2) ** 0.5)
    for parity, colour in ((0, "#c0392b"), (1, "#2471a3")):
        ns = [n for n in range(3, 41) if n % 2 == parity]
        ys = [order_stat_mean_ms(d, n // 2, n - 1) for n in ns]
        ax.plot(ns, ys, "o-", color=colour, markersize=3.5, linewidth=1.2,
                label=("even" if parity == 0 else "odd") + " N")
    ax.axhline(d.mean_ms, color="grey", linestyle=":", linewidth=1, label="mean reply RTT")
    ax.set_xlabel("cluster size N")
    ax.set_ylabel("mean RTT of the quorum reply (ms)")
    ax.set_title("(q-1)-th fastest of N-1 replies, r ~ N(0.447, 0.0477²) ms", fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    _save(fig, "quorum-order-statistic.png")


def lan_figures() -> None:
    sizes = [lan.PaxosLanParams(n=n) for n in (3, 5, 7, 9)]
    _save(curves_figure([lan.curve(p, _loads(p, FRACTIONS)) for p in sizes],
                        "Seed formula (Marchal G/G/1), one pipeline, default costs"),
          "paxos-lan-model.png")
    sims = [lanq.queue_curve(p, _loads(p, FRACTIONS), ROUNDS, SEED) for p in sizes]
    _save(curves_figure(sims, "Message-level queue simulation, 200,000 rounds per load"),
          "paxos-lan-queue-sim.png")
    spread: list[Curve] = []
    for f in (0.0, 0.5, 1.0, 2.0):
        p = lan.PaxosLanParams(n=5, sigma_r_factor=f)
        c = lanq.queue_curve(p, _loads(p, FRACTIONS), ROUNDS, SEED)
        spread.append(Curve(f"N=5, sigma_r = {f:g} mu_r", c.points, c.max_throughput_rps))
    _save(curves_figure(spread, "Queue simulation, N=5, inter-round spread"),
          "paxos-lan-sigma-r.png")
    fp = [lan.PaxosLanParams(n=7), lan.PaxosLanParams(n=9),
          lan.PaxosLanParams(n=9, q2=3, talk_to="all"),
          lan.PaxosLanParams(n=9, q2=3, talk_to="quorum")]
    _save(curves_figure([lan.curve(p, _loads(p, FRACTIONS), refined=True) for p in fp],
                        "FPaxos N=9 |q2|=3 vs Paxos 7 and 9 (refined model)"),
          "paxos-lan-fpaxos.png")
    val: list[Curve] = []
    for n in (5, 9):
        p = lan.PaxosLanParams(n=n)
        loads = _loads(p, FRACTIONS[:-3])
        val += [lan.curve(p, loads), lan.curve(p, loads, refined=True),
                simulate(p, loads, SEED, TWIN_ROUNDS)]
    _save(curves_figure(val, "Seed formula and refined model vs the twin, N=5 and N=9"),
          "paxos-lan-validation.png")


def main() -> None:
    part1_table()
    print()
    part2_table()
    print()
    fpaxos_table()
    print()
    if "--tables" in sys.argv[1:]:
        return
    validation_table()
    quorum_figure()
    lan_figures()


if __name__ == "__main__":
    main()

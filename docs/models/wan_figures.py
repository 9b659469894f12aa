"""Figures and tables of docs/models/{paxos-wan,epaxos,wpaxos}.md.

Run from the repository root:  .venv/bin/python docs/models/wan_figures.py
Writes docs/models/img/*.png and prints the Markdown tables quoted in the pages (model and
discrete-event twin, seed 1; about half a minute).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from matplotlib.figure import Figure

from replicalab.models import epaxos, paxos_wan, wpaxos
from replicalab.models.base import Curve, CurvePoint
from replicalab.models.epaxos import EPaxosParams
from replicalab.models.paxos_wan import WanParams
from replicalab.models.twins.wan import simulate_epaxos, simulate_paxos_wan, simulate_wpaxos
from replicalab.models.wpaxos import WPaxosParams
from replicalab.report.model_plots import curves_figure

IMG = Path(__file__).parent / "img"
FRACTIONS = [0.02, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.96, 0.98, 0.995]
TWIN_FRACTIONS = [0.1, 0.5, 0.8, 0.9]
SEED, ROUNDS = 1, 10_000


def _save(fig: Figure, name: str) -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG / name, dpi=130)
    print(f"wrote {IMG / name}")


def _per_region(c: Curve, shares: tuple[float, ...], regions: tuple[str, ...],
                caps: dict[str, float] | None = None, per_node_x: bool = False) -> list[Curve]:
    """One curve per region from the ``lat_<region>_ms`` extras (x: aggregate or node load)."""
    out = []
    for s, r in zip(shares, regions, strict=True):
        pts = [CurvePoint(p.offered_rps * (s if per_node_x else 1.0),
                          p.extra.get(f"lat_{r}_ms"), p.utilisation, p.saturated)
               for p in c.points]
        cap = (caps or {}).get(r, c.max_throughput_rps * (s if per_node_x else 1.0))
        out.append(Curve(r, pts, cap))
    return out


def _table(model: Curve, twin: Curve) -> None:
    print("| load (req/s) | utilisation | model mean (ms) | twin mean (ms) | twin p99 (ms) |")
    print("|---:|---:|---:|---:|---:|")
    for m, t in zip(model.points, twin.points, strict=True):
        print(f"| {m.offered_rps:,.0f} | {m.utilisation:.2f} | {m.latency_ms:.2f} | "
              f"{t.latency_ms:.2f} | {t.p99_ms:.1f} |")


def paxos() -> None:
    """Seed Fig. 2: latency vs throughput for each leader region."""
    base = WanParams()
    cap = paxos_wan.max_throughput_rps(base)
    loads = [cap * f for f in FRACTIONS]
    curves = [replace(paxos_wan.curve(base.with_leader(r), loads), label=f"leader {r}")
              for r in base.rs.regions]
    twins = []
    print("\n## Paxos WAN: leader table (ms at low load) and model vs twin\n")
    print("| leader | " + " | ".join(f"clients {r}" for r in base.rs.regions) + " | mean |")
    print("|---|" + "---:|" * (len(base.rs.regions) + 1))
    for r in base.rs.regions:
        per = paxos_wan.latency_by_region_ms(base.with_leader(r), 0.0) or {}
        mean = paxos_wan.leader_table(base)[r]
        print(f"| {r} | " + " | ".join(f"{per[c]:.1f}" for c in base.rs.regions)
              + f" | {mean:.1f} |")
    print(f"\nmax throughput {cap:,.0f} req/s; best leader {paxos_wan.best_leader(base)}\n")
    for r in base.rs.regions:
        p = base.with_leader(r)
        tl = [cap * f for f in TWIN_FRACTIONS]
        tw = simulate_paxos_wan(p, tl, seed=SEED, rounds=ROUNDS)
        print(f"\nleader {r} (twin capacity {tw.max_throughput_rps:,.0f} req/s)\n")
        _table(paxos_wan.curve(p, tl), tw)
        if r in ("CA", "JP"):
            twins.append(Curve(f"leader {r} (twin)", tw.points, tw.max_throughput_rps))
    _save(curves_figure([*curves, *twins], "Paxos over WAN (aws5) by leader region: model, "
                        "and the twin for CA and JP"), "paxos-wan.png")


def epaxos_figs() -> None:
    """Seed Figs. 3-5: per-node curves at 2 % and 50 % conflict; capacity vs conflict."""
    print("\n## EPaxos\n")
    for c, name in ((0.02, "epaxos-2.png"), (0.5, "epaxos-50.png")):
        p = EPaxosParams(conflict=c)
        cap = epaxos.max_throughput_rps(p)
        curve = epaxos.curve(p, [cap * f for f in FRACTIONS])
        w = p.wan
        nodes = _per_region(curve, w.shares, w.rs.regions, epaxos.node_max_throughput_rps(p),
                            per_node_x=True)
        _save(curves_figure(nodes, f"EPaxos, {c:.0%} conflict: latency vs each node's "
                            "own throughput (model)"), name)
        tl = [cap * f for f in TWIN_FRACTIONS]
        tw = simulate_epaxos(p, tl, seed=SEED, rounds=ROUNDS)
        print(f"\nconflict {c:.0%}: aggregate max {cap:,.0f} req/s "
              f"(twin {tw.max_throughput_rps:,.0f}), per node {cap / w.n:,.0f}\n")
        _table(epaxos.curve(p, tl), tw)
    conflicts = [i / 20 for i in range(21)]
    rows = epaxos.max_throughput_vs_conflict(EPaxosParams(), conflicts)
    paxos_cap = paxos_wan.max_throughput_rps(WanParams())
    fig = Figure(figsize=(7.5, 4.2), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.spines[["top", "right"]].set_visible(False)
    ax.plot([c * 100 for c, _ in rows], [v for _, v in rows], marker="o", markersize=3,
            label="EPaxos aggregate (5 nodes)")
    ax.axhline(paxos_cap, color="grey", linestyle="--", label="Multi-Paxos (any leader)")
    ax.set_xlabel("conflict (%)")
    ax.set_ylabel("maximum throughput (requests/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("EPaxos aggregate maximum throughput vs conflict (model)", fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    _save(fig, "epaxos-conflict.png")
    print("\n| conflict | EPaxos max (req/s) | x Paxos |\n|---:|---:|---:|")
    for c, v in epaxos.max_throughput_vs_conflict(EPaxosParams(),
                                                  [0.0, 0.02, 0.1, 0.25, 0.5, 0.75, 1.0]):
        print(f"| {c:.0%} | {v:,.0f} | {v / paxos_cap:.2f} |")


def wpaxos_figs() -> None:
    """Seed Figs. 6-7: per-zone latency vs aggregate throughput, 70 %/1 % and 50 %/3 %."""
    print("\n## WPaxos\n")
    for loc, steal, name in ((0.7, 0.01, "wpaxos-70-1.png"), (0.5, 0.03, "wpaxos-50-3.png")):
        p = WPaxosParams(locality=loc, steal=steal)
        cap = wpaxos.max_throughput_rps(p)
        curve = wpaxos.curve(p, [cap * f for f in FRACTIONS])
        zones = _per_region(curve, p.wan.shares, p.wan.rs.regions)
        mean = Curve("mean", curve.points, cap)
        _save(curves_figure([*zones, mean], f"WPaxos, 15 nodes, fz=0, {loc:.0%} locality, "
                            f"{steal:.0%} stealing: latency per zone vs aggregate throughput"),
              name)
        tl = [cap * f for f in TWIN_FRACTIONS]
        tw = simulate_wpaxos(p, tl, seed=SEED, rounds=ROUNDS)
        print(f"\nlocality {loc:.0%}, steal {steal:.0%}: aggregate max {cap:,.0f} req/s "
              f"(twin {tw.max_throughput_rps:,.0f})\n")
        _table(wpaxos.curve(p, tl), tw)
    for kw in ({"fz": 1}, {"leaders_per_zone": 1}):
        p = WPaxosParams(**kw)
        print(f"\n{kw}: aggregate max {wpaxos.max_throughput_rps(p):,.0f} req/s, mean latency "
              f"at low load {wpaxos.curve(p, [100]).points[0].latency_ms:.1f} ms")


if __name__ == "__main__":
    paxos()
    epaxos_figs()
    wpaxos_figs()

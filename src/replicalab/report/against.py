"""The page of ``model paxos-wan --against``: model, twin and real store side by side.

:func:`against_results` turns the fit, the rows and the rankings into the results document
(tables as data, the verdicts as notes); :func:`render_against_report` writes the HTML page
with a figure per leader (bars: model, twin, measured mean per client region at the lowest
offered rate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from replicalab.models.paxos_wan_fit import Ranking, Row, StoreFit
from replicalab.report.model_page import render_model_report
from replicalab.workloads import pbs_real

__all__ = ["TOLERANCE", "against_figure", "against_results", "render_against_report",
           "verdicts"]

TOLERANCE = 0.15
"""Largest |measured / model - 1| of a client region's mean latency called agreement."""


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def _dev(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}%"


def verdicts(rows: Sequence[Row], ranks: Sequence[Ranking], tolerance: float = TOLERANCE
             ) -> dict[str, Any]:
    """Return {"within": bool, "worst": row of the largest |deviation| (or None),
    "ranking_agrees": bool, "missing": rows without a measurement}: the run's two checks."""
    devs = [r for r in rows if r.deviation is not None]
    worst = max(devs, key=lambda r: abs(r.deviation or 0.0), default=None)
    missing = [r for r in rows if r.real_ms is None]
    return {"within": bool(devs) and not missing and all(
                abs(r.deviation or 0.0) <= tolerance for r in devs),
            "worst": worst, "missing": missing,
            "ranking_agrees": bool(ranks) and all(k.agree for k in ranks)}


def _row_json(r: Row) -> dict[str, Any]:
    return {"leader": r.leader, "offered_rps": r.offered_rps, "region": r.region,
            "model_ms": r.model_ms, "twin_ms": r.twin_ms, "real_mean_ms": r.real_ms,
            "real_p50_ms": r.real_p50_ms, "real_p99_ms": r.real_p99_ms, "writes": r.samples,
            "deviation": r.deviation}


def against_results(kind: str, regions: str, params: Mapping[str, Any], fit: StoreFit,
                    fsync_ms: float, rows: Sequence[Row], ranks: Sequence[Ranking],
                    run_info: Mapping[str, Any], tolerance: float = TOLERANCE
                    ) -> dict[str, Any]:
    """Return the results document (JSON-ready): parameters, fit, rows, rankings, verdicts
    and the tables the CLI prints and the page shows."""
    v = verdicts(rows, ranks, tolerance)
    worst: Row | None = v["worst"]
    notes = [
        f"Measured on a real {kind} cluster, one member per region of {regions}, peer links "
        "through Toxiproxy with the region matrix's one-way delays; a client in region R "
        "writes to R's member over loopback. The model and twin use the fitted store delays "
        f"persist_ms = {fit.persist_ms:.2f} and forward_ms = {fit.forward_ms:.2f}, from the "
        "calibration (the same cluster with every link's delay removed).",
        (f"Within {100 * tolerance:g} % of the model: "
         + ("yes" if v["within"] else "NO")
         + ("" if worst is None else
            f" (largest deviation {_dev(worst.deviation)}: leader {worst.leader}, clients in "
            f"{worst.region}, {worst.offered_rps:g} writes/s)")
         + (f"; {len(v['missing'])} region(s) without an answered write" if v["missing"]
            else "")),
    ]
    for rate in sorted({r.offered_rps for r in rows}):
        devs = [r for r in rows if r.offered_rps == rate and r.deviation is not None]
        if devs:
            w = max(devs, key=lambda r: abs(r.deviation or 0.0))
            notes.append(f"At {rate:g} writes/s: largest deviation {_dev(w.deviation)} "
                         f"(leader {w.leader}, clients in {w.region}); "
                         + ("within" if abs(w.deviation or 0.0) <= tolerance else "NOT within")
                         + f" {100 * tolerance:g} %")
    for k in ranks:
        notes.append(f"Best leader at {k.offered_rps:g} writes/s: model {k.model_best}, "
                     f"measured {k.real_best or 'n/a'} — "
                     + ("they agree" if k.agree else "they DIFFER"))
    fit_rows = [
        ["fsync of 4 KiB in the data directory (median, ms)", f"{fsync_ms:.2f}"],
        [f"calibration: client at the leader ({fit.leader}), mean ms",
         f"{fit.leader_client_ms:.2f}"],
        ["calibration: clients at followers, mean ms", _ms(fit.follower_client_ms)],
        ["the model at zero WAN delay: client at the leader, ms",
         f"{fit.model_leader_client_ms:.2f}"],
        ["the model at zero WAN delay: clients at followers, ms",
         _ms(fit.model_follower_client_ms)],
        ["fitted persist_ms (every write)", f"{fit.persist_ms:.2f}"],
        ["fitted forward_ms (clients outside the leader's region)", f"{fit.forward_ms:.2f}"],
        ["calibration writes", str(fit.samples)],
    ]
    tables: list[dict[str, Any]] = [{
        "caption": "The parameter fit (calibration: links without delay)",
        "header": ["quantity", "value"], "rows": fit_rows}]
    for leader in dict.fromkeys(r.leader for r in rows):
        tables.append({
            "caption": f"Leader {leader}: mean write latency per client region (ms)",
            "header": ["writes/s", "client region", "model", "twin", "measured mean",
                       "measured p50", "measured p99", "writes", "measured vs model"],
            "rows": [[f"{r.offered_rps:g}", r.region, _ms(r.model_ms), _ms(r.twin_ms),
                      _ms(r.real_ms), _ms(r.real_p50_ms), _ms(r.real_p99_ms), str(r.samples),
                      _dev(r.deviation)] for r in rows if r.leader == leader]})
    rank_rows = []
    for k in ranks:
        for leader, m in k.model_ms.items():
            real = k.real_ms.get(leader)
            marks = [x for x, best in (("model best", k.model_best),
                                       ("measured best", k.real_best)) if best == leader]
            rank_rows.append([f"{k.offered_rps:g}", leader, f"{m:.1f}", _ms(real),
                              _dev(None if real is None else real / m - 1),
                              ", ".join(marks)])
    tables.append({"caption": "Leaders ranked: mean over client regions (weighted by share)",
                   "header": ["writes/s", "leader", "model (ms)", "measured (ms)",
                              "measured vs model", "best"], "rows": rank_rows})
    return {
        "schema_version": 1, "model": "paxos-wan", "against": kind,
        "title": f"Paxos WAN model vs real {kind} on {regions}",
        "params": dict(params), "notes": notes, "tables": tables,
        "fit": {"persist_ms": fit.persist_ms, "forward_ms": fit.forward_ms,
                "leader": fit.leader, "leader_client_ms": fit.leader_client_ms,
                "follower_client_ms": fit.follower_client_ms,
                "model_leader_client_ms": fit.model_leader_client_ms,
                "model_follower_client_ms": fit.model_follower_client_ms,
                "samples": fit.samples, "fsync_ms": fsync_ms},
        "rows": [_row_json(r) for r in rows],
        "rankings": [{"offered_rps": k.offered_rps, "model_ms": k.model_ms,
                      "real_ms": k.real_ms, "model_best": k.model_best,
                      "real_best": k.real_best, "agree": k.agree} for k in ranks],
        "tolerance": tolerance, "within_tolerance": v["within"],
        "worst_deviation": None if worst is None else worst.deviation,
        "ranking_agrees": v["ranking_agrees"], "run": dict(run_info),
    }


def against_figure(rows: Sequence[Row]) -> Figure:
    """Return one panel per leader: model, twin and measured mean latency (ms) per client
    region at the lowest offered rate of the run."""
    low = min(r.offered_rps for r in rows)
    leaders = list(dict.fromkeys(r.leader for r in rows))
    fig = Figure(figsize=(7.5, 2.6 * len(leaders)), layout="constrained", facecolor="white")
    axes = fig.subplots(len(leaders), 1, squeeze=False)[:, 0]
    for ax, leader in zip(axes, leaders, strict=True):
        mine = [r for r in rows if r.leader == leader and r.offered_rps == low]
        xs = range(len(mine))
        for k, (label, get) in enumerate((("model", lambda r: r.model_ms),
                                          ("twin", lambda r: r.twin_ms),
                                          ("measured", lambda r: r.real_ms))):
            ax.bar([x + (k - 1) * 0.27 for x in xs], [get(r) or 0.0 for r in mine],
                   width=0.27, label=label)
        ax.set_xticks(list(xs), [r.region for r in mine])
        ax.set_ylabel("mean write latency (ms)")
        ax.set_title(f"leader {leader}, {low:g} writes/s", fontsize=10)
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(True, axis="y", color="#e5e5e5", linewidth=0.8)
        ax.set_axisbelow(True)
    axes[0].legend(frameon=False, fontsize=8, ncols=3)
    return fig


def render_against_report(results: Mapping[str, Any], rows: Sequence[Row],
                          run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (and its PNG) for an --against run; return its path."""
    figures = [("fig-against", "Mean write latency per client region: the model and twin "
                "with the fitted store delays beside the real store, at the lowest offered "
                "rate.", against_figure(rows))] if rows else []
    return render_model_report(results, run_dir, figures=figures, kind="comparison")


# -- PBS against a real Cassandra (issue 24, the whole curve: issue 28) -----------------


def pbs_against_results(n: int, regions: str, writer: str, reader: str, duration_s: float,
                        trials: int, seed: int, jitter_ms: float, used: Any,
                        cal: pbs_real.Calibration, curves: list[pbs_real.CurveComparison],
                        label: str, tolerance: float) -> dict[str, Any]:
    """Return the results.json of ``model pbs --against``: every sampled t per pair, the
    largest gap over all curves and where, the verdict judged on the whole curves."""
    rows_out = [{"r": g.r, "w": g.w, **x} for g in curves for x in g.points]
    judged = [g for g in curves if g.largest_gap is not None]
    worst = max(judged, key=lambda g: g.largest_gap or 0.0, default=None)
    has_power = any(g.has_power for g in curves)
    legs = {f"n{i} ({c_region})": {"write_rt_median_ms": round(float(np.median(wr)), 3),
                                   "read_rt_median_ms": round(float(np.median(rr)), 3)}
            for i, (c_region, wr, rr) in enumerate(zip(used, cal.write_rt_ms, cal.read_rt_ms,
                                                       strict=True))}
    return {
        "schema_version": 2, "model": "pbs", "title": label,
        "params": {"n": n, "regions": regions, "writer_region": writer,
                   "reader_region": reader, "duration_s_per_pair": duration_s,
                   "trials": trials, "seed": seed, "jitter_ms": jitter_ms,
                   "write_overhead_ms": cal.write_overhead_ms,
                   "read_overhead_ms": cal.read_overhead_ms, "hop_ms": round(cal.hop_ms, 4)},
        "legs": legs, "points": rows_out, "curves": [g.to_json() for g in curves],
        "round_trips_ms": {"write": [list(x) for x in cal.write_rt_ms],
                           "read": [list(x) for x in cal.read_rt_ms]},
        "tolerance": tolerance,
        "largest_gap": None if worst is None else worst.largest_gap,
        "largest_gap_at": None if worst is None else {"r": worst.r, "w": worst.w,
                                                      "t_ms": worst.largest_gap_t_ms},
        "max_abs_difference": None if worst is None else worst.largest_gap,
        "has_power": has_power,
        "within_tolerance": (has_power and bool(judged)
                             and all(g.within_tolerance for g in judged)),
        "tables": [{"caption": "P(consistent read) t ms after the write was acknowledged, at "
                               "every sampled t: predicted from the measured legs, measured "
                               "on the cluster (reads started in [t, t + window))",
                    "header": ["R", "W", "t (ms)", "window (ms)", "reads' mean t (ms)",
                               "predicted", "measured", "reads", "difference"],
                    "rows": [[x["r"], x["w"], f"{x['t_ms']:g}", f"{x['width_ms']:g}",
                              f"{x['t_mean_ms']:.2f}",
                              f"{100 * x['predicted']:.1f}%",
                              "n/a" if x["measured"] is None else f"{100 * x['measured']:.1f}%",
                              x["reads"], "not judged" if x["difference"] is None
                              else f"{100 * x['difference']:.1f}"] for x in rows_out]},
                   {"caption": "Round trips to each replica measured on the cluster (median, "
                               "ms, the client's own share subtracted)",
                    "header": ["replica", "from the writer's coordinator",
                               "from the reader's coordinator"],
                    "rows": [[k, f"{v['write_rt_median_ms']:.2f}",
                              f"{v['read_rt_median_ms']:.2f}"] for k, v in legs.items()]}],
        "notes": [f"writer at {writer}, reader at {reader}; legs measured from {n} "
                  "calibration keyspaces with one replica each; replication links jitter "
                  f"+-{jitter_ms:g} ms; the model is read {cal.hop_ms:.2f} ms later than t "
                  "(the clients' own hops, half their measured shares)"],
    }

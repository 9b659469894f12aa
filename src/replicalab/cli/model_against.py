"""``replicalab model paxos-wan --against etcd``: the model, its twin and a real store;
``replicalab model pbs --against cassandra``: PBS from a real cluster's legs beside its
measured staleness.

Thin: checks the options, starts the cluster and measures (workloads/consensus_latency.py),
fits and compares (models/paxos_wan_fit.py), writes the page (report/against.py), prints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.cli.errors import fail
from replicalab.cli.model_params import build, describe, load_toml, parse_compare, parse_sets
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.models import paxos_wan_fit as fitting
from replicalab.models import pbs as pbs_model
from replicalab.models.paxos_wan import WanParams, best_leader
from replicalab.models.registry import ModelSpec
from replicalab.regions import REGION_SETS, region_set
from replicalab.report.against import (
    TOLERANCE,
    against_results,
    pbs_against_results,
    render_against_report,
)
from replicalab.report.model_page import render_model_report
from replicalab.report.model_plots import visibility_figure
from replicalab.workloads import pbs_real
from replicalab.workloads.consensus_latency import real_cluster, run_writes, store_kinds

DEFAULT_RATES_RPS = (10.0, 20.0, 40.0)
"""Offered write rates (writes/s over all client regions) when --loads is not given: low
load, and two rates below where the emulation saturates a shared 2-core machine (an emulated
write of 5 members costs ~16 ms of CPU: members, proxies and client; see the docs)."""

START_WEIGHT_S = 8.0  # rough seconds to start a cluster, for the progress bar
MOVE_WEIGHT_S = 2.0  # rough seconds to move the leader


def _rates(loads: str | None) -> list[float]:
    if not loads:
        return list(DEFAULT_RATES_RPS)
    try:
        values = [float(x) for x in loads.split(",")]
    except ValueError:
        raise ValueError(f"--loads {loads!r}: give comma-separated writes/s, e.g. "
                         "20,60,150") from None
    if any(not 0 < v <= 5000 for v in values):
        raise ValueError(f"--loads {loads!r}: every offered rate must be between 0 and 5000 "
                         "writes/s against a real store")
    return values


def check(model: str, against: str, configs: list[tuple[str, Any]],
          compare_key: str | None) -> tuple[WanParams, list[str]]:
    """Return (the base params, the leaders to place) or ValueError naming the problem."""
    if model != "paxos-wan":
        raise ValueError(f"--against is available for the paxos-wan model (one leader, one "
                         f"member per region), not {model}")
    if against not in store_kinds():
        raise ValueError(f"--against {against!r}: use one of {', '.join(store_kinds())}")
    if compare_key not in (None, "leader"):
        raise ValueError(f"--compare {compare_key}=...: with --against only the leader can "
                         "vary (--compare leader=VA,CA,JP); the cluster is the same for all")
    p: WanParams = configs[0][1]
    if p.rtt_sd_ms is not None:
        raise ValueError("rtt_sd_ms: the real links carry the region set's own deviation; "
                         "leave rtt_sd_ms unset with --against")
    rs = p.rs
    if REGION_SETS.get(rs.name) != rs:
        raise ValueError(f"regions: --against starts one member per region of a named region "
                         f"set ({', '.join(n for n in REGION_SETS if n != 'lan')}), not a "
                         "custom table")
    if len(rs.regions) < 3:
        raise ValueError(f"regions={rs.name}: --against needs at least 3 regions (a quorum "
                         "that can lose a member)")
    if p.persist_ms or p.forward_ms:
        raise ValueError("persist_ms and forward_ms are fitted by --against from its "
                         "calibration; leave them unset")
    leaders = list(dict.fromkeys(q.rs.regions[q.leader_index] for _, q in configs))
    return p, leaders


def _cpu_table(points: list[Any]) -> dict[str, Any]:
    rows = []
    for rate in dict.fromkeys(x.offered_rps for x in points):
        mine = [x for x in points if x.offered_rps == rate]
        per = {k: sum(x.cpu_ms_per_write.get(k, 0.0) for x in mine) / len(mine)
               for k in ("store", "links", "client")}
        total = sum(per.values())
        rows.append([f"{rate:g}", *(f"{v:.2f}" for v in per.values()), f"{total:.2f}",
                     f"{total * rate / 1000:.2f}"])
    return {"caption": "CPU per answered write (ms, mean over leaders): members, emulated "
                       "links (Toxiproxy, peer demultiplexers), client; and cores busy",
            "header": ["writes/s", "store", "links", "client", "total", "cores"],
            "rows": rows}


def run_against(spec: ModelSpec, against: str | None, duration: str | None,
                params: Path | None, sets: list[str], compare: str | None, loads: str | None,
                rounds: int, seed: int, out: Path, as_json: bool) -> None:
    """Run the comparison of ``model <spec> --against``, print it and write its report; exit
    1 if a client region's mean is not within the tolerance of the model or the best leaders
    differ, 2 on bad input (``duration``: the --duration text, default 10 s)."""
    try:
        if against is None:
            raise ValueError("--duration applies to --against only")
        duration_s = parse_duration_s(duration or "10s", "--duration")
        cmp = parse_compare(spec.params_cls, compare)
        base = load_toml(params)
        given = parse_sets(spec.params_cls, sets)
        configs = [("", build(spec.params_cls, base, {**given, **extra}, spec.name))
                   for extra in ([{cmp[0]: v} for v in cmp[1]] if cmp else [{}])]
        p, leaders = check(spec.name, against, configs, cmp[0] if cmp else None)
        rates = _rates(loads)
        if rounds < 100:
            raise ValueError(f"--rounds {rounds} must be at least 100")
        make_run_dir(out, "model", f"paxos-wan-against-{against}").rmdir()  # writable?
    except ValueError as err:
        fail(str(err))
    plan = [("starting the cluster", START_WEIGHT_S), ("calibration", duration_s)]
    plan += [(f"leader {r}", MOVE_WEIGHT_S + duration_s * len(rates)) for r in leaders]
    total = sum(w for _, w in plan)
    starts, acc = {}, 0.0
    for name, w in plan:
        starts[name] = (acc / total, w / total)
        acc += w
    label = f"paxos-wan against {against} on {p.rs.name}"
    try:
        with progress_bar(label, enabled=not as_json) as tick:
            tick(0.0, f"starting {len(p.rs.regions)} {against} members")

            def on_phase(phase: str, fraction: float, what: str) -> None:
                lo, share = starts[phase]
                tick(lo + share * min(max(fraction, 0.0), 1.0), f"{phase}: {what}")

            with real_cluster(against, p.rs.name) as c:
                run = run_writes(c, leaders, rates, duration_s, p.shares, seed,
                                 on_phase=on_phase)
            tick(1.0, f"the model and its twin ({rounds:,} requests per point)")
            fit = fitting.fit(p, run.calibration.leader, run.calibration.latencies_ms)
            pf = fitting.fitted(p, fit)
            measured = [fitting.MeasuredPoint(x.leader, x.offered_rps, x.latencies_ms)
                        for x in run.points]
            rows = fitting.side_by_side(pf, measured, seed, rounds)
            ranks = fitting.rankings(pf, rows)
        run_dir = make_run_dir(out, "model", f"paxos-wan-against-{against}")
    except ValueError as err:
        fail(str(err))
    info = {"leaders": leaders, "rates_rps": rates, "duration_s": duration_s,
            "transfer_s": run.transfer_s, "twin_rounds": rounds, "seed": seed,
            "model_best_leader_all_regions": best_leader(pf),
            "points": [{"leader": x.leader, "offered_rps": x.offered_rps,
                        "errors": x.errors, "dropped": x.dropped,
                        "leader_held": x.leader_held,
                        "cpu_ms_per_write": x.cpu_ms_per_write} for x in run.points]}
    results = against_results(against, p.rs.name, describe(pf), fit, run.fsync_ms, rows,
                              ranks, info, TOLERANCE)
    results["tables"].append(_cpu_table(run.points))
    save_results(results, run_dir)
    raw = {"calibration": run.calibration.latencies_ms,
           "points": [{"leader": x.leader, "offered_rps": x.offered_rps,
                       "latencies_ms": x.latencies_ms} for x in run.points]}
    (run_dir / "latencies.json").write_text(json.dumps(raw) + "\n")
    report = render_against_report(results, rows, run_dir)
    if as_json:
        sys.stdout.write(json.dumps({**results, "run_dir": str(run_dir),
                                     "report": str(report)}, sort_keys=True) + "\n")
    else:
        labels = ("quantity", "client region", "leader", "best")
        show([TableData.from_json(t, right=tuple(i for i, h in enumerate(t["header"])
                                                 if h not in labels))
              for t in results["tables"]])
        for note in results["notes"][1:]:
            say(note)
        unheld = [f"{x.leader} at {x.offered_rps:g} writes/s" for x in run.points
                  if not x.leader_held]
        if unheld:
            say(f"the leader moved during: {', '.join(unheld)} (an election on a busy machine)")
        say(f"report: {report}")
    if not (results["within_tolerance"] and results["ranking_agrees"]):
        sys.exit(1)


# -- PBS against a real Cassandra (issue 24) ------------------------------------------------

PBS_TOLERANCE = 0.15
"""Largest |predicted - measured| P(consistent) over the whole sampled curve that counts as
a match (15 points): each write is one draw of when it becomes visible, so the default 30 s
run (300 writes at R = 1) measures the curve to about +-8 points (the DKW band the output
prints; +-11 in 15 s), each sampled window adds its reads' own binomial noise, and the
model cannot see a coordinator that stalls before it acknowledges."""


def parse_pairs(text: str | None, r: int, w: int, n: int) -> list[tuple[int, int]]:
    """Return the (R, W) pairs to measure: ``--pairs 1:1,1:2`` or the one ``--r/--w``."""
    if not text:
        pairs = [(r, w)]
    else:
        try:
            pairs = [(int(a), int(b)) for a, b in (x.split(":") for x in text.split(","))]
        except ValueError:
            raise ValueError(f"--pairs {text!r}: give R:W pairs, e.g. 1:1,1:2,2:1,2:2,1:3"
                             ) from None
    for a, b in pairs:
        if not (1 <= a <= n and 1 <= b <= n):
            raise ValueError(f"--pairs: R={a}, W={b} must each be between 1 and N={n}")
    return pairs


def run_pbs_against(n: int, pairs: list[tuple[int, int]], regions: str, writer: str | None,
                    reader: str | None, duration: str | None, t_max_ms: float, trials: int,
                    seed: int, out: Path, as_json: bool,
                    jitter_ms: float = pbs_real.DEFAULT_JITTER_MS) -> None:
    """``model pbs --against cassandra``: start an N-node cluster (a node per region, every
    replication link jittering +-``jitter_ms``; 0: the region set's own), measure its legs
    and its t-visibility per (R, W), print prediction and measurement side by side at every
    sampled t, write the report; exit 1 when the largest gap over the curves exceeds
    PBS_TOLERANCE or no curve has a transition to test the model on."""
    try:
        # 30 s: 300 writes at R = 1, the measured curve good to +-8 points (DKW, 95 %)
        duration_s = parse_duration_s(duration or "30s", "--duration")
        rs = region_set(regions)
        if n > len(rs.regions):
            raise ValueError(f"--n {n}: --against cassandra places one node per region, and "
                             f"{regions} has {len(rs.regions)}")
        used = rs.regions[:n]
        writer = writer or used[0]
        reader = reader or used[1 % n]
        for flag, reg in (("--client-region", writer), ("--reader-region", reader)):
            if reg not in used:
                raise ValueError(f"{flag} {reg!r}: use one of {', '.join(used)}")
        for a, b in pairs:
            pbs_real.level(a, n), pbs_real.level(b, n)
        shortest = min((rs.one_way_ms(x, y)[0] for x in used for y in used if x != y),
                       default=0.0)
        if jitter_ms > shortest:
            raise ValueError(f"--jitter {jitter_ms:g}ms: at most the shortest one-way delay "
                             f"between the nodes' regions ({shortest:g} ms on {regions})")
        run_dir = make_run_dir(out, "model", f"pbs-n{n}-against-cassandra")
    except ValueError as err:
        fail(str(err))
    label = f"PBS N={n} against cassandra on {regions}"
    curves: list[pbs_real.CurveComparison] = []
    figures = []
    try:
        with progress_bar(label, enabled=not as_json) as tick:
            tick(0.0, f"starting {n} Cassandra nodes")
            with pbs_real.cassandra_cluster(n, regions, jitter_ms=jitter_ms or None) as c:
                tick(0.1, "measuring the legs (round trips to every replica)")
                cal = pbs_real.calibrate(c, writer, reader)
                wars = pbs_model.wars_from_round_trips(cal.write_rt_ms, cal.read_rt_ms)
                for k, (r, w) in enumerate(pairs):
                    lo, share = 0.2 + 0.8 * k / len(pairs), 0.8 / len(pairs)
                    tick(lo, f"R={r} W={w}: probing {duration_s:g} s")
                    m = pbs_real.measure(c, r, w, writer, reader, duration_s, run_dir / "probes",
                                         seed, lambda f, lo=lo, share=share: tick(lo + share * f))

                    def predict(ts: Any, r: int = r, w: int = w) -> Any:
                        return pbs_model.t_visibility_after_ack(wars, r, w, ts, cal.hop_ms,
                                                                trials, seed)

                    cmp = pbs_real.compare_curve(predict, m, PBS_TOLERANCE)
                    curves.append(cmp)
                    t = np.linspace(0.0, t_max_ms, 401)
                    tm, p, tot = m.curve(1.0)
                    keep = (tot >= 5) & (tm <= t_max_ms)
                    judged = [x for x in cmp.points if x["difference"] is not None]
                    figures.append((f"fig-r{r}-w{w}", f"R={r}, W={w}: predicted from the "
                                    f"measured legs (line) and measured on the cluster (dots: "
                                    f"1 ms buckets with at least 5 reads; {m.reads:,} reads, "
                                    f"{m.writes} writes; rings: the {len(judged)} sampled t "
                                    f"judged). Largest gap "
                                    f"{_points(cmp.largest_gap)} at "
                                    f"{_ms(cmp.largest_gap_t_ms)}.",
                                    visibility_figure(
                                        t, {f"PBS R={r} W={w}": predict(t)},
                                        (tm[keep], p[keep]),
                                        sampled=([float(x["t_mean_ms"] or 0) for x in judged],
                                                 [float(x["measured"] or 0) for x in judged]))))
    except ValueError as err:
        fail(str(err))
    results = pbs_against_results(n, regions, writer, reader, duration_s, trials, seed,
                                  jitter_ms, used, cal, curves, label, PBS_TOLERANCE)
    save_results(results, run_dir)
    report = render_model_report(results, run_dir, figures=figures)
    if as_json:
        sys.stdout.write(json.dumps({**results, "run_dir": str(run_dir),
                                     "report": str(report)}, sort_keys=True) + "\n")
    else:
        show(TableData.from_json(results["tables"][0], right=tuple(range(9))))
        for g in curves:
            judged = sum(1 for x in g.points if x["difference"] is not None)
            say(f"R={g.r} W={g.w}: largest gap over the {judged} sampled t: "
                f"{_points(g.largest_gap)} points at {_ms(g.largest_gap_t_ms)} (tolerance "
                f"{100 * PBS_TOLERANCE:.0f}; {g.transition_points} t inside the "
                f"transition, {pbs_real.MIN_TRANSITION_POINTS} needed; sampling band "
                f"+-{100 * g.sampling_band:.1f})")
        if not results["has_power"]:
            say("no measured curve moves from 2 % to 98 % over enough sampled t to test the "
                "model: raise --jitter (e.g. 20ms)")
        say(f"report: {report}")
    if not results["within_tolerance"]:
        sys.exit(1)


def _points(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} ms"

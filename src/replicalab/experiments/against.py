"""Model against store: a protocol model beside a real store that implements it, each run as
one function returning the results document (``results.json``) and the raw data the page
draws. ``model paxos-wan --against etcd``: the Multi-Paxos WAN model and its twin against a
real etcd cluster, one member per region, with the store's fixed delays fitted from a
calibration; ``model pbs --against cassandra``: PBS's t-visibility predicted from a real
Cassandra cluster's measured legs beside its measured staleness. A model declares the kinds
it can be measured against in the model registry (``ModelSpec.against``); :data:`RUNS`
names each model's experiment."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.checkers import visibility
from replicalab.errors import ParameterError
from replicalab.models import paxos_wan_fit as fitting
from replicalab.models import pbs as pbs_model
from replicalab.models.base import describe
from replicalab.models.paxos_wan import WanParams, best_leader
from replicalab.models.paxos_wan_fit import Ranking, Row, StoreFit
from replicalab.models.registry import ModelSpec
from replicalab.regions import REGION_SETS, region_set
from replicalab.runtime import noise
from replicalab.runtime.noise import NoiseFloor
from replicalab.workloads import pbs_real
from replicalab.workloads.consensus_latency import real_cluster, run_writes

Tick = Callable[..., None]
"""Progress: ``tick(fraction of the whole run done, what is happening=None)``."""


def _no_tick(fraction: float, what: str | None = None) -> None:
    return None

DEFAULT_RATES_RPS = (10.0, 20.0, 40.0)
"""Offered write rates (writes/s over all client regions) when --loads is not given: low
load, and two rates below where the emulation saturates a shared 2-core machine (an emulated
write of 5 members costs ~16 ms of CPU: members, proxies and client; see the docs)."""

START_WEIGHT_S = 8.0  # rough seconds to start a cluster, for the progress bar
MOVE_WEIGHT_S = 2.0  # rough seconds to move the leader

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


# -- paxos-wan against a real store -------------------------------------------------------


def parse_rates(loads: str | None) -> list[float]:
    """Return the offered write rates of ``--loads`` (writes/s; the defaults when None);
    ValueError naming a bad one."""
    if not loads:
        return list(DEFAULT_RATES_RPS)
    try:
        values = [float(x) for x in loads.split(",")]
    except ValueError:
        raise ParameterError("loads", f"{loads!r}: give comma-separated writes/s, e.g. "
                                      "20,60,150") from None
    if any(not 0 < v <= 5000 for v in values):
        raise ParameterError("loads", f"{loads!r}: every offered rate must be between 0 and "
                                      "5000 writes/s against a real store")
    return values


def check(spec: ModelSpec, against: str, configs: list[tuple[str, Any]],
          compare_key: str | None) -> tuple[WanParams, list[str]]:
    """Return (the base params, the leaders to place) or ValueError naming the problem:
    the model must declare ``against`` as its real counterpart."""
    if not spec.against:
        offer = [f"the {name} model (against {', '.join(k)})" for name, k in _declared().items()]
        raise ParameterError("against", f"is available for {' and '.join(offer)}, not "
                                        f"{spec.name}; a model declares its real "
                                        "counterparts in the model registry")
    if against not in spec.against:
        raise ParameterError("against", f"{against!r}: use one of {', '.join(spec.against)}")
    if compare_key not in (None, "leader"):
        raise ParameterError("compare", f"{compare_key}=...: with {{against}} only the leader "
                                        "can vary ({compare} leader=VA,CA,JP); the cluster is "
                                        "the same for all",
                             {"against": "against", "compare": "compare"})
    p: WanParams = configs[0][1]
    if p.rtt_sd_ms is not None:
        raise ParameterError("against", f"{against!r}: the real links carry the region set's "
                                        "own deviation; leave rtt_sd_ms unset")
    rs = p.rs
    if REGION_SETS.get(rs.name) != rs:
        raise ParameterError("against", f"{against!r} starts one member per region of a named "
                                        "region set ("
                                        f"{', '.join(n for n in REGION_SETS if n != 'lan')}), "
                                        "not a custom table")
    if len(rs.regions) < 3:
        raise ParameterError("against", f"{against!r} needs at least 3 regions (a quorum that "
                                        f"can lose a member), not regions={rs.name}")
    if p.persist_ms or p.forward_ms:
        raise ParameterError("against", f"{against!r} fits persist_ms and forward_ms from its "
                                        "calibration; leave them unset")
    leaders = list(dict.fromkeys(q.rs.regions[q.leader_index] for _, q in configs))
    return p, leaders


def _declared() -> dict[str, tuple[str, ...]]:
    from replicalab.models.registry import MODELS

    return {name: s.against for name, s in MODELS.items() if s.against}


def cpu_table(points: Sequence[Any]) -> dict[str, Any]:
    """Return the table of CPU per answered write (ms) per offered rate: members, emulated
    links, client, and the cores that keeps busy."""
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


@dataclass
class AgainstRun:
    """What a model-against-store run returns: its results document, the model/twin/store
    rows (paxos-wan's page draws them), raw latencies to keep beside the results, the
    figures' data, and what to print besides the tables."""

    results: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    curves: list[dict[str, Any]] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        """Return whether the model held within its tolerance (and, for paxos-wan, the best
        leaders agree)."""
        return bool(self.results["within_tolerance"]
                    and self.results.get("ranking_agrees", True))

    @property
    def exit_status(self) -> int:
        """Return the command's exit status: 0 agrees, 1 disagrees (or no power), 3
        inconclusive (the machine added more noise than the verdict can bear)."""
        return int(self.results.get("exit_status", 0 if self.agrees else 1))


def paxos_wan_against(p: WanParams, against: str, leaders: list[str], rates: list[float],
                      duration_s: float, rounds: int, seed: int, tick: Tick = _no_tick
                      ) -> AgainstRun:
    """Start ``against`` with one member per region, calibrate, measure each leader at each
    rate, fit the store's delays and return model, twin and store side by side
    (``leaders``: regions, ``rates``: offered writes/s, ``duration_s`` per point,
    ``rounds``: the twin's requests per point)."""
    plan = [("starting the cluster", START_WEIGHT_S), ("calibration", duration_s)]
    plan += [(f"leader {r}", MOVE_WEIGHT_S + duration_s * len(rates)) for r in leaders]
    total = sum(w for _, w in plan)
    starts, acc = {}, 0.0
    for name, w in plan:
        starts[name] = (acc / total, w / total)
        acc += w
    tick(0.0, f"starting {len(p.rs.regions)} {against} members")

    def on_phase(phase: str, fraction: float, what: str) -> None:
        lo, share = starts[phase]
        tick(lo + share * min(max(fraction, 0.0), 1.0), f"{phase}: {what}")

    with real_cluster(against, p.rs.name) as c:
        run = run_writes(c, leaders, rates, duration_s, p.shares, seed, on_phase=on_phase)
    tick(1.0, f"the model and its twin ({rounds:,} requests per point)")
    fit = fitting.fit(p, run.calibration.leader, run.calibration.latencies_ms)
    pf = fitting.fitted(p, fit)
    measured = [fitting.MeasuredPoint(x.leader, x.offered_rps, x.latencies_ms)
                for x in run.points]
    rows = fitting.side_by_side(pf, measured, seed, rounds)
    ranks = fitting.rankings(pf, rows)
    info = {"leaders": leaders, "rates_rps": rates, "duration_s": duration_s,
            "transfer_s": run.transfer_s, "twin_rounds": rounds, "seed": seed,
            "model_best_leader_all_regions": best_leader(pf),
            "points": [{"leader": x.leader, "offered_rps": x.offered_rps,
                        "errors": x.errors, "dropped": x.dropped,
                        "leader_held": x.leader_held,
                        "cpu_ms_per_write": x.cpu_ms_per_write,
                        "noise": None if x.noise is None else x.noise.to_json()}
                       for x in run.points]}
    results = against_results(against, p.rs.name, describe(pf), fit,
                              run.fsync_ms, rows, ranks, info, TOLERANCE)
    results["tables"].append(cpu_table(run.points))
    floors = [x.noise for x in [run.calibration, *run.points] if x.noise is not None]
    _judge_with_noise(results, rows, noise.worst(floors))
    raw = {"calibration": run.calibration.latencies_ms,
           "points": [{"leader": x.leader, "offered_rps": x.offered_rps,
                       "latencies_ms": x.latencies_ms} for x in run.points]}
    unheld = [f"{x.leader} at {x.offered_rps:g} writes/s" for x in run.points
              if not x.leader_held]
    remarks = list(results["notes"][1:])
    if unheld:
        remarks.append(f"the leader moved during: {', '.join(unheld)} (an election on a busy "
                       "machine)")
    return AgainstRun(results, rows, raw, remarks=remarks)


def wan_noise_tolerance_ms(rows: Sequence[Row], tolerance: float = TOLERANCE) -> float:
    """Return the noise a paxos-wan verdict can bear (ms): the tolerance of its tightest
    row (``tolerance`` times the smallest modelled latency)."""
    models = [r.model_ms for r in rows if r.model_ms]
    return round(tolerance * min(models), 3) if models else 0.0


def _judge_with_noise(results: dict[str, Any], rows: Sequence[Row],
                      floor: NoiseFloor | None) -> None:
    """Add the verdict (agrees / disagrees / inconclusive), its exit status and the noise
    floor it was reached under to a paxos-wan results document."""
    agrees = bool(results["within_tolerance"] and results.get("ranking_agrees", True))
    bearable = wan_noise_tolerance_ms(rows)
    verdict = ("agrees" if agrees else "inconclusive"
               if floor is not None and floor.added_p99_ms > bearable else "disagrees")
    results.update({"verdict": verdict, "exit_status": EXIT_STATUS[verdict],
                    "noise": None if floor is None else floor.to_json(),
                    "noise_tolerance_ms": bearable,
                    "verdict_line": verdict_line(verdict, floor, bearable)})
    results["notes"].append(results["verdict_line"])


def save_raw(run: AgainstRun, run_dir: Path) -> None:
    """Write the run's raw latencies beside its results (``latencies.json``), if any."""
    if run.raw:
        (run_dir / "latencies.json").write_text(json.dumps(run.raw) + "\n")


# -- PBS against Cassandra ----------------------------------------------------------------

PBS_NOISE_TOLERANCE_MS = 5.0
"""What the machine may add at p99 (ms, the run's noise floor) before a miss of the sampling
band says nothing about the model: the recorded evidence must tell a prediction shifted by
5 ms from the truth (``tests/test_pbs_evidence.py``), so a run whose client stalls or
emulated hops move its reads by more cannot call the model wrong."""

PBS_WARMUP_ROUND_TRIPS = 20
"""Calibration round trips left out at the start of every series: the first few were slower
than the links allow (up to 163 ms on links that allow 121.5), a warm-up, not the links.
20 rather than 10 since 2026-11-30: with 10, heldout-9's legs were wider than the links its
probe met (1.3 % predicted visible at 14 ms, 0.1 % measured)."""

PBS_MODEL = ("one-way legs deconvolved from the round trips (the first 20 of each series left "
             "out), plus the delay the machine added as the run's noise floor measured it; "
             "chosen 2026-11-30 on heldout-3, heldout-8 and heldout-9")
"""The shipped model, as ``model pbs --against`` and each recording's ``shipped_model.model``
name it (docs/models/pbs.md)."""


PBS_BOOTSTRAP = 30
"""Resamples of the calibration's round trips behind a prediction's own sampling error: its
standard deviation at a t is to about 13 % of itself with 30."""
PBS_BOOTSTRAP_TRIALS = 10_000
"""Trials per resample (their Monte Carlo error, at most 0.5 points, only widens the
spread)."""
PBS_JUDGE = ("each sampled t inside the writes' binomial band (Clopper-Pearson, Bonferroni "
             "over the t) widened in quadrature by z times the prediction's bootstrap standard "
             "deviation over resamples of the calibration; a miss inconclusive when the "
             "prediction moved by no more than the machine added at p99 fits; chosen "
             "2026-11-30")
"""How ``model pbs --against`` and each recording's ``shipped_model.judge`` judge a
prediction (:func:`judge_pbs`). Until 2026-11-30 the prediction counted as exact: a run
calibrates its legs from 380 round trips per replica, whose own sampling error moves the
predicted curve by 4-8 points (95 %), and the command called the shipped model wrong in 3
of 9 runs, quiet or busy, each by less than a point outside the measurement's band."""


@dataclass(frozen=True)
class PbsPrediction:
    """The shipped model's P(consistent) t ms after the ack, callable with t (ms), and its
    own sampling error (:meth:`spread`) from bootstrap resamples of the calibration."""

    tau: np.ndarray  # sorted visibility thresholds (ms after commit)
    resampled: tuple[np.ndarray, ...]  # the same, one array per resample of the round trips
    hop_ms: float

    def __call__(self, ts: Any) -> np.ndarray:
        """Return P(consistent) at each t (ms after the ack)."""
        t = np.asarray(ts, dtype=float) + self.hop_ms
        return np.searchsorted(self.tau, t, side="right") / len(self.tau)

    def spread(self, ts: Any) -> np.ndarray:
        """Return the standard deviation of P(consistent) at each t over the resamples (a
        probability; 0 without resamples)."""
        t = np.asarray(ts, dtype=float) + self.hop_ms
        if len(self.resampled) < 2:
            return np.zeros(t.shape)
        p = np.array([np.searchsorted(x, t, side="right") / len(x) for x in self.resampled])
        return p.std(axis=0, ddof=1)


def pbs_prediction(write_rt_ms: Sequence[Sequence[float]],
                   read_rt_ms: Sequence[Sequence[float]], hop_ms: float,
                   floor: NoiseFloor | None, r: int = 1, w: int = 1,
                   trials: int = 100_000, seed: int = 1,
                   resamples: int = PBS_BOOTSTRAP) -> PbsPrediction:
    """Return the shipped model's P(consistent) at t ms after the ack (call it with t): the
    legs deconvolved from the calibration's round trips (its warm-up left out), each write's
    visibility delayed by a draw of what the machine added while the probe ran (``floor``;
    none without one); its spread from ``resamples`` bootstrap resamples of every series of
    round trips (seeded: the same inputs give the same prediction)."""
    added = floor.draw_added if floor is not None else None
    wars = pbs_model.wars_from_round_trips(write_rt_ms, read_rt_ms,
                                           warmup=PBS_WARMUP_ROUND_TRIPS)
    rng = np.random.default_rng([seed, 17])
    kept_w = [np.asarray(x[PBS_WARMUP_ROUND_TRIPS:], dtype=float) for x in write_rt_ms]
    kept_r = [np.asarray(x[PBS_WARMUP_ROUND_TRIPS:], dtype=float) for x in read_rt_ms]
    resampled = []
    for b in range(resamples):
        drawn = pbs_model.wars_from_round_trips([rng.choice(x, len(x)) for x in kept_w],
                                                [rng.choice(x, len(x)) for x in kept_r])
        resampled.append(pbs_model.thresholds_after_ack(drawn, r, w, PBS_BOOTSTRAP_TRIALS,
                                                        seed + 1 + b, added))
    return PbsPrediction(pbs_model.thresholds_after_ack(wars, r, w, trials, seed, added),
                         tuple(resampled), hop_ms)


EXIT_STATUS = {"agrees": 0, "disagrees": 1, "no power": 1, "inconclusive": 3}
"""Exit status of ``model ... --against`` per verdict (2 is bad input)."""


def parse_pairs(text: str | None, r: int, w: int, n: int) -> list[tuple[int, int]]:
    """Return the (R, W) pairs to measure: ``--pairs 1:1,1:2`` or the one ``--r/--w``."""
    if not text:
        pairs = [(r, w)]
    else:
        try:
            pairs = [(int(a), int(b)) for a, b in (x.split(":") for x in text.split(","))]
        except ValueError:
            raise ParameterError("pairs", f"{text!r}: give R:W pairs, e.g. "
                                          "1:1,1:2,2:1,2:2,1:3") from None
    for a, b in pairs:
        if not (1 <= a <= n and 1 <= b <= n):
            raise ParameterError("pairs", f"{a}:{b}: R and W must each be between 1 and "
                                          f"N={n}")
    return pairs


def pbs_placement(n: int, pairs: list[tuple[int, int]], regions: str, writer: str | None,
                  reader: str | None, jitter_ms: float = 0.0) -> tuple[str, str]:
    """Return (writer, reader) regions of a PBS run on ``n`` nodes, one per region
    (ValueError naming a region, N, a level Cassandra cannot take, or a ``jitter_ms`` wider
    than the shortest one-way delay between the nodes' regions)."""
    rs = region_set(regions)
    if n > len(rs.regions):
        raise ParameterError("n", f"{n}: {{against}} cassandra places one node per region, "
                                  f"and {regions} has {len(rs.regions)}",
                             {"against": "against"})
    used = rs.regions[:n]
    writer, reader = writer or used[0], reader or used[1 % n]
    for name, reg in (("writer", writer), ("reader", reader)):
        if reg not in used:
            raise ParameterError(name, f"{reg!r}: use one of {', '.join(used)}")
    for a, b in pairs:
        pbs_real.level(a, n), pbs_real.level(b, n)
    shortest = min((rs.one_way_ms(x, y)[0] for x in used for y in used if x != y),
                   default=0.0)
    if jitter_ms > shortest:
        raise ParameterError("jitter_ms", f"{jitter_ms:g}ms: at most the shortest one-way "
                                          f"delay between the nodes' regions ({shortest:g} ms "
                                          f"on {regions})")
    return writer, reader


def misread(r: int, read_p50_ms: float | None, own_read_ms: float,
            tolerance_ms: float = PBS_NOISE_TOLERANCE_MS, *,
            traced: Sequence[Mapping[str, Any]] = ()) -> str | None:
    """Return why a probe at R = ``r`` did not measure what the model was calibrated for,
    or None: at R = 1 the reader's coordinator reads its own replica. ``traced``: read paths
    (``ReadPath.to_json()``) sampled at the reader's coordinator while the probe's cluster
    ran; one served by another replica says so, with the keyspace's replication. Without a
    trace, reads whose median ``read_p50_ms`` took more than ``tolerance_ms`` longer than
    the ``own_read_ms`` the calibration measured went elsewhere: the curve they drew is of
    another path."""
    if r != 1:
        return None
    for path in traced:
        if not path["local"]:
            dcs = {k: v for k, v in path["replication"].items() if k != "class"}
            return (f"a traced read at {path['intended']} was served by "
                    f"{', '.join(path['replicas']) or 'no replica the trace shows'} (coordinator "
                    f"{path['coordinator']}; the keyspace's replication {dcs}), so the "
                    "measured curve is not the path the model was given")
    if read_p50_ms is None or read_p50_ms - own_read_ms <= tolerance_ms:
        return None
    return (f"the reads took {read_p50_ms:.1f} ms (median) where reading the reader's own "
            f"replica took {own_read_ms:.1f} ms when calibrated: they were served by another "
            "replica, so the measured curve is not the path the model was given")


@dataclass(frozen=True)
class Shifted:
    """A prediction read ``by_ms`` later (negative: earlier) than given, its spread with it:
    P(consistent) at t is the given one's at t - by_ms."""

    predict: Callable[[Any], np.ndarray]
    by_ms: float

    def __call__(self, ts: Any) -> np.ndarray:
        """Return P(consistent) at each t (ms after the ack)."""
        return np.asarray(self.predict(np.asarray(ts, dtype=float) - self.by_ms), dtype=float)

    def spread(self, ts: Any) -> np.ndarray:
        """Return the given prediction's spread at each t, moved alike (0 without one)."""
        t = np.asarray(ts, dtype=float)
        of = getattr(self.predict, "spread", None)
        return np.zeros(t.shape) if of is None else np.asarray(of(t - self.by_ms), dtype=float)


PBS_SHIFT_STEP_MS = 0.5
"""The moves :func:`noise_fit_ms` tries, in steps of this (ms)."""


def noise_fit_ms(predict: Callable[[Any], np.ndarray], v: visibility.Visibility,
                 floor: NoiseFloor | None) -> float | None:
    """Return the smallest move (ms, positive: later; 0: none needed) of ``predict``, no
    larger than what the machine added at p99 while the probe ran, that puts it inside the
    band at every judged t of ``v``; None when none does (or nothing was measured). The
    machine moves both ways: a stall before a read or on the replication path makes writes
    look late, one before a write's ack makes them look early, and the calibration's own
    round trips (the legs and the clients' hop the model is read by) carry its delays too."""
    if floor is None or floor.added_p99_ms > PBS_NOISE_TOLERANCE_MS:
        return None  # inconclusive whatever fits
    steps = int(floor.added_p99_ms // PBS_SHIFT_STEP_MS)
    if visibility.judge(predict, v).within:
        return 0.0
    for k in range(1, steps + 1):
        for by in (k * PBS_SHIFT_STEP_MS, -k * PBS_SHIFT_STEP_MS):
            if visibility.judge(Shifted(predict, by), v).within:
                return by
    return None


@dataclass(frozen=True)
class PbsJudged:
    """One (R, W) pair judged: the judgement against the sampling band, and for a miss the
    move within the machine's noise that fits it (:func:`noise_fit_ms`, None: none does)
    once the writes whose acks the machine held up are undecided over the hold-up
    (``late_acks`` of them, :func:`visibility.with_late_acks`); the verdict of the pair."""

    judgement: visibility.Judgement
    fit_ms: float | None
    verdict: str
    late_acks: int = 0


def judge_pbs(predict: Callable[[Any], np.ndarray], v: visibility.Visibility,
              floor: NoiseFloor | None, why: str | None = None) -> PbsJudged:
    """Return ``predict`` judged against the writes' visibility ``v``, and for a miss what
    the machine's measured noise can explain of it (:class:`PbsJudged`); "agrees" is judged
    on ``v`` as measured, never on the allowances."""
    j = visibility.judge(predict, v)
    if j.within or why is not None:
        return PbsJudged(j, None, pbs_verdict([j], floor, why=why))
    held = visibility.with_late_acks(v, floor)
    late = sum(1 for a, b in zip(v.first_fresh_ms, held.first_fresh_ms, strict=True)
               if a != b)
    fit = noise_fit_ms(predict, held, floor)
    return PbsJudged(j, fit, pbs_verdict([j], floor, why=why, fits=[fit]), late)


def pbs_verdict(judged: list[visibility.Judgement], floor: NoiseFloor | None,
                tolerance_ms: float = PBS_NOISE_TOLERANCE_MS, why: str | None = None,
                fits: Sequence[float | None] = ()) -> str:
    """Return "agrees", "disagrees", "inconclusive" or "no power" for the pairs judged:
    agreement needs a pair with power and every pair inside its sampling band; a miss is
    "inconclusive" when the machine added more than ``tolerance_ms`` at p99 while it ran,
    or when every pair that missed fits once moved by no more than the machine added
    (``fits``, per pair: :func:`noise_fit_ms`). ``why`` (:func:`misread`): the probe
    measured another path, and so says nothing."""
    if why is not None:
        return "inconclusive"
    if not any(j.has_power for j in judged):
        return "no power"
    if all(j.within for j in judged if j.judged):
        return "agrees"
    if floor is not None and floor.added_p99_ms > tolerance_ms:
        return "inconclusive"
    missed = [f for j, f in zip(judged, list(fits) + [None] * len(judged), strict=False)
              if j.judged and not j.within]
    if missed and all(f is not None for f in missed):
        return "inconclusive"
    return "disagrees"


def verdict_line(verdict: str, floor: NoiseFloor | None, tolerance_ms: float,
                 why: str | None = None, fit_ms: float | None = None,
                 late_acks: int = 0) -> str:
    """Return one sentence for a verdict, with the noise (or ``why``) that made it
    inconclusive; ``fit_ms``: the move within the machine's noise that fits a miss (0: none
    needed once the ``late_acks`` writes held up are undecided)."""
    if verdict == "inconclusive" and why is not None:
        return f"inconclusive: {why}"
    if verdict == "inconclusive" and floor is not None and fit_ms is not None:
        held = (f" once the {late_acks} writes whose acks the machine held up are counted "
                "undecided over the hold-up" if late_acks else "")
        moved = ("" if fit_ms == 0 else
                 f" moved {abs(fit_ms):g} ms {'later' if fit_ms > 0 else 'earlier'}, within "
                 f"the {floor.added_p99_ms:.1f} ms the machine added at p99,")
        return (f"inconclusive: the prediction missed the measurement, but{moved} it fits"
                f"{held} ({floor.line()})")
    if verdict == "inconclusive" and floor is not None:
        return (f"inconclusive: the machine added {floor.added_p99_ms:.1f} ms at p99, over "
                f"the {tolerance_ms:g} ms a verdict can bear ({floor.line()})")
    added = ("no noise floor was measured" if floor is None else
             f"the machine added {floor.added_p99_ms:.1f} ms at p99, "
             + ("within" if floor.added_p99_ms <= tolerance_ms else "over")
             + f" the {tolerance_ms:g} ms the verdict can bear")
    if verdict == "disagrees" and floor is not None:
        added += ", and no move within it fits"
    return {"agrees": f"the model agrees with the measurement within its tolerance ({added})",
            "disagrees": f"the model is off by more than its tolerance ({added})",
            "no power": "no measured curve has a transition to test the model on"}[verdict]


def pbs_against(n: int, pairs: list[tuple[int, int]], regions: str, writer: str,
                reader: str, duration_s: float, t_max_ms: float, trials: int, seed: int,
                run_dir: Path, tick: Tick = _no_tick,
                jitter_ms: float = pbs_real.DEFAULT_JITTER_MS) -> AgainstRun:
    """Start an N-node Cassandra cluster (a node per region, every replication link
    jittering +-``jitter_ms``; 0: the region set's own), measure its legs and its
    t-visibility per (R, W), and return prediction and measurement judged at every sampled
    t against the measurement's sampling band (``checkers/visibility.py``), with the noise
    floor of every probe (``curves``: per pair the predicted curve, the measured buckets and
    the judged points, for the page)."""
    label = f"PBS N={n} against cassandra on {regions}"
    used = region_set(regions).regions[:n]
    judged: list[tuple[int, int, visibility.Judgement, int]] = []
    fits: list[float | None] = []
    late_acks = 0
    floors: list[NoiseFloor] = []
    whys: list[str] = []
    curves: list[dict[str, Any]] = []
    paths: list[dict[str, Any]] = []
    tick(0.0, f"starting {n} Cassandra nodes")
    with pbs_real.cassandra_cluster(n, regions, jitter_ms=jitter_ms or None) as c:
        tick(0.1, "measuring the legs (round trips to every replica)")
        cal = pbs_real.calibrate(c, writer, reader, pbs_real.CALIBRATION_SAMPLES)
        for k, (r, w) in enumerate(pairs):
            lo, share = 0.2 + 0.8 * k / len(pairs), 0.8 / len(pairs)
            tick(lo, f"R={r} W={w}: probing {duration_s:g} s")
            m = pbs_real.measure(c, r, w, writer, reader, duration_s, run_dir / "probes",
                                 seed, lambda f, lo=lo, share=share: tick(lo + share * f))

            vis = pbs_real.visibility_of_run(Path(m.run_dir))
            floor = pbs_real.noise_of_run(Path(m.run_dir))
            if floor is not None:
                floors.append(floor)
            predict = pbs_prediction(cal.write_rt_ms, cal.read_rt_ms, cal.hop_ms, floor, r, w,
                                     trials, seed)
            pair = judge_pbs(predict, vis, floor)
            j = pair.judgement
            judged.append((r, w, j, vis.out_of_order))
            fits.append(pair.fit_ms)
            late_acks += pair.late_acks
            path = pbs_real.read_path_of(c, r, w, reader)
            paths.append({"r": r, "w": w, **path.to_json()})
            why = misread(r, pbs_real.read_p50_ms_of_run(Path(m.run_dir)),
                          cal.read_overhead_ms, traced=[path.to_json()])
            if why is not None:
                whys.append(f"R={r} W={w}: {why}")
            t = np.linspace(0.0, t_max_ms, 401)
            tm, p, tot = m.curve(1.0)
            keep = (tot >= 5) & (tm <= t_max_ms)
            points = j.judged
            curves.append({"id": f"fig-r{r}-w{w}", "caption": (
                f"R={r}, W={w}: predicted from the measured legs (line) and measured on the "
                f"cluster (dots: 1 ms buckets with at least 5 reads; {m.reads:,} reads, "
                f"{vis.writes} writes; rings: the {len(points)} sampled t judged, each "
                f"against its binomial band). {j.line()}."),
                "t_ms": t, "predicted": {f"PBS R={r} W={w}": predict(t)},
                "measured": (tm[keep], p[keep]),
                "sampled": ([x.t_ms for x in points], [x.measured for x in points])})
    floor = noise.worst(floors)
    why = "; ".join(whys) or None
    verdict = pbs_verdict([j for _, _, j, _ in judged], floor, why=why, fits=fits)
    fit = next((f for f in fits if f is not None), None)
    results = pbs_against_results(n, regions, writer, reader, duration_s, trials, seed,
                                  jitter_ms, used, cal, judged, label, floor, verdict, why,
                                  fit, late_acks)
    results["read_paths"] = paths
    remarks = [f"R={r} W={w}: {j.line()} ({j.transition_points} sampled t inside the "
               f"transition, {visibility.MIN_TRANSITION_POINTS} needed)"
               for r, w, j, _ in judged]
    remarks.append(verdict_line(verdict, floor, PBS_NOISE_TOLERANCE_MS, why, fit, late_acks))
    if verdict == "no power":
        remarks.append("raise --jitter (e.g. 20ms) so that the measured curve has a "
                       "transition to judge")
    return AgainstRun(results, curves=curves, remarks=remarks)


def pbs_against_results(n: int, regions: str, writer: str, reader: str, duration_s: float,
                        trials: int, seed: int, jitter_ms: float, used: Any,
                        cal: pbs_real.Calibration,
                        judged: list[tuple[int, int, visibility.Judgement, int]],
                        label: str, floor: NoiseFloor | None, verdict: str,
                        why: str | None = None, fit_ms: float | None = None,
                        late_acks: int = 0) -> dict[str, Any]:
    """Return the results.json of ``model pbs --against``: every sampled t per pair with its
    counts and band, the verdict, and the noise floor it was reached under."""
    rows_out = [{"r": r, "w": w, **x.to_json()} for r, w, j, _ in judged for x in j.points]
    legs = {f"n{i} ({c_region})": {"write_rt_median_ms": round(float(np.median(wr)), 3),
                                   "read_rt_median_ms": round(float(np.median(rr)), 3)}
            for i, (c_region, wr, rr) in enumerate(zip(used, cal.write_rt_ms, cal.read_rt_ms,
                                                       strict=True))}
    return {
        "schema_version": 3, "model": "pbs", "title": label, "pbs_model": PBS_MODEL,
        "pbs_judge": PBS_JUDGE,
        "params": {"n": n, "regions": regions, "writer_region": writer,
                   "reader_region": reader, "duration_s_per_pair": duration_s,
                   "trials": trials, "seed": seed, "jitter_ms": jitter_ms,
                   "write_overhead_ms": cal.write_overhead_ms,
                   "read_overhead_ms": cal.read_overhead_ms, "hop_ms": round(cal.hop_ms, 4)},
        "legs": legs, "points": rows_out,
        "pairs": [{"r": r, "w": w, "out_of_order_writes": odd, **j.to_json()}
                  for r, w, j, odd in judged],
        "round_trips_ms": {"write": [list(x) for x in cal.write_rt_ms],
                           "read": [list(x) for x in cal.read_rt_ms]},
        "verdict": verdict, "exit_status": EXIT_STATUS[verdict],
        "verdict_line": verdict_line(verdict, floor, PBS_NOISE_TOLERANCE_MS, why, fit_ms,
                                     late_acks),
        "noise_fit_ms": fit_ms, "late_acks": late_acks,
        "noise": None if floor is None else floor.to_json(),
        "noise_tolerance_ms": PBS_NOISE_TOLERANCE_MS,
        "has_power": any(j.has_power for _, _, j, _ in judged),
        "within_tolerance": verdict == "agrees",
        "tables": [{"caption": "P(consistent read) t ms after the write was acknowledged, at "
                               "every sampled t: predicted from the measured legs, measured "
                               "on the cluster (writes visible by t, undecided counted half) "
                               "with its binomial band (Clopper-Pearson, Bonferroni over the "
                               "sampled t), and that band widened by the prediction's own "
                               "spread (bootstrap over the calibration), which it must lie in",
                    "header": ["R", "W", "t (ms)", "writes", "predicted", "measured",
                               "band", "with the prediction's spread", "inside"],
                    "rows": [[x["r"], x["w"], f"{x['t_ms']:g}", x["writes"],
                              f"{100 * x['predicted']:.1f}%", f"{100 * x['measured']:.1f}%",
                              f"{100 * x['band_lo']:.1f}-{100 * x['band_hi']:.1f}%",
                              f"{100 * x['tol_lo']:.1f}-{100 * x['tol_hi']:.1f}%",
                              ("yes" if x["inside"] else "NO") if x["judged"]
                              else "not judged"] for x in rows_out]},
                   {"caption": "Round trips to each replica measured on the cluster (median, "
                               "ms, the client's own share subtracted)",
                    "header": ["replica", "from the writer's coordinator",
                               "from the reader's coordinator"],
                    "rows": [[k, f"{v['write_rt_median_ms']:.2f}",
                              f"{v['read_rt_median_ms']:.2f}"] for k, v in legs.items()]}],
        "notes": [f"writer at {writer}, reader at {reader}; legs measured from {n} "
                  "calibration keyspaces with one replica each; replication links jitter "
                  f"+-{jitter_ms:g} ms; the model is read {cal.hop_ms:.2f} ms later than t "
                  "(the clients' own hops, half their measured shares)",
                  verdict_line(verdict, floor, PBS_NOISE_TOLERANCE_MS, why, fit_ms,
                               late_acks)],
    }

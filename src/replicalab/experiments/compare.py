"""``compare``: real stores side by side on the same emulated regions, each as a 3-node
cluster started and stopped here: staleness (with a fault schedule: availability and lost
writes), latency (consistent vs eventual reads with bootstrap intervals) and Jepsen's
register test. Each returns the comparison's ``results.json`` content; the command line
saves and renders it. The figures come from :mod:`replicalab.experiments.figures`, as the
scorecard's do."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.cluster import base
from replicalab.cluster.kinds import StoreKind
from replicalab.cluster.state import Cluster
from replicalab.experiments import figures
from replicalab.faults.schedule import Fault, check_within
from replicalab.history.rundir import Run
from replicalab.regions import region_set
from replicalab.stores.base import redact_url
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.latency import LatencyConfig
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import StalenessConfig

Phase = Callable[[str], Callable[[float], None] | None]
"""Called with a phase's name when it starts; returns its 0..1 progress callback (or None)."""

UP_S = 5.0
"""Expected seconds to start a cluster: its progress weight beside the probes' durations."""
VARIANTS = ("eventual read", "consistent read", "put", "conditional put")
CONSISTENCIES = ("eventual", "consistent")


@dataclass
class Comparison:
    """A comparison's ``results.json`` content, and the eventual reads' freshness curve
    per store (t ms, P(fresh)) for the staleness comparison's figure."""

    results: dict[str, Any]
    curves: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)


def _no_phase(name: str) -> None:
    return None


def latency_s(ops: int) -> float:
    """Return the expected seconds of a latency probe of ``ops`` per variant (its progress
    weight): four variants at up to two WAN round trips each, capped by its 60 s limit."""
    return min(60.0, 0.2 * ops)


def check_faults(faults: tuple[Fault, ...], regions: tuple[str, ...], duration_s: float
                 ) -> None:
    """Raise ValueError for a fault the 3-node clusters of ``regions`` cannot take within a
    probe of ``duration_s``, before any cluster is started."""
    for f in faults:
        if f.node is not None and f.node > 2:
            raise ValueError(f"fault {f.label!r}: the clusters have nodes 0..2")
        if f.region is not None and f.region not in regions:
            raise ValueError(f"fault {f.label!r}: the regions are {', '.join(regions)}")
    check_within(faults, duration_s)


@contextlib.contextmanager
def cluster(kind: StoreKind, regions: str, name: str, hosts: str | None = None
            ) -> Iterator[tuple[Cluster, str | None]]:
    """Start a 3-node ``kind`` cluster on ``regions`` (one node per host of inventory
    ``hosts`` when given); yield it and its leader's region (None without a leader); stop
    it however the block ends. A saved cluster of that name whose processes are gone (a
    comparison killed outright) is replaced; a running one is refused, naming how to
    remove it."""
    c = base.up(kind.name, 3, regions, name=name, hosts=hosts, replace_stale=True, rename="")
    try:
        lead = base.find_leader(c.name)
        yield c, lead.region if lead.is_leader else None
    finally:
        base.down(c.name)


def probe(spec: ProbeSpec, out: Path, progress: Callable[[float], None] | None = None,
          what: str = "") -> Run:
    """Return the probe's run; Ctrl-C or SIGTERM during it stops the whole comparison (the
    probe has saved its history, unchecked: the command must end within a second; the
    cluster is brought down on the way out). With ``what``, a probe that stopped early is a
    ValueError naming it."""
    run = run_probe(spec, out, progress, check_interrupted=False)
    if run.interrupted:
        raise KeyboardInterrupt
    if what and run.error:
        raise ValueError(f"{what} stopped early ({run.error}); what was recorded is in "
                         f"{run.run_dir}")
    return run


def _faults_json(faults: tuple[Fault, ...]) -> list[str]:
    return [f.label + f" at {f.at_s:g}s for {f.for_s:g}s" for f in faults]


def _percent(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


# -- staleness ----------------------------------------------------------------------------


def smooth(freshness: dict[str, list[Any]], width_ms: float = 5.0
           ) -> tuple[list[float], list[float]]:
    """Return (t, p) of the freshness curve merged into ``width_ms`` buckets."""
    t = np.asarray(freshness["t_ms"])
    if len(t) == 0:
        return [], []
    b = (t // width_ms).astype(int)
    fresh = np.bincount(b, weights=np.asarray(freshness["fresh"], float))
    total = np.bincount(b, weights=np.asarray(freshness["total"], float))
    keep = total > 0
    return ((np.flatnonzero(keep) * width_ms).tolist(), (fresh[keep] / total[keep]).tolist())


def staleness_phases(names: Sequence[str], duration_s: float, ops: int
                     ) -> list[tuple[str, float]]:
    """Return the phases of a staleness comparison with their expected seconds."""
    return [p for k in names for p in (
        (f"{k}: starting a 3-node cluster", UP_S),
        (f"{k}: staleness probe, eventual reads", duration_s),
        (f"{k}: staleness probe, consistent reads", duration_s),
        (f"{k}: latency probe", latency_s(ops)))]


def staleness_row(results: dict[str, Any], consistency: str) -> dict[str, Any]:
    """Return one staleness probe's columns of a store's row: stale fraction and window,
    the reader's availability by time (during the faults, whole run, by ops, read count),
    every op's availability and the acknowledged writes lost."""
    st, reads = figures.staleness(results), figures.availability(results, "read")
    c = consistency
    return {f"{c}_stale_fraction": st["stale_fraction"] or 0.0,
            f"{c}_stale_window_ms": st["stale_window_ms"],
            f"{c}_availability": reads["run"], f"{c}_availability_during": reads["during"],
            f"{c}_availability_ops": reads["ops"], f"{c}_read_ops": reads["count"],
            f"{c}_availability_all": results["availability"]["overall"],
            f"{c}_lost_writes": results["lost_writes"]["lost"]}


def _staleness_one(kind: StoreKind, regions: str, duration_s: float, ops: int, out: Path,
                   faults: tuple[Fault, ...], phase: Phase, hosts: str | None = None
                   ) -> tuple[dict[str, Any], tuple[list[float], list[float]]]:
    rs = region_set(regions)
    writer, reader = rs.regions[0], rs.regions[1 % len(rs.regions)]
    k = kind.name
    phase(f"{k}: starting a 3-node cluster")
    with cluster(kind, regions, f"compare-{k}", hosts) as (c, leader):
        row: dict[str, Any] = {"store": k, "url": redact_url(c.url), "leader_region": leader}
        curve: tuple[list[float], list[float]] = ([], [])
        for consistency in CONSISTENCIES:
            spec = ProbeSpec(store=c.url, workload="staleness", options=ProbeOptions(
                consistency=consistency, duration_s=duration_s, write_interval_s=1.0,
                read_rate=50, period_s=1.0),
                config=StalenessConfig(placement="separate-clients", writer_region=writer,
                                       reader_region=reader),
                cluster=c.name if faults else None, faults=faults)
            r = probe(spec, out, phase(f"{k}: staleness probe, {consistency} reads"),
                      what=f"{k}: the staleness probe with {consistency} reads").results
            row.update(staleness_row(r, consistency))
            if consistency == "eventual":
                curve = smooth(r["freshness"])
        lat = probe(ProbeSpec(store=c.url, workload="latency", config=LatencyConfig(ops=ops),
                              options=ProbeOptions(duration_s=60)), out,
                    phase(f"{k}: latency probe"), what=f"{k}: the latency probe").results
        for v, x in figures.latency(lat).items():
            row[f"{v} p50_ms"], row[f"{v} p99_ms"] = x["p50_ms"], x["p99_ms"]
        return row, curve


def _staleness_table(rows: list[dict[str, Any]], regions: str, faults: tuple[Fault, ...]
                     ) -> dict[str, Any]:
    header = ["store", "leader/primary region", "eventual: stale reads",
              "eventual: stale window (ms, median per write)",
              "consistent: stale reads", "consistent: stale window (ms)"]
    if faults:
        header += ["eventual: read time available during the fault / whole run (reads ok)",
                   "consistent: read time available during the fault / whole run (reads ok)",
                   "lost acknowledged writes"]
    header += [f"{v} p50 / p99 (ms)" for v in VARIANTS]

    def fmt(row: dict[str, Any]) -> list[str]:
        cells = [row["store"], row.get("leader_region") or "-"]
        for c in CONSISTENCIES:
            w = row[f"{c}_stale_window_ms"]
            cells += [f"{100 * row[f'{c}_stale_fraction']:.2f}%", "-" if w is None else f"{w:g}"]
        if faults:
            cells += [f"{_percent(row.get(f'{c}_availability_during'))} / "
                      f"{_percent(row[f'{c}_availability'])} "
                      f"({_percent(row[f'{c}_availability_ops'])} of "
                      f"{row[f'{c}_read_ops']:,})" for c in CONSISTENCIES]
            cells.append(str(row["eventual_lost_writes"] + row["consistent_lost_writes"]))
        for v in VARIANTS:
            cells.append(f"{row[f'{v} p50_ms']:.2f} / {row[f'{v} p99_ms']:.2f}"
                         if f"{v} p50_ms" in row else "n/a")
        return cells

    under = f" under {', '.join(f.label for f in faults)}" if faults else ""
    rs = region_set(regions).regions
    return {"caption": f"3-node clusters on {regions}{under}: writer in {rs[0]}, reads at "
                       f"the {rs[1 % len(rs)]} replica, latency from one client at the first "
                       "node; where the leader/primary sits changes the figures",
            "header": header, "rows": [fmt(r) for r in rows]}


def compare_staleness(kinds: Sequence[StoreKind], regions: str, duration_s: float, ops: int,
                      faults: tuple[Fault, ...], run_dir: Path, phase: Phase = _no_phase,
                      hosts: str | None = None) -> Comparison:
    """Probe each kind's cluster in turn (staleness with eventual and consistent reads,
    writer in the first region, reader in the second, under ``faults``; then a short
    latency probe) and return the comparison (sub-runs under ``run_dir/runs``)."""
    rows, curves = [], {}
    for kind in kinds:
        row, curves[kind.name] = _staleness_one(kind, regions, duration_s, ops,
                                                run_dir / "runs", faults, phase, hosts)
        rows.append(row)
    names = [k.name for k in kinds]
    results = {"schema_version": 1, "model": "compare", "title": f"stores on {regions}",
               "params": {"kinds": ",".join(names), "regions": regions,
                          "probe_duration_s": duration_s, "latency_ops": ops,
                          "faults": _faults_json(faults)},
               "rows": rows, "tables": [_staleness_table(rows, regions, faults)]}
    return Comparison(results, curves)


# -- latency ------------------------------------------------------------------------------


def latency_row(kind: str, lat: dict[str, Any], leader_region: str | None
                ) -> dict[str, Any]:
    """Return one store's row of the latency comparison: per variant mean/p50/p99 (ms) and
    consistent minus eventual read mean (ms) with its bootstrap 95 % interval and verdict."""
    row: dict[str, Any] = {"store": kind, "leader_region": leader_region}
    for v, x in lat["variants"].items():
        for k in ("count", "mean_ms", "p50_ms", "p99_ms"):
            row[f"{v} {k}"] = x[k]
    for d in lat["differences"]:
        if {d["a"], d["b"]} == {"eventual read", "consistent read"}:
            sign = 1 if d["a"] == "consistent read" else -1
            lo, hi = sorted((sign * d["lo_ms"], sign * d["hi_ms"]))
            row.update({"consistent_minus_eventual_ms": sign * d["mean_diff_ms"],
                        "ci_lo_ms": lo, "ci_hi_ms": hi, "verdict": d["verdict"]})
    return row


def _latency_table(rows: list[dict[str, Any]], regions: str) -> dict[str, Any]:
    header = ["store", "leader/primary region",
              *(f"{v} mean / p50 / p99 (ms)" for v in VARIANTS),
              "consistent - eventual read mean (ms) [95 % CI]", "verdict"]
    body = []
    for r in rows:
        cells = [r["store"], r["leader_region"] or "-"]
        for v in VARIANTS:
            cells.append(f"{r[f'{v} mean_ms']:.2f} / {r[f'{v} p50_ms']:.2f} / "
                         f"{r[f'{v} p99_ms']:.2f}" if f"{v} mean_ms" in r else "n/a")
        if "verdict" in r:
            cells += [f"{r['consistent_minus_eventual_ms']:+.2f} [{r['ci_lo_ms']:+.2f}, "
                      f"{r['ci_hi_ms']:+.2f}]", r["verdict"]]
        else:
            cells += ["n/a", "n/a"]
        body.append(cells)
    return {"caption": f"3-node clusters on {regions}: latency from one client at the first "
                       "node (first region), operations interleaved one at a time",
            "header": header, "rows": body}


def latency_phases(names: Sequence[str], ops: int) -> list[tuple[str, float]]:
    """Return the phases of a latency comparison with their expected seconds."""
    return [p for k in names for p in ((f"{k}: starting a 3-node cluster", UP_S),
                                       (f"{k}: latency probe", latency_s(ops)))]


def compare_latency(kinds: Sequence[StoreKind], regions: str, ops: int, seed: int,
                    run_dir: Path, phase: Phase = _no_phase, hosts: str | None = None
                    ) -> Comparison:
    """Run the latency workload from one client at each kind's first node and return the
    comparison of consistent and eventual reads (sub-runs under ``run_dir/runs``)."""
    rows = []
    for kind in kinds:
        phase(f"{kind.name}: starting a 3-node cluster")
        with cluster(kind, regions, f"compare-latency-{kind.name}", hosts) as (c, leader):
            run = probe(ProbeSpec(store=c.url, workload="latency",
                                  config=LatencyConfig(ops=ops),
                                  options=ProbeOptions(duration_s=60, seed=seed)),
                        run_dir / "runs", phase(f"{kind.name}: latency probe"),
                        what=f"{kind.name}: the latency probe")
            rows.append(latency_row(kind.name, run.results, leader))
    results = {"schema_version": 1, "model": "compare-latency",
               "title": f"consistent vs eventual read latency on {regions}",
               "params": {"kinds": ",".join(k.name for k in kinds), "regions": regions,
                          "latency_ops": ops, "seed": seed},
               "rows": rows, "tables": [_latency_table(rows, regions)]}
    return Comparison(results)


# -- register (linearizability) -----------------------------------------------------------


def register_row(kind: str, leader: str | None, runs: dict[str, dict[str, Any]],
                 run_dirs: dict[str, str]) -> dict[str, Any]:
    """Return one store's row: per read consistency the verdict, the keys found not
    linearizable, the smallest counterexample (ops), availability and lost writes."""
    row: dict[str, Any] = {"store": kind, "leader_region": leader}
    for c, r in runs.items():
        lin = r["linearizability"]
        bad = [p for p in lin["parts"] if p["valid"] is False]
        sizes = [len(p["counterexample"]) for p in bad if p.get("counterexample")]
        row.update({f"{c}_valid": lin["valid"], f"{c}_ops": lin["ops"],
                    f"{c}_keys": lin["keys"],
                    f"{c}_keys_not_linearizable": lin.get("keys_not_linearizable", len(bad)),
                    f"{c}_counterexample_ops": min(sizes) if sizes else None,
                    f"{c}_explanation": next((p["explanation"] for p in bad
                                              if p.get("explanation")), None),
                    f"{c}_availability": r["availability"]["overall"],
                    f"{c}_lost_writes": r["lost_writes"]["lost"],
                    f"{c}_run_dir": run_dirs[c]})
    return row


def _verdict(valid: Any, bad: int, keys: int, size: int | None) -> str:
    if valid is True:
        return "linearizable"
    if valid is False:
        return (f"NOT linearizable ({bad}/{keys} keys; counterexample "
                f"{size if size is not None else '?'} ops)")
    return f"unknown ({bad}/{keys} keys not linearizable)"


def register_table(rows: list[dict[str, Any]], regions: str, faults: tuple[Fault, ...]
                   ) -> dict[str, Any]:
    """Return the comparison table (caption, header, rows of strings) of ``rows``."""
    header = ["store", "leader/primary region"]
    for c in CONSISTENCIES:
        header += [f"{c} reads: verdict", f"{c} reads: ops checked", f"{c} reads: ops ok"]
    header.append("lost acknowledged writes")
    body = []
    for r in rows:
        cells = [r["store"], r["leader_region"] or "-"]
        for c in CONSISTENCIES:
            avail = r[f"{c}_availability"]
            cells += [_verdict(r[f"{c}_valid"], r[f"{c}_keys_not_linearizable"], r[f"{c}_keys"],
                               r[f"{c}_counterexample_ops"]),
                      f"{r[f'{c}_ops']:,}", "n/a" if avail is None else f"{100 * avail:.1f}%"]
        cells.append(str(sum(r[f"{c}_lost_writes"] for c in CONSISTENCIES)))
        body.append(cells)
    under = f" under {', '.join(f.label for f in faults)}" if faults else ""
    rs = region_set(regions).regions
    return {"caption": f"Register test (kv model) on 3-node clusters on {regions}{under}: "
                       f"writes and cas from {rs[0]}, reads at {rs[1 % len(rs)]}",
            "header": header, "rows": body}


def register_phases(names: Sequence[str], duration_s: float) -> list[tuple[str, float]]:
    """Return the phases of a register comparison with their expected seconds."""
    return [(f"{k}: cluster and register tests", 5 + 2 * duration_s) for k in names]


def compare_register(kinds: Sequence[StoreKind], regions: str, duration_s: float,
                     faults: tuple[Fault, ...], seed: int, run_dir: Path,
                     phase: Phase = _no_phase, clients: int = 10, keys: int = 5,
                     hosts: str | None = None) -> Comparison:
    """Run Jepsen's register test on each kind's cluster with eventual then consistent
    reads (writes in the first region, reads in the second, the same ``faults``) and return
    the comparison of their linearizability verdicts."""
    rs = region_set(regions)
    writer, reader = rs.regions[0], rs.regions[1 % len(rs.regions)]
    rows = []
    for kind in kinds:
        phase(f"{kind.name}: cluster and register tests")
        with cluster(kind, regions, f"compare-register-{kind.name}", hosts) as (c, leader):
            runs, dirs = {}, {}
            for consistency in CONSISTENCIES:
                spec = ProbeSpec(store=c.url, workload="register",
                                 options=ProbeOptions(consistency=consistency,
                                                      duration_s=duration_s, seed=seed),
                                 config=RegisterConfig(keys=keys, clients=clients,
                                                       writer_region=writer,
                                                       reader_region=reader),
                                 cluster=c.name if faults else None, faults=faults)
                run = probe(spec, run_dir / "runs", what=f"{kind.name}: the register probe")
                runs[consistency], dirs[consistency] = run.results, str(run.run_dir)
            rows.append(register_row(kind.name, leader, runs, dirs))
    results = {"schema_version": 1, "model": "compare-register",
               "title": f"linearizability on {regions}",
               "params": {"kinds": ",".join(k.name for k in kinds), "regions": regions,
                          "probe_duration_s": duration_s, "clients": clients, "keys": keys,
                          "seed": seed, "faults": _faults_json(faults)},
               "rows": rows, "tables": [register_table(rows, regions, faults)],
               "notes": [f"{r['store']}, {c} reads: {r[f'{c}_explanation']}"
                         for r in rows for c in CONSISTENCIES if r[f"{c}_explanation"]]}
    return Comparison(results)

"""``replicalab compare``: the real stores side by side on the same emulated regions."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from replicalab.cli.compare_register import compare_register
from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import Phases, progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.cluster import base
from replicalab.faults.schedule import Fault, check_within, parse_fault
from replicalab.history.rundir import Run, make_run_dir, save_results
from replicalab.regions import region_set
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.latency import LatencyConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import StalenessConfig


def _smooth(freshness: dict[str, list], width_ms: float = 5.0) -> tuple[list, list]:
    """Return (t, p) of the freshness curve merged into ``width_ms`` buckets."""
    t = np.asarray(freshness["t_ms"])
    if len(t) == 0:
        return [], []
    b = (t // width_ms).astype(int)
    fresh = np.bincount(b, weights=np.asarray(freshness["fresh"], float))
    total = np.bincount(b, weights=np.asarray(freshness["total"], float))
    keep = total > 0
    return ((np.flatnonzero(keep) * width_ms).tolist(), (fresh[keep] / total[keep]).tolist())


def _check_faults(faults: tuple[Fault, ...], regions: tuple[str, ...], duration_s: float
                  ) -> None:
    """Raise ValueError for a fault the 3-node clusters of ``regions`` cannot take within a
    probe of ``duration_s``, before any cluster is started."""
    for f in faults:
        if f.node is not None and f.node > 2:
            raise ValueError(f"fault {f.label!r}: the clusters have nodes 0..2")
        if f.region is not None and f.region not in regions:
            raise ValueError(f"fault {f.label!r}: the regions are {', '.join(regions)}")
    check_within(faults, duration_s)


def _percent(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _stale(r: dict[str, Any]) -> tuple[float, float | None]:
    """Return (fraction of reads stale, median over writes of the last stale ms after the
    write started): per write, so one slow write (a first write creating parents) does
    not stand for all."""
    f = r["freshness"]
    total, fresh = sum(f["total"]), sum(f["fresh"])
    return (1 - fresh / total if total else 0.0), r["periods"]["last_lt_100_median_ms"]


def _probe(spec: ProbeSpec, out: Path,
           progress: Callable[[float], None] | None = None) -> Run:
    """Return the probe's run; Ctrl-C or SIGTERM during it stops the whole comparison (the
    probe has saved its history; the cluster is brought down on the way out)."""
    run = run_probe(spec, out, progress)
    if run.interrupted:
        raise KeyboardInterrupt
    return run


UP_S = 5.0
"""Expected seconds to start a cluster: its progress weight beside the probes' durations."""


def latency_s(ops: int) -> float:
    """Return the expected seconds of a latency probe of ``ops`` per variant (its progress
    weight): four variants at up to two WAN round trips each, capped by its 60 s limit."""
    return min(60.0, 0.2 * ops)


def leader_region(c: Any) -> str | None:
    """Return the region of the cluster's leader or primary as its status reports it."""
    _, status = base.status(c.name)
    return next((c.nodes[i].region for i, s in enumerate(status)
                 if s.get("role") in ("leader", "primary")), None)


def staleness_plan(names: list[str], duration_s: float, ops: int) -> list[tuple[str, float]]:
    """Return the phases of a staleness comparison with their expected seconds."""
    return [p for k in names for p in (
        (f"{k}: starting a 3-node cluster", UP_S),
        (f"{k}: staleness probe, eventual reads", duration_s),
        (f"{k}: staleness probe, consistent reads", duration_s),
        (f"{k}: latency probe", latency_s(ops)))]


def _one(kind: str, regions: str, duration_s: float, ops: int, out: Path,
         faults: tuple[Fault, ...] = (), phases: Phases | None = None) -> dict[str, Any]:
    """Bring one cluster up, probe it (under ``faults``, the same schedule in each
    staleness probe), bring it down; return its row and eventual curve."""
    rs = region_set(regions)
    writer, reader = rs.regions[0], rs.regions[1 % len(rs.regions)]

    def phase(name: str) -> Callable[[float], None] | None:
        return phases.start(f"{kind}: {name}") if phases is not None else None

    phase("starting a 3-node cluster")
    c = base.up(kind, 3, regions, name=f"compare-{kind}")
    try:
        row: dict[str, Any] = {"store": kind, "url": c.url, "leader_region": leader_region(c)}
        curve = None
        for consistency in ("eventual", "consistent"):
            spec = ProbeSpec(store=c.url, workload="staleness", options=ProbeOptions(
                consistency=consistency, duration_s=duration_s, write_interval_s=1.0,
                read_rate=50, period_s=1.0),
                config=StalenessConfig(placement="separate-clients", writer_region=writer,
                                          reader_region=reader),
                cluster=c.name if faults else None, faults=faults)
            r = _probe(spec, out, phase(f"staleness probe, {consistency} reads")).results
            row[f"{consistency}_stale_fraction"], row[f"{consistency}_stale_window_ms"] = _stale(r)
            # the reader's availability by time (ops counts beside it): a reader blocked by
            # a partition counts for as long as it waited, not for its few timed-out ops
            reads = r["availability"].get("by_f", {}).get("read", {})
            row[f"{consistency}_availability"] = reads.get("overall")
            row[f"{consistency}_availability_during"] = reads.get("during_faults")
            row[f"{consistency}_availability_ops"] = reads.get("overall_ops")
            row[f"{consistency}_read_ops"] = reads.get("count", 0)
            row[f"{consistency}_availability_all"] = r["availability"]["overall"]
            row[f"{consistency}_lost_writes"] = r["lost_writes"]["lost"]
            if consistency == "eventual":
                curve = _smooth(r["freshness"])
        lat = _probe(ProbeSpec(store=c.url, workload="latency", config=LatencyConfig(ops=ops),
                               options=ProbeOptions(duration_s=60)), out,
                     phase("latency probe")).results
        for v, x in lat["variants"].items():
            row[f"{v} p50_ms"], row[f"{v} p99_ms"] = x["p50_ms"], x["p99_ms"]
        return {"row": row, "curve": curve}
    finally:
        base.down(c.name)


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


def _latency_one(kind: str, regions: str, ops: int, seed: int, out: Path,
                 phases: Phases | None = None) -> dict[str, Any]:
    """Bring one cluster up, run the latency workload from one client at the first node,
    bring it down; return its row."""
    if phases is not None:
        phases.start(f"{kind}: starting a 3-node cluster")
    c = base.up(kind, 3, regions, name=f"compare-latency-{kind}")
    try:
        leader = leader_region(c)
        run = _probe(ProbeSpec(store=c.url, workload="latency", config=LatencyConfig(ops=ops),
                               options=ProbeOptions(duration_s=60, seed=seed)), out,
                     phases.start(f"{kind}: latency probe") if phases is not None else None)
        if run.error:
            raise ValueError(f"{kind}: the latency probe stopped early ({run.error}); what "
                             f"was recorded is in {run.run_dir}")
        return latency_row(kind, run.results, leader)
    finally:
        base.down(c.name)


def _latency_table(rows: list[dict[str, Any]], regions: str) -> dict[str, Any]:
    """Return the comparison table (caption, header, rows of strings) of ``rows``."""
    variants = ("eventual read", "consistent read", "put", "conditional put")
    header = ["store", "leader/primary region",
              *(f"{v} mean / p50 / p99 (ms)" for v in variants),
              "consistent - eventual read mean (ms) [95 % CI]", "verdict"]
    body = []
    for r in rows:
        cells = [r["store"], r["leader_region"] or "-"]
        for v in variants:
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


def compare_latency(names: list[str], regions: str, ops: int, seed: int, out: Path,
                    as_json: bool) -> None:
    """Run the latency comparison of ``names`` and print/save it (see :func:`compare`)."""
    run_dir = _run_dir(out, "compare-latency", names)
    try:
        rows = []
        with progress_bar(f"compare --workload latency on {regions}", not as_json) as tick:
            phases = Phases(tick, [p for k in names for p in (
                (f"{k}: starting a 3-node cluster", UP_S),
                (f"{k}: latency probe", latency_s(ops)))])
            for k in names:
                rows.append(_latency_one(k, regions, ops, seed, run_dir / "runs", phases))
    except ValueError as err:
        _drop_if_empty(run_dir)
        fail(str(err))
    table = _latency_table(rows, regions)
    results = {"schema_version": 1, "model": "compare-latency",
               "title": f"consistent vs eventual read latency on {regions}",
               "params": {"kinds": ",".join(names), "regions": regions, "latency_ops": ops,
                          "seed": seed},
               "rows": rows, "tables": [table]}
    save_results(results, run_dir)
    from replicalab.report.model_page import render_model_report

    report = render_model_report(results, run_dir, kind="comparison")
    if as_json:
        sys.stdout.write(json.dumps({**results, "report": str(report)}) + "\n")
        return
    print_comparison(results, report)


def print_comparison(results: dict[str, Any], report: Path | str) -> None:
    """Print a comparison's tables (every value whole, as in its results) and report path."""
    show(TableData.from_json(t) for t in results["tables"])
    say(f"report: {report}")


def _run_dir(out: Path, what: str, names: list[str]) -> Path:
    try:
        return make_run_dir(out, what, "-".join(names))
    except ValueError as err:
        fail(str(err))


def _drop_if_empty(run_dir: Path) -> None:
    """Remove a comparison's run directory if nothing was recorded in it (a store that
    could not start): bad input leaves no empty directory behind."""
    inner = run_dir / "runs"
    if inner.is_dir() and not any(inner.iterdir()):
        inner.rmdir()
    if run_dir.is_dir() and not any(run_dir.iterdir()):
        run_dir.rmdir()


def compare(
    kinds: Annotated[str, typer.Option(help="Comma-separated cluster kinds.")
                     ] = "redis,postgres,etcd,zookeeper",
    regions: Annotated[str, typer.Option(help="Region set of the clusters.")] = "dc3",
    duration: Annotated[str, typer.Option(
        help="Length of each staleness (and register) probe: 30s, 2m; a plain number is "
             "seconds.")] = "30s",
    ops: Annotated[int, typer.Option(help="Operations per variant in the latency probe.")
                   ] = 200,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directories.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    workload: Annotated[str, typer.Option(
        help="staleness: staleness probes plus a short latency probe; latency: only the "
             "latency workload, with consistent vs eventual read differences and verdicts; "
             "register: Jepsen's register test, linearizability with eventual and consistent "
             "reads."
    )] = "staleness",
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap intervals.")] = 1,
    fault: Annotated[list[str] | None, typer.Option(
        help='Fault for every staleness probe, repeatable: "at=10s partition region=US-W '
             'for=10s" (crash, pause, partition, slow ... ms=200; node=0..2 or '
             'region=NAME); adds availability and lost acknowledged writes.')] = None,
) -> None:
    """Start each store as a 3-node cluster on the same regions (writer in the first region,
    reader in the second) and compare staleness and latency side by side.

    Example: replicalab compare --kinds redis,postgres,etcd,zookeeper --regions dc3

    Example: replicalab compare --kinds redis,etcd --fault "at=10s partition region=US-W for=10s"

    Example: replicalab compare --workload latency --ops 300 --kinds etcd,zookeeper

    Example: replicalab compare --workload register --fault "at=3s partition node=1 for=4s"
    """
    names = [k.strip() for k in kinds.split(",") if k.strip()]
    try:
        if not names:
            raise ValueError("--kinds is empty; give e.g. redis,postgres,etcd,zookeeper")
        if workload not in ("staleness", "latency", "register"):
            raise ValueError(f"--workload {workload!r}: use staleness, latency or register")
        duration_s = parse_duration_s(duration, "--duration")
        if ops < 2:
            raise ValueError(f"--ops must be at least 2 (got {ops})")
        for k in names:
            base.driver(k).check_installed()
        faults = tuple(parse_fault(f) for f in fault or [])
        if faults and workload == "latency":
            raise ValueError("--fault applies to the staleness and register comparisons; "
                             "drop it or use --workload staleness or register")
        _check_faults(faults, region_set(regions).regions, duration_s)
    except ValueError as err:
        fail(str(err))
    if workload == "latency":
        compare_latency(names, regions, ops, seed, out, as_json)
        return
    if workload == "register":
        compare_register(names, regions, duration_s, faults, seed, out, as_json)
        return
    run_dir = _run_dir(out, "compare", names)
    try:
        done = []
        with progress_bar(f"compare on {regions}", not as_json) as tick:
            phases = Phases(tick, staleness_plan(names, duration_s, ops))
            for k in names:
                done.append(_one(k, regions, duration_s, ops, run_dir / "runs", faults,
                                 phases))
    except ValueError as err:
        _drop_if_empty(run_dir)
        fail(str(err))
    staleness_results(done, regions, duration_s, ops, faults, run_dir, as_json)


def staleness_results(done: list[dict[str, Any]], regions: str, duration_s: float, ops: int,
                      faults: tuple[Fault, ...], run_dir: Path, as_json: bool) -> None:
    """Save, render and print the staleness comparison of the stores in ``done``."""
    names = [d["row"]["store"] for d in done]
    rows = [d["row"] for d in done]
    header = ["store", "leader/primary region", "eventual: stale reads",
              "eventual: stale window (ms, median per write)",
              "consistent: stale reads", "consistent: stale window (ms)"]
    if faults:
        header += ["eventual: read time available during the fault / whole run (reads ok)",
                   "consistent: read time available during the fault / whole run (reads ok)",
                   "lost acknowledged writes"]
    variants = ("eventual read", "consistent read", "put", "conditional put")
    header += [f"{v} p50 / p99 (ms)" for v in variants]

    def fmt(row: dict[str, Any]) -> list[str]:
        cells = [row["store"], row.get("leader_region") or "-"]
        for c in ("eventual", "consistent"):
            w = row[f"{c}_stale_window_ms"]
            cells += [f"{100 * row[f'{c}_stale_fraction']:.2f}%", "-" if w is None else f"{w:g}"]
        if faults:
            cells += [f"{_percent(row.get(f'{c}_availability_during'))} / "
                      f"{_percent(row[f'{c}_availability'])} "
                      f"({_percent(row[f'{c}_availability_ops'])} of "
                      f"{row[f'{c}_read_ops']:,})" for c in ("eventual", "consistent")]
            cells.append(str(row["eventual_lost_writes"] + row["consistent_lost_writes"]))
        for v in variants:
            cells.append(f"{row[f'{v} p50_ms']:.2f} / {row[f'{v} p99_ms']:.2f}"
                         if f"{v} p50_ms" in row else "n/a")
        return cells

    under = f" under {', '.join(f.label for f in faults)}" if faults else ""
    rs = region_set(regions).regions
    table = {"caption": f"3-node clusters on {regions}{under}: writer in {rs[0]}, reads at "
                        f"the {rs[1 % len(rs)]} replica, latency from one client at the first "
                        "node; where the leader/primary sits changes the figures",
             "header": header, "rows": [fmt(r) for r in rows]}
    results = {"schema_version": 1, "model": "compare", "title": f"stores on {regions}",
               "params": {"kinds": ",".join(names), "regions": regions,
                          "probe_duration_s": duration_s, "latency_ops": ops,
                          "faults": [f.label + f" at {f.at_s:g}s for {f.for_s:g}s"
                                     for f in faults]},
               "rows": rows, "tables": [table]}
    save_results(results, run_dir)
    from replicalab.report.model_page import render_model_report
    from replicalab.report.model_plots import freshness_overlay_figure

    fig = freshness_overlay_figure({d["row"]["store"]: d["curve"] for d in done}, 300.0)
    report = render_model_report(results, run_dir, figures=[(
        "fig-freshness", "Eventual reads: probability of reading the freshest value against "
        "time since the write started (5 ms buckets).", fig)], kind="comparison")
    if as_json:
        sys.stdout.write(json.dumps({**results, "report": str(report)}) + "\n")
        return
    print_comparison(results, report)

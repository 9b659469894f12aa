"""``replicalab compare``: the real stores side by side on the same emulated regions."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from replicalab.cli.compare_register import compare_register
from replicalab.cli.errors import fail
from replicalab.cli.probe import out_console
from replicalab.cli.progress import progress_bar
from replicalab.cluster import base
from replicalab.faults.schedule import Fault, parse_fault
from replicalab.regions import region_set
from replicalab.report.model_page import render_model_report
from replicalab.report.model_plots import freshness_overlay_figure
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.latency import LatencyConfig
from replicalab.workloads.runner import (
    ProbeRun,
    ProbeSpec,
    make_run_dir,
    run_probe,
    save_results,
)
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
        if f.at_s >= duration_s:
            raise ValueError(f"fault {f.label!r} starts after the {duration_s:g} s probe; "
                             "make at= smaller or --duration longer")


def _percent(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _stale(r: dict[str, Any]) -> tuple[float, float | None]:
    """Return (fraction of reads stale, median over writes of the last stale ms after the
    write started): per write, so one slow write (a first write creating parents) does
    not stand for all."""
    f = r["freshness"]
    total, fresh = sum(f["total"]), sum(f["fresh"])
    return (1 - fresh / total if total else 0.0), r["periods"]["last_lt_100_median_ms"]


def _probe(spec: ProbeSpec, out: Path) -> ProbeRun:
    """Return the probe's run; Ctrl-C or SIGTERM during it stops the whole comparison (the
    probe has saved its history; the cluster is brought down on the way out)."""
    run = run_probe(spec, out)
    if run.interrupted:
        raise KeyboardInterrupt
    return run


def _one(kind: str, regions: str, duration_s: float, ops: int, out: Path,
         faults: tuple[Fault, ...] = ()) -> dict[str, Any]:
    """Bring one cluster up, probe it (under ``faults``, the same schedule in each
    staleness probe), bring it down; return its row and eventual curve."""
    rs = region_set(regions)
    writer, reader = rs.regions[0], rs.regions[1 % len(rs.regions)]
    c = base.up(kind, 3, regions, name=f"compare-{kind}")
    try:
        row: dict[str, Any] = {"store": kind, "url": c.url}
        curve = None
        for consistency in ("eventual", "consistent"):
            spec = ProbeSpec(store=c.url, workload="staleness", options=ProbeOptions(
                consistency=consistency, duration_s=duration_s, write_interval_s=1.0,
                read_rate=50, period_s=1.0),
                config=StalenessConfig(placement="separate-clients", writer_region=writer,
                                          reader_region=reader),
                cluster=c.name if faults else None, faults=faults)
            r = _probe(spec, out).results
            row[f"{consistency}_stale_fraction"], row[f"{consistency}_stale_window_ms"] = _stale(r)
            # the reader's availability by time (ops counts beside it): a reader blocked by
            # a partition counts for as long as it waited, not for its few timed-out ops
            reads = r["availability"].get("by_f", {}).get("read", {})
            row[f"{consistency}_availability"] = reads.get("overall")
            row[f"{consistency}_availability_ops"] = reads.get("overall_ops")
            row[f"{consistency}_read_ops"] = reads.get("count", 0)
            row[f"{consistency}_availability_all"] = r["availability"]["overall"]
            row[f"{consistency}_lost_writes"] = r["lost_writes"]["lost"]
            if consistency == "eventual":
                curve = _smooth(r["freshness"])
        lat = _probe(ProbeSpec(store=c.url, workload="latency", config=LatencyConfig(ops=ops),
                               options=ProbeOptions(duration_s=60)), out).results
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


def _latency_one(kind: str, regions: str, ops: int, seed: int, out: Path) -> dict[str, Any]:
    """Bring one cluster up, run the latency workload from one client at the first node,
    bring it down; return its row."""
    c = base.up(kind, 3, regions, name=f"compare-latency-{kind}")
    try:
        _, status = base.status(c.name)
        leader = next((c.nodes[i].region for i, s in enumerate(status)
                       if s.get("role") in ("leader", "primary")), None)
        run = _probe(ProbeSpec(store=c.url, workload="latency", config=LatencyConfig(ops=ops),
                               options=ProbeOptions(duration_s=60, seed=seed)), out)
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
    try:
        run_dir = make_run_dir(out, "compare-latency", "-".join(names))
        rows = []
        with progress_bar("comparing read latency", not as_json) as tick:
            for i, k in enumerate(names):
                rows.append(_latency_one(k, regions, ops, seed, run_dir / "runs"))
                tick((i + 1) / len(names))
    except ValueError as err:
        fail(str(err))
    table = _latency_table(rows, regions)
    results = {"schema_version": 1, "model": "compare-latency",
               "title": f"consistent vs eventual read latency on {regions}",
               "params": {"kinds": ",".join(names), "regions": regions, "latency_ops": ops,
                          "seed": seed},
               "rows": rows, "tables": [table]}
    save_results(results, run_dir)
    report = render_model_report(results, run_dir, kind="comparison")
    if as_json:
        sys.stdout.write(json.dumps({**results, "report": str(report)}) + "\n")
        return
    t = Table(title=table["caption"], title_justify="left")
    for h in table["header"]:
        t.add_column(h)
    for r in table["rows"]:
        t.add_row(*r)
    out_console.print(t)
    out_console.print(f"report: {report}")


def compare(
    kinds: Annotated[str, typer.Option(help="Comma-separated cluster kinds.")
                     ] = "redis,postgres,etcd,zookeeper",
    regions: Annotated[str, typer.Option(help="Region set of the clusters.")] = "dc3",
    duration: Annotated[float, typer.Option(help="Seconds of each staleness probe.")] = 30.0,
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
        for k in names:
            base.driver(k).check_installed()
        if not duration > 0 or ops < 2:
            raise ValueError("--duration must be positive and --ops at least 2")
        if workload not in ("staleness", "latency", "register"):
            raise ValueError(f"--workload {workload!r}: use staleness, latency or register")
        faults = tuple(parse_fault(f) for f in fault or [])
        if faults and workload == "latency":
            raise ValueError("--fault applies to the staleness and register comparisons; "
                             "drop it or use --workload staleness or register")
        _check_faults(faults, region_set(regions).regions, duration)
    except ValueError as err:
        fail(str(err))
    if workload == "latency":
        compare_latency(names, regions, ops, seed, out, as_json)
        return
    if workload == "register":
        compare_register(names, regions, duration, faults, seed, out, as_json)
        return
    try:
        run_dir = make_run_dir(out, "compare", "-".join(names))
        done = []
        with progress_bar("comparing stores") as tick:
            for i, k in enumerate(names):
                done.append(_one(k, regions, duration, ops, run_dir / "runs", faults))
                tick((i + 1) / len(names))
    except ValueError as err:
        fail(str(err))
    rows = [d["row"] for d in done]
    header = ["store", "eventual: stale reads", "eventual: stale window (ms, median per write)",
              "consistent: stale reads", "consistent: stale window (ms)"]
    if faults:
        header += ["eventual: read time available (reads ok)",
                   "consistent: read time available (reads ok)", "lost acknowledged writes"]
    variants = ("eventual read", "consistent read", "put", "conditional put")
    header += [f"{v} p50 / p99 (ms)" for v in variants]

    def fmt(row: dict[str, Any]) -> list[str]:
        cells = [row["store"]]
        for c in ("eventual", "consistent"):
            w = row[f"{c}_stale_window_ms"]
            cells += [f"{100 * row[f'{c}_stale_fraction']:.2f}%", "-" if w is None else f"{w:g}"]
        if faults:
            cells += [f"{_percent(row[f'{c}_availability'])} "
                      f"({_percent(row[f'{c}_availability_ops'])} of "
                      f"{row[f'{c}_read_ops']:,})" for c in ("eventual", "consistent")]
            cells.append(str(row["eventual_lost_writes"] + row["consistent_lost_writes"]))
        for v in variants:
            cells.append(f"{row[f'{v} p50_ms']:.2f} / {row[f'{v} p99_ms']:.2f}"
                         if f"{v} p50_ms" in row else "n/a")
        return cells

    under = f" under {', '.join(f.label for f in faults)}" if faults else ""
    table = {"caption": f"3-node clusters on {regions}{under}: staleness of reads at the "
                        "second region's replica, latency from one client", "header": header,
             "rows": [fmt(r) for r in rows]}
    results = {"schema_version": 1, "model": "compare", "title": f"stores on {regions}",
               "params": {"kinds": ",".join(names), "regions": regions,
                          "probe_duration_s": duration, "latency_ops": ops,
                          "faults": [f.label + f" at {f.at_s:g}s for {f.for_s:g}s"
                                     for f in faults]},
               "rows": rows, "tables": [table]}
    save_results(results, run_dir)
    fig = freshness_overlay_figure({d["row"]["store"]: d["curve"] for d in done}, 300.0)
    report = render_model_report(results, run_dir, figures=[(
        "fig-freshness", "Eventual reads: probability of reading the freshest value against "
        "time since the write started (5 ms buckets).", fig)], kind="comparison")
    if as_json:
        sys.stdout.write(json.dumps({**results, "report": str(report)}) + "\n")
        return
    t = Table(title=table["caption"], title_justify="left")
    for h in header:
        t.add_column(h)
    for r in table["rows"]:
        t.add_row(*r)
    out_console.print(t)
    out_console.print(f"report: {report}")

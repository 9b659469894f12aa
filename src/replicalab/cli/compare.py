"""``replicalab compare``: the real stores side by side on the same emulated regions."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from replicalab.cli.errors import fail
from replicalab.cli.probe import out_console
from replicalab.cli.progress import progress_bar
from replicalab.cluster import base
from replicalab.regions import region_set
from replicalab.report.model_page import render_model_report
from replicalab.report.model_plots import freshness_overlay_figure
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, make_run_dir, run_probe, save_results
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


def _stale(r: dict[str, Any]) -> tuple[float, float | None]:
    """Return (fraction of reads stale, median over writes of the last stale ms after the
    write started): per write, so one slow write (a first write creating parents) does
    not stand for all."""
    f = r["freshness"]
    total, fresh = sum(f["total"]), sum(f["fresh"])
    return (1 - fresh / total if total else 0.0), r["periods"]["last_lt_100_median_ms"]


def _one(kind: str, regions: str, duration_s: float, ops: int, out: Path) -> dict[str, Any]:
    """Bring one cluster up, probe it, bring it down; return its row and eventual curve."""
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
                staleness=StalenessConfig(placement="separate-clients", writer_region=writer,
                                          reader_region=reader))
            r = run_probe(spec, out).results
            row[f"{consistency}_stale_fraction"], row[f"{consistency}_stale_window_ms"] = _stale(r)
            if consistency == "eventual":
                curve = _smooth(r["freshness"])
        lat = run_probe(ProbeSpec(store=c.url, workload="latency", ops=ops,
                                  options=ProbeOptions(duration_s=60)), out).results
        for v, x in lat["variants"].items():
            row[f"{v} p50_ms"], row[f"{v} p99_ms"] = x["p50_ms"], x["p99_ms"]
        return {"row": row, "curve": curve}
    finally:
        base.down(c.name)


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
) -> None:
    """Start each store as a 3-node cluster on the same regions (writer in the first region,
    reader in the second) and compare staleness and latency side by side.

    Example: replicalab compare --kinds redis,postgres,etcd,zookeeper --regions dc3
    """
    names = [k.strip() for k in kinds.split(",") if k.strip()]
    try:
        for k in names:
            base.driver(k).check_installed()
        if not duration > 0 or ops < 2:
            raise ValueError("--duration must be positive and --ops at least 2")
        run_dir = make_run_dir(out, "compare", "-".join(names))
        done = []
        with progress_bar("comparing stores") as tick:
            for i, k in enumerate(names):
                done.append(_one(k, regions, duration, ops, run_dir / "runs"))
                tick((i + 1) / len(names))
    except ValueError as err:
        fail(str(err))
    rows = [d["row"] for d in done]
    header = ["store", "eventual: stale reads", "eventual: stale window (ms, median per write)",
              "consistent: stale reads", "consistent: stale window (ms)"]
    variants = ("eventual read", "consistent read", "put", "conditional put")
    header += [f"{v} p50 / p99 (ms)" for v in variants]

    def fmt(row: dict[str, Any]) -> list[str]:
        cells = [row["store"]]
        for c in ("eventual", "consistent"):
            w = row[f"{c}_stale_window_ms"]
            cells += [f"{100 * row[f'{c}_stale_fraction']:.2f}%", "-" if w is None else f"{w:g}"]
        for v in variants:
            cells.append(f"{row[f'{v} p50_ms']:.2f} / {row[f'{v} p99_ms']:.2f}"
                         if f"{v} p50_ms" in row else "n/a")
        return cells

    table = {"caption": f"3-node clusters on {regions}: staleness of reads at the second "
                        "region's replica, latency from one client", "header": header,
             "rows": [fmt(r) for r in rows]}
    results = {"schema_version": 1, "model": "compare", "title": f"stores on {regions}",
               "params": {"kinds": ",".join(names), "regions": regions,
                          "probe_duration_s": duration, "latency_ops": ops},
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

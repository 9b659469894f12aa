"""``replicalab compare``: the real stores side by side on the same emulated regions. Parses
the options, runs one comparison of ``experiments/compare.py``, saves and renders it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import Phases, progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.cluster import kinds as store_kinds
from replicalab.experiments import compare as experiment
from replicalab.faults.schedule import parse_fault
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.regions import region_set

WORKLOADS = ("staleness", "latency", "register")


def print_comparison(results: dict[str, Any], report: Path | str) -> None:
    """Print a comparison's tables (every value whole, as in its results) and report path."""
    show(TableData.from_json(t) for t in results["tables"])
    for note in results.get("notes", []):
        say(note)
    say(f"report: {report}")


def _drop_if_empty(run_dir: Path) -> None:
    """Remove a comparison's run directory if nothing was recorded in it (a store that
    could not start): bad input leaves no empty directory behind."""
    inner = run_dir / "runs"
    if inner.is_dir() and not any(inner.iterdir()):
        inner.rmdir()
    if run_dir.is_dir() and not any(run_dir.iterdir()):
        run_dir.rmdir()


def _render(comparison: experiment.Comparison, run_dir: Path) -> Path:
    from replicalab.report.model_page import render_model_report
    from replicalab.report.model_plots import freshness_overlay_figure

    figures = []
    if comparison.curves:
        figures.append(("fig-freshness", "Eventual reads: probability of reading the freshest "
                        "value against time since the write started (5 ms buckets).",
                        freshness_overlay_figure(comparison.curves, 300.0)))
    return render_model_report(comparison.results, run_dir, figures=figures,
                               kind="comparison")


def compare(
    kinds: Annotated[str, typer.Option(
        help=f"Comma-separated store kinds: {store_kinds.help_text()}.")
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
    hosts: Annotated[str | None, typer.Option(
        help="Inventory (TOML) of the hosts each cluster runs on, over SSH, or the name of "
             "a set `replicalab hosts up` made (docs/hosts.md).")] = None,
) -> None:
    """Start each store as a 3-node cluster on the same regions (writer in the first region,
    reader in the second) and compare staleness and latency side by side.

    Example: replicalab compare --kinds redis,postgres,etcd,zookeeper --regions dc3

    Example: replicalab compare --kinds redis,etcd --fault "at=10s partition region=US-W for=10s"

    Example: replicalab compare --workload latency --ops 300 --kinds etcd,zookeeper

    Example: replicalab compare --workload register --fault "at=3s partition node=1 for=4s"
    """
    try:
        chosen = [store_kinds.resolve(k.strip()) for k in kinds.split(",") if k.strip()]
        if not chosen:
            raise ValueError("--kinds is empty; give e.g. redis,postgres,etcd,zookeeper")
        if workload not in WORKLOADS:
            raise ValueError(f"--workload {workload!r}: use staleness, latency or register")
        duration_s = parse_duration_s(duration, "--duration")
        if ops < 2:
            raise ValueError(f"--ops must be at least 2 (got {ops})")
        for k in chosen if hosts is None else ():  # on hosts: checked there at start
            k.make_driver().check_installed()
        faults = tuple(parse_fault(f) for f in fault or [])
        if faults and workload == "latency":
            raise ValueError("--fault applies to the staleness and register comparisons; "
                             "drop it or use --workload staleness or register")
        experiment.check_faults(faults, region_set(regions).regions, duration_s)
        names = [k.name for k in chosen]
        what = {"staleness": "compare", "latency": "compare-latency",
                "register": "compare-register"}[workload]
        run_dir = make_run_dir(out, what, "-".join(names))
    except ValueError as err:
        fail(str(err))
    plan = {"staleness": lambda: experiment.staleness_phases(names, duration_s, ops),
            "latency": lambda: experiment.latency_phases(names, ops),
            "register": lambda: experiment.register_phases(names, duration_s)}[workload]()
    label = f"compare on {regions}" if workload == "staleness" else \
        f"compare --workload {workload} on {regions}"
    try:
        with progress_bar(label, not as_json) as tick:
            phase = Phases(tick, plan).start
            if workload == "staleness":
                done = experiment.compare_staleness(chosen, regions, duration_s, ops, faults,
                                                    run_dir, phase, hosts)
            elif workload == "latency":
                done = experiment.compare_latency(chosen, regions, ops, seed, run_dir, phase,
                                                  hosts)
            else:
                done = experiment.compare_register(chosen, regions, duration_s, faults, seed,
                                                   run_dir, phase, hosts=hosts)
    except ValueError as err:
        _drop_if_empty(run_dir)
        fail(str(err))
    save_results(done.results, run_dir)
    report = _render(done, run_dir)
    if as_json:
        sys.stdout.write(json.dumps({**done.results, "report": str(report)}) + "\n")
        return
    print_comparison(done.results, report)
    if workload == "register":
        say(f"each run's report with its timeline: {run_dir / 'runs'}")

"""``replicalab probe``, ``replicalab report`` and ``replicalab demo``: options parsed,
``replicalab.api`` runs them (``probe``, ``probe_batch``, ``report``, ``demo``), the
outcome printed."""

from __future__ import annotations

import gc
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.api import batches, catalog, lifecycle, reporting, runs
from replicalab.api.words import fmt_s, plural
from replicalab.cli.errors import fail
from replicalab.cli.output import attempt, emit, say, show
from replicalab.cli.progress import Bars

__all__ = ["demo", "finish", "probe", "report", "unchecked_exit"]


def finish(run: runs.Run, as_json: bool) -> None:
    """Print the run (its report written) and exit as it ended; a run interrupted before
    its checks says how to check it (:func:`unchecked_exit`)."""
    if not run.checked:
        unchecked_exit(run, as_json)
    emit(run.outcome(), as_json)


def unchecked_exit(run: runs.Run, as_json: bool) -> None:
    """Exit 130 with one line for a run interrupted before its checks: how far it got
    (simulated seconds for a simulation), where its history is, and the command that
    checks it."""
    r = run.raw
    # the simulation's objects are many and about to go: no cyclic GC walking them again
    # while the interpreter exits (a quarter second of the one Ctrl-C allows)
    gc.freeze()
    if as_json:
        sys.stdout.write(json.dumps({**r, "run_dir": str(run.path)}, sort_keys=True) + "\n")
    try:
        fail(f"interrupted after {fmt_s(r['ran_s'])} of {fmt_s(r['duration_s'])}"
             f"{' simulated' if r.get('virtual', True) else ''}; "
             f"its history ({plural(r['operations'], 'operation')}) is saved in "
             f"{run.path}; `replicalab report {run.path}` checks it and draws the report", 130)
    finally:
        # everything is saved and a simulation starts no process: exit now rather than
        # free millions of simulated objects one by one (0.2-0.4 s of the second Ctrl-C
        # allows, for 2 M operations)
        lifecycle.stop_all()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


def probe(
    store: Annotated[str, typer.Option(help="Store URL, e.g. sim://simpledb, "
                                      "sim://quorum?n=3&r=1&w=1&regions=aws5; schemes: "
                                      + ", ".join(f"{s}://" for s in catalog.store_schemes())
                                      + " and those of installed adapters (docs/your-store.md)."
                                      )] = "sim://simpledb",
    workload: Annotated[str, typer.Option(help=" | ".join(catalog.workloads()) + ".")
                        ] = "staleness",
    consistency: Annotated[str, typer.Option(help="eventual | consistent reads.")] = "eventual",
    duration: Annotated[str, typer.Option(help="How long to probe: 300s, 5m, 1h.")] = "5m",
    seed: Annotated[int, typer.Option(help="Seed: same seed, same simulated history.")] = 1,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")] = Path(
        "runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    write_interval: Annotated[str, typer.Option(help="Time between writes.")] = "3s",
    read_rate: Annotated[float, typer.Option(help="Reads per second per reader.")] = 50.0,
    period: Annotated[str, typer.Option(help="Measurement period for per-period "
                                        "statistics.")] = "5m",
    fault: Annotated[list[str] | None, typer.Option(
        help='Fault on the cluster or on sim://primary and sim://quorum, repeatable: '
             '"at=30s crash node=2 for=20s" (crash, pause, partition, slow ... ms=200; '
             'node=N or region=NAME).')] = None,
    faults: Annotated[Path | None, typer.Option(
        help="TOML file of [[fault]] tables (action, at, for, node or region, ms).")] = None,
    cluster: Annotated[str | None, typer.Option(
        help="Cluster the faults act on (default: the one whose URL is --store).")] = None,
    prefix: Annotated[str | None, typer.Option(
        help="Real stores: the key prefix every key of the run goes under (default "
             "replicalab/RUN-ID/; printed before the run).", show_default=False)] = None,
    keep: Annotated[bool, typer.Option(
        "--keep", help="Real stores: keep the run's keys (by default they are removed at "
                       "the end).")] = False,
    repeats: Annotated[int, typer.Option(
        help="Run the probe this many times, with seeds --seed, --seed+1, ...: a batch "
             "whose figures are merged, with their spread across runs.")] = 1,
    sweep: Annotated[list[str] | None, typer.Option(
        help="Repeatable: KEY=V1,V2,... runs the batch at each value (every combination "
             "of several): a probe option (read_rate=10,50), a workload option "
             "(readers=1,4) or a parameter of the store URL (flush_ms=300,500).")] = None,
    workers: Annotated[int, typer.Option(
        help="Run a batch's simulations on this many local processes.")] = 1,
    ray: Annotated[str | None, typer.Option(
        help="Run a batch's simulations as tasks on a Ray cluster: ADDRESS, or 'local' for "
             "a local instance; needs replicalab[ray].")] = None,
    **workload_flags: Any,
) -> None:
    """Probe a store's consistency as its clients see it.

    Example: replicalab probe --store sim://simpledb --workload staleness --duration 1h

    Example: replicalab probe --workload sweep --clients 1,10,100 --total 2000 --variants put

    Example: replicalab probe --workload register --keys 5 --clients 10 --mix read=50,cas=50

    Example: replicalab probe --store 'redis://:PASSWORD@HOST:6379/2' --duration 2m
    (your own store: keys under a prefix, removed at the end; docs/your-store.md)

    Example: replicalab probe --duration 5m --repeats 20 --workers 2

    Example: replicalab probe --store sim://quorum --sweep r=1,2 --sweep w=1,2 --repeats 5
    """
    options = dict(consistency=consistency, seed=seed, write_interval=write_interval,
                   read_rate=read_rate, period=period, faults=list(fault or []),
                   faults_file=faults, cluster=cluster, prefix=prefix, keep=keep,
                   **workload_flags)

    def run() -> Any:  # a Run, or a batch's Outcome
        if repeats != 1 or sweep or workers != 1 or ray is not None:
            request = runs.probe_request(store, workload, duration, **options)
            return batches.probe_batch(request, repeats, sweep or [], workers, ray, out,
                                       Bars(not as_json))
        return runs.probe(store, workload, duration, out=out, progress=Bars(not as_json),
                          announce=lambda line: say(line, err=True), check_interrupted=False,
                          **options)

    done = attempt(run, {"faults_file": "--faults", "faults": "--fault"})
    if isinstance(done, runs.Run):
        finish(done, as_json)
    else:
        emit(done, as_json)


def _with_workload_flags(fn: Any) -> Any:
    """Give ``fn`` (whose ``**workload_flags`` take them) one option per workload option of
    the catalog, so that a workload's options are declared by the workload alone."""
    sig = inspect.signature(fn, eval_str=True)
    fixed = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    extra = []
    for opt in catalog.workload_options():
        if opt.name in sig.parameters:
            raise RuntimeError(f"workload option {opt.name!r} clashes with a common probe "
                               "option; rename it")
        extra.append(inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                       annotation=Annotated[opt.type | None, typer.Option(
                                           opt.option, help=opt.help, show_default=False)]))
    fn.__signature__ = sig.replace(parameters=[*fixed, *extra])
    return fn


_with_workload_flags(probe)


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by probe, load, "
                                             "queue run or placement live.")],
) -> None:
    """Re-check a saved run from its history and re-render its report; says whether the
    re-check agrees with the saved results (a queue run: every delivery accounted for
    again; a placement-live run: lost writes).

    Example: replicalab report runs/20261122T010203Z-staleness-sim-simpledb
    """
    try:
        outcome = reporting.report(run_dir)
    except (OSError, ValueError) as err:
        fail(str(err))
    say(f"report: {outcome.report}")
    for line in outcome.remarks:
        say(line)


def demo(
    out: Annotated[Path, typer.Option(help="Directory that receives the run directories.")
                   ] = Path("runs"),
    duration: Annotated[str, typer.Option(help="Simulated time per probe: 2h, 30m.")] = "2h",
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 1,
) -> None:
    """Reproduce seed 003 §2.1.1 on the simulated SimpleDB and show where the reports are.

    Example: replicalab demo --duration 2h
    """
    done = attempt(lambda: runs.demo(duration, seed, out, Bars(), check_interrupted=False))
    reports = []
    for run, consistency in zip(done, runs.DEMO_READS, strict=False):
        if not run.checked:
            unchecked_exit(run, False)  # Ctrl-C: the history saved at once, one line
        report = run.report()
        show(run.table(f"{runs.DEMO_STORE}: {consistency} reads, {duration} simulated"))
        reports.append((consistency, report))
        if run.interrupted:
            fail(f"interrupted; partial report in {report}", 130)
    for consistency, r in reports:
        say(f"report, {consistency} reads: {r}")

"""``replicalab probe`` and ``replicalab report``."""

from __future__ import annotations

import gc
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.api.request import ProbeRequest, flags_by_name
from replicalab.api.summary import summary_rows, summary_title
from replicalab.cli import rundir
from replicalab.cli.errors import UserError, fail
from replicalab.cli.output import TableData, out_console, say, show
from replicalab.cli.progress import fmt_s, progress_bar
from replicalab.cli.timeparse import noted
from replicalab.cli.words import plural
from replicalab.cluster.process import stop_all
from replicalab.history.rundir import Run, load_results
from replicalab.stores.base import short_url
from replicalab.stores.registry import schemes
from replicalab.workloads import registry
from replicalab.workloads.base import Flag
from replicalab.workloads.runner import recheck, run_probe

__all__ = ["finish", "out_console", "probe", "report", "summary_table", "unchecked_exit"]


def summary_table(results: dict[str, Any], title: str) -> TableData:
    """Return the headline figures of one probe's results as a two-column table: the
    rows its workload declares, latency per operation, then the faults (the rows are the
    Python API's, ``api/summary.py``, so a notebook shows the same)."""
    t = TableData(title, ["measure", "value"], right=(1,))
    for measure, value in summary_rows(results):
        t.add(measure, value)
    return t


def finish(run: Run, as_json: bool) -> None:
    """Render the report, print the outcome, and exit 130/2 if the run was cut short (a
    simulation interrupted before its checks: one line naming its history and the command
    that checks it)."""
    if not run.results.get("checked", True):
        unchecked_exit(run, as_json)
    from replicalab.report import render_report

    report = render_report(run.results, run.run_dir)
    table = summary_table(run.results, summary_title(run.results))
    keys = run.keys.to_json() if run.keys is not None else None
    if as_json:
        sys.stdout.write(json.dumps({**run.results, "run_dir": str(run.run_dir),
                                     "report": str(report), "tables": [table.to_json()],
                                     "keys": keys}, sort_keys=True) + "\n")
    else:
        show(table)
        if run.keys is not None:
            say(run.keys.line())
        say(f"report: {report}")
    if run.interrupted:
        fail(f"interrupted; the history so far and a partial report are in {run.run_dir}", 130)
    if run.error:
        fail(f"the run stopped early ({run.error}); what was recorded is in {run.run_dir}")


def unchecked_exit(run: Run, as_json: bool) -> None:
    """Exit 130 with one line for a simulation interrupted before its checks: how far it
    got, where its history is, and the command that checks it (``run_probe`` with
    ``check_interrupted=False``)."""
    r = run.results
    # the simulation's objects are many and about to go: no cyclic GC walking them again
    # while the interpreter exits (a quarter second of the one Ctrl-C allows)
    gc.freeze()
    if as_json:
        sys.stdout.write(json.dumps({**r, "run_dir": str(run.run_dir)}, sort_keys=True)
                         + "\n")
    try:
        fail(f"interrupted after {fmt_s(r['ran_s'])} of {fmt_s(r['duration_s'])}"
             f"{' simulated' if r.get('virtual', True) else ''}; "
             f"its history ({plural(r['operations'], 'operation')}) is saved in "
             f"{run.run_dir}; `replicalab report {run.run_dir}` checks it and draws the report",
             130)
    finally:
        # everything is saved and a simulation starts no process: exit now rather than
        # free millions of simulated objects one by one (0.2-0.4 s of the second Ctrl-C
        # allows, for 2 M operations)
        stop_all()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


def probe(
    store: Annotated[str, typer.Option(help="Store URL, e.g. sim://simpledb, "
                                      "sim://quorum?n=3&r=1&w=1&regions=aws5; schemes: "
                                      + ", ".join(f"{s}://" for s in schemes(False))
                                      + " and those of installed adapters (docs/your-store.md)."
                                      )] = "sim://simpledb",
    workload: Annotated[str, typer.Option(help=" | ".join(registry.names()) + ".")
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
    args = ProbeRequest(store, workload, seed,
                        {"consistency": consistency, "duration": duration,
                         "write_interval": write_interval, "read_rate": read_rate,
                         "period": period},
                        dict(workload_flags), prefix, keep, list(fault or []), faults, cluster)
    if repeats != 1 or sweep or workers != 1 or ray is not None:
        _batch(args, repeats, sweep or [], workers, ray, out, as_json)
        return
    try:
        spec = noted(args.spec)
        with progress_bar(f"{workload} on {short_url(store)}", not as_json) as tick:
            run = run_probe(spec, out, tick, announce=lambda line: say(line, err=True),
                            check_interrupted=False)
            if run.interrupted or run.error:
                tick.interrupted("interrupted" if run.interrupted else "stopped early")
    except (ValueError, UserError) as err:
        fail(str(err))
    finish(run, as_json)


def _batch(args: ProbeRequest, repeats: int, sweep: list[str], workers: int, ray: str | None,
           out: Path, as_json: bool) -> None:
    """Run ``--repeats``/``--sweep`` as a batch of runs (exit 2 for --workers/--ray where
    they do not apply)."""
    if repeats == 1 and not sweep:
        fail("--workers and --ray spread a batch of runs over processes; add --repeats N "
             "or --sweep KEY=V1,V2")
    if (workers != 1 or ray is not None) and not args.store.startswith("sim://"):
        fail("--workers and --ray run independent simulations; runs against one real "
             "store would share it: drop them (the batch then runs one run at a time)")
    from replicalab.cli.batch import run_probe_batch

    run_probe_batch(lambda point: noted(args.spec, point), sweep, repeats, args.seed,
                    workers, ray, out, as_json)


def _flag_option(uses: list[tuple[str, Flag]]) -> Any:
    """Return the Typer option of one workload flag: its help names the workloads that
    take it, each with its default."""
    parts = []
    for name, flag in uses:
        shown = registry.get(name).default_text(flag)
        parts.append(f"{name}: {flag.help}" + ("" if shown is None else f" (default {shown})"))
    return typer.Option(uses[0][1].option, help="; ".join(parts) + ".", show_default=False)


def _with_workload_flags(fn: Any) -> Any:
    """Give ``fn`` (whose ``**workload_flags`` take them) one option per workload flag of
    the registry, so that a workload's flags are declared by the workload alone."""
    sig = inspect.signature(fn, eval_str=True)
    fixed = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    extra = []
    for name, uses in flags_by_name().items():
        if name in sig.parameters:
            raise RuntimeError(f"workload flag {name!r} ({', '.join(w for w, _ in uses)}) "
                               "clashes with a common probe option; rename it")
        types = {str if f.duration else f.type for _, f in uses}
        kind = types.pop() if len(types) == 1 else str  # converted per workload later
        extra.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                       annotation=Annotated[kind | None, _flag_option(uses)]))
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
        what = rundir.kind(run_dir, "report")
        if what in (rundir.QUEUE, rundir.PLACEMENT_LIVE):
            from replicalab.cli.recheck import report_placement_live, report_queue

            page, line = (report_queue if what == rundir.QUEUE else report_placement_live)(
                run_dir)
            say(f"report: {page}")
            say(line)
            return
        if what == rundir.LOAD:
            from replicalab.report.load import render_load_report

            say(f"report: {render_load_report(load_results(run_dir), run_dir)}")
            say("re-check: none for load runs (their figures come from the workers' "
                "histograms); the report was re-rendered from results.json")
            return
        try:
            saved: dict[str, Any] | None = load_results(run_dir)
        except ValueError:
            saved = None
        results = recheck(run_dir)
    except (OSError, ValueError) as err:
        fail(str(err))
    from replicalab.report import render_report

    say(f"report: {render_report(results, run_dir)}")
    say(rundir.compare_results(saved, results))

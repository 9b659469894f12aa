"""``replicalab probe`` and ``replicalab report``."""

from __future__ import annotations

import gc
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import typer

from replicalab.cli import rundir
from replicalab.cli.errors import UserError, fail
from replicalab.cli.output import TableData, out_console, say, show
from replicalab.cli.progress import fmt_s, progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.cli.words import plural
from replicalab.cluster.state import load, names
from replicalab.faults.schedule import check_within, load_faults, parse_fault
from replicalab.history.rundir import Run, load_results
from replicalab.stores import open_store
from replicalab.stores.base import redact_url
from replicalab.stores.registry import schemes
from replicalab.workloads import registry
from replicalab.workloads.base import Flag, ProbeOptions
from replicalab.workloads.runner import ProbeSpec, recheck, run_probe

__all__ = ["finish", "out_console", "probe", "report", "summary_table", "unchecked_exit"]


def _pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def fault_window_availability(avail: dict[str, Any], start_ms: float, end_ms: float
                              ) -> float | None:
    """Return the fraction of client time covered by ok operations in the availability
    windows that overlap [start_ms, end_ms) (None if no client time fell there)."""
    t_s, frac, client_s = avail.get("t_s", []), avail.get("ok_fraction", []), avail.get(
        "client_s", [])
    width_s = avail.get("window_s") or 1.0
    ok = total = 0.0
    for t, f, c in zip(t_s, frac, client_s, strict=False):
        if t + width_s > start_ms / 1000 and t < end_ms / 1000 and f is not None and c:
            ok += f * c
            total += c
    return ok / total if total else None


def fault_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the (measure, value) rows of a fault run's summary: each fault with its window
    and the availability inside it, then availability overall, indeterminate operations and
    lost acknowledged writes. Empty for a run without faults."""
    faults = results.get("faults") or []
    if not faults:
        return []
    avail = results.get("availability", {})
    rows = []
    for f in faults:
        inside = fault_window_availability(avail, f["start_ms"], f["end_ms"])
        rows.append((f"fault: {f['label']}, {f['start_ms'] / 1000:g}s-{f['end_ms'] / 1000:g}s",
                     f"available {_pct(inside)} of client time during it"))
    rows.append(("availability (client time / ops ok)",
                 f"{_pct(avail.get('overall'))} / {_pct(avail.get('overall_ops'))} of "
                 f"{plural(avail.get('count', 0), 'op')}"))
    ops = results.get("ops", {})
    rows.append(("indeterminate operations (info)", f"{ops.get('info', 0):,}"))
    lost = results.get("lost_writes", {})
    rows.append(("lost acknowledged writes",
                 f"{lost.get('lost', 0):,} of {lost.get('acknowledged', 0):,}"
                 if lost.get("checked", True) else "not checked (the store did not answer)"))
    return rows


def summary_table(results: dict[str, Any], title: str) -> TableData:
    """Return the headline figures of one probe's results as a two-column table: the
    rows its workload declares, latency per operation, then the faults."""
    t = TableData(title, ["measure", "value"], right=(1,))
    ops = results["ops"]
    t.add("reads / writes", f"{ops['reads']:,} / {ops['writes']:,}")
    wl = registry.get(results["workload"])
    for measure, value in wl.summary_rows(results):
        t.add(measure, value)
    if wl.per_op_latency_rows:
        for name, lat in results["latency"].items():
            t.add(f"latency {name} p50/p99/p99.9",
                  f"{lat['p50_ms']:.1f} / {lat['p99_ms']:.1f} / {lat['p999_ms']:.1f} ms")
    for measure, value in fault_rows(results):
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
    table = summary_table(run.results, f"{run.results['workload']} on "
                          f"{run.results['store']} ({run.results['consistency']})"
                          + (" - PARTIAL: the run was cut short"
                             if run.results.get("partial") else ""))
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
    fail(f"interrupted after {fmt_s(r['ran_s'])} of {fmt_s(r['duration_s'])} simulated; its "
         f"history ({plural(r['operations'], 'operation')}) is saved in {run.run_dir}; "
         f"`replicalab report {run.run_dir}` checks it and draws the report", 130)


def _flags_by_name() -> dict[str, list[tuple[str, Flag]]]:
    """Return every workload flag by name, with the workloads that declare it."""
    out: dict[str, list[tuple[str, Flag]]] = {}
    for name in registry.names():
        for flag in registry.get(name).flags:
            out.setdefault(flag.name, []).append((name, flag))
    return out


def _convert(flag: Flag, value: Any) -> Any:
    """Return ``value`` (text when workloads disagree on the type) as ``flag`` takes it."""
    if value is None:
        return None
    if flag.duration:
        return parse_duration_s(value, flag.option)
    if flag.type is int and not isinstance(value, int):
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{flag.option} {value!r}: give one whole number, e.g. 10"
                             ) from None
    if flag.type is float and not isinstance(value, int | float):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{flag.option} {value!r}: give a number, e.g. 2.5") from None
    return value


def workload_config(workload: str, given: dict[str, Any]) -> Any:
    """Return the config of ``workload`` from the values of every workload flag (None: not
    given); ValueError for a flag given that this workload does not take, with why."""
    for name, uses in _flags_by_name().items():
        users = [w for w, _ in uses]
        if given.get(name) is not None and workload not in users:
            raise ValueError(f"{uses[0][1].option} has no effect with --workload {workload} "
                             f"(it applies to {' and '.join(users)}); drop it")
    wl = registry.get(workload)
    return wl.make_config({f.name: _convert(f, given.get(f.name)) for f in wl.flags})


def _number(value: Any, flag: str) -> float:
    """Return ``value`` (a number, or text from --sweep) as a float (ValueError naming it)."""
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{flag} {value!r}: give a number, e.g. 50") from None


def with_url_parameter(url: str, key: str, value: str) -> str:
    """Return ``url`` with query parameter ``key`` set to ``value`` (a simulated store's
    parameter, for --sweep); ValueError for a key a probe cannot take from a real store."""
    if not url.startswith("sim://"):
        raise ValueError(f"--sweep {key}: not a probe or workload option; parameters of the "
                         "store URL can be swept on sim:// stores only")
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != key]
    return urlunsplit(parts._replace(query=urlencode([*query, (key, value)], safe=",")))


def _fault_options(store: str, texts: list[str], path: Path | None,
                   cluster: str | None) -> dict[str, Any]:
    """Return the ProbeSpec fields for faults (ValueError if they cannot be carried out)."""
    plan = [parse_fault(t) for t in texts] + (load_faults(path) if path else [])
    if not plan:
        return {}
    if store.startswith("sim://") and cluster is None:
        return {"faults": tuple(plan)}  # the simulated store's own nodes take them
    if cluster is None:
        # the cluster's URL, or it with parameters added (a consistency level, a timeout)
        matches = [n for n in names()
                   if store == (u := load(n).url) or store.startswith(u + "&")]
        if not matches:
            raise ValueError("faults need a cluster started by `replicalab cluster up`; pass "
                             "its URL as --store or name it with --cluster")
        cluster = matches[0]
    return {"cluster": cluster, "faults": tuple(plan)}


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
    args = _ProbeArgs(store, workload, seed,
                      {"consistency": consistency, "duration": duration,
                       "write_interval": write_interval, "read_rate": read_rate,
                       "period": period},
                      dict(workload_flags), prefix, keep, list(fault or []), faults, cluster)
    if repeats != 1 or sweep or workers != 1 or ray is not None:
        _batch(args, repeats, sweep or [], workers, ray, out, as_json)
        return
    try:
        spec = args.spec({})
        with progress_bar(f"{workload} on {redact_url(store)}", not as_json) as tick:
            run = run_probe(spec, out, tick, announce=lambda line: say(line, err=True),
                            check_interrupted=False)
            if run.interrupted or run.error:
                tick.interrupted("interrupted" if run.interrupted else "stopped early")
    except (ValueError, UserError) as err:
        fail(str(err))
    finish(run, as_json)


@dataclass(frozen=True)
class _ProbeArgs:
    """The options of one ``probe`` command, from which each of its runs is built: the
    common options as typed (``common``), the workload's flags, the key prefix and faults."""

    store: str
    workload: str
    seed: int
    common: dict[str, Any]
    flags: dict[str, Any]
    prefix: str | None
    keep: bool
    fault: list[str]
    faults: Path | None
    cluster: str | None

    def spec(self, point: dict[str, str]) -> ProbeSpec:
        """Return the probe with ``point``'s values (a batch's sweep point: a common
        option, a workload flag or a store URL parameter) in place of the options given."""
        values, flags, url = dict(self.common), dict(self.flags), self.store
        for key, text in point.items():
            if key in values:
                values[key] = text
            elif key in _flags_by_name():
                flags[key] = text
            else:
                url = with_url_parameter(url, key, text)
        if url != self.store:
            open_store(url, self.seed)  # a parameter the simulated store does not take
        opts = ProbeOptions(
            consistency=values["consistency"],
            duration_s=parse_duration_s(values["duration"], "--duration"),
            write_interval_s=parse_duration_s(values["write_interval"], "--write-interval"),
            read_rate=_number(values["read_rate"], "--read-rate"),
            period_s=parse_duration_s(values["period"], "--period"), seed=self.seed)
        registry.get(self.workload)
        spec = ProbeSpec(store=url, workload=self.workload, options=opts,
                         config=workload_config(self.workload, flags),
                         key_prefix=self.prefix, keep_keys=self.keep,
                         **_fault_options(url, self.fault, self.faults, self.cluster))
        check_within(spec.faults, opts.duration_s)
        return spec


def _batch(args: _ProbeArgs, repeats: int, sweep: list[str], workers: int, ray: str | None,
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

    run_probe_batch(args.spec, sweep, repeats, args.seed, workers, ray, out, as_json)


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
    for name, uses in _flags_by_name().items():
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

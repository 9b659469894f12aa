"""``replicalab probe`` and ``replicalab report``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli import rundir
from replicalab.cli.errors import UserError, fail
from replicalab.cli.output import TableData, out_console, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.cluster.state import load, names
from replicalab.faults.schedule import check_within, load_faults, parse_fault
from replicalab.stores.base import redact_url
from replicalab.workloads import registry
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.inter_element import InterElementConfig
from replicalab.workloads.latency import LatencyConfig
from replicalab.workloads.monotonic_writes import MonotonicWritesConfig
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeRun, ProbeSpec, recheck, run_probe
from replicalab.workloads.staleness import StalenessConfig
from replicalab.workloads.sweep import SweepConfig

__all__ = ["finish", "out_console", "probe", "report", "summary_table"]


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
                 f"{avail.get('count', 0):,} ops"))
    ops = results.get("ops", {})
    rows.append(("indeterminate operations (info)", f"{ops.get('info', 0):,}"))
    lost = results.get("lost_writes", {})
    rows.append(("lost acknowledged writes",
                 f"{lost.get('lost', 0):,} of {lost.get('acknowledged', 0):,}"
                 if lost.get("checked", True) else "not checked (the store did not answer)"))
    return rows


def summary_table(results: dict[str, Any], title: str) -> TableData:
    """Return the headline figures of one probe's results as a two-column table."""
    t = TableData(title, ["measure", "value"], right=(1,))
    ops = results["ops"]
    t.add("reads / writes", f"{ops['reads']:,} / {ops['writes']:,}")
    if results["workload"] == "staleness":
        for r in results["fresh_by_range"]:
            p = "n/a" if r["p"] is None else f"{100 * r['p']:.2f}%"
            t.add(f"fresh in [{r['from_ms']:g}, {r['to_ms']:g}) ms",
                  f"{p} ({r['fresh']:,}/{r['total']:,})")
        med = results["periods"]["first_ge_99_median_ms"]
        t.add("median first time >= 99% fresh", "n/a" if med is None else f"{med:.1f} ms")
        s = results["successive_reads"]
        if s["pairs"]:
            t.add("monotonic-read violations (fresh then stale)",
                  f"{100 * s['fresh_stale']:.2f}% of {s['pairs']:,} pairs")
        ryw = results["read_your_writes"]
        if ryw["applicable"]:
            t.add("read-your-writes violations", f"{ryw['violations']:,} of {ryw['reads']:,}")
    elif results["workload"] == "latency":
        for v, x in results["variants"].items():
            t.add(f"{v} mean / p50 / p99 / p99.9",
                  f"{x['mean_ms']:.2f} / {x['p50_ms']:.2f} / {x['p99_ms']:.2f} / "
                  f"{x['p999_ms']:.2f} ms")
        for d in results["differences"]:
            t.add(f"{d['a']} - {d['b']}",
                  f"{d['mean_diff_ms']:+.2f} ms [{d['lo_ms']:+.2f}, {d['hi_ms']:+.2f}] "
                  f"{d['verdict']}")
    elif results["workload"] == "sweep":
        for pt in results["points"]:
            t.add(f"{pt['variant']}, {pt['items']:,} item(s), {pt['clients']} clients",
                  f"{pt['total_s']:.1f} s, {pt['throughput_per_s'] or 0:.1f}/s, "
                  f"p50 {pt['p50_ms'] or 0:.1f} / p99 {pt['p99_ms'] or 0:.1f} ms")
        for v, why in results["skipped"].items():
            t.add(f"{v} skipped", why)
    elif results["workload"] == "register":
        lin = results["linearizability"]
        t.add("linearizable (kv model)", {True: "yes", False: "NO"}.get(lin["valid"],
                                                                        str(lin["valid"])))
        t.add("keys not linearizable / unknown",
              f"{lin['keys_not_linearizable']:,} / {lin['keys_unknown']:,} of {lin['keys']:,}")
        t.add("operations checked", f"{lin['ops']:,}")
        for part in lin["parts"]:
            if part.get("explanation"):
                t.add(f"why {part['key']}", part["explanation"])
    elif results["workload"] == "monotonic-writes":
        for attr, fr in results["version_fraction"].items():
            t.add(f"{attr} versions in [50, 400) ms",
                  "  ".join(f"{k} {100 * v:.2f}%" for k, v in fr.items() if v is not None))
    else:
        for e in results["table3"]:
            label = f"{e['placement']}, {e['write']}, {e['read']}"
            t.add(label, "N/A" if e["abcd"] is None else "  ".join(
                f"{k} {100 * v:.1f}%" for k, v in e["abcd"].items()))
    if results["workload"] != "latency":
        # the latency workload's variant rows above already give these, per variant: the
        # per-operation rows would count a conditional put's own read as a consistent read
        for name, lat in results["latency"].items():
            t.add(f"latency {name} p50/p99/p99.9",
                  f"{lat['p50_ms']:.1f} / {lat['p99_ms']:.1f} / {lat['p999_ms']:.1f} ms")
    for measure, value in fault_rows(results):
        t.add(measure, value)
    return t


def finish(run: ProbeRun, as_json: bool) -> None:
    """Render the report, print the outcome, and exit 130/2 if the run was cut short."""
    from replicalab.report import render_report

    report = render_report(run.results, run.run_dir)
    table = summary_table(run.results, f"{run.results['workload']} on "
                          f"{run.results['store']} ({run.results['consistency']})")
    if as_json:
        sys.stdout.write(json.dumps({**run.results, "run_dir": str(run.run_dir),
                                     "report": str(report), "tables": [table.to_json()]},
                                    sort_keys=True) + "\n")
    else:
        show(table)
        say(f"report: {report}")
    if run.interrupted:
        fail(f"interrupted; the history so far and a partial report are in {run.run_dir}", 130)
    if run.error:
        fail(f"the run stopped early ({run.error}); what was recorded is in {run.run_dir}")


def _count(text: str | None, default: int, flag: str) -> int:
    """Return the whole number in ``text`` (``default`` if not given)."""
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: give one whole number, e.g. 10") from None


_USES = {"writer_region": ("staleness", "register"), "reader_region": ("staleness", "register"),
         "ops": ("latency", "register"), "clients": ("sweep", "register"),
         "placement": ("staleness", "inter-element")}


def _refuse_unused(workload: str, placement: str, readers: int, writer_region: str | None,
                   reader_region: str | None, ops: int | None, clients: str | None) -> None:
    """Raise ValueError for an option that would have no effect in this mode, with why."""
    given = {"writer_region": writer_region, "reader_region": reader_region, "ops": ops,
             "clients": clients, "placement": placement or None}
    for name, value in given.items():
        if value is not None and workload not in _USES[name]:
            raise ValueError(f"--{name.replace('_', '-')} has no effect with --workload "
                             f"{workload} (it applies to {' and '.join(_USES[name])}); "
                             "drop it")
    if workload == "staleness" and placement != "separate-clients":
        for flag, used in (("--reader-region", reader_region is not None),
                           ("--readers", readers != 1)):
            if used:
                raise ValueError(f"{flag} has no effect with --placement "
                                 f"{placement or 'same-client'} (the writer does the reads); "
                                 "add --placement separate-clients or drop it")


def _fault_options(store: str, texts: list[str], path: Path | None,
                   cluster: str | None) -> dict[str, Any]:
    """Return the ProbeSpec fields for faults (ValueError if they cannot be carried out)."""
    plan = [parse_fault(t) for t in texts] + (load_faults(path) if path else [])
    if not plan:
        return {}
    if store.startswith("sim://") and cluster is None:
        return {"faults": tuple(plan)}  # the simulated store's own nodes take them
    if cluster is None:
        matches = [n for n in names() if load(n).url == store]
        if not matches:
            raise ValueError("faults need a cluster started by `replicalab cluster up`; pass "
                             "its URL as --store or name it with --cluster")
        cluster = matches[0]
    return {"cluster": cluster, "faults": tuple(plan)}


def probe(
    store: Annotated[str, typer.Option(help="Store URL, e.g. sim://simpledb, "
                                      "sim://quorum?n=3&r=1&w=1&regions=aws5.")] = "sim://simpledb",
    workload: Annotated[str, typer.Option(
        help="staleness | monotonic-writes | inter-element | latency | sweep | register."
    )] = "staleness",
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
    placement: Annotated[str, typer.Option(
        help="staleness: same-client | separate-clients; inter-element: same-item | "
             "same-domain | diff-domains | all.")] = "",
    readers: Annotated[int, typer.Option(help="Reader clients (separate-clients).")] = 1,
    writer_region: Annotated[str | None, typer.Option(
        help="Region of the writer (register: of every client's writes and cas).")] = None,
    reader_region: Annotated[str | None, typer.Option(
        help="Region of the readers (register: of every client's reads).")] = None,
    ranges: Annotated[str, typer.Option(help="Aggregate ranges in ms since the write "
                                        "started.")] = "0-450,500-1000",
    variant: Annotated[str, typer.Option(
        help="monotonic-writes: different | three | same | two-then-one | "
             "two-then-one-same.")] = "different",
    write_mode: Annotated[str, typer.Option(help="inter-element: one-call | two-calls | all."
                                            )] = "all",
    read_mode: Annotated[str, typer.Option(help="inter-element: two-single | one-multi | all."
                                           )] = "all",
    ops: Annotated[int | None, typer.Option(help="latency: operations per variant (default "
                                         "1000); register: stop after this many operations "
                                         "(default: run for --duration).")] = None,
    clients: Annotated[str | None, typer.Option(help="sweep: closed-loop client counts, one "
                                                "point each (default 1,2,5,10,20,50,100,200); "
                                                "register: clients (default 10).")] = None,
    total: Annotated[int, typer.Option(help="sweep: requests per point.")] = 10_000,
    items: Annotated[str, typer.Option(help="sweep: item counts (requests pick one item at "
                                       "random).")] = "1,1000",
    variants: Annotated[str, typer.Option(
        help="sweep: put, conditional put, eventual read, consistent read (comma-separated)."
    )] = "put,conditional put,eventual read,consistent read",
    writers: Annotated[int, typer.Option(help="sweep: background writers during read "
                                         "points.")] = 5,
    fault: Annotated[list[str] | None, typer.Option(
        help='Fault on the cluster or on sim://primary and sim://quorum, repeatable: '
             '"at=30s crash node=2 for=20s" (crash, pause, partition, slow ... ms=200; '
             'node=N or region=NAME).')] = None,
    faults: Annotated[Path | None, typer.Option(
        help="TOML file of [[fault]] tables (action, at, for, node or region, ms).")] = None,
    cluster: Annotated[str | None, typer.Option(
        help="Cluster the faults act on (default: the one whose URL is --store).")] = None,
    keys: Annotated[int, typer.Option(help="register: keys (one register each).")] = 5,
    mix: Annotated[str, typer.Option(help="register: operation mix.")
                   ] = "read=50,write=25,cas=25",
    op_rate: Annotated[float, typer.Option(help="register: operations per second per client "
                                           "(0: back to back).")] = 10.0,
    check_timeout: Annotated[str, typer.Option(help="register: time limit of the "
                                               "linearizability check (then: unknown).")
                             ] = "60s",
) -> None:
    """Probe a store's consistency as its clients see it.

    Example: replicalab probe --store sim://simpledb --workload staleness --duration 1h

    Example: replicalab probe --workload sweep --clients 1,10,100 --total 2000 --variants put

    Example: replicalab probe --workload register --keys 5 --clients 10 --mix read=50,cas=50
    """
    try:
        opts = ProbeOptions(consistency=consistency, duration_s=parse_duration_s(duration,
                            "--duration"), write_interval_s=parse_duration_s(
                                write_interval, "--write-interval"),
                            read_rate=read_rate, period_s=parse_duration_s(period, "--period"),
                            seed=seed)
        configs = {
            "staleness": lambda: StalenessConfig(
                placement=placement or "same-client", readers=readers,
                writer_region=writer_region, reader_region=reader_region, ranges=ranges),
            "monotonic-writes": lambda: MonotonicWritesConfig(variant=variant),
            "inter-element": lambda: InterElementConfig(placement=placement or "all",
                                                        write_mode=write_mode,
                                                        read_mode=read_mode),
            "latency": lambda: LatencyConfig(ops=1000 if ops is None else ops),
            "sweep": lambda: SweepConfig.parse(clients or "1,2,5,10,20,50,100,200", total,
                                               items, variants, writers),
            "register": lambda: RegisterConfig(
                keys=keys, clients=_count(clients, 10, "--clients"), mix=mix,
                writer_region=writer_region, reader_region=reader_region, rate=op_rate,
                ops=ops or 0, check_timeout_s=parse_duration_s(check_timeout,
                                                               "--check-timeout")),
        }
        registry.get(workload)
        _refuse_unused(workload, placement, readers, writer_region, reader_region, ops,
                       clients)
        spec = ProbeSpec(store=store, workload=workload, options=opts,
                         config=configs[workload](),
                         **_fault_options(store, fault or [], faults, cluster))
        check_within(spec.faults, opts.duration_s)
        with progress_bar(f"{workload} on {redact_url(store)}", not as_json) as tick:
            run = run_probe(spec, out, tick, announce=lambda line: say(line, err=True))
    except (ValueError, UserError) as err:
        fail(str(err))
    finish(run, as_json)


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by probe or load.")],
) -> None:
    """Re-check a saved run from its history and re-render its report; says whether the
    re-check agrees with the saved results.

    Example: replicalab report runs/20261122T010203Z-staleness-sim-simpledb
    """
    try:
        what = rundir.kind(run_dir, "report")
        if what == rundir.LOAD:
            from replicalab.report.load import render_load_report

            results = json.loads((run_dir / "results.json").read_text())
            say(f"report: {render_load_report(results, run_dir)}")
            say("re-check: none for load runs (their figures come from the workers' "
                "histograms); the report was re-rendered from results.json")
            return
        try:
            saved = json.loads((run_dir / "results.json").read_text())
        except (OSError, ValueError):
            saved = None
        results = recheck(run_dir)
    except (OSError, ValueError) as err:
        fail(str(err))
    from replicalab.report import render_report

    say(f"report: {render_report(results, run_dir)}")
    say(rundir.compare_results(saved, results))

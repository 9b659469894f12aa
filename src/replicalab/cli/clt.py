"""``replicalab clt ...``: the Cloud Latency Tester (agents, coordinator, local cluster)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, out_console, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.cli.words import plural
from replicalab.history.rundir import load_results, make_run_dir, save_results
from replicalab.regions import region_set

if TYPE_CHECKING:  # the CLT modules load when a clt command runs (they pull in matplotlib)
    from replicalab.clt import analysis, runner

clt_app = typer.Typer(help="Cloud Latency Tester: all-pairs RTT and quorum latency over TCP "
                      "(seed 002).", no_args_is_help=True)
__all__ = ["clt_app", "out_console", "register"]

Rate = Annotated[float, typer.Option(help="Rounds per second at every node.")]
Payload = Annotated[int, typer.Option(help="Payload bytes per ping (echoed back).")]
Duration = Annotated[str, typer.Option(help="Length of the run: 30s, 10m, 1h.")]
Timeout = Annotated[str, typer.Option(help="Ping timeout; later echoes are censored "
                                      "observations (kept, never dropped).")]
SelfLoop = Annotated[bool, typer.Option("--self-loop", help="Each node also pings itself.")]
Window = Annotated[str, typer.Option(help="Window of the averages over time.")]
Spike = Annotated[float, typer.Option(help="A spike is a ping above this multiple of its "
                                      "pair's median.")]
Seed = Annotated[int, typer.Option(help="Seed of the payload bytes.")]
TraceEvery = Annotated[int, typer.Option(help="Trace every Nth round in the HLC logs (0: off).")]
Out = Annotated[Path, typer.Option(help="Directory that receives the run directory.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the results as JSON.")]


def _config(rate: float, payload: int, duration: str, timeout: str, self_loop: bool, seed: int,
            trace_every: int) -> runner.RunConfig:
    from replicalab.clt import runner

    cfg = runner.RunConfig(rate_hz=rate, payload_bytes=payload,
                           duration_s=parse_duration_s(duration, "--duration"),
                           timeout_s=parse_duration_s(timeout, "--timeout"),
                           self_loop=self_loop, seed=seed, trace_every=trace_every)
    cfg.check()
    return cfg


def _settings(cfg: runner.RunConfig, agents: list[runner.AgentSpec], window: str,
              spike_factor: float, injected: dict[str, float] | None = None) -> analysis.Settings:
    from replicalab.clt import analysis

    if spike_factor <= 1:
        raise ValueError(f"--spike-factor {spike_factor:g} must be above 1")
    planned = max(1, round(cfg.duration_s * cfg.rate_hz))
    return analysis.Settings(
        nodes=[a.node for a in agents], rate_hz=cfg.rate_hz, timeout_ms=cfg.timeout_s * 1000,
        self_loop=cfg.self_loop, regions={a.node: a.region for a in agents},
        window_s=parse_duration_s(window, "--window"), spike_factor=spike_factor,
        injected_rtt_ms=injected or {}, planned_rounds={a.node: planned for a in agents})


def _settings_json(s: analysis.Settings) -> dict[str, Any]:
    return {"nodes": s.nodes, "rate_hz": s.rate_hz, "timeout_ms": s.timeout_ms,
            "self_loop": s.self_loop, "regions": dict(s.regions), "window_s": s.window_s,
            "spike_factor": s.spike_factor, "fd_p": list(s.fd_p),
            "injected_rtt_ms": dict(s.injected_rtt_ms), "planned_rounds": dict(s.planned_rounds)}


def _offsets(traces: dict[str, Path], skews: dict[str, float]) -> dict | None:
    if not traces or not any(skews.values()):
        return None
    from replicalab.clt.offsets import recovered_offsets
    return recovered_offsets(traces, skews)


def _finish(run_dir: Path, outcome: runner.Outcome, s: analysis.Settings,
            config: dict[str, Any], as_json: bool, notes: list[str],
            skews: dict[str, float]) -> None:
    """Save rows, analyse, write the report, print; exit 2 after saving if agents failed."""
    from replicalab.clt import analysis, records

    rec = outcome.records
    if outcome.interrupted:
        # the plan was cut short on purpose: rounds not sent are not a sign of falling behind
        s = replace(s, planned_rounds={k: int(v.get("rounds_sent", 0))
                                       for k, v in outcome.agents.items()})
        notes = [*notes, "interrupted (Ctrl-C): the agents stopped early; every round they "
                 "sent is kept"]
    records.write_csv(rec, run_dir / "clt.csv")
    records.write_parquet(rec, run_dir / "clt.parquet")
    (run_dir / "config.json").write_text(json.dumps(
        {**config, "settings": _settings_json(s), "skews_ms": skews,
         "traces": {k: str(v) for k, v in outcome.traces.items()}}, indent=1, sort_keys=True))
    results = analysis.analyse(rec, s)
    results.update(workload="clt", agents=outcome.agents, errors=outcome.errors, notes=notes,
                   wall_s=round(outcome.wall_s, 2), run_dir=str(run_dir))
    results["clock_offsets"] = _offsets(outcome.traces, skews)
    save_results(results, run_dir)
    from replicalab.report.clt import render_clt_report

    report = render_clt_report(results, rec, run_dir)
    _print(results, report, as_json)
    if outcome.errors:
        fail(f"{outcome.errors[0]}; partial results saved in {run_dir}")
    if outcome.interrupted:
        fail(f"interrupted; partial results saved in {run_dir}", 130)


def pairs_table(results: dict[str, Any]) -> TableData:
    """Return the per-pair RTT table of a CLT run."""
    t = TableData(f"CLT: {plural(len(results['nodes']), 'node')}, "
                  f"{plural(results['rows'], 'ping')}",
                  ["pair", "group", "n", "timeouts", "p50 ms", "p99 ms", "p99.9 ms",
                   "p99.999 ms"], wrap=(), right=tuple(range(2, 8)))
    for key, p in results["pairs"].items():
        t.add(key, p["group"], f"{p['n']:,}", p["timeouts"],
              *(_cell(p["p"][q]) for q in ("p50", "p99", "p99.9", "p99.999")))
    return t


def _cell(v: float | None) -> str:
    return "> timeout" if v is None else f"{v:.3f}"


def _print(results: dict[str, Any], report: Path, as_json: bool) -> None:
    table = pairs_table(results)
    if as_json:
        sys.stdout.write(json.dumps({**results, "report": str(report),
                                     "tables": [table.to_json()]}) + "\n")
        return
    show(table)
    cell = _cell
    q = results.get("quorum")
    if q:
        maj = next(x for x in q["by_k"] if x["k"] == q["majority_k"])
        say(f"majority quorum Q{q['majority_k']}/{q['n']}: p50 {cell(maj['p']['p50'])} ms, "
            f"p99.999 {cell(maj['p']['p99.999'])} ms; single pair p99.999 "
            f"{cell(q['single']['p']['p99.999'])} ms")
    lag = results["lag"]
    worst = max((v["p99_ms"] or 0 for v in lag["nodes"].values()), default=0)
    say(f"schedule lag p99 (worst node) {worst:.3f} ms of a {lag['period_ms']:.1f} ms period; "
        f"fell behind: {lag['behind']}")
    if po := results.get("proxy_overhead"):
        say(f"proxy overhead p50 {cell(po['overhead_p50_ms'])} ms, with a latency toxic "
            f"{cell(po['floor_p50_ms'])} ms")
    if m := results.get("matrix"):
        bad = [r["pair"] for r in m["rows"] if not r["ok"]]
        worst = max((abs(r["diff_ms"]) for r in m["rows"] if r["diff_ms"] is not None),
                    default=0.0)
        say(f"injected RTT matrix matched within {m['tolerance_ms']:g} ms + the measured proxy "
            f"overhead: {m['all_ok']} (worst difference {worst:.3f} ms)"
            + (f"; off: {', '.join(bad)}" if bad else ""))
    say(f"report: {report}")


@clt_app.command("agent")
def agent(
    listen: Annotated[str, typer.Option(help="HOST:PORT to listen on.")] = "127.0.0.1:7100",
    skew_ms: Annotated[float, typer.Option(help="Offset this agent's physical clock (HLC and "
                                           "reported times) by this many ms, on purpose.")
                       ] = 0.0,
) -> None:
    """Run a CLT agent: echo pings, and ping the peers when a coordinator says so.

    Example: replicalab clt agent --listen 127.0.0.1:7101 --skew-ms 20
    """
    from replicalab.clt.agent import serve
    from replicalab.clt.protocol import split_address

    try:
        host, port = split_address(listen)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(host, port, skew_ms))
    except OSError as err:
        fail(f"cannot listen on {listen} ({err.strerror}); pick another --listen port")
    except ValueError as err:
        fail(str(err))


@clt_app.command("run")
def run(
    agents: Annotated[str, typer.Option(help="Agents as [name=]HOST:PORT[@region], "
                                        "comma-separated.")],
    rate: Rate = 100.0, payload: Payload = 1024, duration: Duration = "10m",
    timeout: Timeout = "1s", self_loop: SelfLoop = False, window: Window = "30s",
    spike_factor: Spike = 3.0, seed: Seed = 1, trace_every: TraceEvery = 1,
    out: Out = Path("runs"), as_json: AsJson = False,
) -> None:
    """Coordinate running agents: rounds of all-pairs pings, then the report.

    Example: replicalab clt run --agents 127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103
    --rate 100 --payload 1024 --duration 10m --self-loop
    """
    from replicalab.clt import runner

    try:
        specs = runner.parse_agents(agents)
        cfg = _config(rate, payload, duration, timeout, self_loop, seed, trace_every)
        s = _settings(cfg, specs, window, spike_factor)
        run_dir = make_run_dir(out, "clt", f"run-{len(specs)}")
        with progress_bar(f"clt run, {len(specs)} agents", not as_json) as tick:
            outcome = runner.run(specs, cfg, runner.plan_targets(specs, cfg),
                                 run_dir / "traces", progress=tick)
        skews = {k: float(v.get("skew_ms", 0.0)) for k, v in outcome.agents.items()}
    except ValueError as err:
        fail(str(err))
        return
    _finish(run_dir, outcome, s, {"command": "run", "agents": agents, "run": vars(cfg)},
            as_json, [], skews)


@clt_app.command("local")
def local_cmd(
    nodes: Annotated[int, typer.Option(help="Agents to start on 127.0.0.1.")] = 3,
    regions: Annotated[str | None, typer.Option(
        help="Region set for Toxiproxy WAN links: aws5, dc3, lan (none: direct loopback).")
                       ] = None,
    skew_ms: Annotated[str | None, typer.Option(
        help="Per-node clock skews in ms, comma-separated (missing ones are 0).")] = None,
    jitter_ms: Annotated[float, typer.Option(help="Toxiproxy jitter per direction (ms).")
                         ] = 0.0,
    rate: Rate = 100.0, payload: Payload = 1024, duration: Duration = "30s",
    timeout: Timeout = "1s", self_loop: SelfLoop = False, window: Window = "30s",
    spike_factor: Spike = 3.0, seed: Seed = 1, trace_every: TraceEvery = 1,
    out: Out = Path("runs"), as_json: AsJson = False,
) -> None:
    """Start N local agents (behind Toxiproxy WAN links with --regions), run, stop them.

    Example: replicalab clt local --nodes 5 --regions aws5 --duration 60s
    """
    from replicalab.clt import local

    try:
        cfg = _config(rate, payload, duration, timeout, self_loop, seed, trace_every)
        skews = local.parse_skews(skew_ms, nodes)
        if regions:
            region_set(regions)
        run_dir = make_run_dir(out, "clt", f"local-{regions or 'loopback'}")
        with progress_bar(f"clt local, {nodes} agents", not as_json) as tick:
            outcome, setup = local.run_local(nodes, regions, cfg, run_dir, skews, jitter_ms,
                                             tick)
        s = _settings(cfg, setup.agents, window, spike_factor, setup.injected_rtt_ms)
    except ValueError as err:
        fail(str(err))
        return
    _finish(run_dir, outcome, s, {"command": "local", "nodes": nodes, "regions": regions,
                                  "jitter_ms": jitter_ms, "run": vars(cfg)},
            as_json, setup.notes, setup.skews_ms)


@clt_app.command("report")
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by clt run/local.")],
    as_json: AsJson = False,
) -> None:
    """Re-analyse a saved CLT run from its Parquet rows and re-render its report.

    Example: replicalab clt report runs/20261122T030000Z-clt-local-aws5
    """
    from replicalab.clt import analysis, records

    try:
        cfg = json.loads((run_dir / "config.json").read_text())
        rec = records.read_parquet(run_dir / "clt.parquet")
        old = load_results(run_dir)
    except (OSError, ValueError, KeyError) as err:
        fail(f"{run_dir} is not a readable CLT run directory ({err}); pass the directory "
             "that clt run/local printed")
        return
    s = analysis.Settings(**cfg["settings"])
    results = analysis.analyse(rec, s)
    for k in ("workload", "agents", "errors", "notes", "wall_s", "run_dir", "clock_offsets"):
        results[k] = old.get(k)
    save_results(results, run_dir)
    from replicalab.report.clt import render_clt_report

    _print(results, render_clt_report(results, rec, run_dir), as_json)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(clt_app, name="clt")

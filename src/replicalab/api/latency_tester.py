"""The Cloud Latency Tester (seed 002): agents that echo pings and ping their peers, a
coordinator running rounds of all-pairs pings (:func:`clt_run` over running agents,
:func:`clt_local` over agents started here), and a saved run analysed again
(:func:`clt_report`): per-pair RTT percentiles, quorum latency, schedule lag, proxy
overhead. What ``replicalab clt agent|run|local|report`` run."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, INTERRUPTED, STOPPED, Outcome, Table
from replicalab.api.progress import Progress, ticking


def _cell(v: float | None) -> str:
    return "> timeout" if v is None else f"{v:.3f}"


def pairs_table(results: dict[str, Any]) -> Table:
    """Return the per-pair RTT table of a CLT run."""
    n, rows = len(results["nodes"]), results["rows"]
    t = Table(f"CLT: {n:,} node{'' if n == 1 else 's'}, {rows:,} ping{'' if rows == 1 else 's'}",
              ["pair", "group", "n", "timeouts", "p50 ms", "p99 ms", "p99.9 ms", "p99.999 ms"],
              wrap=(), right=tuple(range(2, 8)))
    for key, p in results["pairs"].items():
        t.add(key, p["group"], f"{p['n']:,}", p["timeouts"],
              *(_cell(p["p"][q]) for q in ("p50", "p99", "p99.9", "p99.999")))
    return t


def _remarks(results: dict[str, Any]) -> list[str]:
    """Return the lines after the table: quorum latency, schedule lag, proxy overhead, the
    injected RTT matrix against what was measured."""
    out = []
    if q := results.get("quorum"):
        maj = next(x for x in q["by_k"] if x["k"] == q["majority_k"])
        out.append(f"majority quorum Q{q['majority_k']}/{q['n']}: p50 {_cell(maj['p']['p50'])} "
                   f"ms, p99.999 {_cell(maj['p']['p99.999'])} ms; single pair p99.999 "
                   f"{_cell(q['single']['p']['p99.999'])} ms")
    lag = results["lag"]
    worst = max((v["p99_ms"] or 0 for v in lag["nodes"].values()), default=0)
    out.append(f"schedule lag p99 (worst node) {worst:.3f} ms of a {lag['period_ms']:.1f} ms "
               f"period; fell behind: {lag['behind']}")
    if po := results.get("proxy_overhead"):
        out.append(f"proxy overhead p50 {_cell(po['overhead_p50_ms'])} ms, with a latency toxic "
                   f"{_cell(po['floor_p50_ms'])} ms")
    if m := results.get("matrix"):
        bad = [r["pair"] for r in m["rows"] if not r["ok"]]
        worst = max((abs(r["diff_ms"]) for r in m["rows"] if r["diff_ms"] is not None),
                    default=0.0)
        out.append(f"injected RTT matrix matched within {m['tolerance_ms']:g} ms + the measured "
                   f"proxy overhead: {m['all_ok']} (worst difference {worst:.3f} ms)"
                   + (f"; off: {', '.join(bad)}" if bad else ""))
    return out


def _config(rate: float, payload: int, duration: str | float, timeout: str | float,
            self_loop: bool, seed: int, trace_every: int) -> Any:
    from replicalab.clt import runner

    cfg = runner.RunConfig(rate_hz=rate, payload_bytes=payload,
                           duration_s=seconds(duration, "duration"),
                           timeout_s=seconds(timeout, "timeout"), self_loop=self_loop,
                           seed=seed, trace_every=trace_every)
    cfg.check()
    return cfg


def _settings(cfg: Any, agents: list[Any], window: str | float, spike_factor: float,
              injected: dict[str, float] | None = None) -> Any:
    from replicalab.clt import analysis

    if spike_factor <= 1:
        raise ParameterError("spike_factor", f"{spike_factor:g} must be above 1")
    planned = max(1, round(cfg.duration_s * cfg.rate_hz))
    return analysis.Settings(
        nodes=[a.node for a in agents], rate_hz=cfg.rate_hz, timeout_ms=cfg.timeout_s * 1000,
        self_loop=cfg.self_loop, regions={a.node: a.region for a in agents},
        window_s=seconds(window, "window"), spike_factor=spike_factor,
        injected_rtt_ms=injected or {}, planned_rounds={a.node: planned for a in agents})


def _finish(run_dir: Path, outcome: Any, s: Any, config: dict[str, Any], notes: list[str],
            skews: dict[str, float]) -> Outcome:
    """Save rows, analyse, write the report; STOPPED if agents failed (saved first)."""
    from replicalab.clt import analysis, records
    from replicalab.history.rundir import save_results
    from replicalab.report.clt import render_clt_report

    rec = outcome.records
    if outcome.interrupted:
        # the plan was cut short on purpose: rounds not sent are not a sign of falling behind
        s = replace(s, planned_rounds={k: int(v.get("rounds_sent", 0))
                                       for k, v in outcome.agents.items()})
        notes = [*notes, "interrupted (Ctrl-C): the agents stopped early; every round they "
                 "sent is kept"]
    records.write_csv(rec, run_dir / "clt.csv")
    records.write_parquet(rec, run_dir / "clt.parquet")
    settings = {"nodes": s.nodes, "rate_hz": s.rate_hz, "timeout_ms": s.timeout_ms,
                "self_loop": s.self_loop, "regions": dict(s.regions), "window_s": s.window_s,
                "spike_factor": s.spike_factor, "fd_p": list(s.fd_p),
                "injected_rtt_ms": dict(s.injected_rtt_ms),
                "planned_rounds": dict(s.planned_rounds)}
    (run_dir / "config.json").write_text(json.dumps(
        {**config, "settings": settings, "skews_ms": skews,
         "traces": {k: str(v) for k, v in outcome.traces.items()}}, indent=1, sort_keys=True))
    results = analysis.analyse(rec, s)
    results.update(workload="clt", agents=outcome.agents, errors=outcome.errors, notes=notes,
                   wall_s=round(outcome.wall_s, 2), run_dir=str(run_dir))
    results["clock_offsets"] = None
    if outcome.traces and any(skews.values()):
        from replicalab.clt.offsets import recovered_offsets

        results["clock_offsets"] = recovered_offsets(outcome.traces, skews)
    save_results(results, run_dir)
    # an interrupted run ends now: its figures (seconds of matplotlib on a busy machine,
    # while the signal waits) are drawn from the saved rows by clt_report when asked
    report = None if outcome.interrupted else render_clt_report(results, rec, run_dir)
    status, why = DONE, ""
    if outcome.errors:
        status, why = STOPPED, f"{outcome.errors[0]}; partial results saved in {run_dir}"
    elif outcome.interrupted:
        status, why = INTERRUPTED, (f"interrupted; partial results saved in {run_dir} (its "
                                    f"report: replicalab clt report {run_dir})")
    return Outcome(results, None, report, [pairs_table(results)], _remarks(results), status,
                   why)


def clt_agent(listen: str = "127.0.0.1:7100", skew_ms: float = 0.0) -> None:
    """Run a CLT agent on ``listen`` (HOST:PORT) until Ctrl-C: echo pings, and ping the
    peers when a coordinator says so; ``skew_ms`` offsets its clock on purpose."""
    from replicalab.clt.agent import serve
    from replicalab.clt.protocol import split_address

    host, port = split_address(listen)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(host, port, skew_ms))
    except OSError as err:
        raise ParameterError("listen", f"{listen}: cannot listen there ({err.strerror}); "
                                       "pick another port") from None


def clt_run(agents: str, rate: float = 100.0, payload: int = 1024,
            duration: str | float = "10m", timeout: str | float = "1s",
            self_loop: bool = False, window: str | float = "30s", spike_factor: float = 3.0,
            seed: int = 1, trace_every: int = 1, out: str | Path = "runs",
            progress: Progress = None) -> Outcome:
    """Coordinate running agents (``agents``: ``[name=]HOST:PORT[@region]``,
    comma-separated): rounds of all-pairs pings at ``rate`` per second of ``payload``
    bytes for ``duration``, pings over ``timeout`` kept as censored; then analyse, save
    and report (``window``: averages over time; ``spike_factor``: a spike is a ping above
    that multiple of its pair's median)."""
    from replicalab.clt import runner
    from replicalab.history.rundir import make_run_dir

    specs = runner.parse_agents(agents)
    cfg = _config(rate, payload, duration, timeout, self_loop, seed, trace_every)
    s = _settings(cfg, specs, window, spike_factor)
    run_dir = make_run_dir(Path(out), "clt", f"run-{len(specs)}")
    with ticking(f"clt run, {len(specs)} agents", progress) as tick:
        outcome = runner.run(specs, cfg, runner.plan_targets(specs, cfg), run_dir / "traces",
                             progress=tick)
    skews = {k: float(v.get("skew_ms", 0.0)) for k, v in outcome.agents.items()}
    return _finish(run_dir, outcome, s, {"command": "run", "agents": agents, "run": vars(cfg)},
                   [], skews)


def clt_local(nodes: int = 3, regions: str | None = None, skew_ms: str | None = None,
              jitter_ms: float = 0.0, rate: float = 100.0, payload: int = 1024,
              duration: str | float = "30s", timeout: str | float = "1s",
              self_loop: bool = False, window: str | float = "30s", spike_factor: float = 3.0,
              seed: int = 1, trace_every: int = 1, out: str | Path = "runs",
              progress: Progress = None) -> Outcome:
    """Start ``nodes`` agents on 127.0.0.1 (behind Toxiproxy WAN links of ``regions``, with
    ``jitter_ms``; ``skew_ms``: per-node clock skews, comma-separated), run as
    :func:`clt_run` does, stop them."""
    from replicalab.clt import local
    from replicalab.history.rundir import make_run_dir
    from replicalab.regions import region_set

    cfg = _config(rate, payload, duration, timeout, self_loop, seed, trace_every)
    local.check_nodes(nodes)  # before the run directory: bad input leaves nothing behind
    skews = local.parse_skews(skew_ms, nodes)
    if regions:
        region_set(regions)
    run_dir = make_run_dir(Path(out), "clt", f"local-{regions or 'loopback'}")
    with ticking(f"clt local, {nodes} agents", progress) as tick:
        outcome, setup = local.run_local(nodes, regions, cfg, run_dir, skews, jitter_ms, tick)
    s = _settings(cfg, setup.agents, window, spike_factor, setup.injected_rtt_ms)
    return _finish(run_dir, outcome, s, {"command": "local", "nodes": nodes,
                                         "regions": regions, "jitter_ms": jitter_ms,
                                         "run": vars(cfg)}, setup.notes, setup.skews_ms)


def clt_report(run_dir: str | Path) -> Outcome:
    """Analyse a saved CLT run again from its Parquet rows and write its report again."""
    from replicalab.clt import analysis, records
    from replicalab.history.rundir import load_results, save_results
    from replicalab.report.clt import render_clt_report

    path = Path(run_dir)
    try:
        cfg = json.loads((path / "config.json").read_text())
        rec = records.read_parquet(path / "clt.parquet")
        old = load_results(path)
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"{path} is not a readable CLT run directory ({err}); pass the "
                         "directory that clt run/local printed") from None
    results = analysis.analyse(rec, analysis.Settings(**cfg["settings"]))
    for k in ("workload", "agents", "errors", "notes", "wall_s", "run_dir", "clock_offsets"):
        results[k] = old.get(k)
    save_results(results, path)
    return Outcome(results, None, render_clt_report(results, rec, path),
                   [pairs_table(results)], _remarks(results))

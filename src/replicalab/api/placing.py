"""Data placement (seed 002): where each object should live as the regions using it change.
:func:`placement_simulate` runs migration policies in the simulator over a region matrix
against static placement and an oracle; :func:`placement_live` runs one policy on a live
multi-region store (simulated regions, servers started here, or your stores) beside its
static twins in the same run. What ``replicalab placement simulate|live`` run."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, FAILED, INTERRUPTED, Outcome, Table
from replicalab.api.progress import Progress, ticking

KINDS = ("sim", "redis", "postgresql")
WINDOWS_PER_RUN = 6
"""A periodic policy without window_ms= decides this many times per run."""


def _f(x: Any, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def writable(out: Path) -> None:
    """Raise ParameterError naming ``out`` if run directories cannot be made under it (made
    if missing; no run directory is made here)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ParameterError("out", f"{out}: cannot write there ({err.strerror}); pass a "
                                    "writable directory") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ParameterError("out", f"{out}: cannot write there (permission denied); pass a "
                                    "writable directory")


def simulate_table(results: dict[str, Any]) -> Table:
    """Return one row per policy of a simulation: latency, migrations, ping-pong, load."""
    cfg = results["config"]
    cols = ["policy", "mean_ms", "p99_ms", "steady_ms", "migrations_per_1k", "pingpong_per_1k",
            "max_share"]
    sharers = any("on_sharers" in e for e in results["policies"])
    if sharers:
        cols.append("on_sharers")
    t = Table(f"placement {cfg['workload']}: {cfg['objects']} objects, "
              f"{len(cfg['region_names'])} regions ({cfg['regions']}), "
              f"{cfg['requests']} accesses over {cfg['duration_s']:g} s, seed {cfg['seed']}",
              cols, right=tuple(range(1, len(cols))))
    for e in results["policies"]:
        row = [e["policy"], _f(e["mean_latency_ms"]), _f(e["p99_latency_ms"]),
               _f(e["steady_latency_ms"]), _f(e["migrations_per_1k"], 2),
               _f(e["pingpong_per_1k"], 2), f"{e['max_share'] * 100:.1f}%"]
        if sharers:
            v = e.get("on_sharers")
            row.append("-" if v is None else f"{v * 100:.1f}%")
        t.add(*row)
    return t


def placement_simulate(workload: str = "locality", policy: str | None = None,
                       regions: str | None = None, objects: int | None = None,
                       requests: int | None = None, duration: str | float | None = None,
                       balance: float | None = None, seed: int | None = None,
                       pingpong: str | float = "30s", out: str | Path = "runs",
                       progress: Progress = None, command: str | None = None) -> Outcome:
    """Simulate seed 002's migration policies (``policy``: comma-separated, with
    parameters, e.g. ``static,cog:balance=0.25,oracle``; default the workload's list) on
    ``workload``'s access pattern over a region matrix (``regions``: aws15 or a subset),
    ``objects`` objects and ``requests`` accesses spread over ``duration``; a migration
    back within ``pingpong`` counts as ping-pong. Returns the :class:`Outcome`: per policy
    latency, migrations, ping-pong and load balance, its table and report (``command``:
    the command line to record in it)."""
    from replicalab.history.rundir import make_run_dir, save_results
    from replicalab.placement import simulate as sim
    from replicalab.report.placement import render_placement_report

    exp = sim.experiment(workload, policies=policy, regions=regions, objects=objects,
                         requests=requests,
                         duration_s=None if duration is None else seconds(duration, "duration"),
                         seed=seed, balance=balance,
                         pingpong_ms=seconds(pingpong, "pingpong") * 1000.0)
    sim.check(exp)
    writable(Path(out))
    with ticking(f"placement {exp.workload}: {len(exp.policies)} policies", progress) as tick:
        results = sim.run_experiment(
            exp, progress=lambda k, n, what: tick(k / n, what or "metrics") if tick else None)
    # made once there is something to save: a Ctrl-C above leaves no empty directory
    run_dir = make_run_dir(Path(out), f"placement-{exp.workload}", exp.regions.split(":")[0])
    if command is not None:
        results["command"] = command
    save_results(results, run_dir)
    report = render_placement_report(results, run_dir)
    return Outcome({**results, "run_dir": str(run_dir), "report": str(report)}, None, None,
                   [simulate_table(results)], [f"run directory: {run_dir}", f"report: {report}"])


@dataclass(frozen=True)
class _Plan:
    """A checked live run: where it runs, the policy, the run config and its directory."""

    kind: str
    urls: list[str]
    rs: Any
    matrix: Any
    policy: str
    name: str
    params: dict[str, str]
    note: str
    cfg: Any
    run_dir: Path


def _policy_spec(policy: str, duration_s: float) -> tuple[str, dict[str, str], str]:
    """Return (name, params, note) for a live policy (ParameterError on a bad spec); a
    periodic policy without ``window_ms`` gets duration / WINDOWS_PER_RUN, said in the note."""
    from replicalab.placement.policies import parse_spec, policy_class

    name, params = parse_spec(policy)
    cls = policy_class(name)
    if cls.needs_requests:
        raise ParameterError("policy", f"{name} needs the future request stream; it runs "
                                       "only in `replicalab placement simulate`")
    note = ""
    if cls.periodic(params) and "window_ms" not in params:
        window_ms = duration_s * 1000.0 / WINDOWS_PER_RUN
        params["window_ms"] = f"{window_ms:g}"
        note = (f"{name} decides every window_ms={window_ms:g} (the run's duration / "
                f"{WINDOWS_PER_RUN}); give {name}:window_ms=... to choose")
    return name, params, note


def _where(kind: str | None, stores: str | None) -> tuple[str, list[str]]:
    """Return (kind, URLs) of a live run: a kind started here, or one URL per region."""
    if kind is not None and stores is not None:
        raise ParameterError("kind", "or {stores}: give one (servers started here, or your "
                                     "URLs), not both", {"stores": "stores"})
    if stores is None:
        kind = "sim" if kind in (None, "sim://primary") else kind
        if kind in KINDS:
            return kind, []
        raise ParameterError("kind", f"{kind!r}: use {', '.join(KINDS)} (or {{stores}} with "
                                     "one URL per region)", {"stores": "stores"})
    urls = [u.strip() for u in stores.split(",") if u.strip()]
    if urls and all("://" in u for u in urls):
        return "urls", urls
    raise ParameterError("stores", f"{stores!r}: give one redis:// or postgresql:// URL per "
                                   "region, comma-separated (or {kind} sim, redis or "
                                   "postgresql)", {"kind": "kind"})


async def _check_reachable(urls: list[str]) -> None:
    """Raise ValueError naming the first store URL that does not answer."""
    from replicalab.stores import open_store

    for url in urls:
        store = open_store(url)
        try:
            c = await store.connect()
            await c.close()
        finally:
            await store.close()


def _plan(kind: str | None, stores: str | None, policy: str, regions: str,
          duration: str | float, objects: int, clients: int, think_ms: float,
          write_share: float, stuck_ms: float, seed: int, out: Path) -> _Plan:
    """Return the checked plan of a live run and make its run directory (bad input or a
    store URL that does not answer raises before the directory)."""
    from replicalab.history.rundir import make_run_dir
    from replicalab.placement.live import LiveOptions
    from replicalab.placement.live_deploy import region_set_of
    from replicalab.placement.live_run import LiveConfig
    from replicalab.placement.matrix import region_matrix
    from replicalab.placement.policies import make_policy

    duration_s = seconds(duration, "duration")
    kind, urls = _where(kind, stores)
    matrix = region_matrix(regions)
    rs = region_set_of(matrix, regions)
    name, params, note = _policy_spec(policy, duration_s)
    if kind == "urls" and len(urls) != len(rs.regions):
        raise ParameterError("stores", f"{len(urls)} store URLs for {len(rs.regions)} regions "
                                       f"({', '.join(rs.regions)}): give one URL per region")
    cfg = LiveConfig(duration_s=duration_s, objects=objects, clients=clients,
                     think_ms=think_ms, write_share=write_share, window_s=duration_s / 10,
                     seed=seed, live=LiveOptions(stuck_ms=stuck_ms,
                                                 deadline_ms=max(15_000.0, 4 * stuck_ms)))
    cfg.check()
    make_policy(name, matrix, [0] * objects, **params)  # refuse bad parameters now
    if kind == "urls":
        asyncio.run(_check_reachable(urls))
    run_dir = make_run_dir(out, "placement-live", kind if kind != "urls" else
                           urls[0].split("://", 1)[0])
    return _Plan(kind, urls, rs, matrix, policy, name, params, note, cfg, run_dir)


def _execute(deploy: Any, plan: _Plan, tick: Any, history: Any) -> tuple[Any, Any]:
    from replicalab.placement.live_deploy import SimDeployment
    from replicalab.placement.live_run import run_live
    from replicalab.placement.policies import make_policy

    def make(names: list[str], owner: list[int]) -> Any:
        return make_policy(plan.name, plan.matrix, owner, **plan.params)

    main = run_live(deploy, plan.cfg, plan.policy, make,
                    progress=lambda x: tick(x) if tick else None, history=history)
    if isinstance(deploy, SimDeployment):
        return deploy.runtime.run(main)

    async def real() -> tuple[Any, Any]:
        try:
            return await main
        finally:
            await deploy.close()

    return asyncio.run(real())


def live_tables(res: Any) -> list[Table]:
    """Return the latency-over-time table and the summary table of a live run."""
    over = Table(f"Mean access latency over time ({res.policy} vs static, same run)",
                 ["from (s)", f"{res.policy} (ms)", "static (ms)", "accesses", "migrations"],
                 right=(0, 1, 2, 3, 4))
    for w in res.windows:
        over.add(_f(w["t_s"]), _f(w["managed_mean_ms"]), _f(w["static_mean_ms"]),
                 w["accesses"], w["migrations"])
    summary = Table(f"After the policy settles (from {res.settled_from_s:g} s)",
                    ["placement", "mean (ms)", "p99 (ms)", "migrations per 1k (whole run)",
                     "lost writes"], right=(1, 2, 3, 4))
    summary.add(res.policy, _f(res.managed_mean_ms), _f(res.managed_p99_ms),
                _f(res.migrations_per_1k, 2), res.lost_writes)
    summary.add("static", _f(res.static_mean_ms), _f(res.static_p99_ms), "0", res.lost_writes)
    return [over, summary]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


def placement_live(kind: str | None = None, stores: str | None = None, policy: str = "cog",
                   regions: str = "dc3", duration: str | float = "30s", objects: int = 30,
                   clients: int = 2, think_ms: float = 20.0, write_share: float = 0.5,
                   stuck_ms: float = 2000.0, seed: int = 1, out: str | Path = "runs",
                   progress: Progress = None, command: str | None = None) -> Outcome:
    """Run migration ``policy`` on a live multi-region store — ``kind`` sim (virtual
    time), redis or postgresql (one server per region, started here, joined by Toxiproxy
    WAN links), or ``stores`` (your URLs, one per region of ``regions``) — with
    ``clients`` per region reading and writing ``objects`` objects, each also kept as a
    static twin. Returns the :class:`Outcome`: latency over time for both, the settled
    means, migrations and lost writes (FAILED if a write was lost or a read saw a value
    never written; INTERRUPTED with the history so far saved on Ctrl-C)."""
    from replicalab.history import History, save_history
    from replicalab.history.rundir import save_results
    from replicalab.placement.live_deploy import SimDeployment, attach_real, start_real
    from replicalab.placement.simulate import SCHEMA
    from replicalab.report.placement_live import render_placement_live_report

    plan = _plan(kind, stores, policy, regions, duration, objects, clients, think_ms,
                 write_share, stuck_ms, seed, Path(out))
    root = Path(tempfile.mkdtemp(prefix="replicalab-plive-"))
    root.chmod(0o755)  # PostgreSQL runs as its own user, which must reach its data directory
    real, deploy, history = None, None, History()
    try:
        with ticking(f"placement live: {plan.policy} on {plan.kind} "
                     f"({len(plan.rs.regions)} regions)", progress) as tick:
            try:
                if plan.kind == "sim":
                    deploy = SimDeployment(plan.rs, seed=plan.cfg.seed)
                elif plan.kind == "urls":
                    deploy = real = attach_real(plan.urls, plan.rs, root, "plive")
                else:
                    if tick:
                        tick(0.0, f"starting {len(plan.rs.regions)} {plan.kind} servers")
                    deploy = real = start_real(plan.kind, plan.rs, root, "plive")
                if tick:
                    tick(0.0, "clients running")
                res, history = _execute(deploy, plan, tick, history)
            except ValueError as err:
                with contextlib.suppress(OSError):
                    plan.run_dir.rmdir()  # nothing was measured: leave no empty directory
                raise ValueError(f"{err}; the store could not be used (try kind sim)") from None
            except KeyboardInterrupt:
                history.close_in_flight(deploy.runtime.now_ns() if deploy else 0)
                save_history(history, plan.run_dir, {"store": plan.kind, "interrupted": True})
                return Outcome({"kind": "placement-live", "interrupted": True}, plan.run_dir,
                               status=INTERRUPTED, why=f"interrupted; what was recorded so far "
                               f"({len(history):,} operations) is saved in {plan.run_dir}")
    finally:
        if real is not None:
            real.topology.down()
        shutil.rmtree(root, ignore_errors=True)
    results = _jsonable({"kind": "placement-live", "schema_version": SCHEMA, **res.to_json(),
                         "policies": [
                             {"policy": res.policy, "mean_latency_ms": res.managed_mean_ms,
                              "p99_latency_ms": res.managed_p99_ms,
                              "migrations_per_1k": res.migrations_per_1k,
                              "max_share": max(res.final_share)},
                             {"policy": "static", "mean_latency_ms": res.static_mean_ms,
                              "p99_latency_ms": res.static_p99_ms, "migrations_per_1k": 0.0,
                              "max_share": None}],
                         "command": command or "", "notes": [plan.note] if plan.note else []})
    save_history(history, plan.run_dir, {"command": results["command"], "store": plan.kind,
                                         "config": results["config"]})
    save_results(results, plan.run_dir)
    report = render_placement_live_report(results, plan.run_dir)
    lost = res.lost_writes or res.unknown_reads
    return Outcome(
        {**results, "run_dir": str(plan.run_dir)}, None, None, live_tables(res),
        ([f"note: {plan.note}"] if plan.note else [])
        + [f"{res.policy} / static mean latency after settling: {res.ratio:.2f}x; "
           f"{res.migrations_moved} migrations; {res.lost_writes} lost writes",
           f"run directory: {plan.run_dir}", f"report: {report}"],
        FAILED if lost else DONE,
        f"{res.lost_writes} acknowledged writes lost, {res.unknown_reads} reads of unknown "
        f"values: the history is in {plan.run_dir}" if lost else "")

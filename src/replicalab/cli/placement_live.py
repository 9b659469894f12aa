"""``replicalab placement live``: a migration policy moving objects on a running store.

Clients in every region read and write; the policy moves the objects it manages between the
regions' stores through the ownership directory; their static twins, in the same run, stay
where they were placed. Prints latency over time for both, the settled means and their
ratio, migrations and lost writes (always 0 unless the protocol is broken), and saves the
history (``history.parquet``), ``config.json``, ``results.json`` and ``report.html`` in a run
directory.

:func:`attach` adds the command to the ``placement`` group; :func:`register` does it for the
root app.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import duration_ms, note_once, parse_duration_s
from replicalab.cli.words import plural
from replicalab.history import History, save_history
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.placement.live import LiveOptions
from replicalab.placement.live_deploy import (
    Deployment,
    RealDeployment,
    SimDeployment,
    attach_real,
    region_set_of,
    start_real,
)
from replicalab.placement.live_run import LiveConfig, LiveResult, run_live
from replicalab.placement.matrix import RegionMatrix, region_matrix
from replicalab.placement.policies import described, make_policy, parse_spec, policy_class
from replicalab.placement.simulate import SCHEMA
from replicalab.regions import RegionSet

KINDS = ("sim", "redis", "postgresql")
WINDOWS_PER_RUN = 6
"""A periodic policy without window_ms= decides this many times per run."""


def _policy_spec(policy: str, duration_s: float) -> tuple[str, dict[str, str], str]:
    """Return (name, params, note) for ``--policy`` (ValueError on a bad spec); a periodic
    policy without ``window_ms`` gets duration / WINDOWS_PER_RUN, said in the note."""
    name, params = parse_spec(policy)
    cls = policy_class(name)
    if cls.needs_requests:
        raise ValueError(f"policy {name} needs the future request stream; it runs only in "
                         "`replicalab placement simulate`")
    note = ""
    if cls.periodic(params) and "window_ms" not in params:
        window_ms = duration_s * 1000.0 / WINDOWS_PER_RUN
        params["window_ms"] = f"{window_ms:g}"
        note = (f"{name} decides every window_ms={window_ms:g} (the run's duration / "
                f"{WINDOWS_PER_RUN}); give {name}:window_ms=... to choose")
    return name, params, note


def _store_kind(kind: str | None, store: str | None) -> tuple[str, list[str]]:
    """Return (kind, URLs): ``--kind`` (a kind replicalab starts) or ``--store`` (one URL
    per region); a kind given to ``--store`` still works, with a deprecation note."""
    if kind is not None and store is not None:
        raise ValueError("give --kind (servers started here) or --store (your URLs), not "
                         "both")
    if store is not None and "://" not in store and store in ("sim", *KINDS):
        note_once(f"--store {store} is deprecated here; use --kind {store} (--store takes "
                  "URLs)")
        kind, store = store, None
    if store is None:
        kind = kind or "sim"
        if kind in ("sim", "sim://primary"):
            return "sim", []
        if kind in KINDS:
            return kind, []
        raise ValueError(f"--kind {kind!r}: use sim, {', '.join(KINDS)} (or --store with "
                         "one URL per region)")
    urls = [u.strip() for u in store.split(",") if u.strip()]
    if urls and all("://" in u for u in urls):
        return "urls", urls
    raise ValueError(f"--store {store!r}: give one redis:// or postgresql:// URL per region, "
                     "comma-separated (or --kind sim, redis or postgresql)")


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


def _f(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def tables(res: LiveResult) -> list[TableData]:
    """Return the latency-over-time table and the summary table of a run."""
    over = TableData(f"Mean access latency over time ({res.policy} vs static, same run)",
                     ["from (s)", f"{res.policy} (ms)", "static (ms)", "accesses",
                      "migrations"], right=(0, 1, 2, 3, 4))
    for w in res.windows:
        over.add(_f(w["t_s"]), _f(w["managed_mean_ms"]), _f(w["static_mean_ms"]),
                 w["accesses"], w["migrations"])
    summary = TableData(f"After the policy settles (from {res.settled_from_s:g} s)",
                        ["placement", "mean (ms)", "p99 (ms)", "migrations per 1k (whole run)",
                         "lost writes"], right=(1, 2, 3, 4))
    summary.add(res.policy, _f(res.managed_mean_ms), _f(res.managed_p99_ms),
                _f(res.migrations_per_1k, 2), res.lost_writes)
    summary.add("static", _f(res.static_mean_ms), _f(res.static_p99_ms), "0",
                res.lost_writes)
    return [over, summary]


def _policies_json(res: LiveResult) -> list[dict[str, Any]]:
    """Return the ``policies`` list of ``--json`` (the shape ``placement simulate`` uses)."""
    return [
        {"policy": res.policy, "mean_latency_ms": res.managed_mean_ms,
         "p99_latency_ms": res.managed_p99_ms, "migrations_per_1k": res.migrations_per_1k,
         "max_share": max(res.final_share)},
        {"policy": "static", "mean_latency_ms": res.static_mean_ms,
         "p99_latency_ms": res.static_p99_ms, "migrations_per_1k": 0.0,
         "max_share": None},
    ]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


def _execute(deploy: Deployment, cfg: LiveConfig, policy: str, name: str,
             params: dict[str, str], matrix: RegionMatrix, tick: Any, history: History
             ) -> tuple[LiveResult, History]:
    def make(names: list[str], owner: list[int]) -> Any:
        return make_policy(name, matrix, owner, **params)

    main = run_live(deploy, cfg, policy, make, progress=lambda x: tick(x), history=history)
    if isinstance(deploy, SimDeployment):
        return deploy.runtime.run(main)

    async def real() -> tuple[LiveResult, History]:
        try:
            return await main
        finally:
            await deploy.close()

    return asyncio.run(real())


def live(
    kind: Annotated[str | None, typer.Option(
        help="sim (simulated regions in virtual time; the default), redis or postgresql (one "
             "server per region, started here, joined by Toxiproxy WAN links).",
        show_default=False)] = None,
    store: Annotated[str | None, typer.Option(
        help="Your own stores instead: one redis:// or postgresql:// URL per region, "
             "comma-separated, in the order of --regions.", show_default=False)] = None,
    policy: Annotated[str, typer.Option(
        help="Migration policy with optional parameters, e.g. cog, cog:window_ms=5000, "
             "cog:mode=continuous:alpha=0.1, consecutive:n=3; balance=0.5 adds the "
             f"load-balancing filter. Policies (parameters): {described()}; those that "
             "need the future request stream run only in simulate.")] = "cog",
    regions: Annotated[str, typer.Option(
        help="Region matrix or a subset of one: dc3, aws5, aws15:us-east-1,eu-west-1,"
             "ap-northeast-1.")] = "dc3",
    duration: Annotated[str, typer.Option(
        help="Length of the workload: 30s, 2m (virtual time for sim).")] = "30s",
    objects: Annotated[int, typer.Option(
        help="Object ids; each exists managed by the policy and as a static twin.")] = 30,
    clients: Annotated[int, typer.Option(help="Clients per region.")] = 2,
    think: Annotated[str | None, typer.Option(
        help="Pause between a client's accesses: 20ms, 0.1s (default 20ms).",
        show_default=False)] = None,
    think_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --think."
                                                  )] = None,
    write_share: Annotated[float, typer.Option(help="Share of accesses that are writes.")
                           ] = 0.5,
    stuck: Annotated[str | None, typer.Option(
        help="How long an object may stay frozen by a migration before a client finishes or "
             "undoes it: 2s, 500ms (default 2s).", show_default=False)] = None,
    stuck_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --stuck."
                                                  )] = None,
    seed: Annotated[int, typer.Option(help="Seed of homes and traffic.")] = 1,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run a migration policy on a live multi-region store and compare it with static
    placement in the same run: latency over time, migrations, lost writes (must be 0).

    Example: replicalab placement live --kind redis --policy cog --regions dc3 --duration 30s
    """
    try:
        plan = _plan(kind, store, policy, regions, duration, objects, clients,
                     (think, think_ms), write_share, (stuck, stuck_ms), seed, out)
    except ValueError as err:
        fail(str(err))
    res, history = _measure(plan, as_json)
    _save_and_show(plan, res, history, as_json)


@dataclass(frozen=True)
class _Plan:
    """A checked ``placement live`` command: where it runs, the policy, the run config and
    the run directory made for it."""

    kind: str
    urls: list[str]
    rs: RegionSet
    matrix: RegionMatrix
    policy: str
    name: str
    params: dict[str, str]
    note: str
    cfg: LiveConfig
    run_dir: Path


def _plan(kind: str | None, store: str | None, policy: str, regions: str, duration: str,
          objects: int, clients: int, think: tuple[str | None, float | None],
          write_share: float, stuck: tuple[str | None, float | None], seed: int, out: Path
          ) -> _Plan:
    """Return the checked plan of a run and make its run directory (ValueError, before the
    directory, for bad input or a store URL that does not answer). ``think`` and ``stuck``
    are (--think, deprecated --think-ms) and (--stuck, --stuck-ms)."""
    duration_s = parse_duration_s(duration, "--duration")
    think_ms = duration_ms(think[0], "--think", think[1], "--think-ms", "20ms")
    stuck_ms = duration_ms(stuck[0], "--stuck", stuck[1], "--stuck-ms", "2s")
    kind, urls = _store_kind(kind, store)
    matrix = region_matrix(regions)
    rs = region_set_of(matrix, regions)
    name, params, note = _policy_spec(policy, duration_s)
    if kind == "urls" and len(urls) != len(rs.regions):
        raise ValueError(f"{len(urls)} store URLs for {len(rs.regions)} regions "
                         f"({', '.join(rs.regions)}): give one URL per region")
    cfg = LiveConfig(duration_s=duration_s, objects=objects, clients=clients,
                     think_ms=think_ms, write_share=write_share,
                     window_s=duration_s / 10, seed=seed,
                     live=LiveOptions(stuck_ms=stuck_ms,
                                      deadline_ms=max(15_000.0, 4 * stuck_ms)))
    cfg.check()
    make_policy(name, matrix, [0] * objects, **params)  # refuse bad parameters now
    if kind == "urls":
        asyncio.run(_check_reachable(urls))
    run_dir = make_run_dir(out, "placement-live", kind if kind != "urls" else
                           urls[0].split("://", 1)[0])
    return _Plan(kind, urls, rs, matrix, policy, name, params, note, cfg, run_dir)


def _measure(plan: _Plan, as_json: bool) -> tuple[LiveResult, History]:
    """Deploy the stores (simulated, started here or given), run the clients and the policy,
    and return what they measured; on Ctrl-C save the history so far and exit 130, on a
    store that cannot be used remove the empty run directory and exit 2."""
    kind, rs, run_dir = plan.kind, plan.rs, plan.run_dir
    label = f"placement live: {plan.policy} on {kind} ({len(rs.regions)} regions)"
    deploy: Deployment
    root = Path(tempfile.mkdtemp(prefix="replicalab-plive-"))
    root.chmod(0o755)  # PostgreSQL runs as its own user, which must reach its data directory
    real: RealDeployment | None = None
    history = History()
    try:
        with progress_bar(label, enabled=not as_json) as tick:
            try:
                if kind == "sim":
                    deploy = SimDeployment(rs, seed=plan.cfg.seed)
                elif kind == "urls":
                    deploy = real = attach_real(plan.urls, rs, root, "plive")
                else:
                    tick(0.0, f"starting {len(rs.regions)} {kind} servers")
                    deploy = real = start_real(kind, rs, root, "plive")
                tick(0.0, "clients running")
                return _execute(deploy, plan.cfg, plan.policy, plan.name, {**plan.params},
                                plan.matrix, tick, history)
            except ValueError as err:
                with contextlib.suppress(OSError):
                    run_dir.rmdir()  # nothing was measured: leave no empty run directory
                fail(f"{err}; the store could not be used (try --store sim)")
            except KeyboardInterrupt:
                history.close_in_flight(deploy.runtime.now_ns())
                save_history(history, run_dir, {"store": kind, "interrupted": True})
                fail(f"interrupted; what was recorded so far "
                     f"({plural(len(history), 'operation')}) is saved in {run_dir}", 130)
    finally:
        if real is not None:
            real.topology.down()
        shutil.rmtree(root, ignore_errors=True)


def _save_and_show(plan: _Plan, res: LiveResult, history: History, as_json: bool) -> None:
    """Save the history, results and report of a run, print them, and exit 1 if a write was
    lost or a read returned a value never written."""
    run_dir, note = plan.run_dir, plan.note
    results = _jsonable({"kind": "placement-live", "schema_version": SCHEMA,
                         **res.to_json(), "policies": _policies_json(res),
                         "command": shlex.join(["replicalab", "placement", "live",
                                                *sys.argv[3:]]),
                         "notes": [note] if note else []})
    save_history(history, run_dir, {"command": results["command"], "store": plan.kind,
                                    "config": results["config"]})
    save_results(results, run_dir)
    from replicalab.report.placement_live import render_placement_live_report

    report = render_placement_live_report(results, run_dir)
    shown = tables(res)
    if as_json:
        sys.stdout.write(json.dumps({**results, "run_dir": str(run_dir),
                                     "tables": [t.to_json() for t in shown]},
                                    sort_keys=True) + "\n")
    else:
        show(shown)
        if note:
            say(f"note: {note}")
        say(f"{res.policy} / static mean latency after settling: {res.ratio:.2f}x; "
            f"{res.migrations_moved} migrations; {res.lost_writes} lost writes")
        say(f"run directory: {run_dir}")
        say(f"report: {report}")
    if res.lost_writes or res.unknown_reads:
        fail(f"{res.lost_writes} acknowledged writes lost, {res.unknown_reads} reads of "
             f"unknown values: the history is in {run_dir}", 1)


def attach(placement_app: typer.Typer) -> None:
    """Add ``live`` to the ``placement`` command group."""
    placement_app.command("live")(live)


def register(app: typer.Typer) -> None:
    """Add ``replicalab placement live`` (the group itself is registered by
    ``cli/placement.py``)."""
    from replicalab.cli.placement import placement_app

    attach(placement_app)

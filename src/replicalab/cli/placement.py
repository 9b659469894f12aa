"""``replicalab placement ...``: seed 002's data-migration policies in the simulator.

``placement_app`` is the ``placement`` group. Other modules add commands to it from their own
``register(app)`` (e.g. ``cli/placement_live.py``: ``placement_app.command("live")(live)``);
the order of registration does not matter, Typer builds the group when the CLI runs.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import note_once, parse_duration_s
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.placement import simulate as sim
from replicalab.placement.policies import described
from replicalab.placement.workloads import WORKLOADS

placement_app = typer.Typer(
    help="Data placement (seed 002): where each object should live as the regions using it "
         "change.", no_args_is_help=True)


def _table(results: dict[str, Any]) -> TableData:
    cfg = results["config"]
    cols = ["policy", "mean_ms", "p99_ms", "steady_ms", "migrations_per_1k", "pingpong_per_1k",
            "max_share"]
    sharers = any("on_sharers" in e for e in results["policies"])
    if sharers:
        cols.append("on_sharers")
    t = TableData(f"placement {cfg['workload']}: {cfg['objects']} objects, "
                  f"{len(cfg['region_names'])} regions ({cfg['regions']}), "
                  f"{cfg['requests']} accesses over {cfg['duration_s']:g} s, seed {cfg['seed']}",
                  cols, right=tuple(range(1, len(cols))))

    def f(x: Any, d: int = 1) -> str:
        return "n/a" if x is None else f"{x:.{d}f}"

    for e in results["policies"]:
        row = [e["policy"], f(e["mean_latency_ms"]), f(e["p99_latency_ms"]),
               f(e["steady_latency_ms"]), f(e["migrations_per_1k"], 2),
               f(e["pingpong_per_1k"], 2), f"{e['max_share'] * 100:.1f}%"]
        if sharers:
            v = e.get("on_sharers")
            row.append("-" if v is None else f"{v * 100:.1f}%")
        t.add(*row)
    return t


@placement_app.command("simulate")
def simulate_cmd(
    workload: Annotated[str, typer.Option(
        help=f"Access pattern: {', '.join(WORKLOADS)}.")] = "locality",
    policy: Annotated[str | None, typer.Option(
        help="Comma-separated policies with optional parameters, e.g. "
             "static,consecutive:n=3,majority:window_ms=30000,ema:alpha=0.1,cog,"
             "cog:mode=continuous:alpha=0.1,cog:balance=0.25,oracle. Policies (parameters; "
             f"balance= for every one): {described()} "
             f"[default: {sim.DEFAULT_POLICIES}; skew: {sim.SKEW_POLICIES}].",
        show_default=False)] = None,
    policies: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --policy."
                                                 )] = None,
    regions: Annotated[str | None, typer.Option(
        help="Region matrix, or a subset of one: aws15, aws15:us-east-1,eu-west-1,... "
             "[default: aws15; skew: 5 of aws15].", show_default=False)] = None,
    objects: Annotated[int | None, typer.Option(
        help="Objects [default: 3000; skew: 1000].", show_default=False)] = None,
    requests: Annotated[int | None, typer.Option(
        help="Accesses in the run [default: 1000000].", show_default=False)] = None,
    duration: Annotated[str | None, typer.Option(
        help="Simulated time the accesses spread over, e.g. 300s or 5m [default: 300s].",
        show_default=False)] = None,
    balance: Annotated[float | None, typer.Option(
        help="Load-balancing filter for every policy without its own balance=: at most this "
             "share of the objects per region, in (0, 1] (skew's default list: the share of "
             "its filtered CoG, 0.25 if not given).", show_default=False)] = None,
    seed: Annotated[int | None, typer.Option(
        help="Seed of the stream and the initial placement [default: 1].",
        show_default=False)] = None,
    pingpong: Annotated[str, typer.Option(
        help="A migration back to a region left within this long counts as ping-pong.")
                        ] = "30s",
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Simulate seed 002's migration policies on 15 AWS regions and compare them with static
    placement and an oracle: latency, migrations, ping-pong and load balance over time.

    Example: replicalab placement simulate --workload shared --policy
    static,consecutive,majority,ema,cog --regions aws15 --objects 3000
    """
    try:
        if policies is not None:
            if policy is not None:
                raise ValueError("--policies is the old name of --policy; give only --policy")
            note_once("--policies is deprecated; use --policy (one or several, "
                      "comma-separated)")
        duration_s = None if duration is None else parse_duration_s(duration, "--duration")
        exp = sim.experiment(workload, policies=policy or policies, regions=regions,
                             objects=objects,
                             requests=requests, duration_s=duration_s, seed=seed,
                             balance=balance,
                             pingpong_ms=parse_duration_s(pingpong, "--pingpong") * 1000.0)
        sim.check(exp)
        writable(out)
    except ValueError as e:
        fail(str(e))
    label = f"placement {exp.workload}: {len(exp.policies)} policies"
    with progress_bar(label, enabled=not as_json) as tick:
        results = sim.run_experiment(
            exp, progress=lambda k, n, what: tick(k / n, what or "metrics"))
    try:  # made once there is something to save: a Ctrl-C above leaves no empty directory
        run_dir = make_run_dir(out, f"placement-{exp.workload}", exp.regions.split(":")[0])
    except ValueError as e:
        fail(str(e))
    results["command"] = shlex.join(["replicalab", "placement", "simulate", *sys.argv[3:]])
    save_results(results, run_dir)
    from replicalab.report.placement import render_placement_report

    report = render_placement_report(results, run_dir)
    table = _table(results)
    if as_json:
        sys.stdout.write(json.dumps({**results, "run_dir": str(run_dir), "report": str(report),
                                     "tables": [table.to_json()]}, sort_keys=True) + "\n")
        return
    show(table)
    say(f"run directory: {run_dir}")
    say(f"report: {report}")


def writable(out: Path) -> None:
    """Raise ValueError naming --out if run directories cannot be made under ``out`` (made
    if missing; no run directory is made here)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot write to output directory {out}: {err.strerror}; pass "
                         "--out with a writable directory") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write to output directory {out}: permission denied; pass "
                         "--out with a writable directory")


def register(app: typer.Typer) -> None:
    """Add ``replicalab placement ...`` to the root app."""
    app.add_typer(placement_app, name="placement")

"""``replicalab placement ...``: seed 002's data-migration policies in the simulator
(``replicalab.api.placing``), printed here.

``placement_app`` is the ``placement`` group. Other modules add commands to it from their own
``register(app)`` (e.g. ``cli/placement_live.py``: ``placement_app.command("live")(live)``);
the order of registration does not matter, Typer builds the group when the CLI runs.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import catalog, placing
from replicalab.cli.errors import fail, said
from replicalab.cli.output import emit
from replicalab.cli.progress import Bars
from replicalab.cli.timeparse import note_once, warnings_as_notes

placement_app = typer.Typer(
    help="Data placement (seed 002): where each object should live as the regions using it "
         "change.", no_args_is_help=True)
_DEFAULTS = catalog.placement_defaults()


@placement_app.command("simulate")
def simulate_cmd(
    workload: Annotated[str, typer.Option(
        help=f"Access pattern: {', '.join(catalog.placement_workloads())}.")] = "locality",
    policy: Annotated[str | None, typer.Option(
        help="Comma-separated policies with optional parameters, e.g. "
             "static,consecutive:n=3,majority:window_ms=30000,ema:alpha=0.1,cog,"
             "cog:mode=continuous:alpha=0.1,cog:balance=0.25,oracle. Policies (parameters; "
             f"balance= for every one): {catalog.placement_policies()} "
             f"[default: {_DEFAULTS[0]}; skew: {_DEFAULTS[1]}].",
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
    if policies is not None:
        if policy is not None:
            fail("--policies is the old name of --policy; give only --policy")
        note_once("--policies is deprecated; use --policy (one or several, comma-separated)")
    try:
        with warnings_as_notes():
            outcome = placing.placement_simulate(
                workload, policy or policies, regions, objects, requests, duration, balance,
                seed, pingpong, out, Bars(not as_json),
                shlex.join(["replicalab", "placement", "simulate", *sys.argv[3:]]))
    except ValueError as err:
        fail(said(err))
    emit(outcome, as_json)


def register(app: typer.Typer) -> None:
    """Add ``replicalab placement ...`` to the root app."""
    app.add_typer(placement_app, name="placement")

"""``replicalab placement simulate|live``: seed 002's data-migration policies in the
simulator, and one policy moving objects on a running store beside its static twins
(``replicalab.api.placing``), printed here. :func:`attach` adds ``live`` to a group."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import catalog, placing
from replicalab.cli.errors import fail
from replicalab.cli.output import outcome_of
from replicalab.cli.progress import Bars
from replicalab.cli.timeparse import duration_ms, note_once

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
    outcome_of(lambda: placing.placement_simulate(
        workload, policy or policies, regions, objects, requests, duration, balance, seed,
        pingpong, out, Bars(not as_json),
        shlex.join(["replicalab", "placement", "simulate", *sys.argv[3:]])), as_json)


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
             f"load-balancing filter. Policies (parameters): {catalog.placement_policies()}; those "
             "that "
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
    if store is not None and "://" not in store and store in placing.KINDS:
        note_once(f"--store {store} is deprecated here; use --kind {store} (--store takes "
                  "URLs)")
        kind, store = kind or store, None
    outcome_of(lambda: placing.placement_live(
        kind, store, policy, regions, duration, objects, clients,
        duration_ms(think, "--think", think_ms, "--think-ms", "20ms"), write_share,
        duration_ms(stuck, "--stuck", stuck_ms, "--stuck-ms", "2s"), seed, out,
        Bars(not as_json), shlex.join(["replicalab", "placement", "live", *sys.argv[3:]])),
        as_json, {"stores": "--store"})


def attach(placement_app: typer.Typer) -> None:
    """Add ``live`` to the ``placement`` command group."""
    placement_app.command("live")(live)


def register(app: typer.Typer) -> None:
    """Add ``replicalab placement simulate|live`` to the root app."""
    attach(placement_app)
    app.add_typer(placement_app, name="placement")

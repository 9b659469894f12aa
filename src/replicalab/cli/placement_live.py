"""``replicalab placement live``: a migration policy moving objects on a running store beside
its static twins (``replicalab.api.placing.placement_live``), printed here.

:func:`attach` adds the command to the ``placement`` group; :func:`register` does it for the
root app.
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
from replicalab.cli.timeparse import duration_ms, note_once, warnings_as_notes


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
    try:
        with warnings_as_notes():
            outcome = placing.placement_live(
                kind, store, policy, regions, duration, objects, clients,
                duration_ms(think, "--think", think_ms, "--think-ms", "20ms"), write_share,
                duration_ms(stuck, "--stuck", stuck_ms, "--stuck-ms", "2s"), seed, out,
                Bars(not as_json),
                shlex.join(["replicalab", "placement", "live", *sys.argv[3:]]))
    except ValueError as err:
        fail(said(err, {"stores": "--store"}))
    emit(outcome, as_json)


def attach(placement_app: typer.Typer) -> None:
    """Add ``live`` to the ``placement`` command group."""
    placement_app.command("live")(live)


def register(app: typer.Typer) -> None:
    """Add ``replicalab placement live`` (the group itself is registered by
    ``cli/placement.py``)."""
    from replicalab.cli.placement import placement_app

    attach(placement_app)

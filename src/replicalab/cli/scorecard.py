"""``replicalab scorecard``: seed 001's chart measured, one row per store, one column per
property (``replicalab.api.comparing.scorecard_run``), printed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import catalog, comparing
from replicalab.cli.output import attempt, emit, say
from replicalab.cli.progress import Bars


def register(app: typer.Typer) -> None:
    """Add ``replicalab scorecard`` to the root app."""
    app.command(name="scorecard")(scorecard)


def scorecard(
    kinds: Annotated[str, typer.Option(help="Comma-separated stores: cluster kinds ("
                                            f"{catalog.store_kinds_help()}) and sim:// URLs.")
                     ] = "redis,postgres,etcd,zookeeper",
    regions: Annotated[str, typer.Option(help="Region set of the clusters.")] = "dc3",
    quick: Annotated[bool, typer.Option("--quick", help="Every cell, shorter runs "
                                                        "(about 8 minutes for four stores).")
                     ] = False,
    only: Annotated[str | None, typer.Option(
        help=f"Comma-separated properties: {catalog.properties_help()} (default: all).")
                    ] = None,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    seed: Annotated[int, typer.Option(help="Seed of every run.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print scorecard.json.")] = False,
    hosts: Annotated[Path | None, typer.Option(
        help="Inventory (TOML) of hosts to start each store's cluster on, over SSH "
        "(docs/hosts.md); durability is not measured there.")] = None,
    name: Annotated[str, typer.Option(help="Name prefix of the clusters it starts "
                                           "(NAME-KIND): another lets two scorecards run "
                                           "at once.")] = "scorecard",
) -> None:
    """Measure seed 001's chart for each store: latency from each region against the 50 ms /
    500 ms goals, acknowledged writes lost under kill -9 and power loss, availability while a
    region is cut off and while the leader is down, consistency promised vs observed,
    transactional isolation observed vs promised, and where replicas sit. Each store runs
    on its own 3-node cluster, started and stopped by the command. Exit code 1 when a cell
    could not be measured because its run failed (the last line says why and how to
    measure it again), 130 when interrupted.

    Example: replicalab scorecard --kinds redis,postgres,etcd,zookeeper --regions dc3 --quick

    Example: replicalab scorecard --kinds 'sim://primary?regions=dc3' --quick --only consistency

    Example: replicalab scorecard --kinds etcd --only durability,availability

    Example: replicalab scorecard --kinds cassandra --regions dc3 --quick
    """
    outcome = attempt(lambda: comparing.scorecard_run(
        kinds.split(","), regions, quick, None if only is None else only.split(","), out, seed,
        Bars(not as_json), hosts, name))
    if not as_json:
        for store, err in outcome.results["errors"].items():
            say(f"{store}: {err}", err=True)
    emit(outcome, as_json, sort_keys=False)

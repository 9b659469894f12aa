"""``replicalab cluster up|status|down``: real local clusters with emulated WAN links
(``replicalab.api.clustering``), printed here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import catalog, clustering
from replicalab.cli.errors import fail
from replicalab.cli.output import outcome_of
from replicalab.cli.progress import Bars

cluster_app = typer.Typer(help="Start, inspect and stop real local clusters.",
                          no_args_is_help=True)
_FLAGS = {"settings": "--set", "all_clusters": "--all"}


@cluster_app.command("up")
def up(
    kind: Annotated[str, typer.Argument(help=" | ".join(catalog.store_kinds()) + ".")],
    nodes: Annotated[int, typer.Option(help="Number of servers.")] = 3,
    regions: Annotated[str, typer.Option(help="Region set: dc3, aws5 or lan.")] = "dc3",
    name: Annotated[str | None, typer.Option(help="Cluster name (default KIND-REGIONS).")
                    ] = None,
    base_port: Annotated[int | None, typer.Option(help="First of consecutive ports to use.")
                         ] = None,
    client_region: Annotated[str | None, typer.Option(
        help="Also route client links through proxies, as from this region.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    power_loss_fs: Annotated[bool, typer.Option(
        "--power-loss-fs", help="Put each node's data directory on a file system that keeps "
        "writes in memory until fsync, so that a power-loss fault can drop them (needs FUSE)."
    )] = False,
    setting: Annotated[list[str] | None, typer.Option(
        "--set", help="Server setting KEY=VALUE over the lab's defaults, repeatable: "
        "appendfsync=always (Redis), fsync=on (PostgreSQL), forceSync=yes (ZooKeeper).")
    ] = None,
    hosts: Annotated[Path | None, typer.Option(
        help="Inventory (TOML) of the hosts to run on, one node per host, over SSH, or the "
        "name of a set `replicalab hosts up` made (docs/hosts.md).")] = None,
) -> None:
    """Start a cluster on 127.0.0.1 whose replication links carry the region delays.

    Example: replicalab cluster up redis --nodes 3 --regions dc3

    Example: replicalab cluster up redis --power-loss-fs --set appendfsync=always

    Example: replicalab cluster up etcd --hosts inventory.toml --regions dc3 --name e
    """
    outcome_of(lambda: clustering.cluster_up(
        kind, nodes, regions, name, base_port, client_region, power_loss_fs, setting or [],
        Bars(not as_json, estimates=False), hosts), as_json, _FLAGS, False)


@cluster_app.command("status")
def status(
    name: Annotated[str | None, typer.Argument(help="Cluster name (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show each node's role, pid, port and replication state or lag.

    Clusters are found from any directory: their state lives in one directory per user
    ($REPLICALAB_STATE_DIR, else $XDG_STATE_HOME/replicalab, else ~/.local/state/replicalab).

    Example: replicalab cluster status redis-dc3
    """
    outcome_of(lambda: clustering.cluster_status(name), as_json, _FLAGS, False)


@cluster_app.command("down")
def down(
    name: Annotated[str | None, typer.Argument(help="Cluster name.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Stop every cluster.")] = False,
) -> None:
    """Stop exactly the processes a cluster started and remove its data (a cluster whose
    processes died: remove what it left).

    Example: replicalab cluster down redis-dc3
    """
    if not name and not all_:
        fail("name a cluster or pass --all")
    outcome_of(lambda: clustering.cluster_down(name, all_), False, _FLAGS)

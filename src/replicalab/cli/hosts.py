"""``replicalab hosts up|status|down``: emulated hosts (network namespaces, an sshd each);
the work is ``replicalab.api.clustering``'s, printed here."""

from __future__ import annotations

from typing import Annotated

import typer

from replicalab.api import clustering
from replicalab.cli.output import outcome_of

hosts_app = typer.Typer(help="Make, inspect and remove emulated hosts reached over SSH.",
                        no_args_is_help=True)


@hosts_app.command("up")
def up(
    count: Annotated[int, typer.Option(help="Number of hosts.")] = 3,
    name: Annotated[str, typer.Option(help="Name of the set (unique on this machine).")
                    ] = "lab",
    regions: Annotated[str, typer.Option(help="Region set whose regions the hosts take in "
                                              "turn: lan, dc3, aws5.")] = "lan",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Make COUNT hosts in network namespaces on a bridge (198.18.0.0/15, no default
    route), each with an OpenSSH server and keys made for the set; print the inventory.
    Needs root.

    Example: replicalab hosts up --count 3 --name lab --regions dc3
    """
    outcome_of(lambda: clustering.hosts_up(count, name, regions), as_json, sort_keys=False)


@hosts_app.command("status")
def status(
    name: Annotated[str | None, typer.Argument(help="Set name (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show each emulated host: address, region, namespace and whether it answers over SSH.

    Example: replicalab hosts status lab
    """
    outcome_of(lambda: clustering.hosts_status(name), as_json, sort_keys=False)


@hosts_app.command("down")
def down(
    name: Annotated[str, typer.Argument(help="Set name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Remove a set: its namespaces, bridge, every process in them, keys and files.

    Example: replicalab hosts down lab
    """
    outcome_of(lambda: clustering.hosts_down(name), as_json, sort_keys=False)

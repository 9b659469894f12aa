"""``replicalab hosts up|status|down``: emulated hosts (network namespaces, an sshd each)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.words import plural
from replicalab.cluster.state import state_root
from replicalab.hosts import emulated

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
    try:
        inv = emulated.up(count, name, state_root(), regions)
    except ValueError as err:
        fail(str(err))
    if as_json:
        sys.stdout.write(json.dumps(inv.to_json()) + "\n")
        return
    say(f"hosts {name}: {plural(len(inv.hosts), 'host')} reached over SSH ("
        + ", ".join(f"{h.name} {h.address} {h.region}" for h in inv.hosts) + ")")
    say(f"inventory: {inv.path}")
    say(f"use it:    replicalab cluster up redis --hosts {inv.path} --regions {regions}")
    say(f"remove:    replicalab hosts down {name}")


@hosts_app.command("status")
def status(
    name: Annotated[str | None, typer.Argument(help="Set name (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show each emulated host: address, region, namespace and whether it answers over SSH.

    Example: replicalab hosts status lab
    """
    root = state_root()
    try:
        found = [emulated.status(n, root) for n in ([name] if name else emulated.sets(root))]
    except ValueError as err:
        fail(str(err))
    if as_json:
        sys.stdout.write(json.dumps({"sets": [s.to_json() for s in found]}) + "\n")
        return
    if not found:
        say(f"no emulated hosts (state in {root})")
        return
    cols = ["host", "address", "region", "namespace", "ssh"]
    tables = []
    for s in found:
        t = TableData(f"{s.name} — {s.inventory}", cols, wrap=(4,))
        for row in s.hosts:
            t.add(*(row[c] for c in cols))
        tables.append(t)
    show(tables)


@hosts_app.command("down")
def down(
    name: Annotated[str, typer.Argument(help="Set name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Remove a set: its namespaces, bridge, every process in them, keys and files.

    Example: replicalab hosts down lab
    """
    try:
        removed = emulated.down(name, state_root())
    except ValueError as err:
        fail(str(err))
    if as_json:
        sys.stdout.write(json.dumps(removed.to_json()) + "\n")
        return
    say(f"{name}: removed {', '.join(removed.removed)}")

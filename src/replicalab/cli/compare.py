"""``replicalab compare``: the real stores side by side on the same emulated regions
(``replicalab.api.comparing.compare_clusters``), printed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import catalog, comparing
from replicalab.cli.output import outcome_of
from replicalab.cli.progress import Bars


def compare(
    kinds: Annotated[str, typer.Option(
        help=f"Comma-separated store kinds: {catalog.store_kinds_help()}.")
    ] = "redis,postgres,etcd,zookeeper",
    regions: Annotated[str, typer.Option(help="Region set of the clusters.")] = "dc3",
    duration: Annotated[str, typer.Option(
        help="Length of each staleness (and register) probe: 30s, 2m; a plain number is "
             "seconds.")] = "30s",
    ops: Annotated[int, typer.Option(help="Operations per variant in the latency probe.")
                   ] = 200,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directories.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    workload: Annotated[str, typer.Option(
        help="staleness: staleness probes plus a short latency probe; latency: only the "
             "latency workload, with consistent vs eventual read differences and verdicts; "
             "register: Jepsen's register test, linearizability with eventual and consistent "
             "reads."
    )] = "staleness",
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap intervals.")] = 1,
    fault: Annotated[list[str] | None, typer.Option(
        help='Fault for every staleness probe, repeatable: "at=10s partition region=US-W '
             'for=10s" (crash, pause, partition, slow ... ms=200; node=0..2 or '
             'region=NAME); adds availability and lost acknowledged writes.')] = None,
    hosts: Annotated[str | None, typer.Option(
        help="Inventory (TOML) of the hosts each cluster runs on, over SSH, or the name of "
             "a set `replicalab hosts up` made (docs/hosts.md).")] = None,
) -> None:
    """Start each store as a 3-node cluster on the same regions (writer in the first region,
    reader in the second) and compare staleness and latency side by side.

    Example: replicalab compare --kinds redis,postgres,etcd,zookeeper --regions dc3

    Example: replicalab compare --kinds redis,etcd --fault "at=10s partition region=US-W for=10s"

    Example: replicalab compare --workload latency --ops 300 --kinds etcd,zookeeper

    Example: replicalab compare --workload register --fault "at=3s partition node=1 for=4s"
    """
    outcome_of(lambda: comparing.compare_clusters(kinds.split(","), regions, duration, ops,
                                                  workload, seed, fault or [], out,
                                                  Bars(not as_json), hosts),
               as_json, {"faults": "--fault"}, False)

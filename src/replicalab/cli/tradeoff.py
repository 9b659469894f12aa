"""``replicalab load tradeoff``: seed 003 §4, eventual against consistent reads under paced
load (the group itself is registered by ``cli/load.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.stores.base import redact_url

__all__ = ["register", "tradeoff_cmd"]


def _list(text: str, kind: type, flag: str) -> list:
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{flag} {text!r} must be a comma-separated list, e.g. "
                         f"{'1,5,10' if kind is int else '0.99,0.75,0.5'}") from None


def tradeoff_cmd(
    store: Annotated[str, typer.Option(help="Store URL, e.g. sim://simpledb or "
                                       "redis://127.0.0.1:6379.")] = "sim://simpledb",
    groups: Annotated[str, typer.Option(help="Client groups (machines) per load, comma "
                                        "separated.")] = "1,5,10,15,20,25",
    clients: Annotated[int, typer.Option(help="Clients per group.")] = 100,
    client_rate: Annotated[float, typer.Option(help="Requests per second per client, each "
                                               "waiting for its reply.")] = 1.0,
    read_ratios: Annotated[str, typer.Option(help="Read ratios, comma separated.")
                           ] = "0.99,0.75,0.5",
    consistency: Annotated[str, typer.Option(help="eventual, consistent, or both "
                                             "(comma separated).")] = "eventual,consistent",
    repeats: Annotated[int, typer.Option(help="Runs of each load (whiskers: min and max "
                                         "over them).")] = 3,
    step_duration: Annotated[str, typer.Option(help="How long each load runs.")] = "30s",
    keyspace: Annotated[int, typer.Option(help="Keys (the paper used one attribute of one "
                                          "item).")] = 1,
    timeout: Annotated[str, typer.Option(help="Per-request timeout.")] = "10s",
    seed: Annotated[int, typer.Option(help="Seed of phases, operations and the simulator.")
                    ] = 1,
    workers: Annotated[int, typer.Option(help="Local processes running steps (sim://) or "
                                         "client groups (real stores).")] = 1,
    ray: Annotated[str | None, typer.Option(help="Ray cluster address, or 'local'; needs "
                                            "replicalab[ray].")] = None,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Seed 003 §4: eventual against consistent reads as paced load grows (Figures 7-12).

    Example: replicalab load tradeoff --store sim://simpledb --workers 2

    Example: replicalab load tradeoff --store redis://127.0.0.1:6379 --groups 1,2,4
    --clients 20 --client-rate 5 --repeats 2 --step-duration 10s
    """
    from replicalab.api.tradeoff import tradeoff
    from replicalab.cli.timeparse import parse_duration_s
    from replicalab.workloads.distributed import RayMissing

    try:
        run = tradeoff(
            store, _list(groups, int, "--groups"), clients, client_rate,
            _list(read_ratios, float, "--read-ratios"),
            [c.strip() for c in consistency.split(",") if c.strip()], repeats,
            parse_duration_s(step_duration, "--step-duration"), keyspace,
            1000 * parse_duration_s(timeout, "--timeout"), seed, out, workers, ray,
            lambda: progress_bar(f"load tradeoff on {redact_url(store)}", not as_json))
    except (ValueError, RayMissing) as err:
        fail(str(err))
    t = TableData(f"seed 003 §4 on {run.results['store']}", ["observation", "holds",
                                                               "evidence"], wrap=(0, 2))
    for o in run.observations:
        t.add(o["claim"], {True: "yes", False: "no", None: "n/a"}[o["holds"]], o["evidence"])
    if as_json:
        sys.stdout.write(json.dumps({**run.to_json(), "tables": [t.to_json()]},
                                    sort_keys=True) + "\n")
    else:
        show(t)
        say(f"report: {run.report}")
    if run.interrupted:
        fail(f"interrupted; the steps so far and their report are in {run.run_dir}", 130)
    if run.error:
        fail(f"the run stopped early ({run.error}); what was done is in {run.run_dir}")


def register(app: typer.Typer) -> None:
    """Add ``replicalab load tradeoff`` to the ``load`` group of ``cli/load.py``."""
    from replicalab.cli.load import load_app

    load_app.command("tradeoff")(tradeoff_cmd)

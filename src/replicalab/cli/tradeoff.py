"""``replicalab load tradeoff``: seed 003 §4, eventual against consistent reads under paced
load (the group itself is registered by ``cli/load.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import catalog
from replicalab.api.tradeoff import tradeoff
from replicalab.cli.errors import fail, said
from replicalab.cli.output import emit
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import warnings_as_notes

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
    from replicalab.api.durations import seconds

    try:
        with warnings_as_notes():
            run = tradeoff(
                store, _list(groups, int, "--groups"), clients, client_rate,
                _list(read_ratios, float, "--read-ratios"),
                [c.strip() for c in consistency.split(",") if c.strip()], repeats,
                seconds(step_duration, "step_duration"), keyspace,
                1000 * seconds(timeout, "timeout"), seed, out, workers, ray,
                lambda: progress_bar(f"load tradeoff on {catalog.redact_url(store)}",
                                     not as_json))
    except ValueError as err:
        fail(said(err))
    emit(run.outcome(), as_json)


def register(app: typer.Typer) -> None:
    """Add ``replicalab load tradeoff`` to the ``load`` group of ``cli/load.py``."""
    from replicalab.cli.load import load_app

    load_app.command("tradeoff")(tradeoff_cmd)

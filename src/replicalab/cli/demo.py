"""``replicalab demo``: the SimpleDB-model staleness probe, eventual and consistent reads
(``replicalab.api.runs.demo``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import runs
from replicalab.cli.errors import fail, said
from replicalab.cli.output import say, show
from replicalab.cli.probe import unchecked_exit
from replicalab.cli.progress import Bars
from replicalab.cli.timeparse import warnings_as_notes


def demo(
    out: Annotated[Path, typer.Option(help="Directory that receives the run directories.")
                   ] = Path("runs"),
    duration: Annotated[str, typer.Option(help="Simulated time per probe: 2h, 30m.")] = "2h",
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 1,
) -> None:
    """Reproduce seed 003 §2.1.1 on the simulated SimpleDB and show where the reports are.

    Example: replicalab demo --duration 2h
    """
    try:
        with warnings_as_notes():
            done = runs.demo(duration, seed, out, Bars(), check_interrupted=False)
    except ValueError as err:
        fail(said(err))
    reports = []
    for run, consistency in zip(done, runs.DEMO_READS, strict=False):
        if not run.checked:
            unchecked_exit(run, False)  # Ctrl-C: the history saved at once, one line
        report = run.report()
        show(run.table(f"{runs.DEMO_STORE}: {consistency} reads, {duration} simulated"))
        reports.append((consistency, report))
        if run.interrupted:
            fail(f"interrupted; partial report in {report}", 130)
    for consistency, r in reports:
        say(f"report, {consistency} reads: {r}")

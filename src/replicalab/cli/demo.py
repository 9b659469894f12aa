"""``replicalab demo``: the SimpleDB-model staleness probe, eventual and consistent reads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import say, show
from replicalab.cli.probe import summary_table, unchecked_exit
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe

DEMO_STORE = "sim://simpledb"


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
        duration_s = parse_duration_s(duration, "--duration")
    except ValueError as err:
        fail(str(err))
    from replicalab.report import render_report

    reports = []
    for consistency in ("eventual", "consistent"):
        spec = ProbeSpec(store=DEMO_STORE, workload="staleness",
                         options=ProbeOptions(consistency=consistency,
                                              duration_s=duration_s, seed=seed))
        try:
            with progress_bar(f"demo: staleness probe, {consistency} reads") as tick:
                run = run_probe(spec, out, tick, check_interrupted=False)
        except ValueError as err:
            fail(str(err))
        if not run.results.get("checked", True):
            unchecked_exit(run, False)  # Ctrl-C: the history saved at once, one line
        report = render_report(run.results, run.run_dir)
        show(summary_table(run.results, f"{DEMO_STORE}: {consistency} reads, {duration} "
                                        "simulated"))
        reports.append((consistency, report))
        if run.interrupted:
            fail(f"interrupted; partial report in {report}", 130)
    for consistency, r in reports:
        say(f"report, {consistency} reads: {r}")

"""``replicalab demo``: the SimpleDB-model staleness probe, eventual and consistent reads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.cli.errors import fail
from replicalab.cli.probe import out_console, summary_table
from replicalab.cli.progress import progress_bar
from replicalab.report import render_report
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe

DEMO_STORE = "sim://simpledb"


def demo(
    out: Annotated[Path, typer.Option(help="Directory that receives the run directories.")
                   ] = Path("runs"),
    hours: Annotated[float, typer.Option(help="Simulated hours per probe.")] = 2.0,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 1,
) -> None:
    """Reproduce seed 003 §2.1.1 on the simulated SimpleDB and show where the report is.

    Example: replicalab demo --hours 2
    """
    if not hours > 0:
        fail(f"--hours must be positive (got {hours})")
    reports = []
    for consistency in ("eventual", "consistent"):
        spec = ProbeSpec(store=DEMO_STORE, workload="staleness",
                         options=ProbeOptions(consistency=consistency,
                                              duration_s=hours * 3600, seed=seed))
        try:
            with progress_bar(f"staleness, {consistency} reads") as tick:
                run = run_probe(spec, out, tick)
        except ValueError as err:
            fail(str(err))
        report = render_report(run.results, run.run_dir)
        out_console.print(summary_table(run.results,
                                        f"{DEMO_STORE}: {consistency} reads, {hours:g} h"))
        reports.append(report)
        if run.interrupted:
            fail(f"interrupted; partial report in {report}", 130)
    for r in reports:
        out_console.print(f"report: {r}")

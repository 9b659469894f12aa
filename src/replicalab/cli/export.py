"""``replicalab export``: a saved history as Jepsen events for other checkers; the export
itself is ``replicalab.api.exporting.export``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api.exporting import export as export_history
from replicalab.cli.errors import fail, note
from replicalab.cli.output import attempt, say


def export(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by probe, load, "
                                             "queue run or placement live.")],
    fmt: Annotated[str, typer.Option("--format", help="edn (Jepsen/Elle/Knossos/Porcupine) "
                                                      "or jsonl.")] = "edn",
    out: Annotated[Path | None, typer.Option(
        "--out", help="File to write (default: RUN_DIR/history.FORMAT).",
        show_default=False, metavar="FILE")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", hidden=True, help="Deprecated: --out.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace an existing file, or write inside a run directory (a run's "
                        "own files are never replaced).")] = False,
) -> None:
    """Export a run's history as invoke/completion events (Jepsen EDN or JSON lines):
    register ops as jepsen.independent [key value] tuples with plain integer values (the
    recorded values kept in :replicalab/value), transactions as Elle writes them.

    Example: replicalab export runs/20261122T010203Z-staleness-sim-simpledb --format edn
    """
    if output is not None:
        if out is not None:
            fail("--output is the old name of --out; give only --out")
        note("--output is deprecated; use --out")
        out = output
    done = attempt(lambda: export_history(run_dir, fmt, out, force))
    say(f"{done.events:,} events -> {done.path}")

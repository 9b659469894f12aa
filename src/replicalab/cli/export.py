"""``replicalab export``: a saved history as Jepsen events for other checkers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.cli import rundir
from replicalab.cli.errors import fail
from replicalab.cli.output import say
from replicalab.history import load_history, to_edn, to_jsonl

_WRITERS = {"edn": to_edn, "jsonl": to_jsonl}


def export(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by probe or load.")],
    fmt: Annotated[str, typer.Option("--format", help="edn (Jepsen/Elle/Knossos) or jsonl."
                                        )] = "edn",
    output: Annotated[Path | None, typer.Option(help="File to write (default: "
                                                "RUN_DIR/history.FORMAT).")] = None,
) -> None:
    """Export a run's history as invoke/completion events (Jepsen EDN or JSON lines).

    Example: replicalab export runs/20261122T010203Z-staleness-sim-simpledb --format edn
    """
    if fmt not in _WRITERS:
        fail(f"--format {fmt!r}: use edn or jsonl")
    try:
        rundir.kind(run_dir, "export")
        h, _ = load_history(run_dir)
    except ValueError as err:
        fail(str(err))
    path = output or run_dir / f"history.{fmt}"
    try:
        n = _WRITERS[fmt](h, path)
    except OSError as err:
        fail(f"cannot write {path}: {err.strerror}; pass --output with a writable path")
    say(f"{n:,} events -> {path}")

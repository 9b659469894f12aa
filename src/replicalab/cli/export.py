"""``replicalab export``: a saved history as Jepsen events for other checkers.

Probe, load and placement-live runs export their History (reads, writes, cas); a queue run
exports its record (every send, delivery, processing, commit, delete, with its outcome).
Nothing a run recorded is ever overwritten: a target that is one of a run's own files is
refused even with ``--force``; another file that exists, or a path inside a run directory
(other than the run's default ``history.FORMAT``), needs ``--force``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import runkind as rundir
from replicalab.cli.errors import fail, note
from replicalab.cli.output import say
from replicalab.history import load_history, to_edn, to_jsonl
from replicalab.history.export import record_events, write_edn, write_jsonl

_WRITERS = {"edn": to_edn, "jsonl": to_jsonl}
_RECORD_WRITERS = {"edn": write_edn, "jsonl": write_jsonl}
RECORDED = ("history.parquet", "queue.parquet", "intended.parquet", "clt.parquet",
            "config.json", "results.json", "report.html", "samples.sqlite")
"""Files a run writes: what it recorded and what it derived from that."""
_RECORDED_DIRS = ("figures", "histograms", "runs")


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / f).exists() for f in
                                 ("history.parquet", "queue.parquet", "results.json",
                                  "clt.parquet"))


def _run_dir_holding(path: Path) -> Path | None:
    """Return the run directory ``path`` is inside (nearest first), or None."""
    for parent in path.parents:
        if _is_run_dir(parent):
            return parent
    return None


def target_problem(path: Path, default: Path, force: bool) -> str:
    """Return why ``path`` may not receive an export ("" when it may): a run's own file
    (never), another existing file or a path inside a run directory (not without
    ``force``), a directory."""
    p, own = path.absolute(), default.absolute()
    holder = _run_dir_holding(p)
    if holder is not None and (p.name in RECORDED or any(
            part in _RECORDED_DIRS for part in p.relative_to(holder).parts[:-1])):
        return (f"{path} is one of the files of the run {holder}; export never writes over "
                f"what a run saved: pass --out with a new file, e.g. {holder.name}."
                f"{default.suffix.lstrip('.')}")
    if p.is_dir():
        return f"{path} is a directory; pass --out with a file path"
    if p == own or force:
        return ""
    if holder is not None:
        return (f"{path} is inside the run directory {holder}; pass --force to write there "
                "anyway, or --out with a path outside it")
    if p.exists():
        return f"{path} exists; pass --force to replace it, or --out with another file"
    return ""


def export(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by probe, load, "
                                             "queue run or placement live.")],
    fmt: Annotated[str, typer.Option("--format", help="edn (Jepsen/Elle/Knossos) or jsonl."
                                        )] = "edn",
    out: Annotated[Path | None, typer.Option(
        "--out", help="File to write (default: RUN_DIR/history.FORMAT).",
        show_default=False, metavar="FILE")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", hidden=True, help="Deprecated: --out.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace an existing file, or write inside a run directory (a run's "
                        "own files are never replaced).")] = False,
) -> None:
    """Export a run's history as invoke/completion events (Jepsen EDN or JSON lines).

    Example: replicalab export runs/20261122T010203Z-staleness-sim-simpledb --format edn
    """
    if fmt not in _WRITERS:
        fail(f"--format {fmt!r}: use edn or jsonl")
    if output is not None:
        if out is not None:
            fail("--output is the old name of --out; give only --out")
        note("--output is deprecated; use --out")
        out = output
    try:
        what = rundir.kind(run_dir, "export")
    except ValueError as err:
        fail(str(err))
    default = run_dir / f"history.{fmt}"
    path = out or default
    problem = target_problem(path, default, force)
    if problem:
        fail(problem)
    try:
        if what == rundir.QUEUE:
            from replicalab.queues.record import load_log

            n = _RECORD_WRITERS[fmt](record_events(load_log(run_dir)), path)
        else:
            h, _ = load_history(run_dir)
            n = _WRITERS[fmt](h, path)
    except ValueError as err:
        fail(str(err))
    except OSError as err:
        fail(f"cannot write {path}: {err.strerror}; pass --out with a writable path")
    say(f"{n:,} events -> {path}")

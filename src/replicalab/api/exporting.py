"""A run's history as Jepsen events, for other checkers (Elle, Knossos, Porcupine), and such a
file read back as a History: :func:`export` and :func:`read_history`.

Probe, load and placement-live runs export their History (register ops with Jepsen's
``independent`` tuples and plain values, transactions in Elle's shape: ``history/export.py``);
a queue run exports its record (every send, delivery, processing, commit, delete, with its
outcome). Nothing a run recorded is ever overwritten: a target that is one of a run's own
files is refused even with ``force``; another file that exists, or a path inside a run
directory (other than the run's default ``history.FORMAT``), needs ``force``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicalab.api import runkind
from replicalab.api.errors import ParameterError

FORMATS = ("edn", "jsonl")
RECORDED = ("history.parquet", "queue.parquet", "intended.parquet", "clt.parquet",
            "config.json", "results.json", "report.html", "samples.sqlite")
"""Files a run writes: what it recorded and what it derived from that."""
_RECORDED_DIRS = ("figures", "histograms", "runs")
_MENTIONS = {"out": "out", "force": "force=True"}


@dataclass(frozen=True)
class Export:
    """An export written: ``path``, ``format`` (edn or jsonl) and ``events`` (invokes and
    completions written)."""

    path: Path
    format: str
    events: int

    def to_json(self) -> dict[str, Any]:
        """Return {"path", "format", "events"}."""
        return {"path": str(self.path), "format": self.format, "events": self.events}


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
    ``force``), a directory. ``{out}`` and ``{force}`` in the text name those parameters."""
    p, own = path.absolute(), default.absolute()
    holder = _run_dir_holding(p)
    if holder is not None and (p.name in RECORDED or any(
            part in _RECORDED_DIRS for part in p.relative_to(holder).parts[:-1])):
        return (f"{path} is one of the files of the run {holder}; export never writes over "
                f"what a run saved: pass {{out}} with a new file, e.g. {holder.name}."
                f"{default.suffix.lstrip('.')}")
    if p.is_dir():
        return f"{path} is a directory; pass {{out}} with a file path"
    if p == own or force:
        return ""
    if holder is not None:
        return (f"{path} is inside the run directory {holder}; pass {{force}} to write there "
                "anyway, or {out} with a path outside it")
    if p.exists():
        return f"{path} exists; pass {{force}} to replace it, or {{out}} with another file"
    return ""


def export(run: Any, format: str = "edn", out: str | Path | None = None,
           force: bool = False) -> Export:
    """Write the history of ``run`` (a run directory or a ``Run``) as Jepsen events in
    ``format`` (``edn``: Jepsen's history.edn, one op map per line; ``jsonl``: the same
    events as JSON lines) to ``out`` (default ``RUN_DIR/history.FORMAT``); return the
    :class:`Export`. Raises :class:`ParameterError` naming ``format`` or ``out`` (a run's
    own file is never written over; an existing file, or one inside a run, needs
    ``force``), ValueError for a path that is not a run with a history."""
    from replicalab.history import load_history
    from replicalab.history.export import record_events, to_edn, to_jsonl, write_edn, write_jsonl

    if format not in FORMATS:
        raise ParameterError("format", f"{format!r}: use edn or jsonl")
    run_dir = Path(getattr(run, "path", run))
    what = runkind.kind(run_dir, "export")
    default = run_dir / f"history.{format}"
    path = Path(out) if out is not None else default
    problem = target_problem(path, default, force)
    if problem:
        raise ParameterError("out", problem, _MENTIONS)
    try:
        if what == runkind.QUEUE:
            from replicalab.queues.record import load_log

            write = write_edn if format == "edn" else write_jsonl
            n = write(record_events(load_log(run_dir)), path)
        else:
            h, _ = load_history(run_dir)
            n = (to_edn if format == "edn" else to_jsonl)(h, path)
    except OSError as err:
        raise ParameterError("out", f"cannot write {path}: {err.strerror}; pass {{out}} with a "
                                    "writable path", _MENTIONS) from None
    return Export(path, format, n)


def read_history(path: str | Path) -> Any:
    """Return the History in a Jepsen EDN or JSON lines file written by :func:`export`
    (row for row the run's History: the export is lossless) or by Jepsen (register ops,
    transactions). Raises ValueError naming the file and line of an event it cannot take."""
    from replicalab.history.export import read_history as read

    return read(Path(path))

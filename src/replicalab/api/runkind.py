"""What a path given to ``report`` or ``export`` is, and the one line that says what to pass.

Commands write several kinds of directory: probe runs (``history.parquet`` and a config
with the probe's spec), load runs (the same files plus ``intended.parquet``), queue runs
(``queue.parquet``, every queue operation), placement-live runs (``history.parquet`` of the
clients and migrations), comparisons, model runs and benches (``results.json`` with their
own kind), CLT runs (``clt.parquet``). ``report`` and ``export`` work on every run directory
with a history; ``check`` (linearizability) on those whose history is of registers (probe
and load runs) and names the command that re-checks the others; anything else gets a
message naming what it is and what to do instead of a missing-file error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROBE, LOAD, QUEUE, PLACEMENT_LIVE = "probe", "load", "queue", "placement-live"


def _results(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads((path / "results.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _config(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _run_dirs_in(path: Path) -> list[Path]:
    """Return the run directories directly inside ``path``, newest name last."""
    try:
        return sorted(p for p in path.iterdir() if p.is_dir() and (
            (p / "history.parquet").exists() or (p / "results.json").exists()
            or (p / "clt.parquet").exists()))
    except OSError:
        return []


def kind(path: Path, command: str) -> str:
    """Return PROBE, LOAD, QUEUE or PLACEMENT_LIVE for a run directory with a history that
    ``command`` can use; raise ValueError with one line saying what ``path`` is and what to
    pass instead."""
    example = "runs/<UTC time>-staleness-sim-simpledb"
    if not path.exists():
        raise ValueError(f"{path} does not exist; pass a run directory such as {example} "
                         "(ls runs/ lists them)")
    if not path.is_dir():
        where = (f"; pass the directory that holds it: replicalab {command} {path.parent}"
                 if (path.parent / "history.parquet").exists() else
                 f"; pass a run directory such as {example}")
        raise ValueError(f"{path} is a file, not a run directory{where}")
    if (path / "clt.parquet").exists():
        raise ValueError(f"{path} is a CLT run; use `replicalab clt report {path}` (it has "
                         "no operation history to re-check or export)")
    results, config = _results(path), _config(path)
    if (path / "queue.parquet").exists():
        if command == "check":
            raise ValueError(f"{path} is a queue run: its record is of deliveries, not of "
                             "registers; `replicalab report "
                             f"{path}` re-checks it (exactly once, lost, duplicates)")
        return QUEUE
    interrupted_live = ((path / "history.parquet").exists() and "store" in config
                        and "spec" not in config)  # saved before its results were
    if results.get("kind") == "placement-live" or interrupted_live:
        if command == "check":
            raise ValueError(f"{path} is a placement-live run: its migrations are not register "
                             "writes; `replicalab report "
                             f"{path}` re-checks its history for lost writes")
        return PLACEMENT_LIVE
    if (path / "history.parquet").exists():
        if "mode" in config and isinstance(config.get("spec"), dict) and \
                "rate_per_s" in config["spec"]:
            return LOAD
        return PROBE
    what = results.get("model") or results.get("kind")
    if what:
        inner = _run_dirs_in(path / "runs")
        hint = (f"; its probe runs are in {path / 'runs'}, e.g. replicalab {command} "
                f"{inner[-1]}" if inner else "")
        report = path / "report.html"
        shown = f"its report is {report}" if report.exists() else "it has no history"
        if what == "queue-compare" and inner:
            hint = (f"; each of its runs is a queue run, e.g. replicalab {command} "
                    f"{inner[-1]}")
        raise ValueError(f"{path} is a {what} run, not a probe run: {shown}{hint}")
    inner = _run_dirs_in(path)
    if inner:
        raise ValueError(f"{path} holds {len(inner)} run directories; pass one of them, e.g. "
                         f"replicalab {command} {inner[-1]}")
    raise ValueError(f"{path} is not a run directory (it has no history.parquet); pass a "
                     f"run directory such as {example}")


def compare_results(saved: dict[str, Any] | None, fresh: dict[str, Any]) -> str:
    """Return one line saying whether re-checked ``fresh`` results agree with ``saved``."""
    if saved is None:
        return "re-check: no saved results.json to compare with; wrote a new one"
    a = json.loads(json.dumps(saved, sort_keys=True))
    b = json.loads(json.dumps(fresh, sort_keys=True))
    if a == b:
        return "re-check: agrees with the saved results (results.json unchanged)"
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
    return f"re-check: DIFFERS from the saved results in {shown}; results.json now holds " \
           "the re-checked figures"

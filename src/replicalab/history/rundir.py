"""The run directory, one home for every command that saves a run (probe, load, queue,
placement, counter bench, model, CLT, HLC bench, check): ``<out>/<UTC time>-<what>-<name>/``
made once the run can start, ``results.json`` written deterministically (sorted keys, no
NaN) and read back, and ``Run``, what a command hands to its renderer."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replicalab.errors import ParameterError

RESULTS = "results.json"
MAX_PER_SECOND = 1000
"""Run directories one command may make under one --out in the same second."""


@dataclass
class Run:
    """Where a run was saved, its results, and whether it was cut short (``error`` says
    why it stopped early); ``steps`` holds the per-step parts of a run made of steps (a
    load ramp's worker results), empty otherwise; ``keys`` says where a probe's keys went
    on a real store (``workloads.runner.KeyCleanup``), None elsewhere."""

    run_dir: Path
    results: dict[str, Any]
    interrupted: bool = False
    error: str = ""
    steps: list[Any] = field(default_factory=list)
    keys: Any = None


def slug(text: str) -> str:
    """Return ``text`` (a URL or a name) as at most 40 letters, digits and dashes, fit for a
    directory name ("run" if nothing is left): a URL's scheme, host and path, never its
    user, password or query."""
    base = text.split("?", 1)[0]
    scheme, sep, rest = base.partition("://")
    if sep:
        base = f"{scheme}://{rest.rpartition('@')[2]}"
    return re.sub(r"[^A-Za-z0-9]+", "-", base).strip("-")[:40] or "run"


def make_run_dir(out: Path, what: str, name: str) -> Path:
    """Create and return a fresh ``out/<UTC time>-<what>-<slug(name)>`` (``-1``, ``-2`` ...
    when one of the same second exists); ParameterError naming ``out`` if it cannot be
    written."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for n in range(MAX_PER_SECOND):
            run_dir = out / f"{stamp}-{what}-{slug(name)}{'' if n == 0 else f'-{n}'}"
            try:
                run_dir.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise ParameterError("out", f"{out} already holds {MAX_PER_SECOND} {what} runs of "
                                        "this second; pass another directory")
        probe = run_dir / ".writable"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ParameterError("out", f"{out}: cannot write to output directory "
                                    f"({err.strerror}); pass a writable directory") from None
    return run_dir


def named_run_dir(out: Path, name: str) -> Path:
    """Create and return ``out/name``, one run of a batch whose directory names its place in
    the batch (ParameterError naming ``out`` if it exists already or cannot be written)."""
    run_dir = out / name
    try:
        run_dir.mkdir(parents=True)
    except FileExistsError:
        raise ParameterError("out", f"{out}: {run_dir} exists already; pass another "
                                    "directory") from None
    except OSError as err:
        raise ParameterError("out", f"{out}: cannot write to output directory "
                                    f"({err.strerror}); pass a writable directory") from None
    return run_dir


def finite_or_null(x: Any) -> Any:
    """Return ``x`` with every non-finite float (NaN, inf) inside dicts, lists and tuples
    replaced by None, tuples as lists: what JSON (``allow_nan=False``) can hold."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite_or_null(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite_or_null(v) for v in x]
    return x


def save_results(results: dict[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/results.json`` deterministically (sorted keys, no NaN: a missing
    figure is null) and return its path."""
    path = run_dir / RESULTS
    path.write_text(json.dumps(results, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return path


def load_results(run_dir: Path) -> dict[str, Any]:
    """Return the results saved in ``run_dir``; ValueError (one line) if they are missing
    or not a JSON object."""
    path = run_dir / RESULTS
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{run_dir} has no {RESULTS}; pass a run directory") from None
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror}") from None
    except ValueError as err:
        raise ValueError(f"{path} is malformed ({err}); re-run the command") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is malformed (not a JSON object); re-run the command")
    return doc

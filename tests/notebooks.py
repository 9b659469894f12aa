"""The example notebooks as they are committed: executed on real Jupyter machinery (a kernel
started by nbclient, as a notebook server would), saved with their outputs in a form that
re-executing changes only where a run's own identity changes (run directory names carry the
UTC time), and the numbers those outputs show, which tests/test_notebook.py compares.

Run as a script to execute the notebooks and save them with their outputs:
``.venv/bin/python tests/notebooks.py [docs/examples/NAME.ipynb ...]``."""

from __future__ import annotations

import copy
import html
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "docs" / "examples"
TIMEOUT_S = 120
"""One cell's limit: every cell runs in virtual time or on files it made."""

PROGRESS = '<div class="replicalab-progress">'
"""How replicalab's notebook progress bar starts (api/progress.py): updated in place while
a run goes, it shows wall time, not a result, so the saved notebook leaves it out."""
RUN_NAME = re.compile(r"\S*\d{8}T\d{6}Z\S*")
"""A run directory's name or path: ``<UTC time>-<what>-<name>``, new at each execution."""
NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?")
TAG = re.compile(r"<[^>]*>")
STYLE = re.compile(r"<style.*?</style>", re.S)


def execute(path: Path, cwd: Path) -> Any:
    """Return the notebook at ``path`` executed cell by cell in a fresh ``python3`` kernel
    whose working directory is ``cwd`` (the notebook's runs go under it); raises
    nbclient's CellExecutionError on the first cell that fails."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return nb


def _is_progress(output: Any) -> bool:
    return str(output.get("data", {}).get("text/html", "")).startswith(PROGRESS)


def saved_form(nb: Any) -> Any:
    """Return a copy of the executed ``nb`` as it is committed: no execution timestamps
    (cell ``execution`` metadata) nor Python patch version, no progress bars, and an output
    that has an HTML form kept in that form only (its text/plain twin of an Outcome is a
    dump of all its results: kilobytes, and run paths)."""
    nb = copy.deepcopy(nb)
    nb.metadata.get("language_info", {}).pop("version", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        cell.outputs = [o for o in cell.outputs if not _is_progress(o)]
        for o in cell.outputs:
            data = o.get("data", {})
            if "text/html" in data:
                data.pop("text/plain", None)
    return nb


def _text(output: Any) -> str:
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    if output.get("output_type") == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    data = output.get("data", {})
    if "text/html" in data:
        return html.unescape(TAG.sub(" ", STYLE.sub(" ", str(data["text/html"]))))
    return str(data.get("text/plain", ""))


def figures(nb: Any) -> list[list[str]]:
    """Return, for each code cell of ``nb``, the numbers its outputs show in order (text,
    tables, each figure as ``png``), run directory names left out: what a re-execution of
    a deterministic notebook must show again."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        shown: list[str] = []
        for o in cell.outputs:
            if _is_progress(o):
                continue
            if "image/png" in o.get("data", {}):
                shown.append("png")
            shown += NUMBER.findall(RUN_NAME.sub(" ", _text(o)))
        cells.append(shown)
    return cells


def save(path: Path) -> float:
    """Execute the notebook at ``path`` in a fresh temporary directory and save it over
    itself in its saved form; return how long it took in seconds."""
    import nbformat

    with tempfile.TemporaryDirectory(prefix="replicalab-notebook-") as cwd:
        started = time.monotonic()
        nb = execute(path, Path(cwd))
        took_s = time.monotonic() - started
    nbformat.write(saved_form(nb), path)
    return took_s


def main(argv: list[str]) -> int:
    """Save each notebook named (all of docs/examples/ by default) with its outputs."""
    paths = [Path(a) for a in argv] or sorted(EXAMPLES.glob("*.ipynb"))
    for path in paths:
        print(f"{path}: executed and saved in {save(path):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

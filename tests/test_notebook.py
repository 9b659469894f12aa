"""docs/examples/*.ipynb run on real Jupyter machinery (a kernel started by nbclient, as a
notebook server would) and fail on any cell error; their figures come from runs they start
themselves under a directory they name, progress shows as a notebook bar, never as terminal
escape codes, and the outputs committed with them are the ones a re-execution shows again
(simulated runs in virtual time: the same seed, the same numbers)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from servers import need_module

nbformat = need_module("nbformat")
need_module("nbclient")
need_module("ipykernel")

from notebooks import EXAMPLES, execute, figures, saved_form  # noqa: E402  (needs nbformat)

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
LIMIT_S = 60.0
"""A notebook runs its probes in virtual time: it must finish within a minute."""
REMAKE = "re-make it with .venv/bin/python tests/notebooks.py and commit it"


def _outputs(nb: object, kind: str) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code"  # type: ignore[attr-defined]
            for o in c.get("outputs", []) if kind in o.get("data", {})]


def _first_difference(saved: list[list[str]], now: list[list[str]]) -> str:
    for i, (was, shown) in enumerate(zip(saved, now, strict=True)):
        if was != shown:
            at = next((j for j, (a, b) in enumerate(zip(was, shown, strict=False)) if a != b),
                      min(len(was), len(shown)))
            return (f"code cell {i + 1}: committed {was[at:at + 6]}, now {shown[at:at + 6]} "
                    f"({len(was)} numbers committed, {len(shown)} now)")
    return ""


def test_there_is_an_example_notebook() -> None:
    assert [p.name for p in NOTEBOOKS] == ["seed-figures.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_notebook_is_committed_with_its_outputs(path: Path) -> None:
    committed = nbformat.read(path, as_version=4)
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert all(c.execution_count == i for i, c in enumerate(code, 1)), \
        f"every cell executed once, in order: {REMAKE}"
    assert len(_outputs(committed, "image/png")) >= 3
    # in its saved form: no execution timestamps, progress bars or text twins of HTML
    assert saved_form(committed) == committed, REMAKE
    text = json.dumps(committed)
    assert "/tmp/" not in text and str(REPO) not in text, "runs under a relative directory"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_notebook_runs_every_cell(path: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # nothing of replicalab's may go here
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    started = time.monotonic()
    nb = execute(path, cwd)  # raises CellExecutionError on the first cell that fails
    took_s = time.monotonic() - started
    assert took_s < LIMIT_S, f"{path.name} took {took_s:.0f} s"
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    # figures: the side-by-side freshness panels and each run's Figure 3, as PNG
    assert len(_outputs(nb, "image/png")) >= 3
    # a Run and a Comparison show their summary tables as HTML
    html = [o["data"]["text/html"] for o in _outputs(nb, "text/html")]
    assert any("fresh in [0, 450) ms" in h for h in html)
    # progress: notebook bars (HTML <progress> updated in place), no terminal escapes
    bars = [h for h in html if "<progress" in h]
    assert len(bars) == 4  # one per run: two staleness and two latency probes
    # updated in place (update_display_data) from 0 % to the end, not printed again and again
    assert all('value="100.0"' in b and " done " in b for b in bars), bars
    streams = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs if o.output_type == "stream")
    assert "\x1b[" not in streams and "\r" not in streams
    # the runs behind the figures were started by the notebook itself, under the directory
    # it names (runs/notebook where it runs), none in the system's temporary directory
    assert "runs made by this notebook:" in streams
    listed = streams.split("runs made by this notebook:", 1)[1]
    assert listed.count("staleness-sim-") == 2 and listed.count("latency-sim-") == 2
    made = sorted(p.name for p in (cwd / "runs" / "notebook").glob("*-sim-*"))
    assert len(made) == 4 and all(f"runs/notebook/{name}" in listed for name in made)
    assert (cwd / "runs" / "notebook" / "verbs").is_dir()
    assert not [p.name for p in temp.glob("replicalab-*")]
    # the numbers it shows are those committed with it: same seed, same figures
    committed = nbformat.read(path, as_version=4)
    now = saved_form(nb)
    assert len(figures(now)) == len(figures(committed))
    assert figures(now) == figures(committed), \
        f"{path.name} shows other numbers than committed: " \
        f"{_first_difference(figures(committed), figures(now))}; {REMAKE}"

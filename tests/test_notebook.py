"""docs/examples/*.ipynb run on real Jupyter machinery (a kernel started by nbclient, as a
notebook server would) and fail on any cell error; their figures come from runs they start
themselves, and progress shows as a notebook bar, never as terminal escape codes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from servers import need_module

nbformat = need_module("nbformat")
nbclient = need_module("nbclient")
need_module("ipykernel")

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "docs" / "examples").glob("*.ipynb"))
LIMIT_S = 60.0
"""A notebook runs its probes in virtual time: it must finish within a minute."""


def _outputs(nb: object, kind: str) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code"  # type: ignore[attr-defined]
            for o in c.get("outputs", []) if kind in o.get("data", {})]


def test_there_is_an_example_notebook() -> None:
    assert [p.name for p in NOTEBOOKS] == ["seed-figures.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_notebook_runs_every_cell(path: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's runs go under tmp_path
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "commit the notebook without outputs: the test makes them"
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    started = time.monotonic()
    client.execute()  # raises CellExecutionError on the first cell that fails
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
    # the runs behind the figures were started by the notebook itself
    assert "runs made by this notebook:" in streams
    listed = streams.split("runs made by this notebook:", 1)[1]
    assert listed.count("staleness-sim-") == 2 and listed.count("latency-sim-") == 2
    made = sorted(p.name for p in tmp_path.glob("replicalab-notebook-*/runs/*"))
    assert len(made) == 4 and all(name in listed for name in made)

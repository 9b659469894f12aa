"""Open a rendered report in headless Chromium with networking off and check what it shows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from browser import fetch_from_live_server, run_chromium
from replicalab.report import render_report
from test_report import make_results

pytestmark = pytest.mark.browser

@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_report(make_results("staleness"), tmp_path_factory.mktemp("run"))


def test_offline_dom_has_rendered_staleness_svg(report: Path, tmp_path: Path) -> None:
    proc = run_chromium(tmp_path, "--dump-dom", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert re.search(r'<body[^>]*data-rendered="1"', dom), "load script did not mark the page"
    figure = re.search(r'<figure id="fig-staleness">(.*?)</figure>', dom, re.S)
    assert figure, "staleness figure missing from the DOM"
    assert "<svg" in figure[1]
    assert len(re.findall(r"<path\b", figure[1])) > 10


def test_offline_screenshot_is_not_blank(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    proc = run_chromium(
        tmp_path, f"--screenshot={shot}", "--window-size=1200,2000", report.as_uri()
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.is_file()
    assert shot.stat().st_size > 20_000
    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1200)
    # A page with text, tables and plots has many distinct grey levels and real contrast.
    grey = pixels[..., :3].mean(axis=2)
    assert grey.std() > 0.05
    assert len(np.unique(np.round(grey, 2))) > 20


def test_offline_flags_really_block_the_network(tmp_path: Path) -> None:
    """Guard for the two tests above: a page fetching from a live local server must fail."""
    proc, hits = fetch_from_live_server(
        tmp_path, lambda page: run_chromium(tmp_path, "--dump-dom", page.as_uri()))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-net="off"' in proc.stdout
    assert hits == []

"""The scorecard's chart opened in headless Chromium with networking off: every cell is
coloured and clickable, and a click opens that cell's evidence."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from browser import run_chromium
from replicalab.experiments.plan import QUICK
from replicalab.experiments.properties import names
from replicalab.experiments.run import Scorecard, run
from replicalab.report.scorecard import render_scorecard

pytestmark = pytest.mark.browser

STORES = ("sim://primary?replication=async&regions=dc3", "sim://simpledb")
SMALL = dataclasses.replace(QUICK, staleness_s=10.0, register_s=5.0, latency_ops=10,
                            fault_probe_s=10.0, fault_at_s=2.0, fault_for_s=4.0)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("scorecard")
    (d / "runs").mkdir()
    sc = run(Scorecard(d, STORES, names(), "dc3", SMALL, seed=3), lambda what: None)
    return render_scorecard(sc.to_json(), d)


def test_every_cell_is_coloured_clickable_and_opens_its_evidence(report: Path, tmp_path: Path):
    proc = run_chromium(tmp_path, "--dump-dom", report.as_uri() + "#selftest")
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", proc.stdout)
    assert body, proc.stdout[:500]
    attrs = dict(re.findall(r'data-(\w+)="([^"]*)"', body[1]))
    n = len(STORES) * len(names())
    assert attrs.get("rendered") == "1"
    assert attrs.get("cells") == str(n)
    assert attrs.get("coloured") == str(n)
    assert attrs.get("opened") == str(n)


def test_an_opened_cell_shows_promise_source_and_counterexample(report: Path, tmp_path: Path):
    proc = run_chromium(tmp_path, "--dump-dom",
                        report.as_uri() + "#open=sim://primary?replication=async&regions=dc3/"
                        "consistency")
    assert proc.returncode == 0, proc.stderr[-2000:]
    box = re.search(r'<section id="evidence"[^>]*>(.*?)</section>', proc.stdout, re.S)
    assert box and "hidden" not in box[0].split(">")[0]
    text = box[1]
    assert "Promise:" in text and "source:" in text
    assert "Counterexample" in text and "NOT linearizable" in text


def test_screenshot_shows_the_colours(report: Path, tmp_path: Path):
    shot = tmp_path / "shot.png"
    proc = run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,900",
                        report.as_uri() + "#open=sim://simpledb/transactionality")
    assert proc.returncode == 0, proc.stderr[-2000:]
    px = imread(shot)[..., :3]
    green = (np.abs(px[..., 0] - 0xB7 / 255) < 0.04) & (np.abs(px[..., 1] - 0xE4 / 255) < 0.04)
    yellow = (np.abs(px[..., 0] - 0xF7 / 255) < 0.04) & (np.abs(px[..., 2] - 0x8A / 255) < 0.04)
    assert green.sum() > 500 and yellow.sum() > 500

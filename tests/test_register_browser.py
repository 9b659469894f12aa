"""A register run's report opened in headless Chromium with networking off: the timeline
of the non-linearizable key renders, with the counterexample highlighted and nemesis
periods shaded, and the page stays small."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from browser import run_chromium
from replicalab.faults.schedule import parse_fault
from replicalab.report import render_report
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A long run (about 20,000 operations) on sim://primary with eventual reads at the EU
    replica and the EU region partitioned for a while: not linearizable."""
    spec = ProbeSpec(store="sim://primary?replication=async&regions=dc3", workload="register",
                     options=ProbeOptions(duration_s=200),
                     config=RegisterConfig(writer_region="US-E", reader_region="EU"),
                     faults=(parse_fault("at=60s partition region=EU for=20s"),))
    run = run_probe(spec, tmp_path_factory.mktemp("runs"))
    assert run.results["linearizability"]["valid"] is False
    return render_report(run.results, run.run_dir)


def test_offline_dom_has_the_timeline_with_the_counterexample(report: Path, tmp_path: Path):
    proc = run_chromium(tmp_path, "--dump-dom", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert re.search(r'<body[^>]*data-rendered="1"', dom), "load script did not mark the page"
    fig = re.search(r'<figure id="fig-timeline-1" class="timeline">(.*?)</figure>', dom, re.S)
    assert fig, "timeline missing from the DOM"
    svg = fig[1]
    drawn = len(re.findall(r'<g class="op', svg))
    assert 2 <= drawn <= RegisterConfig().timeline_ops
    assert re.search(r'<g class="op offending"', svg)
    # a stale read is refuted without a search: no linearization order to draw, and the
    # caption says so rather than promising dots
    points = len(re.findall(r'class="lin-point"', svg))
    caption = re.search(r"<figcaption>(.*?)</figcaption>", svg, re.S)[1]
    if points:
        assert "linearization order" in caption
    else:
        assert "refuted this key" in caption and "dots joined" not in caption
    # the key's heading and its plain-language reading stand above the timeline
    assert re.search(r"register/\S+: not linearizable", dom)
    assert "minimal counterexample" in dom
    # a long history, a small page: the neighbourhood of the counterexample only
    assert report.stat().st_size < 600_000


def test_offline_screenshot_shows_the_timeline(report: Path, tmp_path: Path):
    shot = tmp_path / "shot.png"
    proc = run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1100,2400",
                        report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    # the counterexample's red (#d62728) is on the page, drawn by the browser
    red = (np.abs(pixels[..., 0] - 0xD6 / 255) < 0.08) & (pixels[..., 1] < 0.35) & (
        pixels[..., 2] < 0.35)
    assert red.sum() > 50
    grey = pixels.mean(axis=2)
    assert grey.std() > 0.05

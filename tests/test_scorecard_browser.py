"""The scorecard's chart opened in headless Chromium with networking off: every cell is
coloured and clickable, a click opens that cell's evidence, and a cell's bar chart shows
every label whole with no value drawn over a bar."""

from __future__ import annotations

import dataclasses
import html
import json
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


# Run inside the rendered report (appended after its own script): opens every cell that
# draws a bar chart and measures the chart as laid out. A label is cut when its full text
# (from the cell's data) is not shown in one element, when that element's content is wider
# than its box, or when it reaches past the chart or the window; a value overlaps when its
# box meets a bar's. Bars are SVG rects or [data-part=bar] elements; values are the leaves
# whose text is a percentage or "n/a"; every other text leaf is a label.
_LAYOUT_CHECK = r"""<script>
(function () {
  const DATA = JSON.parse(document.getElementById('scorecard-data').textContent);
  const out = {charts: 0, labels: 0, values: 0, cut: [], overlaps: []};
  const meets = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5
    && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  const isValue = t => /^\s*(\d+(\.\d+)?\s?%|n\/a)\s*$/.test(t);
  const page = document.documentElement.clientWidth;
  for (const c of DATA.cells) {
    if (!c.chart || !c.chart.bars) continue;
    const b = [...document.querySelectorAll('button.cell')].find(
      x => x.dataset.store === c.store && x.dataset.prop === c.prop);
    b.click();
    const chart = document.querySelector('#evidence svg.bars, #evidence .bars');
    if (!chart) { out.cut.push(c.store + '/' + c.prop + ': no chart drawn'); continue; }
    out.charts++;
    const box = chart.getBoundingClientRect();
    const leaves = [...chart.querySelectorAll('*')].filter(
      e => e.children.length === 0 && e.textContent.trim());
    const values = leaves.filter(e => isValue(e.textContent));
    const labels = leaves.filter(e => !isValue(e.textContent));
    const bars = [...chart.querySelectorAll('rect, [data-part=bar]')].map(
      e => e.getBoundingClientRect()).filter(r => r.width > 0 && r.height > 0);
    for (const [label] of c.chart.bars) {
      out.labels++;
      const e = labels.find(x => x.textContent === label);
      if (!e) {
        const shown = labels.map(x => x.textContent).find(
          t => t.endsWith('…') && label.startsWith(t.slice(0, -1)));
        out.cut.push(label + ' shown as ' + JSON.stringify(shown || 'nothing'));
        continue;
      }
      const r = e.getBoundingClientRect();
      const wider = e instanceof HTMLElement ? e.scrollWidth > e.clientWidth + 0.5
        : e.getComputedTextLength() > r.width + 0.5;
      if (wider || r.right > box.right + 0.5 || r.left < box.left - 0.5 || r.right > page)
        out.cut.push(label + ' drawn past its space');
      for (const bar of bars) if (meets(r, bar)) out.overlaps.push('label ' + label);
    }
    for (const v of values) {
      out.values++;
      const r = v.getBoundingClientRect();
      for (const bar of bars) if (meets(r, bar)) {
        out.overlaps.push(c.store + '/' + c.prop + ': ' + v.textContent + ' over a bar');
        break;
      }
    }
  }
  document.body.dataset.layout = JSON.stringify(out);
})();
</script>"""


@pytest.mark.parametrize("width", [None, 1400])  # Chromium's default window, and a wide one
def test_chart_labels_are_whole_and_values_clear_of_the_bars(report: Path, tmp_path: Path,
                                                             width: int | None):
    page = tmp_path / "layout.html"
    page.write_text(report.read_text().replace("</body>", _LAYOUT_CHECK + "</body>"))
    size = [f"--window-size={width},900"] if width else []
    proc = run_chromium(tmp_path, *size, "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = re.search(r'<body[^>]*data-layout="([^"]*)"', proc.stdout)
    assert body, proc.stdout[:500]
    got = json.loads(html.unescape(body[1]))
    # every store with a fault has an availability chart: 3 bars per fault, values beside
    assert got["charts"] >= 1 and got["labels"] >= 3 and got["values"] == got["labels"]
    assert {"cut": got["cut"], "overlaps": got["overlaps"]} == {"cut": [], "overlaps": []}


# Run inside the rendered report: every cell shows its headline whole (its text is the
# cell's headline, nothing overflows its box or the window), and a click opens that cell's
# evidence with its value sentence in it.
_HEADLINE_CHECK = r"""<script>
(function () {
  const DATA = JSON.parse(document.getElementById('scorecard-data').textContent);
  const out = {cells: 0, headlines: 0, whole: 0, evidence: 0, bad: []};
  const page = document.documentElement.clientWidth;
  for (const b of document.querySelectorAll('button.cell')) {
    out.cells++;
    const c = DATA.cells.find(x => x.store === b.dataset.store && x.prop === b.dataset.prop);
    if (c && c.headline && b.textContent === c.headline) out.headlines++;
    else out.bad.push('not its headline: ' + b.textContent);
    const r = b.getBoundingClientRect();
    if (b.scrollWidth <= b.clientWidth + 1 && b.scrollHeight <= b.clientHeight + 1
        && r.right <= page + 0.5 && r.width > 0) out.whole++;
    else out.bad.push('cut: ' + b.textContent);
    b.click();
    const box = document.getElementById('evidence');
    const value = box.querySelector('p.value');
    if (!box.hidden && c && value && value.textContent === c.value
        && box.textContent.includes('grade ' + c.grade)) out.evidence++;
    else out.bad.push('no evidence for ' + b.dataset.store + '/' + b.dataset.prop);
  }
  document.body.dataset.headlines = JSON.stringify(out);
})();
</script>"""


@pytest.mark.parametrize("width", [800, 1400])
def test_cells_show_their_headlines_and_open_their_evidence(report: Path, tmp_path: Path,
                                                            width: int):
    page = tmp_path / "headlines.html"
    page.write_text(report.read_text().replace("</body>", _HEADLINE_CHECK + "</body>"))
    proc = run_chromium(tmp_path, f"--window-size={width},900", "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = re.search(r'<body[^>]*data-headlines="([^"]*)"', proc.stdout)
    assert body, proc.stdout[:500]
    got = json.loads(html.unescape(body[1]))
    n = len(STORES) * len(names())
    assert got == {"cells": n, "headlines": n, "whole": n, "evidence": n, "bad": []}, got
    saved = json.loads(report.with_name("scorecard.json").read_text()) \
        if report.with_name("scorecard.json").exists() else None
    if saved is not None:
        assert all(len(c["headline"].split()) <= 12 for c in saved["cells"])

"""The scorecard's ``report.html``: seed 001's chart measured, one row per store, one column
per property, each cell coloured against the goal or the documented promise and opening its
evidence (figures, counterexample, fault windows, promise and its source, the runs behind it)
when clicked. One self-contained file: styles, script and data inline, nothing fetched."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from replicalab.experiments.run import order

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
@media (max-width:900px){body{margin:12px}table.chart{border-spacing:3px}
 button.cell{padding:5px 6px}}
h1{font-size:20px;margin:0 0 4px} .sub{color:#666;font-weight:normal}
table.chart{border-collapse:separate;border-spacing:4px;margin:16px 0;width:100%}
.chart th{font-weight:600;text-align:left;padding:6px 4px;color:#333;font-size:12px}
.chart td.store{font-weight:600;padding:6px 4px;min-width:6em;max-width:14em;
 overflow-wrap:break-word}
.chart td{vertical-align:top}
button.cell{display:block;width:100%;min-height:64px;text-align:left;border:1px solid
 rgba(0,0,0,.15);border-radius:6px;padding:6px 8px;font:12px/1.35 system-ui,sans-serif;
 cursor:pointer;color:#111;overflow-wrap:break-word}
button.cell:hover,button.cell:focus{outline:2px solid #333}
.green{background:#b7e4b0}.yellow{background:#f7e08a}.red{background:#f4a3a3}
.grey{background:#e4e4e4;color:#555}.pending{background:#fff;border-style:dashed}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;border-radius:4px}
#evidence{border:1px solid #999;border-radius:8px;padding:12px 16px;margin-top:12px;
 max-width:1100px} #evidence[hidden]{display:none}
#evidence h2{font-size:16px;margin:0 0 6px} #evidence .grade{font-weight:600}
#evidence ul{margin:4px 0 8px 18px;padding:0} .muted{color:#666}
.counter{background:#fff3f3;border-left:4px solid #d62728;padding:6px 8px;margin:6px 0}
.bars{display:grid;grid-template-columns:minmax(10em,26em) minmax(80px,200px) 4.5em;
 gap:4px 10px;align-items:center;font-size:12px;margin:4px 0 10px;max-width:100%}
.bar-label{overflow-wrap:anywhere;min-width:0}
.bar-track{display:block;height:12px;background:#eee;border-radius:2px;overflow:hidden}
.bar-fill{display:block;height:100%}
.bar-value{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.notes{color:#8a4b00}
"""

_JS = r"""
const DATA = JSON.parse(document.getElementById('scorecard-data').textContent);
const GRADE_WORDS = {green: 'meets the goal or promise', yellow: 'meets it with a caveat',
  red: 'misses the goal or promise', grey: 'not measured'};
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function list(items) {
  const ul = el('ul');
  for (const t of items) ul.appendChild(el('li', {}, t));
  return ul;
}
function bars(rows) {
  // a cell's chart: one row per [label, fraction] (availability: each fault's reads and
  // writes) in a grid of three columns, so nothing is cut and nothing is drawn over a bar:
  // the label in full (it wraps on a narrow page), the bar on its own track, the value beside
  // the track
  const box = el('div', {class: 'bars'});
  for (const [label, v] of rows) {
    const frac = v === null ? 0 : Math.max(0, Math.min(1, v));
    box.appendChild(el('span', {class: 'bar-label'}, label));
    const track = el('span', {class: 'bar-track'});
    const fill = el('span', {class: 'bar-fill', 'data-part': 'bar'});
    fill.style.width = (100 * frac).toFixed(2) + '%';
    fill.style.background = frac >= 0.95 ? '#4c9a2a' : frac >= 0.5 ? '#d9a400' : '#d62728';
    track.appendChild(fill);
    box.appendChild(track);
    box.appendChild(el('span', {class: 'bar-value'},
                       v === null ? 'n/a' : (100 * v).toFixed(1) + '%'));
  }
  return box;
}
function openCell(store, prop) {
  const c = DATA.cells.find(x => x.store === store && x.prop === prop);
  const box = document.getElementById('evidence');
  box.replaceChildren();
  if (!c) {
    box.appendChild(el('h2', {}, store + ' · ' + prop));
    box.appendChild(el('p', {class: 'muted'}, 'not measured: the run stopped before this cell'));
  } else {
    box.appendChild(el('h2', {}, c.store + ' · ' + c.prop));
    box.appendChild(el('p', {class: 'grade ' + c.grade},
                       'grade ' + c.grade + ': ' + GRADE_WORDS[c.grade]));
    box.appendChild(el('p', {class: 'value'}, c.value));
    const pr = el('p');
    pr.appendChild(el('b', {}, 'Promise: ')); pr.appendChild(document.createTextNode(c.promise));
    pr.appendChild(el('span', {class: 'muted'}, ' — source: ' + c.source));
    box.appendChild(pr);
    if (c.caveat) box.appendChild(el('p', {}, 'Caveat: ' + c.caveat));
    if (c.reason) box.appendChild(el('p', {}, 'Why not measured: ' + c.reason));
    if (c.details.length) {
      box.appendChild(el('b', {}, 'Evidence'));
      box.appendChild(list(c.details));
    }
    if (c.counterexample) {
      box.appendChild(el('b', {}, 'Counterexample (register test)'));
      box.appendChild(el('div', {class: 'counter'}, c.counterexample));
    }
    if (c.chart && c.chart.bars) {
      box.appendChild(el('b', {}, c.chart.title));
      box.appendChild(el('div')).appendChild(bars(c.chart.bars));
    }
    if (c.runs.length) {
      box.appendChild(el('b', {}, 'Runs behind this cell'));
      const ul = el('ul');
      for (const r of c.runs) {
        const li = el('li'); const a = el('a', {href: r + '/results.json'}, r);
        li.appendChild(a); ul.appendChild(li);
      }
      box.appendChild(ul);
      box.appendChild(el('p', {class: 'muted'},
        'Each run directory holds its history; `replicalab report DIR` re-checks and renders it.'));
    }
  }
  box.hidden = false;
  box.dataset.cell = store + '/' + prop;
  return box;
}
document.querySelectorAll('button.cell').forEach(b => b.addEventListener('click',
  () => openCell(b.dataset.store, b.dataset.prop)));
// #open=STORE/PROP opens that cell; #selftest clicks every cell and records what opened
const hash = decodeURIComponent(location.hash.slice(1));
if (hash.startsWith('open=')) {
  const [s, p] = [hash.slice(5, hash.lastIndexOf('/')), hash.slice(hash.lastIndexOf('/') + 1)];
  const b = [...document.querySelectorAll('button.cell')].find(
    x => x.dataset.store === s && x.dataset.prop === p);
  if (b) b.click();
}
if (hash === 'selftest') {
  let opened = 0, coloured = 0;
  const buttons = document.querySelectorAll('button.cell');
  for (const b of buttons) {
    const bg = getComputedStyle(b).backgroundColor;
    if (bg && bg !== 'rgba(0, 0, 0, 0)' && bg !== 'rgb(255, 255, 255)') coloured++;
    b.click();
    const box = document.getElementById('evidence');
    if (!box.hidden && box.dataset.cell === b.dataset.store + '/' + b.dataset.prop
        && box.querySelector('h2')) opened++;
  }
  document.body.dataset.cells = buttons.length;
  document.body.dataset.coloured = coloured;
  document.body.dataset.opened = opened;
}
document.body.dataset.rendered = '1';
"""


def _cell_button(store: str, prop: str, c: dict[str, Any] | None) -> str:
    # the cell shows its headline (the figure that decides its grade); the sentences and
    # the evidence open on a click (a scorecard saved before headlines shows its value)
    grade = c["grade"] if c else "pending"
    text = (c.get("headline") or c["value"]) if c else "not measured (run stopped)"
    title = f"{store} {prop}: {grade}" + (f" — {c['caveat']}" if c and c["caveat"] else "")
    return (f'<button class="cell {grade}" data-store="{escape(store)}" '
            f'data-prop="{escape(prop)}" title="{escape(title)}">{escape(text)}</button>')


def placement(sc: dict[str, Any]) -> str:
    """Return which stores the scorecard measured and where each one's nodes sit, stores on
    the same regions together: "redis, etcd on US-E, US-W, EU; sim://quorum in one region"
    (a store whose cluster never started is named alone)."""
    by_regions: dict[tuple[str, ...], list[str]] = {}
    for store in sc["kinds"]:
        regions = tuple(sc.get("stores", {}).get(store, {}).get("regions", ()))
        by_regions.setdefault(regions, []).append(store)
    parts = []
    for regions, stores in by_regions.items():
        names = ", ".join(stores)
        if not regions:
            parts.append(names)
        elif len(set(regions)) == 1:
            parts.append(f"{names} in one region" + (
                f" ({regions[0]})" if regions[0] != "local" else ""))
        else:
            parts.append(f"{names} on {', '.join(dict.fromkeys(regions))}")
    return "; ".join(parts)


def render_scorecard(sc: dict[str, Any], run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` for a scorecard (its scorecard.json as a dict); return
    its path. A partial scorecard (interrupted) shows the cells not measured as dashed."""
    props = sc["properties"]
    rows = []
    for store, cells in order(sc):
        # a sim:// URL may break after "?" and "&" (never inside a word)
        name = escape(store).replace("?", "?<wbr>").replace("&amp;", "&amp;<wbr>")
        rows.append(f'<tr><td class="store">{name}</td>' + "".join(
            f"<td>{_cell_button(store, p, c)}</td>" for p, c in zip(props, cells, strict=True))
                    + "</tr>")
    plan = sc["plan"]
    notes = []
    if sc.get("interrupted"):
        notes.append("Interrupted: the cells measured before the interruption are shown; "
                     "dashed cells were not measured.")
    for store, err in sc.get("errors", {}).items():
        notes.append(f"{store}: {err}")
    head = "".join(f"<th>{escape(p)}</th>" for p in props)
    # the data island: '<' escaped so no value can close the script element
    data = json.dumps(sc, allow_nan=False).replace("<", "\\u003c")
    html = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>replicalab scorecard</title><style>{_CSS}</style></head>
<body>
<h1>replicalab scorecard <span class="sub">· {escape(placement(sc))} ·
{'quick' if plan['quick'] else 'full'} · {sc['wall_s']:.0f} s</span></h1>
<p class="legend">Grade: <span class="green">green: meets the goal or promise</span><span
class="yellow">yellow: with a caveat</span><span class="red">red: misses it</span><span
class="grey">grey: not measured (reason given)</span> Each cell names the figure that
decides its grade; click it for the evidence.</p>
{''.join(f'<p class="notes">{escape(n)}</p>' for n in notes)}
<table class="chart"><thead><tr><th>store</th>{head}</tr></thead>
<tbody>{''.join(rows)}</tbody></table>
<section id="evidence" hidden></section>
<script type="application/json" id="scorecard-data">{data}</script>
<script>{_JS}</script>
</body></html>
"""
    path = run_dir / "report.html"
    path.write_text(html)
    return path

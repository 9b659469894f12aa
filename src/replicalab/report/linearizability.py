"""The register workload's report section: the linearizability verdict, each violation's
explanation and counterexample, and a timeline per key drawn as inline SVG.

The timeline has one lane per process and a bar per operation from its invoke to its
completion (an ``info`` operation, whose outcome is unknown, runs on to the window's edge,
dashed); the checker's linearization points are dots joined in their order; operations of
the counterexample are red; nemesis periods are shaded. Only the operations the checker
stored in ``results["timeline"]`` are drawn (a counterexample's neighbourhood), so the
page stays small. Every store value is escaped; tooltips (``<title>``) give the full
operation.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replicalab.report.page import Page

WIDTH = 900
LEFT = 64
RIGHT = 16
TOP = 30
LANE = 24
BAR = 12
BOTTOM = 34
COLORS = {"read": "#1f77b4", "write": "#2ca02c", "cas": "#9467bd"}
OFFENDING = "#d62728"
FAULT_FILL = "#ffdd99"
CHAR_PX = 5.6
"""Width of one label character at font size 10 (labels that would overlap are left out;
the tooltip still names the op)."""
_VERDICT = {True: "linearizable", False: "not linearizable", "unknown": "unknown"}


def esc(value: object) -> str:
    """Return ``value`` as text safe in HTML content and attributes."""
    return html.escape(str(value))


def _ms(x: float | None) -> str:
    return "never" if x is None else f"{x:,.3f}"


def verdict_text(valid: Any) -> str:
    """Return a verdict (True / False / "unknown") in words."""
    return _VERDICT.get(valid, str(valid))


def _short(value: str | None) -> str:
    if value is None:
        return "nil"
    head = value.split("@", 1)[0]
    return head if head else value


def _op_label(op: Mapping[str, Any]) -> str:
    f = op["f"]
    if f == "read":
        return f"R {_short(op['value'])}" if op["type"] == "ok" else "R ?"
    if f == "cas":
        return f"CAS {_short(op.get('expect'))}→{_short(op['value'])}"
    return f"W {_short(op['value'])}"


def _op_title(op: Mapping[str, Any], process: str) -> str:
    end = "never (unknown outcome)" if op["complete_ms"] is None else f"{op['complete_ms']:.3f}"
    what = f"{op['f']} {op['value']}" if op["f"] != "cas" else (
        f"cas {op.get('expect')} -> {op['value']}")
    lin = "" if op.get("lin_ms") is None else f"; linearized at {op['lin_ms']:.3f} ms"
    bad = "; in the counterexample" if op.get("offending") else ""
    return (f"op {op['row']}, process {process}: {what} ({op['type']}); invoked "
            f"{op['invoke_ms']:.3f} ms, completed {end} ms{lin}{bad}")


def _ticks(t0: float, t1: float, count: int = 6) -> list[float]:
    """Return round tick positions (1, 2 or 5 times a power of ten apart) inside (t0, t1)."""
    raw = max(t1 - t0, 1e-6) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if raw <= m * mag)
    first = math.floor(t0 / step + 1) * step
    return [round(first + k * step, 6) for k in range(count * 2 + 2)
            if first + k * step < t1]


def _legend(x0: float, y: float) -> str:
    """Return the legend: op colours, the counterexample, linearization points, faults."""
    items = [(COLORS["read"], "read"), (COLORS["write"], "write"), (COLORS["cas"], "cas"),
             (OFFENDING, "counterexample"), (FAULT_FILL, "fault")]
    out, x = [], x0
    for color, name in items:
        out.append(f'<rect x="{x:.1f}" y="{y - 8}" width="12" height="9" fill="{color}" '
                   f'fill-opacity="{0.55 if name == "fault" else 0.35}" stroke="{color}"/>'
                   f'<text x="{x + 16:.1f}" y="{y}" fill="#555">{name}</text>')
        x += 22 + CHAR_PX * len(name) + 8
    out.append(f'<circle cx="{x + 4:.1f}" cy="{y - 3.5}" r="2.6" fill="#111"/>'
               f'<text x="{x + 12:.1f}" y="{y}" fill="#555">linearization point</text>')
    return f'<g class="legend">{"".join(out)}</g>'


def _label_room(ops: Sequence[Mapping[str, Any]], x: Any) -> dict[int, float]:
    """Return per op (by id) the px free after its start on its lane, up to the next op."""
    room: dict[int, float] = {}
    by_lane: dict[int, list[Mapping[str, Any]]] = {}
    for op in ops:
        by_lane.setdefault(op["process"], []).append(op)
    for lane_ops in by_lane.values():
        lane_ops.sort(key=lambda o: o["invoke_ms"])
        for a, b in zip(lane_ops, [*lane_ops[1:], None], strict=True):
            end = WIDTH - RIGHT if b is None else x(b["invoke_ms"])
            room[id(a)] = end - x(a["invoke_ms"]) - 4
    return room


def timeline_svg(tl: Mapping[str, Any], faults: Sequence[Mapping[str, Any]] = ()) -> str:
    """Return the timeline of one key (``results["timeline"][i]``) as an <svg> element."""
    ops = tl["ops"]
    procs = sorted({op["process"] for op in ops}, key=lambda p: (p < 0, p))
    lane = {p: i for i, p in enumerate(procs)}
    t0, t1 = float(tl["t0_ms"]), float(tl["t1_ms"])
    pad = max((t1 - t0) * 0.03, 0.01)
    t0, t1 = t0 - pad, t1 + pad
    inner = WIDTH - LEFT - RIGHT
    height = TOP + LANE * len(procs) + BOTTOM + 14

    def x(t: float) -> float:
        return LEFT + (min(max(t, t0), t1) - t0) / (t1 - t0) * inner

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" role="img" font-family="sans-serif" '
             f'font-size="10" class="lin-timeline" data-ops="{len(ops)}">',
             f"<title>{esc(tl['key'])}: {len(ops)} of {tl['ops_total']} operations</title>"]
    for f in faults:
        a, b = float(f["start_ms"]), float(f["end_ms"])
        if b < t0 or a > t1:
            continue
        parts.append(f'<rect class="nemesis" x="{x(a):.1f}" y="{TOP - 14}" '
                     f'width="{max(x(b) - x(a), 1):.1f}" height="{LANE * len(procs) + 14}" '
                     f'fill="{FAULT_FILL}" opacity="0.55"><title>{esc(f.get("label", "fault"))} '
                     f'{a:.0f}–{b:.0f} ms</title></rect>')
        parts.append(f'<text x="{x(a) + 3:.1f}" y="{TOP - 4}" fill="#8a5a00">'
                     f'{esc(f.get("label", "fault"))}</text>')
    for p, i in lane.items():
        y = TOP + i * LANE + LANE / 2
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                     'stroke="#eee"/>')
        name = "final" if p == -2 else f"p{p}"
        parts.append(f'<text x="{LEFT - 6}" y="{y + 3:.1f}" text-anchor="end" '
                     f'fill="#555">{esc(name)}</text>')
    room = _label_room(ops, x)
    points = []
    for op in ops:
        i = lane[op["process"]]
        y = TOP + i * LANE + (LANE - BAR) / 2
        xa = x(op["invoke_ms"])
        open_end = op["complete_ms"] is None
        xb = x(t1 if open_end else op["complete_ms"])
        color = COLORS.get(op["f"], "#7f7f7f")
        bad = bool(op.get("offending"))
        failed = op["type"] == "fail"
        style = (f'fill="{OFFENDING if bad else color}" fill-opacity="{0.15 if failed else 0.35}" '
                 f'stroke="{OFFENDING if bad else color}" stroke-width="{2 if bad else 1}"')
        if open_end:
            style += ' stroke-dasharray="4 3"'
        proc_name = "final" if op["process"] == -2 else str(op["process"])
        cls = "op offending" if bad else "op"
        weight = ' font-weight="bold"' if bad else ""
        label = _op_label(op) + (" ✗" if failed else "")
        text = esc(label) if len(label) * CHAR_PX <= room[id(op)] else ""
        parts.append(f'<g class="{cls}" data-row="{op["row"]}"><title>'
                     f"{esc(_op_title(op, proc_name))}</title>"
                     f'<rect x="{xa:.1f}" y="{y:.1f}" width="{max(xb - xa, 1.5):.1f}" '
                     f'height="{BAR}" rx="2" {style}/>'
                     f'<text x="{xa + 2:.1f}" y="{y + BAR - 2.5:.1f}" '
                     f'fill="{OFFENDING if bad else "#222"}"{weight}>'
                     f"{text}</text></g>")
        if op.get("lin_ms") is not None:
            points.append((op["lin_ms"], x(op["lin_ms"]), y + BAR / 2))
    points.sort()
    if len(points) > 1:
        path = " ".join(f"{px:.1f},{py:.1f}" for _, px, py in points)
        parts.append(f'<polyline class="lin-order" points="{path}" fill="none" '
                     'stroke="#333" stroke-width="0.8" stroke-opacity="0.6"/>')
    for _, px, py in points:
        parts.append(f'<circle class="lin-point" cx="{px:.1f}" cy="{py:.1f}" r="2.6" '
                     'fill="#111"/>')
    axis_y = TOP + LANE * len(procs) + 4
    parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{axis_y}" y2="{axis_y}" '
                 'stroke="#999"/>')
    for t in _ticks(t0, t1):
        parts.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{axis_y}" y2="{axis_y + 4}" '
                     'stroke="#999"/>')
        parts.append(f'<text x="{x(t):.1f}" y="{axis_y + 15}" text-anchor="middle" '
                     f'fill="#555">{t:g}</text>')
    parts.append(f'<text x="{WIDTH - RIGHT}" y="{axis_y + 28}" text-anchor="end" '
                 'fill="#555">ms since the run started</text>')
    parts.append(_legend(LEFT, axis_y + 24))
    parts.append("</svg>")
    return "".join(parts)


def _counterexample_table(page: Page, part: Mapping[str, Any]) -> None:
    rows = []
    for op in part.get("counterexample") or []:
        end = _ms(op["complete_ms"])
        value = op["value"] if op["f"] != "cas" else f"{op.get('expect')} → {op['value']}"
        rows.append([op["row"], op["process"], op["f"], value, op["type"],
                     _ms(op["invoke_ms"]), end])
    if rows:
        page.table(["History row", "Process", "Op", "Value", "Outcome", "Invoke (ms)",
                    "Complete (ms)"], rows, caption=f"Minimal counterexample on {part['key']}",
                   numeric_from=5)


def linearizability_section(page: Page, r: Mapping[str, Any]) -> None:
    """Add the register workload's section: verdict, explanations, counterexamples and
    timelines (from ``results["linearizability"]`` and ``results["timeline"]``)."""
    lin = r["linearizability"]
    page.heading(f"Linearizability: {verdict_text(lin['valid'])}")
    cfg = r.get("config", {})
    page.para(f"Model {lin['model']}: {lin['keys']:,} keys, {lin['ops']:,} operations "
              f"checked ({cfg.get('clients', '?')} clients, mix {cfg.get('mix', '?')}, "
              f"{r['consistency']} reads).")
    page.table(["Key", "Verdict", "Operations", "Counterexample (ops)"],
               [[p["key"], verdict_text(p["valid"]), f"{p['ops']:,}",
                 len(p["counterexample"]) if p.get("counterexample") else "-"]
                for p in lin["parts"]], caption="Verdict per key", numeric_from=2)
    if lin.get("parts_left_out"):
        page.para(f"{lin['parts_left_out']:,} more keys are in the embedded results only.",
                  "muted")
    for part in lin["parts"]:
        if part.get("explanation"):
            page.heading(f"Why {part['key']} is not linearizable", 3)
            page.para(part["explanation"])
            _counterexample_table(page, part)
    for n, tl in enumerate(r.get("timeline") or []):
        page.heading(f"Timeline of {tl['key']} ({verdict_text(tl['valid'])})", 3)
        what = ("the counterexample (red) and the operations nearest it"
                if tl["valid"] is not True else "the first operations on this key")
        page.add(f'<figure id="fig-timeline-{n + 1}" class="timeline">'
                 f"{timeline_svg(tl, r.get('faults') or ())}"
                 f"<figcaption>{esc(tl['ops_shown'])} of {esc(tl['ops_total'])} operations on "
                 f"this key: {esc(what)}. One lane per process; a bar from invoke to "
                 "completion (dashed: outcome unknown, may take effect any time after its "
                 "invoke); dots joined by a line: the checker's linearization order"
                 f"{' of the longest linearizable prefix' if tl['valid'] is False else ''}; "
                 "shaded: injected faults. Hover an operation for its details."
                 "</figcaption></figure>")

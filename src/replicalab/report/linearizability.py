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

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any

from replicalab.report.page import Page, esc

MIN_WIDTH = 900
SLOT = 18
"""Pixels per event (an invoke or a completion) along the time axis."""
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


class _Axis:
    """Events (invokes and completions) in time order, one slot each: what decides
    linearizability is which operation ends before which begins, so that order is drawn
    exactly, and short operations between long pauses stay wide enough to read."""

    def __init__(self, ops: Sequence[Mapping[str, Any]]) -> None:
        events = sorted([(op["invoke_ms"], 0, i) for i, op in enumerate(ops)]
                        + [(op["complete_ms"], 1, i) for i, op in enumerate(ops)
                           if op["complete_ms"] is not None])
        self.times = [t for t, _, _ in events]
        self.xs = [LEFT + SLOT * (n + 0.5) for n in range(len(events))]
        self.right = LEFT + SLOT * (len(events) + 1)
        self.width = max(MIN_WIDTH, self.right + RIGHT)
        self.start = [0.0] * len(ops)
        self.end = [self.right] * len(ops)  # info: open to the right edge
        for x, (_, kind, i) in zip(self.xs, events, strict=True):
            if kind == 0:
                self.start[i] = x
            else:
                self.end[i] = x

    def at(self, t_ms: float) -> float:
        """Return the x of time ``t_ms`` (between the events around it; clamped)."""
        times, xs = self.times, self.xs
        if not times or t_ms <= times[0]:
            return LEFT
        if t_ms >= times[-1]:
            return self.right
        hi = bisect.bisect_right(times, t_ms)
        lo = hi - 1
        span = times[hi] - times[lo]
        return xs[lo] + (xs[hi] - xs[lo]) * ((t_ms - times[lo]) / span if span else 0.0)

    def ticks(self, count: int = 8) -> list[tuple[float, float]]:
        """Return (x, ms) of about ``count`` events spread over the axis."""
        step = max(1, math.ceil(len(self.times) / count))
        return [(self.xs[n], self.times[n]) for n in range(0, len(self.times), step)]


def _label_room(ops: Sequence[Mapping[str, Any]], axis: _Axis) -> list[float]:
    """Return per op the px free after its start on its lane, up to the next op."""
    room = [0.0] * len(ops)
    by_lane: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        by_lane.setdefault(op["process"], []).append(i)
    for lane_ops in by_lane.values():
        lane_ops.sort(key=lambda i: axis.start[i])
        for a, b in zip(lane_ops, [*lane_ops[1:], None], strict=True):
            end = axis.width - RIGHT if b is None else axis.start[b]
            room[a] = end - axis.start[a] - 4
    return room


def _points(ops: Sequence[Mapping[str, Any]], axis: _Axis) -> dict[int, float]:
    """Return op -> x of its linearization point: in linearization order, each at its own
    start or at the previous point, whichever is further right (inside its bar)."""
    order = sorted((op["lin_rank"], i) for i, op in enumerate(ops)
                   if op.get("lin_rank") is not None)
    out: dict[int, float] = {}
    last = float(LEFT)
    for _, i in order:
        x = min(max(axis.start[i] + 3, last), axis.end[i] - 3)
        out[i] = last = x
    return out


def timeline_svg(tl: Mapping[str, Any], faults: Sequence[Mapping[str, Any]] = ()) -> str:
    """Return the timeline of one key (``results["timeline"][i]``) as an <svg> element."""
    ops = tl["ops"]
    procs = sorted({op["process"] for op in ops}, key=lambda p: (p < 0, p))
    lane = {p: i for i, p in enumerate(procs)}
    axis = _Axis(ops)
    width = axis.width
    height = TOP + LANE * len(procs) + BOTTOM + 14
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height}" '
             f'width="{width:.0f}" height="{height}" style="width:{width:.0f}px;max-width:none" '
             'role="img" font-family="sans-serif" font-size="10" class="lin-timeline" '
             f'data-ops="{len(ops)}">',
             f"<title>{esc(tl['key'])}: {len(ops)} of {tl['ops_total']} operations</title>"]
    t0, t1 = (axis.times[0], axis.times[-1]) if axis.times else (0.0, 0.0)
    for f in faults:
        a, b = float(f["start_ms"]), float(f["end_ms"])
        if b < t0 or a > t1:
            continue
        xa, xb = axis.at(a), axis.at(b)
        label = esc(f.get("label", "fault"))
        parts.append(f'<rect class="nemesis" x="{xa:.1f}" y="{TOP - 14}" '
                     f'width="{max(xb - xa, 1):.1f}" height="{LANE * len(procs) + 14}" '
                     f'fill="{FAULT_FILL}" opacity="0.55"><title>{label} '
                     f'{a:.0f}–{b:.0f} ms</title></rect>'
                     f'<text x="{xa + 3:.1f}" y="{TOP - 4}" fill="#8a5a00">{label}</text>')
    for p, i in lane.items():
        y = TOP + i * LANE + LANE / 2
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                     'stroke="#eee"/>'
                     f'<text x="{LEFT - 6}" y="{y + 3:.1f}" text-anchor="end" fill="#555">'
                     f'{esc("final" if p == -2 else f"p{p}")}</text>')
    room = _label_room(ops, axis)
    for i, op in enumerate(ops):
        y = TOP + lane[op["process"]] * LANE + (LANE - BAR) / 2
        xa, xb = axis.start[i], axis.end[i]
        bad = bool(op.get("offending"))
        failed = op["type"] == "fail"
        stroke = OFFENDING if bad else COLORS.get(op["f"], "#7f7f7f")
        style = (f'fill="{stroke}" fill-opacity="{0.15 if failed else 0.35}" '
                 f'stroke="{stroke}" stroke-width="{2 if bad else 1}"')
        if op["complete_ms"] is None:
            style += ' stroke-dasharray="4 3"'
        label = _op_label(op) + (" ✗" if failed else "")
        text = esc(label) if len(label) * CHAR_PX <= room[i] else ""
        weight = ' font-weight="bold"' if bad else ""
        proc_name = "final" if op["process"] == -2 else str(op["process"])
        parts.append(f'<g class="{"op offending" if bad else "op"}" data-row="{op["row"]}">'
                     f"<title>{esc(_op_title(op, proc_name))}</title>"
                     f'<rect x="{xa:.1f}" y="{y:.1f}" width="{max(xb - xa, 2):.1f}" '
                     f'height="{BAR}" rx="2" {style}/>'
                     f'<text x="{xa + 2:.1f}" y="{y + BAR - 2.5:.1f}" '
                     f'fill="{OFFENDING if bad else "#222"}"{weight}>{text}</text></g>')
    line = sorted((ops[i]["lin_rank"], x, TOP + lane[ops[i]["process"]] * LANE + LANE / 2)
                  for i, x in _points(ops, axis).items())
    if len(line) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for _, x, y in line)
        parts.append(f'<polyline class="lin-order" points="{path}" fill="none" '
                     'stroke="#333" stroke-width="0.8" stroke-opacity="0.6"/>')
    parts += [f'<circle class="lin-point" cx="{x:.1f}" cy="{y:.1f}" r="2.6" fill="#111"/>'
              for _, x, y in line]
    axis_y = TOP + LANE * len(procs) + 4
    parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT:.1f}" y1="{axis_y}" y2="{axis_y}" '
                 'stroke="#999"/>')
    for x, t in axis.ticks():
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{axis_y}" y2="{axis_y + 4}" '
                     f'stroke="#999"/><text x="{x:.1f}" y="{axis_y + 15}" '
                     f'text-anchor="middle" fill="#555">{t:,.1f}</text>')
    parts.append(f'<text x="{width - RIGHT:.1f}" y="{axis_y + 28}" text-anchor="end" '
                 'fill="#555">events in time order; ms since the run started</text>')
    parts.append(_legend(LEFT, axis_y + 28))
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
    timelines = {tl["key"]: (n, tl) for n, tl in enumerate(r.get("timeline") or [])}
    faults = r.get("faults") or ()
    for part in lin["parts"]:
        drawn = timelines.pop(part["key"], None)
        if part["valid"] is True and drawn is None:
            continue
        if part.get("explanation") or drawn:
            page.heading(f"{part['key']}: {verdict_text(part['valid'])}", 3)
        if part.get("explanation"):
            page.para(part["explanation"])
            _counterexample_table(page, part)
        if drawn:
            _timeline_figure(page, *drawn, faults)
    for n, tl in timelines.values():  # keys the parts list left out
        page.heading(f"{tl['key']}: {verdict_text(tl['valid'])}", 3)
        _timeline_figure(page, n, tl, faults)


def _order_note(tl: Mapping[str, Any]) -> str:
    """Return what the caption says of the dots: a refuted key was never searched, so it
    has no linearization order to draw."""
    if any(op.get("lin_rank") is not None for op in tl["ops"]):
        prefix = " of the longest linearizable prefix" if tl["valid"] is False else ""
        return f"dots joined by a line: the checker's linearization order{prefix}"
    if tl["valid"] is False:
        return ("no linearization dots: the checker refuted this key from the "
                "counterexample's operations alone, without searching for an order")
    return "no linearization dots: the checker did not search this key"


def _timeline_figure(page: Page, n: int, tl: Mapping[str, Any],
                     faults: Sequence[Mapping[str, Any]]) -> None:
    what = ("the counterexample (red) and the operations nearest it"
            if tl["valid"] is not True else "the first operations on this key")
    page.add(f'<figure id="fig-timeline-{n + 1}" class="timeline">'
             f'<div style="overflow-x:auto">{timeline_svg(tl, faults)}</div>'
             f"<figcaption>Timeline: {esc(tl['ops_shown'])} of {esc(tl['ops_total'])} "
             f"operations on this key, {esc(what)}. One lane per process; a bar from invoke "
             "to completion (dashed: outcome unknown, it may take effect any time after its "
             "invoke; ✗: failed, it did not happen); events are spaced evenly in time order "
             f"(the order is what linearizability depends on; the axis gives their ms); "
             f"{esc(_order_note(tl))}; shaded: injected faults. Hover an operation for its "
             "details."
             "</figcaption></figure>")

"""The transactions report section: the isolation verdict, the consistency models ruled
out, the anomaly table, and each anomaly's cycle drawn as a small inline SVG graph
(transactions on a circle, one arrow per dependency, coloured by its kind) with its steps
in words. It takes the checker's Elle-style result map (``checkers.txn.result_json``);
every transaction name, key and explanation is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from replicalab.report.page import Page, esc

EDGE_COLORS = {"ww": "#d62728", "wr": "#1f77b4", "rw": "#ff7f0e", "process": "#7f7f7f",
               "realtime": "#2ca02c"}
SIZE = 260
RADIUS = 90
NODE = 18
MAX_DRAWN = 3
"""Cycles drawn per anomaly type (the table counts them all)."""
_VERDICT = {True: "no anomaly found", False: "anomalies found",
            "unknown": "unknown (a cycle search stopped before it finished)"}


def cycle_svg(cycle: Sequence[Mapping[str, Any]], explanation: Sequence[str]) -> str:
    """Return an inline SVG of one cycle: its transactions on a circle and an arrow per
    step, labelled with the step's kind; each arrow's tooltip is the step in words."""
    names = [str(s["from"]) for s in cycle]
    n = len(names)
    c = SIZE / 2
    pos = {}
    for i in range(n):
        angle = -math.pi / 2 + 2 * math.pi * i / max(n, 1)
        pos[i] = (c + RADIUS * math.cos(angle), c + RADIUS * math.sin(angle))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}" '
             f'viewBox="0 0 {SIZE} {SIZE}" role="img" aria-label="dependency cycle">',
             '<defs>' + "".join(
                 f'<marker id="arrow-{k}" viewBox="0 0 10 10" refX="9" refY="5" '
                 f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
                 f'<path d="M0,0 L10,5 L0,10 z" fill="{col}"/></marker>'
                 for k, col in EDGE_COLORS.items()) + '</defs>']
    for i, step in enumerate(cycle):
        (x1, y1), (x2, y2) = pos[i], pos[(i + 1) % n]
        kind = str(step["type"])
        col = EDGE_COLORS.get(kind, "#000")
        dx, dy = x2 - x1, y2 - y1
        d = math.hypot(dx, dy) or 1.0
        # from circle edge to circle edge, bowed outwards so a 2-cycle shows two arrows
        sx, sy = x1 + dx / d * NODE, y1 + dy / d * NODE
        ex, ey = x2 - dx / d * NODE, y2 - dy / d * NODE
        mx, my = (sx + ex) / 2, (sy + ey) / 2
        ox, oy = mx - c, my - c
        od = math.hypot(ox, oy)
        bow = 28 if n == 2 else 14
        if od < 1e-6:
            ox, oy, od = -dy, dx, d
        qx, qy = mx + ox / od * bow, my + oy / od * bow
        title = explanation[i] if i < len(explanation) else kind
        parts.append(
            f'<g><title>{esc(title)}</title><path d="M{sx:.1f},{sy:.1f} Q{qx:.1f},{qy:.1f} '
            f'{ex:.1f},{ey:.1f}" fill="none" stroke="{col}" stroke-width="2" '
            f'marker-end="url(#arrow-{esc(kind)})"/>'
            f'<text x="{qx:.1f}" y="{qy:.1f}" font-size="10" text-anchor="middle" '
            f'fill="{col}">{esc(kind)}</text></g>')
    for i, name in enumerate(names):
        x, y = pos[i]
        parts.append(f'<g><circle cx="{x:.1f}" cy="{y:.1f}" r="{NODE}" fill="#fff" '
                     f'stroke="#333"/><text x="{x:.1f}" y="{y + 4:.1f}" font-size="10" '
                     f'text-anchor="middle">{esc(name)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def transactions_section(page: Page, r: Mapping[str, Any], heading: str = "Transactions"
                         ) -> None:
    """Add the section for one checked transaction history ``r`` (Elle's result map as
    ``checkers.txn.result_json`` returns it) to ``page``."""
    page.heading(heading)
    page.para(f"{r.get('model', '')} history of {r.get('txns', 0):,} transactions: "
              f"{_VERDICT.get(r.get('valid'), str(r.get('valid')))}.")
    if r.get("not"):
        also = f" (and so {', '.join(r['also_not'])})" if r.get("also_not") else ""
        page.para(f"Ruled out: {', '.join(r['not'])}{also}.")
    page.para("May still hold: " + (", ".join(r.get("possible", ())) or "none of the models")
              + ".")
    for u in r.get("unfinished", ()):
        page.para(f"The cycle search stopped ({u['limit']}) in a component of "
                  f"{u['size']:,} transactions (e.g. {', '.join(u['sample'])}) before "
                  f"deciding {', '.join(u['classes'])}: it might still hold one.", cls="warn")
    anomalies = r.get("anomalies", {})
    counts = r.get("counts", {})
    if not anomalies:
        return
    page.table(["anomaly", "found", "first example"],
               [(typ, f"{counts.get(typ, len(ans)):,}",
                 ans[0]["explanation"][0] if ans and ans[0]["explanation"] else "")
                for typ, ans in anomalies.items()],
               caption="Anomalies (Elle's names; -process / -realtime: the cycle needs "
                       "process or real-time order)")
    for typ, ans in anomalies.items():
        for an in [a for a in ans if a.get("cycle")][:MAX_DRAWN]:
            steps = "".join(f"<li>{esc(line)}</li>" for line in an["explanation"])
            page.add(f'<figure class="txn-cycle"><figcaption>{esc(typ)}: a cycle of '
                     f'{len(an["cycle"])}</figcaption>'
                     f'{cycle_svg(an["cycle"], an["explanation"])}<ol>{steps}</ol></figure>')
        for an in [a for a in ans if not a.get("cycle")][:MAX_DRAWN]:
            page.para(f"{typ}: {' '.join(an['explanation'])}")

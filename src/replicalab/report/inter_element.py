"""The inter-element workload's report section: outcomes A-D of reading two elements X and
Y, and every feasible combination side by side (seed 003 Table 3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from replicalab.report import plots
from replicalab.report.page import Page, esc, num, pct

_ABCD = {
    "A": "X and Y both fresh",
    "B": "X fresh, Y stale",
    "C": "X stale, Y fresh",
    "D": "X and Y both stale",
}
_READS = {"two-single": "two single-element reads", "one-multi": "one multi-element read"}


def _label(value: str) -> str:
    return str(value).replace("-", " ")


def _combo_label(entry: Mapping[str, Any]) -> str:
    return " · ".join(_label(entry[k]) for k in ("placement", "write", "read"))


def inter_element_section(page: Page, r: Mapping[str, Any]) -> None:
    """Add the outcomes of this run's combination, and of all of them, to ``page``."""
    combo = r["combination"]
    lo_ms, hi_ms = r["window_ms"]
    page.heading("Reading two elements X and Y")
    page.para(
        f"Placement: {_label(combo['placement'])}; write: {_label(combo['write'])}; "
        f"read: {_READS.get(combo['read'], combo['read'])}; "
        f"reads {num(lo_ms, 0)}–{num(hi_ms, 0)} ms after a write."
    )
    page.table(
        ["Outcome", "Meaning", "Fraction", "Reads"],
        [[k, meaning, pct(r["abcd"][k], 3), f"{r['counts'][k]:,}"] for k, meaning in _ABCD.items()],
        numeric_from=2,
    )
    table3 = r.get("table3") or []
    feasible = [e for e in table3 if e.get("abcd")]
    bars = [(_combo_label(e), e["abcd"]) for e in feasible] or [(_combo_label(combo), r["abcd"])]
    page.figure(
        "fig-abcd",
        "Outcomes of reading X and Y: A both fresh, B only X fresh, C only Y fresh, D both stale"
        + (" (all feasible combinations, cf. paper Table 3)." if feasible else "."),
        plots.abcd_figure(bars),
    )
    if table3:
        _table3(page, table3, combo)


def _table3(page: Page, entries: Sequence[Mapping[str, Any]], current: Mapping[str, Any]) -> None:
    rows = list(dict.fromkeys((e["placement"], e["write"]) for e in entries))
    present = list(dict.fromkeys(e["read"] for e in entries))
    reads = [m for m in _READS if m in present] + [m for m in present if m not in _READS]
    cells = {(e["placement"], e["write"], e["read"]): e.get("abcd") for e in entries}
    head = (
        '<tr><th rowspan="2">Placement</th><th rowspan="2">Write</th>'
        + "".join(f'<th colspan="4" class="group">{esc(_READS.get(m, m))}</th>' for m in reads)
        + "</tr><tr>"
        + "".join(f'<th class="num">{k} (%)</th>' for _ in reads for k in _ABCD)
        + "</tr>"
    )
    here = (current["placement"], current["write"], current["read"])
    body = []
    for placement, write in rows:
        tds = []
        for m in reads:
            abcd = cells.get((placement, write, m))
            cls = "num current" if (placement, write, m) == here else "num"
            tds += (
                [f'<td class="{cls}">{num(abcd[k] * 100, 3)}</td>' for k in _ABCD]
                if abcd
                else ['<td colspan="4" class="na">N/A</td>']
            )
        body.append(
            f"<tr><td>{esc(_label(placement))}</td><td>{esc(_label(write))}</td>{''.join(tds)}</tr>"
        )
    page.add(
        '<div class="table-wrap"><table><caption>Write and read two elements (cf. paper Table 3; '
        "highlighted: this run)</caption>"
        f"<thead>{head}</thead><tbody>{''.join(body)}</tbody></table></div>"
    )

"""Build the self-contained HTML report and its PNG figures from a results dict."""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from matplotlib.figure import Figure

from replicalab import __version__
from replicalab.report import plots
from replicalab.report.linearizability import linearizability_section
from replicalab.report.sweep import sweep_section
from replicalab.stores.base import redact_url

PNG_DPI = 120
# All-None metadata drops matplotlib's <metadata> block (dates, creator URL) from the SVG.
_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
# Inline SVGs share one document, so their ids (and references to them) get a per-figure prefix.
_SVG_ID = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')
_VARIANTS = {
    "different": "Two writes to one attribute, v1 ≠ v2 (cf. paper Figure 4).",
    "same": "The same value written twice, v1 = v2 (cf. paper Figure 5).",
    "three": "Three consecutive writes to one attribute.",
    "two-then-one": "Write A1 and A2 together, then A1 alone, v1 ≠ v2 (cf. paper Figure 6).",
    "two-then-one-same": "Write A1 and A2 together, then A1 alone with the same value.",
}
_ABCD = {
    "A": "X and Y both fresh",
    "B": "X fresh, Y stale",
    "C": "X stale, Y fresh",
    "D": "X and Y both stale",
}
_READS = {"two-single": "two single-element reads", "one-multi": "one multi-element read"}
_WIDE = ("Store", "Operations")
_WIDE_CARD = ' class="wide"'
_OPS = {"reads": "reads", "writes": "writes", "failed": "failed", "info": "indeterminate"}


def esc(value: object) -> str:
    """Return ``value`` as text safe to place in HTML content or attributes."""
    return html.escape(str(value))


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def pct(x: float | None, digits: int = 2) -> str:
    """Return fraction ``x`` (0..1) as a percentage string, or "n/a"."""
    return "n/a" if _missing(x) else f"{x * 100:.{digits}f}%"


def num(x: float | None, digits: int = 1) -> str:
    """Return ``x`` with thousands separators and ``digits`` decimals, or "n/a"."""
    return "n/a" if _missing(x) else f"{x:,.{digits}f}"


def _label(value: str) -> str:
    return str(value).replace("-", " ")


def _jsonable(obj: Any) -> Any:
    # Checkers may hand over numpy values or NaN; JSON.parse accepts neither.
    if hasattr(obj, "tolist"):
        obj = obj.tolist()
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def results_json(results: Mapping[str, Any]) -> str:
    """Return ``results`` as JSON safe inside a <script> element (no ``</`` or ``<!--``)."""
    text = json.dumps(_jsonable(results), ensure_ascii=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("<!--", "\\u003c!--")


def svg_markup(fig: Figure, id_prefix: str) -> str:
    """Return ``fig`` as an inline <svg> element (no XML prolog) with ids prefixed."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_SVG_METADATA)
    text = buf.getvalue()
    return _SVG_ID.sub(lambda m: f"{m[1]}{id_prefix}-{m[2]}", text[text.index("<svg") :])


class Page:
    """Accumulates escaped HTML fragments and the figures to save as PNG."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.figures: list[tuple[str, Figure]] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def heading(self, text: str, level: int = 2) -> None:
        self.add(f"<h{level}>{esc(text)}</h{level}>")

    def para(self, text: str, cls: str = "") -> None:
        self.add(f'<p class="{cls}">{esc(text)}</p>' if cls else f"<p>{esc(text)}</p>")

    def figure(self, fig_id: str, caption: str, fig: Figure) -> None:
        self.figures.append((fig_id, fig))
        self.add(
            f'<figure id="{fig_id}">{svg_markup(fig, fig_id)}'
            f"<figcaption>{esc(caption)}</figcaption></figure>"
        )

    def table(
        self,
        header: Sequence[str],
        rows: Iterable[Sequence[object]],
        caption: str = "",
        numeric_from: int = 1,
    ) -> None:
        def cells(row: Sequence[object], tag: str) -> str:
            return "".join(
                f'<{tag} class="num">{esc(c)}</{tag}>'
                if i >= numeric_from
                else f"<{tag}>{esc(c)}</{tag}>"
                for i, c in enumerate(row)
            )

        body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in rows)
        cap = f"<caption>{esc(caption)}</caption>" if caption else ""
        self.add(
            f'<div class="table-wrap"><table>{cap}<thead><tr>{cells(header, "th")}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )


def _summary(page: Page, r: Mapping[str, Any]) -> None:
    ops = r["ops"]
    items = {
        "Workload": r["workload"],
        "Store": r["store"],
        "Consistency": r["consistency"],
        "Seed": r["seed"],
        "Duration": f"{num(r['duration_s'])} s",
        "Operations": f"{sum(ops[k] for k in _OPS):,}: "
        + ", ".join(f"{ops[k]:,} {name}" for k, name in _OPS.items()),
    }
    cards = "".join(
        f"<div{_WIDE_CARD if k in _WIDE else ''}><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>"
        for k, v in items.items()
    )
    page.add(
        f'<h1>replicalab report <span class="sub">· {esc(r["workload"])}</span></h1>'
        f'<dl class="summary">{cards}</dl>'
    )
    if notes := r.get("notes"):
        page.add('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    if faults := r.get("faults"):
        page.table(
            ["Fault", "Start (s)", "End (s)"],
            [
                [f.get("label", "fault"), num(f["start_ms"] / 1000, 2), num(f["end_ms"] / 1000, 2)]
                for f in faults
            ],
            caption="Injected faults",
        )


def _range(lo: float, hi: float | None) -> str:
    return f"[{num(lo, 0)}, {'∞' if _missing(hi) or math.isinf(hi) else num(hi, 0)})"


def _staleness(page: Page, r: Mapping[str, Any]) -> None:
    page.heading("Probability of reading the freshest value")
    page.figure(
        "fig-staleness",
        f"Probability that a read with {r['consistency']} consistency returns the freshest value, "
        "against the time from the start of the write to the start of the read "
        "(cf. paper Figure 2). Shaded: 95 % Wilson confidence band.",
        plots.staleness_figure(r["freshness"], r["consistency"]),
    )
    page.table(
        ["Time since write started (ms)", "Fresh reads", "95 % band"],
        [
            [
                _range(row["from_ms"], row["to_ms"]),
                f"{pct(row['p'])} ({row['fresh']:,}/{row['total']:,})",
                f"{pct(row['lo'])} – {pct(row['hi'])}",
            ]
            for row in r["fresh_by_range"]
        ],
        caption="Fresh reads by time range (cf. paper Table 1)",
    )

    per = r["periods"]
    page.heading("Time to see freshness per measurement period", 3)
    page.figure(
        "fig-periods",
        f"Per {per['period_s']:g} s measurement period: the first time the freshness "
        "probability reaches 99 % and the last time it is below 100 % (cf. paper Figure 3)."
        + (" Shaded: injected faults." if r.get("faults") else ""),
        plots.periods_figure(per, r.get("faults") or ()),
    )
    page.table(
        ["Measure", "Median (ms)", "Coefficient of variation", "Periods with data"],
        [
            [
                label,
                num(per[f"{key}_median_ms"]),
                num(per[f"{key}_cv"], 4),
                f"{sum(v is not None for v in per[f'{key}_ms']):,} of {len(per['start_s']):,}",
            ]
            for key, label in (
                ("first_ge_99", "First time ≥ 99 %"),
                ("last_lt_100", "Last time < 100 %"),
            )
        ],
    )

    ks = r["k_staleness"]
    if ks["k"]:
        page.heading("k-staleness", 3)
        page.figure(
            "fig-k-staleness",
            "Reads that returned a value k versions older than the freshest (k = 0: fresh).",
            plots.k_staleness_figure(ks["k"], ks["count"]),
        )
        reads = sum(ks["count"]) or 1
        page.table(
            ["k", "Reads", "Fraction"],
            [[k, f"{c:,}", pct(c / reads, 3)] for k, c in zip(ks["k"], ks["count"], strict=True)],
        )

    ryw = r["read_your_writes"]
    page.heading("Read your writes", 3)
    if ryw["applicable"]:
        page.para(
            f"{ryw['violations']:,} of {ryw['reads']:,} reads ({pct(ryw['fraction'], 3)}) by the "
            "writing client returned a value older than its own last write."
        )
    else:
        page.para("Not applicable: the reads and writes come from different clients.", "muted")

    sr = r["successive_reads"]
    lo_ms, hi_ms = sr["window_ms"]
    counts = sr["counts"]
    page.heading("Successive reads (monotonic reads)", 3)
    page.table(
        ["First read \\ second read", "Stale", "Fresh"],
        [
            [
                first.capitalize(),
                *(
                    f"{pct(sr[f'{first}_{second}'])} ({counts[f'{first}_{second}']:,})"
                    for second in ("stale", "fresh")
                ),
            ]
            for first in ("stale", "fresh")
        ],
        caption=f"Pairs of successive reads {num(lo_ms, 0)}–{num(hi_ms, 0)} ms after a write "
        "(cf. paper Table 2)",
    )
    page.para(
        f"Monotonic-read violations (fresh then stale): {pct(sr['fresh_stale'])} "
        f"({counts['fresh_stale']:,} of {sr['pairs']:,} pairs). Pearson correlation between the "
        f"outcomes of successive reads: {num(sr['pearson'], 4)}."
    )


def _monotonic_writes(page: Page, r: Mapping[str, Any]) -> None:
    lo_ms, hi_ms = r["window_ms"]
    variant = r["variant"]
    page.heading(f"Monotonic writes: variant {variant}")
    page.para(_VARIANTS.get(variant, f"Variant {variant}."))
    for i, (attr, curve) in enumerate(r["curves"].items()):
        page.figure(
            "fig-versions" if i == 0 else f"fig-versions-{i + 1}",
            f"Attribute {attr}: probability of reading each version against the time since the "
            f"cycle started. Shaded: analysis window {num(lo_ms, 0)}–{num(hi_ms, 0)} ms.",
            plots.versions_figure(curve, r["window_ms"]),
        )
    fractions = r["version_fraction"]
    versions = sorted({v for f in fractions.values() for v in f})
    page.table(
        ["Attribute", *versions],
        [[attr, *(pct(f.get(v), 3) for v in versions)] for attr, f in fractions.items()],
        caption=f"Fraction of reads returning each version, {num(lo_ms, 0)}–{num(hi_ms, 0)} ms "
        "after the cycle started",
    )


def _combo_label(entry: Mapping[str, Any]) -> str:
    return " · ".join(_label(entry[k]) for k in ("placement", "write", "read"))


def _inter_element(page: Page, r: Mapping[str, Any]) -> None:
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


def _latency(page: Page, r: Mapping[str, Any]) -> None:
    latency = r["latency"]
    page.heading("Latency")
    if not latency:
        page.para("No latency data recorded.", "muted")
        return
    keys = ("mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")
    page.table(
        ["Operation", "Count", "Mean (ms)", "p50", "p90", "p99", "p99.9", "max"],
        [[op, f"{s['count']:,}", *(num(s[k], 2) for k in keys)] for op, s in latency.items()],
    )
    page.figure(
        "fig-latency",
        "Latency percentiles per operation (f/consistency).",
        plots.latency_figure(latency),
    )


def _accounting(page: Page, r: Mapping[str, Any]) -> None:
    avail = r.get("availability")
    faults = r.get("faults") or []
    if avail and avail.get("t_s") and (faults or (avail.get("overall") or 1) < 1):
        page.heading("Availability")
        page.figure("fig-availability",
                    f"Fraction of client time the store answered per {avail['window_s']:g} s "
                    f"window ({pct(avail['overall'])} overall; by operations "
                    f"{pct(avail.get('overall_ops'))}, dashed): each op stands for the time "
                    "until its client's next op, so a blocked client counts for as long as it "
                    "waited; shaded: injected faults.",
                    plots.availability_figure(avail, faults))
    lost = r.get("lost_writes")
    if lost and lost.get("checked"):
        page.heading("Acknowledged writes")
        page.para(f"A final read of each of the {lost['keys']:,} keys found "
                  f"{lost['lost']:,} of {lost['acknowledged']:,} acknowledged writes lost.")
        if lost["examples"]:
            page.table(["Key", "Lost value", "Final version"],
                       [[x["key"], x["value"], x["final"] or "absent"]
                        for x in lost["examples"]], caption="Lost acknowledged writes")


def _latency_workload(page: Page, r: Mapping[str, Any]) -> None:
    page.heading("Latency by kind of operation (cf. seed 000)")
    page.table(["Variant", "Count", "Mean (ms)", "p50", "p99", "p99.9"],
               [[v, f"{x['count']:,}", *(num(x[k], 3) for k in ("mean_ms", "p50_ms", "p99_ms",
                                                                 "p999_ms"))]
                for v, x in r["variants"].items()])
    page.table(["A", "B", "Mean A - B (ms)", "95 % bootstrap interval", "Verdict"],
               [[d["a"], d["b"], num(d["mean_diff_ms"], 3),
                 f"[{num(d['lo_ms'], 3)}, {num(d['hi_ms'], 3)}]", d["verdict"]]
                for d in r["differences"]], caption="Pairwise differences of the means")


_SECTIONS: dict[str, Callable[[Page, Mapping[str, Any]], None]] = {
    "staleness": _staleness,
    "monotonic-writes": _monotonic_writes,
    "inter-element": _inter_element,
    "latency": _latency_workload,
    "sweep": sweep_section,
    "register": linearizability_section,
}


def render_report(results: dict, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (self-contained, opens offline) and ``run_dir/figures/*.png``
    from a checker's results dict; return the path of report.html."""
    run_dir = Path(run_dir)
    results = {**results, "store": redact_url(str(results["store"]))}
    page = Page()
    _summary(page, results)
    workload = results["workload"]
    if section := _SECTIONS.get(workload):
        section(page, results)
    else:
        page.para(
            f"No views for workload {workload!r}; the embedded results hold all data.", "muted"
        )
    _accounting(page, results)
    _latency(page, results)
    return write_page(page, results, f"replicalab · {workload} · {results['store']}", run_dir)


def write_page(page: Page, results: Mapping[str, Any], title: str, run_dir: Path) -> Path:
    """Write ``page`` as ``run_dir/report.html`` (results embedded) and its figures as PNGs
    under ``run_dir/figures``; return the path of report.html."""
    run_dir = Path(run_dir)
    page.add(
        f"<footer>replicalab {esc(__version__)} · results schema version "
        f"{esc(results['schema_version'])} · the full results are embedded in this file as JSON "
        "(<code>script#results-data</code>).</footer>"
    )
    package = resources.files(__package__)
    text = Template(package.joinpath("template.html").read_text(encoding="utf-8")).substitute(
        title=esc(title),
        css=package.joinpath("report.css").read_text(encoding="utf-8"),
        body="\n".join(page.parts),
        results_json=results_json(results),
    )
    figures_dir = run_dir / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    for fig_id, fig in page.figures:
        fig.savefig(figures_dir / f"{fig_id.removeprefix('fig-')}.png", format="png", dpi=PNG_DPI)
    out = run_dir / "report.html"
    out.write_text(text, encoding="utf-8")
    return out

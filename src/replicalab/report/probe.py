"""The probe report: the run's summary, the section its workload declares, availability,
acknowledged writes and latency per operation, as one self-contained report.html."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from replicalab.report import plots, sections
from replicalab.report.page import Page, esc, num, pct, write_page
from replicalab.stores.base import redact_url
from replicalab.workloads import registry
from replicalab.workloads.base import duration_text
from replicalab.workloads.txn import isolation_words

_WIDE = ("Store", "Operations", "Transactions", "Isolation")
_WIDE_CARD = ' class="wide"'
_OPS = {"reads": "reads", "writes": "writes", "failed": "failed", "info": "indeterminate"}


Section = sections.Section


def workload_section(workload: str) -> Section | None:
    """Return the report section of ``workload`` (registered in ``report/sections.py``, or
    the ``report_section`` an outside workload names), or None without one or unknown."""
    try:
        declared = registry.get(workload).report_section
    except ValueError:
        return None
    return sections.section(workload, declared)


def _summary(page: Page, r: Mapping[str, Any]) -> None:
    items = {"Workload": r["workload"], "Store": r["store"]}
    if "transactions" in r:  # a transactional run: its operations are transactions
        t = r["transactions"]
        items["Isolation"] = (isolation_words(r["isolation"]) if "isolation" in r
                              else "not recorded")
        items["Seed"] = r["seed"]
        items["Duration"] = duration_text(dict(r))
        items["Transactions"] = (f"{t['ok'] + t['fail'] + t['info']:,}: {t['ok']:,} "
                                 f"committed, {t['fail']:,} failed, {t['info']:,} unknown")
    else:
        ops = r["ops"]
        items.update({
            "Consistency": r["consistency"],
            "Seed": r["seed"],
            "Duration": duration_text(dict(r)),
            "Operations": f"{sum(ops[k] for k in _OPS):,}: "
            + ", ".join(f"{ops[k]:,} {name}" for k, name in _OPS.items()),
        })
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
    elif lost and lost.get("why"):
        page.heading("Acknowledged writes")
        page.para(f"Not checked: no final read reached the store ({lost['why']}).")


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


def probe_page(results: dict) -> Page:
    """Return the probe report of ``results`` as a :class:`Page` (its HTML parts and its
    matplotlib figures, ``page.figures``), written nowhere."""
    results = {**results, "store": redact_url(str(results["store"]))}
    page = Page()
    _summary(page, results)
    workload = results["workload"]
    if section := workload_section(workload):
        section(page, results)
    else:
        page.para(
            f"No views for workload {workload!r}; the embedded results hold all data.", "muted"
        )
    _accounting(page, results)
    _latency(page, results)
    return page


def render_report(results: dict, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (self-contained, opens offline) and ``run_dir/figures/*.png``
    from a checker's results dict; return the path of report.html."""
    run_dir = Path(run_dir)
    results = {**results, "store": redact_url(str(results["store"]))}
    page = probe_page(results)
    return write_page(page, results, f"replicalab · {results['workload']} · {results['store']}",
                      run_dir)

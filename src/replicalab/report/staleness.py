"""The staleness workload's report section: freshness against time since the write
(seed 003 Figure 2, Table 1), time to see freshness per period (Figure 3), k-staleness,
read-your-writes and successive reads (Table 2)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from replicalab.report import plots
from replicalab.report.page import Page, missing, num, pct


def _range(lo: float, hi: float | None) -> str:
    return f"[{num(lo, 0)}, {'∞' if missing(hi) or math.isinf(hi) else num(hi, 0)})"


def staleness_section(page: Page, r: Mapping[str, Any]) -> None:
    """Add the staleness probe's figures and tables to ``page``."""
    _freshness(page, r)
    _periods(page, r)
    _k_staleness(page, r["k_staleness"])
    _read_your_writes(page, r["read_your_writes"])
    _successive_reads(page, r["successive_reads"])


def _freshness(page: Page, r: Mapping[str, Any]) -> None:
    """Freshness against the time since the write started (Figure 2, Table 1)."""
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


def _periods(page: Page, r: Mapping[str, Any]) -> None:
    """First time >= 99 % and last time < 100 % fresh, per measurement period (Figure 3)."""
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


def _k_staleness(page: Page, ks: Mapping[str, Any]) -> None:
    """How many versions behind the freshest the reads were."""
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


def _read_your_writes(page: Page, ryw: Mapping[str, Any]) -> None:
    """Reads by the writer older than its own last write."""
    page.heading("Read your writes", 3)
    if ryw["applicable"]:
        page.para(
            f"{ryw['violations']:,} of {ryw['reads']:,} reads ({pct(ryw['fraction'], 3)}) by the "
            "writing client returned a value older than its own last write."
        )
    else:
        page.para("Not applicable: the reads and writes come from different clients.", "muted")


def _successive_reads(page: Page, sr: Mapping[str, Any]) -> None:
    """Pairs of successive reads and monotonic-read violations (Table 2)."""
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

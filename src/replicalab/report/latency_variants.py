"""The latency workload's report section: latency by kind of operation and the pairwise
differences of the means (seed 000)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replicalab.report.page import Page, num


def latency_variants_section(page: Page, r: Mapping[str, Any]) -> None:
    """Add latency per variant and the differences between variants to ``page``."""
    page.heading("Latency by kind of operation (cf. seed 000)")
    page.table(["Variant", "Count", "Mean (ms)", "p50", "p99", "p99.9"],
               [[v, f"{x['count']:,}", *(num(x[k], 3) for k in ("mean_ms", "p50_ms", "p99_ms",
                                                                 "p999_ms"))]
                for v, x in r["variants"].items()])
    page.table(["A", "B", "Mean A - B (ms)", "95 % bootstrap interval", "Verdict"],
               [[d["a"], d["b"], num(d["mean_diff_ms"], 3),
                 f"[{num(d['lo_ms'], 3)}, {num(d['hi_ms'], 3)}]", d["verdict"]]
                for d in r["differences"]], caption="Pairwise differences of the means")

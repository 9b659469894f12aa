"""The monotonic-writes workload's report section: the probability of reading each version
against the time since the cycle started (seed 003 Figures 4-6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replicalab.report import plots
from replicalab.report.page import Page, num, pct

_VARIANTS = {
    "different": "Two writes to one attribute, v1 ≠ v2 (cf. paper Figure 4).",
    "same": "The same value written twice, v1 = v2 (cf. paper Figure 5).",
    "three": "Three consecutive writes to one attribute.",
    "two-then-one": "Write A1 and A2 together, then A1 alone, v1 ≠ v2 (cf. paper Figure 6).",
    "two-then-one-same": "Write A1 and A2 together, then A1 alone with the same value.",
}


def monotonic_writes_section(page: Page, r: Mapping[str, Any]) -> None:
    """Add the version curves and the version table of one variant to ``page``."""
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

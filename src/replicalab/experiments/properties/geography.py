"""Geography: where replicas sit, whether eventual reads are local in each region, how many
WAN round trips a write pays (from the latency column's runs)."""

from __future__ import annotations

from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.promises import GEOGRAPHY
from replicalab.experiments.properties.latency import latency_runs
from replicalab.experiments.property import Context, NotMeasured, Property
from replicalab.regions import region_set


def nearest_rtt_ms(regions: tuple[str, ...], set_name: str | None) -> dict[str, float]:
    """Return, per region of ``regions``, the RTT (ms) to the nearest other region of the
    set ({} for one region or no named set)."""
    if set_name is None or len(set(regions)) < 2:
        return {}
    rs = region_set(set_name)
    return {r: min(rs.rtt_ms[rs.index(r)][rs.index(o)] for o in rs.regions if o != r)
            for r in rs.regions if r in regions}


def _measure(ctx: Context) -> dict[str, Any]:
    assert ctx.target is not None
    near = nearest_rtt_ms(ctx.target.regions, ctx.rs_name)
    if not near:
        raise NotMeasured("one region: no WAN to place replicas across")
    return {"latency": latency_runs(ctx), "nearest_rtt_ms": near}


def _grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    assert ctx.target is not None
    return cells.geography_cell(ctx.subject.label, m["latency"], ctx.target.node_regions,
                                m["nearest_rtt_ms"], p)


def _steps(subject: Subject, plan: Plan, regions: int, asked: tuple[str, ...]) -> int:
    return 0 if "latency" in asked else regions  # the latency column's runs, else its own


PROPERTY = Property("geography", "where replicas sit, local reads, WAN round trips per write",
                    _measure, _grade, _steps, promise=lambda kind: GEOGRAPHY)

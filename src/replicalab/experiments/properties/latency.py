"""Latency: p50/p99/p99.9 of every read and write variant from each region, against seed
001's goals."""

from __future__ import annotations

from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells, measure
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.promises import LATENCY
from replicalab.experiments.property import Context, Property


def latency_runs(ctx: Context) -> dict[str, Any]:
    """Return the latency workload's figures per region, measured once per store (the
    geography column reads the same runs)."""
    if "latency" not in ctx.shared:
        assert ctx.target is not None
        ctx.shared["latency"] = measure.latency(ctx.target, ctx.plan, ctx.out, ctx.base,
                                                ctx.seed, ctx.progress)
    return ctx.shared["latency"]  # type: ignore[no-any-return]


def _grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    return cells.latency_cell(ctx.subject.label, m, p)


def _steps(subject: Subject, plan: Plan, regions: int, asked: tuple[str, ...]) -> int:
    return regions  # one latency probe from each region


PROPERTY = Property("latency", "p99 of reads and writes from each region vs 50 ms / 500 ms",
                    latency_runs, _grade, _steps, promise=lambda kind: LATENCY)

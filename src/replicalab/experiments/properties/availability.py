"""Availability: reads and writes served while a region is cut off and while the leader
(primary; a coordinator or replica where the store has no leader) is down, graded against
the store's promise of local reads."""

from __future__ import annotations

from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells, measure
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.promises import sim_rules
from replicalab.experiments.property import Context, NotMeasured, Property
from replicalab.faults.sim import SimNemesis
from replicalab.stores import open_store


def _measure(ctx: Context) -> dict[str, Any]:
    assert ctx.target is not None
    if ctx.subject.kind is None:
        try:  # a simulated scheme whose nodes no fault can aim at: nothing to measure
            SimNemesis.of(open_store(ctx.subject.label, 1))
        except ValueError as why:
            raise NotMeasured(str(why)) from None
    return measure.availability(ctx.target, ctx.plan, ctx.out, ctx.base, ctx.seed,
                                ctx.progress)


def local_reads_promised(ctx: Context) -> bool:
    """Return whether the store promises that a replica cut off from the rest keeps serving
    eventual reads: its kind record says so, or for sim:// its scheme's own rules."""
    kind = ctx.subject.kind
    if kind is not None:
        return kind.local_reads
    info = open_store(ctx.subject.label, 1).info
    return sim_rules(info.params, tuple(info.regions)).local_reads


def _grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    return cells.availability_cell(ctx.subject.label, m, p, local_reads_promised(ctx))


def _steps(subject: Subject, plan: Plan, regions: int, asked: tuple[str, ...]) -> int:
    # eventual and consistent reads under each region cut off (or the readers' only) and
    # under the leader's crash
    return 2 * ((regions if plan.all_cut_regions else 1) + 1)


PROPERTY = Property("availability", "reads and writes served while a region is cut off and "
                    "while the leader is down", _measure, _grade, _steps)

"""Availability: reads and writes served while a region is cut off and while the
leader/primary is crashed, graded against the kind's promise of local reads."""

from __future__ import annotations

from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells, measure
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.property import Context, Property


def _measure(ctx: Context) -> dict[str, Any]:
    assert ctx.target is not None
    return measure.availability(ctx.target, ctx.plan, ctx.out, ctx.base, ctx.seed,
                                ctx.progress)


def _grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    kind = ctx.subject.kind
    return cells.availability_cell(ctx.subject.label, m, p,
                                   kind.local_reads if kind is not None else True)


def _steps(subject: Subject, plan: Plan, regions: int, asked: tuple[str, ...]) -> int:
    # eventual and consistent reads under each region cut off (or the readers' only) and
    # under the leader's crash
    return 2 * ((regions if plan.all_cut_regions else 1) + 1)


PROPERTY = Property("availability", "reads and writes served while a region is cut off and "
                    "while the leader is down", _measure, _grade, _steps)

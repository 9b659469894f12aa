"""Consistency: staleness at a remote replica, one client's session guarantees and the
register test's linearizability verdicts, graded against the kind's strong-read promise."""

from __future__ import annotations

from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells, measure
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.property import Context, Property


def _measure(ctx: Context) -> dict[str, Any]:
    assert ctx.target is not None
    return measure.consistency(ctx.target, ctx.plan, ctx.out, ctx.base, ctx.seed,
                               ctx.progress)


def _grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    kind = ctx.subject.kind
    return cells.consistency_cell(ctx.subject.label, m, p,
                                  kind.strong_reads if kind is not None else False)


def _steps(subject: Subject, plan: Plan, regions: int, asked: tuple[str, ...]) -> int:
    return 5  # staleness x2, one client's sessions, register test x2


PROPERTY = Property("consistency", "staleness, session guarantees and linearizability, "
                    "promised vs observed", _measure, _grade, _steps)

"""Durability: acknowledged writes lost under a kill -9 of the leader and a power loss of
every node, per documented setting (clusters of its own, before the store's main one)."""

from __future__ import annotations

from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells
from replicalab.experiments.durability import durability, variants
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.property import Context, NotMeasured, Property


def _measure(ctx: Context) -> dict[str, Any]:
    kind = ctx.subject.kind
    if kind is None:
        raise NotMeasured("the simulated store keeps no disk: neither a kill -9 nor a power "
                          "loss is modelled")
    if not kind.durability:
        raise NotMeasured(f"the {kind.name} kind records no durability settings to compare")
    if ctx.hosts:
        raise NotMeasured("a power loss is cut on the power-loss file system of this "
                          "machine, which hosts reached over SSH do not have")
    return durability(kind, ctx.regions, ctx.plan, ctx.seed, ctx.out, ctx.base, ctx.progress,
                      ctx.root, ctx.name)


def _grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    return cells.durability_cell(ctx.subject.label, m, p)


def _steps(subject: Subject, plan: Plan, regions: int, asked: tuple[str, ...]) -> int:
    if subject.kind is None:
        return 0
    return 3 * len(variants(subject.kind, plan))  # a cluster start, a kill, a power loss


PROPERTY = Property("durability", "acknowledged writes lost under kill -9 and power loss",
                    _measure, _grade, _steps, needs_cluster=False)

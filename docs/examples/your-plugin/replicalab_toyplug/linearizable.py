"""The ``toy-linearizable`` scorecard property: a register test on the store's cluster,
green when its history is linearizable (``replicalab scorecard --only toy-linearizable``)."""

from __future__ import annotations

from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells, measure
from replicalab.experiments.property import Context, Property
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec


def measure_it(ctx: Context) -> dict[str, Any]:
    """Run the register workload on the store for the plan's register time."""
    assert ctx.target is not None
    options = ProbeOptions(consistency="consistent", duration_s=ctx.plan.register_s,
                           seed=ctx.seed)
    run = measure.probe(ProbeSpec(store=ctx.target.url, workload="register", options=options),
                        ctx.out, ctx.progress("register test"))
    ops = run.results["ops"]
    return {"valid": run.results["linearizability"]["valid"],
            "ops": ops["reads"] + ops["writes"], "runs": [measure.rel(run, ctx.base)]}


def grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    """Green for a linearizable history, red for one that is not, grey when unknown."""
    grade = {True: "green", False: "red"}.get(m["valid"], "grey")
    value = {True: "linearizable", False: "not linearizable"}.get(m["valid"], "unknown")
    return cells.Cell(ctx.subject.label, "toy-linearizable", f"{value} ({m['ops']} ops)",
                      grade, p.text, p.source, runs=m["runs"], figures=m)


PROPERTY = Property(
    "toy-linearizable", "a register test's history is linearizable", measure_it, grade,
    lambda subject, plan, regions, asked: 1,
    promise=lambda kind: Promise("consistent reads are linearizable",
                                 "replicalab_toyplug/linearizable.py"))

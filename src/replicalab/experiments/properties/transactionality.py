"""Transactionality: concurrent conditional increments (lost updates) and atomic
multi-element writes read back (torn reads), each where the store declares the feature.

The isolation-grading property of issue 27 replaces this module and its registry line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells, measure
from replicalab.experiments.measure import Progress, Target
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.property import Context, Property
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.increments import IncrementsConfig
from replicalab.workloads.inter_element import InterElementConfig
from replicalab.workloads.runner import ProbeSpec


def transactionality(t: Target, plan: Plan, features: frozenset[str], out: Path, base: Path,
                     seed: int, progress: Callable[[str], Progress]) -> dict[str, Any]:
    """Return the concurrent conditional increments' count and the atomic multi-element
    writes' torn reads (each only where the store declares the feature)."""
    res: dict[str, Any] = {"runs": [], "conditional_write": "conditional-write" in features,
                           "atomic_multi_write": "atomic-multi-write" in features,
                           "multi_read": "multi-read" in features}
    if res["conditional_write"]:
        run = measure.probe(ProbeSpec(store=t.url, workload="increments", options=ProbeOptions(
            duration_s=plan.increments_s, seed=seed),
            config=IncrementsConfig(clients=4, region=t.writer_region)), out,
            progress("concurrent conditional increments"))
        res["increments"] = {**run.results["increments"], "run": measure.rel(run, base)}
        res["runs"].append(measure.rel(run, base))
    if res["atomic_multi_write"] and res["multi_read"]:
        run = measure.probe(ProbeSpec(store=t.url, workload="inter-element", options=ProbeOptions(
            duration_s=plan.inter_element_s, write_interval_s=0.5, read_rate=20, seed=seed),
            config=InterElementConfig(placement="same-item", write_mode="one-call",
                                      read_mode="one-multi")), out,
            progress("atomic multi-element writes"))
        counts = run.results["counts"] or {}
        res["inter_element"] = {"pairs": sum(counts.values()) if counts else 0,
                                "torn": counts.get("B", 0) + counts.get("C", 0),
                                "counts": counts, "run": measure.rel(run, base)}
        res["runs"].append(measure.rel(run, base))
    return res


def transactionality_cell(store: str, m: dict[str, Any], p: Promise) -> cells.Cell:
    """Grade conditional and atomic multi-element writes: red if an increment was lost or a
    multi-element write was seen torn, yellow if one of them is not supported, else green."""
    details, parts, red, missing = [], [], [], []
    inc = m.get("increments")
    if inc is None:
        missing.append("no conditional write")
        parts.append("cas: unsupported")
    else:
        details.append(f"concurrent conditional increments: {inc['acknowledged']:,} "
                       f"acknowledged, {inc['failed_condition']:,} failed their condition, "
                       f"{inc['unknown']:,} unknown; final count "
                       f"{inc['final_count'] if inc['checked'] else 'not read'}; lost updates "
                       f"{inc['lost_updates'] if inc['checked'] else 'unchecked'}")
        if not inc["checked"]:
            red.append("the counter was not read back")
        elif inc["lost_updates"]:
            red.append(f"{inc['lost_updates']} lost updates")
        parts.append(f"cas: {inc['lost_updates'] if inc['checked'] else '?'} lost of "
                     f"{inc['acknowledged']:,}")
    ie = m.get("inter_element")
    if ie is None:
        why = ("no atomic multi-element write" if not m["atomic_multi_write"]
               else "no multi-element read to check it")
        missing.append(why)
        parts.append("multi-write: unsupported" if not m["atomic_multi_write"]
                     else "multi-write: unchecked")
    else:
        details.append(f"atomic two-element writes read back in one call: {ie['torn']} torn "
                       f"of {ie['pairs']:,} reads (A/B/C/D {ie['counts']})")
        if ie["torn"]:
            red.append(f"{ie['torn']} torn multi-element writes")
        parts.append(f"multi-write: {ie['torn']} torn of {ie['pairs']:,}")
    grade = "red" if red else "yellow" if missing else "green"
    caveat = "; ".join(red or missing)
    return cells.Cell(store, "transactionality", "; ".join(parts), grade, p.text, p.source, caveat,
                details, m["runs"], figures={k: m.get(k) for k in ("increments",
                                                                   "inter_element")})


def _measure(ctx: Context) -> dict[str, Any]:
    assert ctx.target is not None
    return transactionality(ctx.target, ctx.plan, ctx.features, ctx.out, ctx.base, ctx.seed,
                            ctx.progress)


def _grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    return transactionality_cell(ctx.subject.label, m, p)


def _steps(subject: Subject, plan: Plan, regions: int, asked: tuple[str, ...]) -> int:
    return 2  # increments, inter-element


PROPERTY = Property("transactionality", "conditional and atomic multi-element writes "
                    "verified", _measure, _grade, _steps)

"""The transaction checker's entry: transactions and options in, a
:class:`TxnCheckResult` out.

``check_txns`` runs the pure-Python analysis (the reference); ``check_result`` turns the
findings of either engine (this one or the native core) into the result: Elle's
``valid`` / ``anomaly-types`` / ``not`` / ``also-not`` (``elle.txn/result-map``), the
models still possible, a few anomalies of each type explained.
"""

from __future__ import annotations

import time
from typing import Any

from replicalab.checkers.txn import cycles, graph, listappend, models, register, versions
from replicalab.checkers.txn.explain import anomaly_text, step_text
from replicalab.checkers.txn.types import (
    DEFAULT_OPTIONS,
    EDGE_NAMES,
    PROCESS,
    REALTIME,
    Anomaly,
    Options,
    Step,
    Txn,
    TxnCheckResult,
    Unfinished,
)

TXN_MODELS = ("list-append", "rw-register")
DEFAULT_MAX_STEPS = 200_000_000
"""Cycle-search steps (edges looked at) allowed before a search is left unfinished."""
MAX_PER_TYPE = 8
"""Anomalies kept (and explained) per type; ``TxnCheckResult.counts`` has them all."""
_REALTIME_TYPES = {t for t in cycles.CYCLE_TYPES if t.endswith("-realtime")} | {
    "G-single-realtime", "G-nonadjacent-realtime", "G2-realtime"}
_PROCESS_TYPES = {t for t in cycles.CYCLE_TYPES if t.endswith("-process")} | {
    "G-single-process", "G-nonadjacent-process", "G2-process"}


def prohibited(opts: Options) -> set[str]:
    """Return the anomalies that make a history invalid under ``opts``: those its
    consistency models forbid and those it names (and any that imply them)."""
    out = models.anomalies_implying(opts.anomalies)
    if opts.consistency_models:
        out |= models.prohibited_by(opts.consistency_models)
    return out


def order_kind(opts: Options) -> int | None:
    """Return which order edges the search needs, as Elle: real-time ones if a real-time
    class is asked about (a process's order is in real-time order too), else process
    ones if a process class is, else none."""
    asked = prohibited(opts)
    if asked & _REALTIME_TYPES:
        return REALTIME
    if asked & _PROCESS_TYPES:
        return PROCESS
    return None


def order_edges(txns: list[Txn], kind: int | None) -> list[graph.Edge]:
    """Return the process or real-time edges of ``txns`` (none for None)."""
    if kind == REALTIME:
        return graph.realtime_edges(txns)
    if kind == PROCESS:
        return graph.process_edges(txns)
    return []


def analyse(txns: list[Txn], model: str, opts: Options = DEFAULT_OPTIONS
            ) -> tuple[list[graph.Edge], list[Anomaly]]:
    """Return the dependency edges (ww/wr/rw plus the order edges ``opts`` need) and the
    non-cycle anomalies of ``txns`` under ``model`` (raises TxnInputError)."""
    if model not in TXN_MODELS:
        raise ValueError(f"model {model!r}: use {' or '.join(TXN_MODELS)}")
    if model == "list-append":
        edges, anomalies = listappend.analyse(txns)
    else:
        def orders(kind: str) -> list[tuple[int, int]]:
            es = order_edges(txns, PROCESS if kind == "process" else REALTIME)
            return [(e[0], e[1]) for e in es]
        edges, anomalies = register.analyse(txns, opts, orders)
    return edges + order_edges(txns, order_kind(opts)), anomalies


def check_txns(txns: list[Txn], model: str, opts: Options = DEFAULT_OPTIONS,
               deadline_s: float | None = None,
               max_steps: int = DEFAULT_MAX_STEPS) -> TxnCheckResult:
    """Return the pure-Python check of ``txns`` under ``model`` (``list-append`` or
    ``rw-register``) and ``opts``; ``deadline_s`` a ``time.monotonic()`` value after
    which searches stop (the result then says which classes they left undecided)."""
    started = time.monotonic()
    edges, anomalies = analyse(txns, model, opts)
    budget = cycles.Budget(max_steps, deadline_s)
    found = cycles.search(len(txns), edges, budget)
    for name, cyc in found.cycles:
        steps = [Step(e[0], e[1], EDGE_NAMES[e[2]], *e[3:]) for e in cyc]
        anomalies.append(Anomaly(name, [s.src for s in steps], cycle=steps))
    for name, vs in found.exists:
        anomalies.append(Anomaly(name, vs[:8], detail={"size": len(vs)}))
    unfinished = [Unfinished(size, sample, classes, limit)
                  for size, sample, classes, limit in found.unfinished]
    if model == "list-append":
        _unread_orders(txns, edges, anomalies, unfinished, budget)
    else:
        _open_versions(txns, edges, opts, anomalies, unfinished, budget)
    involved = set(found.on_cycle).union(*(an.txns for an in anomalies))
    return check_result(txns, model, opts, anomalies, unfinished,
                        time.monotonic() - started, "python", empty=not edges,
                        anomalous=len(involved))


def _unread_orders(txns: list[Txn], edges: list[graph.Edge], anomalies: list[Anomaly],
                   unfinished: list[Unfinished], budget: cycles.Budget) -> None:
    """Where two or more committed appends to a key are read by no one, their order is
    not known and the graph holds no ww edge between them; a cycle snapshot isolation
    forbids may exist whichever order they took. If snapshot isolation is not ruled out
    already, try the orders (``cycles.si_completion``): when none is free of such a
    cycle, add Elle's ``PL-SI-cycle-exists`` naming those keys."""
    if "PL-SI" in models.impossible_models({a.type for a in anomalies}):
        return
    unread = listappend.unread_appenders(txns)
    if not unread:
        return
    rank = cycles.topo_ranks(txns, edges)
    verdict = cycles.si_completion(len(txns), edges, unread, rank, budget)
    involved = sorted({t for ts in unread.values() for t in ts})
    if verdict == "impossible":
        anomalies.append(Anomaly("PL-SI-cycle-exists", involved[:8], detail={
            "size": len(involved), "keys": sorted(unread)}))
    elif verdict == "unknown":
        unfinished.append(Unfinished(len(involved), involved[:8], ["PL-SI-cycle-exists"],
                                     budget.hit or "steps"))


def _open_versions(txns: list[Txn], edges: list[graph.Edge], opts: Options,
                   anomalies: list[Anomaly], unfinished: list[Unfinished],
                   budget: cycles.Budget) -> None:
    """Where a key's version order is open (rw-register), search the orders
    (:mod:`versions`) for serializability, strict serializability and snapshot isolation
    when the anomalies found leave them possible and the options ask about them: add
    Elle's ``<model>-cycle-exists`` when no order avoids a cycle the model forbids, or
    leave the class undecided when the budget ran out."""
    ruled_out = models.impossible_models({a.type for a in anomalies})
    targets = [m for m in versions.TARGETS
               if m not in ruled_out and checked(models.friendly(m), opts)]
    for m, (verdict, involved, keys) in versions.complete(txns, edges, targets,
                                                          budget).items():
        if verdict == "impossible":
            anomalies.append(Anomaly(f"{m}-cycle-exists", involved[:8], detail={
                "size": len(involved), "keys": keys}))
        elif verdict == "unknown":
            unfinished.append(Unfinished(len(involved), involved[:8],
                                         [f"{m}-cycle-exists"], budget.hit or "steps"))


def with_open_versions(result: TxnCheckResult, txns: list[Txn], opts: Options,
                       deadline_s: float | None = None,
                       max_steps: int = DEFAULT_MAX_STEPS) -> TxnCheckResult:
    """Return the native core's rw-register ``result`` for ``txns`` (positions as in
    ``txns``) with the version-order search of :func:`_open_versions` added (the core
    infers orders as Elle does but does not search them); ``result`` itself when that
    changes nothing."""
    if not any(models.canonical(m) in versions.TARGETS for m in result.possible):
        return result
    started = time.monotonic()
    edges, _ = analyse(txns, "rw-register", opts)
    derived = ("empty-transaction-graph", "cycle-search-timeout")
    anomalies = [a for t, ans in result.anomalies.items() if t not in derived for a in ans]
    unfinished = list(result.unfinished)
    before = (len(anomalies), len(unfinished))
    _open_versions(txns, edges, opts, anomalies, unfinished,
                   cycles.Budget(max_steps, deadline_s))
    if (len(anomalies), len(unfinished)) == before:
        return result
    return check_result(txns, result.model, opts, anomalies, unfinished,
                        result.check_s + time.monotonic() - started, result.engine,
                        empty="empty-transaction-graph" in result.anomalies,
                        anomalous=result.anomalous_txns, skipped=result.skipped,
                        counts=result.counts)


def check_result(txns: list[Txn] | Any, model: str, opts: Options,
                 anomalies: list[Anomaly], unfinished: list[Unfinished], check_s: float,
                 engine: str, empty: bool = False, n_txns: int | None = None,
                 anomalous: int = 0, skipped: dict[str, int] | None = None,
                 counts: dict[str, int] | None = None) -> TxnCheckResult:
    """Return the result (Elle's ``result-map``): the anomalies the options ask about
    (``anomaly_types``), ``valid`` false if one of them is forbidden, "unknown" if only
    an empty graph or an undecided search is, the models the anomalies rule out, a few
    anomalies per type (shortest cycles first), explained. ``txns`` is the transaction
    list, or a mapping position -> (index, process) for the ones anomalies name;
    ``empty`` whether the dependency graph has no edge at all; ``counts`` how many of
    each type were found when ``anomalies`` holds a few of each only."""
    bad_types = prohibited(opts)
    if empty:
        anomalies = [*anomalies, Anomaly("empty-transaction-graph", [])]
    relevant = [u for u in unfinished if set(u.classes) & bad_types]
    if relevant:
        anomalies = [*anomalies, Anomaly("cycle-search-timeout", [], detail={
            "classes": sorted({c for u in relevant for c in u.classes})})]
    by_type: dict[str, list[Anomaly]] = {}
    for an in anomalies:
        by_type.setdefault(an.type, []).append(an)
    found = set(by_type)
    reportable = {t for t in found if t in bad_types or t in models.UNKNOWN_TYPES}
    reportable = _without_redundant_exists(reportable)
    bad = reportable & bad_types
    valid: bool | str = True if not reportable else False if bad else "unknown"
    not_, also_not = models.boundary(found)
    undecided = {c for u in unfinished for c in u.classes}
    possible = [m for m in models.possible(found) if checked(m, opts)
                and not models.prohibited_by([m]) & undecided]

    names: dict[int, str] = {}
    procs: dict[int, int] = {}

    def info(t: int) -> tuple[int, int]:
        if isinstance(txns, list):
            return txns[t].index, txns[t].process
        return txns[t]

    kept: dict[str, list[Anomaly]] = {}
    for typ in sorted(by_type):
        ans = sorted(by_type[typ], key=lambda a: (len(a.cycle or ()), a.txns))
        kept[typ] = ans[:MAX_PER_TYPE]
        for an in kept[typ]:
            for t in an.txns:
                idx, proc = info(t)
                names[t] = f"T{idx}"
                procs[t] = proc
    for u in unfinished:
        for t in u.sample:
            names[t] = f"T{info(t)[0]}"
    for ans in kept.values():
        for an in ans:
            if an.cycle is not None:
                an.explanation = [step_text(s, names, model, procs) for s in an.cycle]
            else:
                an.explanation = anomaly_text(an, names, model)
    n = len(txns) if n_txns is None else n_txns
    counts = {typ: len(ans) for typ, ans in by_type.items()} | (counts or {})
    return TxnCheckResult(model, valid, n, sorted(reportable), kept, not_, also_not, possible,
                          unfinished, check_s, engine, names, counts, anomalous, opts,
                          dict(skipped or {}))


def checked(model: str, opts: Options) -> bool:
    """Whether the search ``opts`` ask for looks at every cycle class ``model`` forbids:
    its real-time classes need real-time edges; its process classes process edges, or
    real-time ones when the model forbids the real-time class too (a process runs one
    transaction at a time, so a process cycle is a real-time cycle)."""
    kind = order_kind(opts)
    forbidden = models.prohibited_by([model]) & set(cycles.CYCLE_TYPES)
    process = {t for t in forbidden if t.endswith("-process")}
    realtime = {t for t in forbidden if t.endswith("-realtime")}
    if kind == REALTIME:
        return all(t.removesuffix("-process") + "-realtime" in forbidden for t in process)
    if kind == PROCESS:
        return not realtime
    return not process and not realtime


def _without_redundant_exists(types: set[str]) -> set[str]:
    """Drop the cycle-exists findings whose model the other findings rule out already
    (Elle's ``remove-redundant-cycle-exists``)."""
    others = [t for t in types if not t.endswith("-cycle-exists")]
    ruled_out = models.impossible_models(others)
    return {t for t in types
            if not (t.endswith("-cycle-exists")
                    and t.removesuffix("-cycle-exists") in ruled_out)}

"""The transaction checker's entry: transactions in, a :class:`TxnCheckResult` out.

``check_txns`` runs the pure-Python analysis (the reference); ``check_result`` turns the
raw findings of either engine (this one or the native core) into the result with its
explanations and the consistency models ruled out.
"""

from __future__ import annotations

import time
from typing import Any

from replicalab.checkers.txn import graph, listappend, models, register
from replicalab.checkers.txn.explain import anomaly_text, step_text
from replicalab.checkers.txn.types import (
    EDGE_NAMES,
    Anomaly,
    Step,
    Txn,
    TxnCheckResult,
    Unfinished,
)

TXN_MODELS = ("list-append", "rw-register")
DEFAULT_MAX_STEPS = 200_000_000
"""Cycle-search steps (edges looked at) allowed before a component is left unfinished."""
MAX_PER_TYPE = 8
"""Anomalies kept (and explained) per type; ``TxnCheckResult.counts`` has them all."""


def analyse(txns: list[Txn], model: str) -> tuple[list[graph.Edge], list[Anomaly]]:
    """Return the dependency edges (ww/wr/rw plus process and real-time) and the
    non-cycle anomalies of ``txns`` under ``model`` (raises TxnInputError)."""
    if model not in TXN_MODELS:
        raise ValueError(f"model {model!r}: use {' or '.join(TXN_MODELS)}")
    mod = listappend if model == "list-append" else register
    edges, anomalies = mod.analyse(txns)
    return edges + graph.order_edges(txns), anomalies


def check_txns(txns: list[Txn], model: str, deadline_s: float | None = None,
               max_steps: int = DEFAULT_MAX_STEPS) -> TxnCheckResult:
    """Return the pure-Python check of ``txns`` under ``model`` (``list-append`` or
    ``rw-register``); ``deadline_s`` a ``time.monotonic()`` value after which cycle
    search stops (the result then says what it could not finish)."""
    started = time.monotonic()
    edges, anomalies = analyse(txns, model)
    found, unfinished, on_cycle = graph.search_cycles(len(txns), edges,
                                                      graph.Budget(max_steps, deadline_s))
    for name, ids in found:
        cycle = [Step(edges[e][0], edges[e][1], EDGE_NAMES[edges[e][2]], *edges[e][3:])
                 for e in ids]
        anomalies.append(Anomaly(name, [s.src for s in cycle], cycle=cycle))
    involved = set(on_cycle).union(*(an.txns for an in anomalies))
    return check_result(txns, model, anomalies, unfinished, time.monotonic() - started,
                        "python", anomalous=len(involved))


def check_result(txns: list[Txn] | Any, model: str, anomalies: list[Anomaly],
                 unfinished: list[Unfinished], check_s: float, engine: str,
                 n_txns: int | None = None, anomalous: int = 0) -> TxnCheckResult:
    """Return the result: anomalies grouped by type (at most MAX_PER_TYPE each, shortest
    cycles first), explained, and the models ruled out. ``txns`` is the transaction list,
    or a mapping position -> (index, process) for the ones anomalies name; ``anomalous``
    how many transactions take part in some anomaly (on a cycle or named by another)."""
    by_type: dict[str, list[Anomaly]] = {}
    for an in anomalies:
        by_type.setdefault(an.type, []).append(an)
    kept: dict[str, list[Anomaly]] = {}
    names: dict[int, str] = {}
    procs: dict[int, int] = {}

    def info(t: int) -> tuple[int, int]:
        if isinstance(txns, list):
            return txns[t].index, txns[t].process
        return txns[t]

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
    types = sorted(kept)
    not_, also_not, possible = models.verdict(types)
    valid: bool | str = not types
    if valid and unfinished:
        valid = "unknown"
    n = len(txns) if n_txns is None else n_txns
    counts = {typ: len(ans) for typ, ans in by_type.items()}
    return TxnCheckResult(model, valid, n, types, kept, not_, also_not, possible, unfinished,
                          check_s, engine, names, counts, anomalous)

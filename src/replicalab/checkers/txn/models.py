"""Consistency models and anomalies as Elle relates them (``elle.consistency-model``):
which anomaly implies which, which model implies which, and which anomalies each model
forbids directly. From these three graphs: the anomalies a set of models forbids, the
models a set of anomalies rules out (``not``: the weakest, ``also_not``: the rest) and the
models still possible.

The graphs are Elle's, after Adya, Bailis et al., Cerone et al., Daudjee and Salem (see
docs/transactions.md#consistency-models); names are canonical (Adya's ``PL-2``...)
inside and friendly (``read-committed``...) outside, as Elle prints them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

# anomaly -> the anomalies it implies (a history with the first has the others)
IMPLIED: dict[str, tuple[str, ...]] = {
    "G0": ("G1c", "G0-process"),
    "G0-process": ("G1c-process", "G0-realtime"),
    "G0-realtime": ("G1c-realtime",),
    "G1a": ("G1",),
    "G1b": ("G1",),
    "G1c": ("G1", "G1c-process"),
    "G1c-process": ("G1c-realtime", "G1-process"),
    "G1c-realtime": ("G1-realtime",),
    "G1": ("G1-process",),
    "G1-process": ("G1-realtime",),
    "G-single-item": ("G-single", "G-single-item-process", "G-nonadjacent-item"),
    "G-single-item-process": ("G-single-process", "G-single-item-realtime",
                              "G-nonadjacent-item-process"),
    "G-single-item-realtime": ("G-single-realtime", "G-nonadjacent-item-realtime"),
    "G-single": ("G-nonadjacent", "GSIb", "G-single-process"),
    "G-single-process": ("G-nonadjacent-process", "G-single-realtime"),
    "G-single-realtime": ("G-nonadjacent-realtime",),
    "G-nonadjacent-item": ("G-nonadjacent", "G2-item", "G-nonadjacent-item-process"),
    "G-nonadjacent-item-process": ("G-nonadjacent-process", "G2-item-process",
                                   "G-nonadjacent-item-realtime"),
    "G-nonadjacent-item-realtime": ("G2-item-realtime", "G-nonadjacent-realtime"),
    "G-nonadjacent": ("G2", "G-nonadjacent-process"),
    "G-nonadjacent-process": ("G2-process", "G-nonadjacent-realtime"),
    "G-nonadjacent-realtime": ("G2-realtime",),
    "G2": ("G2-process",),
    "G2-item": ("G2", "G2-item-process"),
    "G2-item-process": ("G2-process", "G2-item-realtime"),
    "G2-item-realtime": ("G2-realtime",),
    "G2-process": ("G2-realtime",),
    "GSIa": ("GSI",),
    "GSIb": ("GSI",),
    # two committed reads no single order of appends explains: a dirty read
    "incompatible-order": ("G1a",),
    # a transaction that reads its own later write: a trivial wr cycle
    "future-read": ("G1c",),
    # an aborted write followed by a committed one in a key's version order
    "dirty-update": ("G1a",),
    # ours (Elle stops on it): a read of a value no transaction of the history wrote
    "garbage-read": ("G1a",),
    "lost-update": ("write-skew", "G2-item"),
    "write-skew": ("G2",),
}

# a second order used only to search the worse anomalies first (Elle's severity graph)
SEVERITY: dict[str, tuple[str, ...]] = {
    "G0": ("G1c",), "G0-process": ("G1c-process",), "G0-realtime": ("G1c-realtime",),
    "G1c": ("G-single", "G2-item"), "G1c-process": ("G-single-process", "G2-item-process"),
    "G1c-realtime": ("G-single-realtime", "G2-item-realtime"),
    "G2": ("G0-process",), "G2-process": ("G0-realtime",),
}

CANONICAL = {
    "consistent-view": "PL-2+", "conflict-serializable": "PL-3",
    "cursor-stability": "PL-CS", "forward-consistent-view": "PL-FCV",
    "monotonic-snapshot-read": "PL-MSR", "monotonic-view": "PL-2L",
    "read-committed": "PL-2", "read-uncommitted": "PL-1", "repeatable-read": "PL-2.99",
    "serializable": "PL-3", "snapshot-isolation": "PL-SI", "strict-serializable": "PL-SS",
    "strong-serializable": "PL-SS", "update-serializable": "PL-3U",
    "strong-session-read-uncommitted": "strong-session-PL-1",
    "strong-session-read-committed": "strong-session-PL-2",
    "strong-read-uncommitted": "strong-PL-1", "strong-read-committed": "strong-PL-2",
}
"""Friendly name -> canonical name (two friendly names share PL-3 and PL-SS)."""
FRIENDLY = {v: k for k, v in CANONICAL.items()} | {"PL-3": "serializable",
                                                    "PL-SS": "strong-serializable"}
"""Canonical -> the name printed (Elle prints PL-SS as strong-serializable)."""

# model -> the models it implies (a history satisfying the first satisfies these)
_IMPLIES: dict[str, tuple[str, ...]] = {
    "causal-cerone": ("read-atomic",),
    "consistent-view": ("cursor-stability", "monotonic-view"),
    "conflict-serializable": ("view-serializable",),
    "cursor-stability": ("read-committed", "PL-2"),
    "forward-consistent-view": ("consistent-view",),
    "PL-2": ("PL-1",),
    "PL-3": ("repeatable-read", "update-serializable"),
    "update-serializable": ("forward-consistent-view",),
    "monotonic-atomic-view": ("read-committed",),
    "monotonic-view": ("PL-2",),
    "monotonic-snapshot-read": ("PL-2",),
    "parallel-snapshot-isolation": ("causal-cerone", "update-atomic"),
    "prefix": ("causal-cerone",),
    "read-atomic": ("monotonic-atomic-view",),
    "read-committed": ("read-uncommitted",),
    "repeatable-read": ("cursor-stability", "monotonic-atomic-view"),
    "update-atomic": ("read-atomic",),
    "serializable": ("repeatable-read", "snapshot-isolation", "view-serializable"),
    "session-serializable": ("1SR",),
    "snapshot-isolation": ("forward-consistent-view", "monotonic-atomic-view",
                           "monotonic-snapshot-read", "parallel-snapshot-isolation",
                           "prefix"),
    "strict-serializable": ("PL-3", "serializable", "linearizable", "snapshot-isolation",
                            "strong-snapshot-isolation", "strong-session-serializable"),
    "strong-session-PL-1": ("PL-1",),
    "strong-session-PL-2": ("PL-2", "strong-session-PL-1"),
    "strong-PL-1": ("strong-session-PL-1",),
    "strong-PL-2": ("strong-session-PL-2", "strong-PL-1"),
    "strong-session-serializable": ("serializable", "strong-session-snapshot-isolation"),
    "strong-session-snapshot-isolation": ("snapshot-isolation", "strong-session-PL-2"),
    "strong-serializable": ("session-serializable",),
    "strong-snapshot-isolation": ("strong-session-snapshot-isolation", "strong-PL-2"),
    "linearizable": ("sequential",),
    "sequential": ("causal",),
    "causal": ("writes-follow-reads", "PRAM"),
    "PRAM": ("monotonic-reads", "monotonic-writes", "read-your-writes"),
}

# model -> the anomalies it forbids itself (its weaker models forbid the rest)
_FORBIDS: dict[str, tuple[str, ...]] = {
    "causal-cerone": ("internal", "G1a"),
    "cursor-stability": ("G1", "G-cursor", "lost-update"),
    "monotonic-view": ("G1", "G-monotonic"),
    "monotonic-snapshot-read": ("G1", "G-MSR"),
    "consistent-view": ("G1", "G-single"),
    "forward-consistent-view": ("G1", "G-SIb"),
    "parallel-snapshot-isolation": ("internal", "G1a"),
    "PL-3": ("G1", "G2", "predicate-read-miss", "PL-3-cycle-exists"),
    "PL-2": ("G1", "PL-2-cycle-exists"),
    "PL-1": ("G0", "duplicate-elements", "cyclic-versions", "PL-1-cycle-exists"),
    "prefix": ("internal", "G1a"),
    "serializable": ("internal",),
    "snapshot-isolation": ("internal", "G1", "G-SI", "G-nonadjacent",
                           "PL-SI-cycle-exists"),
    "read-atomic": ("internal", "G1a", "future-read"),
    "repeatable-read": ("G1", "G2-item", "PL-2.99-cycle-exists", "lost-update"),
    "update-atomic": ("lost-update",),
    "strict-serializable": ("G1", "G1c-realtime", "G2-realtime", "PL-SS-cycle-exists"),
    "strong-session-PL-1": ("strong-session-PL-1-cycle-exists", "G0-process"),
    "strong-session-PL-2": ("strong-session-PL-2-cycle-exists", "G1c-process"),
    "strong-PL-1": ("strong-PL-1-cycle-exists", "G0-realtime"),
    "strong-PL-2": ("strong-PL-2-cycle-exists", "G1c-realtime"),
    "strong-session-snapshot-isolation": ("internal", "G1-process", "G-nonadjacent-process",
                                          "strong-session-snapshot-isolation-cycle-exists"),
    "strong-snapshot-isolation": ("internal", "G1-realtime", "G-nonadjacent-realtime",
                                  "strong-snapshot-isolation-cycle-exists"),
    "strong-session-serializable": ("G1-process", "G2-process",
                                    "strong-session-serializable-cycle-exists"),
    "update-serializable": ("G1", "G-update"),
}

UNKNOWN_TYPES = ("empty-transaction-graph", "cycle-search-timeout")
"""Findings that make a verdict "unknown" rather than false."""


def canonical(model: str) -> str:
    """Return a model's canonical name (``read-committed`` -> ``PL-2``)."""
    return CANONICAL.get(model, model)


def friendly(model: str) -> str:
    """Return a model's printed name (``PL-2`` -> ``read-committed``)."""
    return FRIENDLY.get(model, model)


def _edges(graph: dict[str, tuple[str, ...]], rename: bool) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, bs in graph.items():
        a2 = canonical(a) if rename else a
        out.setdefault(a2, set())
        for b in bs:
            b2 = canonical(b) if rename else b
            out[a2].add(b2)
            out.setdefault(b2, set())
    return out


MODEL_GRAPH = _edges(_IMPLIES, True)
"""Canonical model -> the canonical models it implies directly."""
FORBIDS = {canonical(m): set() for m in _FORBIDS}
for _m, _as in _FORBIDS.items():
    FORBIDS[canonical(_m)].update(_as)
ANOMALY_GRAPH = _edges(IMPLIED, False)


def _reverse(g: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {v: set() for v in g}
    for a, bs in g.items():
        for b in bs:
            out.setdefault(b, set()).add(a)
    return out


_MODEL_IN = _reverse(MODEL_GRAPH)
_ANOMALY_IN = _reverse(ANOMALY_GRAPH)
_FORBIDDEN_BY: dict[str, set[str]] = {}
for _m, _as in FORBIDS.items():
    for _a in _as:
        _FORBIDDEN_BY.setdefault(_a, set()).add(_m)

ALL_MODELS = frozenset(MODEL_GRAPH) | frozenset(CANONICAL) | frozenset(CANONICAL.values())
"""Every model name accepted (friendly and canonical)."""
MODELS = ALL_MODELS


def _reach(start: Iterable[str], nxt: dict[str, set[str]]) -> set[str]:
    seen = set(start)
    todo = list(seen)
    while todo:
        for b in nxt.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def validate(models: Iterable[str]) -> list[str]:
    """Return ``models`` as given; raises ValueError naming an unknown one."""
    out = list(models)
    bad = [m for m in out if m not in ALL_MODELS]
    if bad:
        raise ValueError(f"unknown consistency model {bad[0]!r}; known: "
                         f"{', '.join(sorted(set(map(friendly, ALL_MODELS))))}")
    return out


def implied_anomalies(anomalies: Iterable[str]) -> set[str]:
    """Return the anomalies given and every anomaly they imply."""
    return _reach(anomalies, ANOMALY_GRAPH)


def anomalies_implying(anomalies: Iterable[str]) -> set[str]:
    """Return the anomalies given and every anomaly that implies one of them."""
    return _reach(anomalies, _ANOMALY_IN)


def implied_models(models: Iterable[str]) -> set[str]:
    """Return (canonical) the models given and every model they imply."""
    return _reach((canonical(m) for m in validate(models)), MODEL_GRAPH)


def models_implying(models: Iterable[str]) -> set[str]:
    """Return (canonical) the models given and every model implying one of them: the
    models that cannot hold when these cannot."""
    return _reach((canonical(m) for m in validate(models)), _MODEL_IN)


def prohibited_by(models: Iterable[str]) -> set[str]:
    """Return every anomaly that cannot appear if all ``models`` hold."""
    direct = {a for m in implied_models(models) for a in FORBIDS.get(m, ())}
    return anomalies_implying(direct)


def impossible_models(anomalies: Iterable[str]) -> set[str]:
    """Return (canonical) every model that cannot hold given ``anomalies``."""
    direct = {m for a in implied_anomalies(anomalies) for m in _FORBIDDEN_BY.get(a, ())}
    return _reach(direct, _MODEL_IN)


def _most(models: Iterable[str], nxt: dict[str, set[str]]) -> set[str]:
    ms = {canonical(m) for m in models}
    out = set(ms)
    for m in sorted(ms):
        rest = out - {m}
        if rest & (_reach([m], nxt) - {m}):
            out = rest
    return out


def weakest(models: Iterable[str]) -> set[str]:
    """Return (canonical) the models of ``models`` that imply none of the others: the
    weakest ones (Elle's ``weakest-models``)."""
    return _most(models, MODEL_GRAPH)


def strongest(models: Iterable[str]) -> set[str]:
    """Return (canonical) the models of ``models`` that imply the others."""
    return _most(models, _MODEL_IN)


def boundary(anomalies: Iterable[str]) -> tuple[list[str], list[str]]:
    """Return ``(not, also_not)`` (friendly names, sorted): the weakest models the
    anomalies rule out, then every other model they rule out."""
    impossible = impossible_models(anomalies)
    is_not = weakest(impossible)
    return (sorted(friendly(m) for m in is_not),
            sorted(friendly(m) for m in impossible - is_not))


@cache
def transactional_models() -> tuple[str, ...]:
    """Return (friendly, in order from weak to strong) the models some anomaly can rule
    out: those that imply a model forbidding something. Single-object models
    (linearizable, sequential, ...) are left out: no transactional anomaly touches them."""
    forbidding = set(FORBIDS)
    ms = [m for m in MODEL_GRAPH if _reach([m], MODEL_GRAPH) & forbidding]
    depth = {m: len(_reach([m], MODEL_GRAPH)) for m in ms}
    return tuple(friendly(m) for m in sorted(ms, key=lambda m: (depth[m], friendly(m))))


def possible(anomalies: Iterable[str]) -> list[str]:
    """Return (friendly, weak to strong) the transactional models ``anomalies`` leave
    possible."""
    out = {friendly(m) for m in impossible_models(anomalies)}
    return [m for m in transactional_models() if m not in out]


@cache
def depths() -> dict[str, int]:
    """Return each known anomaly's depth: the longest chain of implications or
    severities leading to it (0: nothing implies it). Elle searches in this order."""
    g = {a: set(bs) for a, bs in ANOMALY_GRAPH.items()}
    for a, bs in SEVERITY.items():
        g.setdefault(a, set()).update(bs)
        for b in bs:
            g.setdefault(b, set())
    indeg = {v: 0 for v in g}
    for bs in g.values():
        for b in bs:
            indeg[b] += 1
    out: dict[str, int] = {}
    layer = [v for v, d in indeg.items() if d == 0]
    level = 0
    while layer:
        nxt = []
        for v in layer:
            out[v] = level
            for b in g[v]:
                indeg[b] -= 1
                if indeg[b] == 0:
                    nxt.append(b)
        layer, level = nxt, level + 1
    for a in set().union(*FORBIDS.values()):
        out.setdefault(a, 0)
    return out


def ordered(anomalies: Iterable[str]) -> list[str]:
    """Return ``anomalies`` sorted by depth, then name (Elle's order)."""
    d = depths()
    return sorted(anomalies, key=lambda a: (d.get(a, 0), a))


def verdict(anomaly_types: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """Return ``(not, also_not, possible)`` for the anomalies found (see
    :func:`boundary` and :func:`possible`)."""
    types = list(anomaly_types)
    not_, also = boundary(types)
    return not_, also, possible(types)

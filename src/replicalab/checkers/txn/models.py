"""Consistency models and the anomalies each forbids (after Adya's thesis, Cerone et al.
and Elle's ``elle.consistency-model``), as a lattice: a model forbids what it names and
everything its weaker models forbid.

An anomaly also counts as every anomaly it is a case of: a G-single cycle is a
G-nonadjacent one (no two rw edges in a row) and both are G2-item cycles (item
anti-dependency cycles); G0 is a case of G1c; a cycle without process or real-time edges
is also a cycle of the graph with them (G0 is a case of G0-process and G0-realtime).
"""

from __future__ import annotations

CYCLES = ("G0", "G1c", "G-single", "G-nonadjacent", "G2-item")

# model -> (weaker models it implies, anomalies it forbids itself)
MODELS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "read-uncommitted": ((), ("G0", "internal", "incompatible-order", "duplicate-elements")),
    "read-committed": (("read-uncommitted",), ("G1a", "G1b", "G1c")),
    "cursor-stability": (("read-committed",), ("lost-update",)),
    "monotonic-view": (("read-committed",), ()),
    "consistent-view": (("monotonic-view",), ("G-single",)),
    "snapshot-isolation": (("consistent-view", "cursor-stability"), ("G-nonadjacent",)),
    "repeatable-read": (("consistent-view", "cursor-stability"), ("G2-item",)),
    "serializable": (("snapshot-isolation", "repeatable-read"), ()),
    "strong-session-snapshot-isolation": (
        ("snapshot-isolation",), tuple(f"{c}-process" for c in CYCLES[:4])),
    "strong-session-serializable": (
        ("serializable", "strong-session-snapshot-isolation"), ("G2-item-process",)),
    "strong-snapshot-isolation": (
        ("strong-session-snapshot-isolation",), tuple(f"{c}-realtime" for c in CYCLES[:4])),
    "strict-serializable": (
        ("strong-session-serializable", "strong-snapshot-isolation"), ("G2-item-realtime",)),
}
"""The lattice. monotonic-view (Adya's PL-2L) is kept as a node for its place in the
order; no anomaly this checker finds is specific to it."""

_CASE_OF = {"G0": ("G1c",), "G-single": ("G-nonadjacent",), "G-nonadjacent": ("G2-item",)}


def _closure(anomaly: str) -> set[str]:
    """Return ``anomaly`` and every anomaly it is a case of."""
    base, variant = anomaly, ""
    for v in ("-process", "-realtime"):
        if anomaly.endswith(v):
            base, variant = anomaly[: -len(v)], v
    bases = {base}
    todo = [base]
    while todo:
        for b in _CASE_OF.get(todo.pop(), ()):
            if b not in bases:
                bases.add(b)
                todo.append(b)
    out = set()
    variants = {"": ("", "-process", "-realtime"), "-process": ("-process", "-realtime"),
                "-realtime": ("-realtime",)}[variant]
    for b in bases:
        if b in CYCLES:
            out.update(b + v for v in variants)
        else:
            out.add(b)
    return out


def forbidden(model: str) -> set[str]:
    """Return every anomaly ``model`` forbids (its own and its weaker models')."""
    weaker, own = MODELS[model]
    out = set(own)
    for w in weaker:
        out |= forbidden(w)
    return out


def weaker(model: str) -> set[str]:
    """Return every model strictly weaker than ``model``."""
    out: set[str] = set()
    for w in MODELS[model][0]:
        out |= {w} | weaker(w)
    return out


def verdict(anomaly_types: list[str] | set[str]) -> tuple[list[str], list[str], list[str]]:
    """Return ``(not, also_not, possible)``: the weakest models the anomalies rule out,
    every other model they rule out, and the models the history may still satisfy (each
    list in lattice order)."""
    present: set[str] = set()
    for a in anomaly_types:
        present |= _closure(a)
    ruled_out = [m for m in MODELS if forbidden(m) & present]
    out = set(ruled_out)
    weakest = [m for m in ruled_out if not (weaker(m) & out)]
    also = [m for m in ruled_out if m not in weakest]
    possible = [m for m in MODELS if m not in out]
    return weakest, also, possible

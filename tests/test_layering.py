"""Imports only point down the layering of DESIGN.md; nothing imports cli."""

from __future__ import annotations

import ast
from pathlib import Path

import replicalab

ROOT = Path(replicalab.__file__).parent
# Each part and the parts it may import (besides itself), from DESIGN.md "Layering":
# cli -> report -> workloads, faults, cluster -> checkers -> stores -> sim -> base;
# the middle row may use each other (the probe runner drives faults on a cluster);
# models are a sibling on the base layers and sim, used by report and cli.
BASE = {"history", "runtime", "regions"}
MIDDLE = {"workloads", "faults", "cluster"}
BELOW = {"checkers", "stores", "sim", *BASE}
SIBLINGS = {"models", "clt", "hlc", "counters", "watch", "queues", "placement"}
ALLOWED = {
    "cli": {"report", "scorecard", *SIBLINGS, *MIDDLE, *BELOW},
    "report": {"scorecard", *SIBLINGS, *MIDDLE, *BELOW},
    # seed 001's chart: composes workloads, faults and clusters into cells
    "scorecard": {*MIDDLE, *BELOW},
    "workloads": {*MIDDLE, *BELOW},
    "faults": {*MIDDLE, *BELOW},
    "cluster": {*MIDDLE, *BELOW},
    "checkers": {"stores", "sim", *BASE},
    "stores": {"sim", *BASE},
    "sim": BASE,
    "models": {"sim", "stores", *BASE},
    # siblings that need real servers or WAN links start them through cluster/
    "clt": {"hlc", "cluster", "checkers", *BASE},
    "hlc": BASE,
    "watch": {"stores", *BASE},
    "counters": {"cluster", "stores", "sim", *BASE},
    # the queue workload's central store is any Store; its checker is pure (checkers/)
    "queues": {"cluster", "stores", "sim", "checkers", "faults", *BASE},
    "placement": {"cluster", "stores", "sim", *BASE},
    # the conformance suite for store adapters: runs any Store through the registry
    "testing": {"stores", *BASE},
    "history": set(),
    "data": set(),  # package data (region matrices), no code
    "runtime": set(),
    "regions": set(),
}


def _part(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "replicalab" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_imports_point_down():
    bad = []
    for path in ROOT.rglob("*.py"):
        part = _part(path)
        if part not in ALLOWED:
            continue
        for target in _imports(path) - {part} - ALLOWED[part]:
            bad.append(f"{path.relative_to(ROOT)} imports replicalab.{target}")
    assert not bad, "\n".join(bad)


def test_every_part_has_its_place_in_the_layering():
    parts = {p.name.removesuffix(".py") for p in ROOT.iterdir()
             if (p.is_dir() and not p.name.startswith("_")) or
             (p.suffix == ".py" and p.name != "__init__.py")}
    assert parts - ALLOWED.keys() == set(), "add the new part to ALLOWED (and DESIGN.md)"

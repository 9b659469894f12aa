"""Run a scorecard: per store, start its cluster (none for sim://), run what each asked
property needs, turn the measurements into cells, stop the cluster; ``scorecard.json`` is
rewritten after every cell, so an interrupted run keeps every cell measured so far."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicalab.cluster import base
from replicalab.cluster.state import ROOT
from replicalab.experiments import cells, measure
from replicalab.experiments.durability import durability, leader
from replicalab.experiments.measure import Interrupted, Progress, Target
from replicalab.experiments.plan import PROPERTIES, Plan
from replicalab.experiments.promises import promise, store_kind
from replicalab.regions import region_set
from replicalab.stores import open_store

SCHEMA_VERSION = 1

_LOCAL_READS = {"redis": True, "postgres": True, "etcd": True, "zookeeper": False,
                "cassandra": True}
"""Whether the store's documentation promises eventual reads at a replica cut off from its
leader/primary (ZooKeeper's servers stop serving without a quorum; Cassandra's at ONE need
one live replica, its own)."""
_STRONG = {"redis": False, "postgres": False, "etcd": True, "zookeeper": True,
           "cassandra": False}
"""Whether the store's consistent read (as the adapter makes it) is promised linearizable:
etcd's linearizable read, ZooKeeper's sync + read (Cassandra's QUORUM read is not: only
SERIAL reads with lightweight transactions are)."""


@dataclass
class Scorecard:
    """A scorecard being filled: where it is saved, what was asked, the cells so far."""

    run_dir: Path
    kinds: tuple[str, ...]
    properties: tuple[str, ...]
    regions: str
    plan: Plan
    seed: int
    cells: list[cells.Cell] = field(default_factory=list)
    interrupted: bool = False
    errors: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    stores: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the scorecard as saved in scorecard.json."""
        return {"schema_version": SCHEMA_VERSION, "kinds": list(self.kinds),
                "properties": list(self.properties), "regions": self.regions,
                "plan": self.plan.to_json(), "seed": self.seed,
                "interrupted": self.interrupted, "errors": self.errors,
                "wall_s": round(self.wall_s, 1), "stores": self.stores,
                "cells": [c.to_json() for c in self.cells]}

    def save(self) -> Path:
        """Write scorecard.json and return its path."""
        path = self.run_dir / "scorecard.json"
        path.write_text(json.dumps(self.to_json(), indent=1, allow_nan=False) + "\n")
        return path

    def add(self, cell: cells.Cell) -> None:
        """Keep ``cell`` and save at once (an interruption keeps it)."""
        self.cells.append(cell)
        self.save()


def load(run_dir: Path) -> dict[str, Any]:
    """Return a saved scorecard.json (ValueError naming the fix if there is none)."""
    path = run_dir / "scorecard.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist; pass a scorecard run directory") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); re-run the scorecard") from None


def _nearest_rtt(regions: tuple[str, ...], set_name: str | None) -> dict[str, float]:
    if set_name is None or len(set(regions)) < 2:
        return {}
    rs = region_set(set_name)
    return {r: min(rs.rtt_ms[rs.index(r)][rs.index(o)] for o in rs.regions if o != r)
            for r in rs.regions if r in regions}


def _sim_target(url: str) -> tuple[Target, frozenset[str], str | None]:
    store = open_store(url, 1)
    info = store.info
    rs = info.params.get("regions") if isinstance(info.params.get("regions"), str) else None
    if rs is None and len(info.regions) > 1:
        rs = next((name for name in ("dc3", "aws5") if set(info.regions)
                   <= set(region_set(name).regions)), None)
    return (Target(url, url, None, tuple(info.regions), 0, info.regions[0],
                   tuple(info.regions)),
            frozenset(f.value for f in info.features), rs)


def _cluster_target(kind: str, regions: str, root: Path) -> Target:
    c = base.up(kind, 3, regions, name=f"scorecard-{kind}", root=root)
    i, role = leader(c.name, root)
    return Target(kind, c.url, c.name, region_set(regions).regions, i,
                  c.nodes[i].region, tuple(n.region for n in c.nodes), str(root),
                  leader_role="leader/primary" if role == "leader/primary" else "node")


def _add(sc: Scorecard, store: str, prop: str, make: Callable[[], cells.Cell]) -> None:
    """Add the cell ``make`` returns, or a grey one naming why it could not be measured."""
    try:
        sc.add(make())
    except ValueError as err:  # this property cannot run here: say why in its cell
        sc.add(cells.not_measured(store, prop, promise(store, prop), f"the run failed: {err}"))


def score_store(sc: Scorecard, store: str, tick: Callable[[str], Progress],
                root: Path = ROOT) -> None:
    """Measure every asked property of ``store`` into ``sc`` (its cluster is stopped
    however this ends). Durability runs first, on clusters of its own that are down before
    the main cluster starts (a kind on fixed ports, Cassandra, runs one cluster at a
    time)."""
    kind = store_kind(store)
    props = sc.properties
    lat: list[dict[str, Any]] = []
    if "durability" in props:
        _add(sc, store, "durability",
             lambda: _cell(sc, store, "durability", None, frozenset(), None, lat, tick, root))
    rest = [p for p in props if p != "durability"]
    if not rest:
        return
    target: Target | None = None
    try:
        tick(f"{store}: starting")
        if kind == "sim":
            target, features, rs_name = _sim_target(store)
        else:
            target = _cluster_target(store, sc.regions, root)
            features = frozenset(f.value for f in open_store(target.url, 1).info.features)
            rs_name = sc.regions
        sc.stores[store] = {"url": target.url.split("?")[0], "regions":
                            list(target.regions), "leader": target.leader,
                            "leader_region": target.leader_region,
                            "features": sorted(features)}
        for prop in rest:
            _add(sc, store, prop, lambda prop=prop: _cell(
                sc, store, prop, target, features, rs_name, lat, tick, root))
    finally:
        if target is not None and target.cluster is not None:
            base.down(target.cluster, root)


def _cell(sc: Scorecard, store: str, prop: str, target: Target | None,
          features: frozenset[str], rs_name: str | None, lat: list[dict[str, Any]],
          tick: Callable[[str], Progress], root: Path) -> cells.Cell:
    """Run what ``prop`` needs on ``store`` and return its cell (``lat`` caches the latency
    runs, which geography reads too)."""
    kind, out, p = store_kind(store), sc.run_dir / "runs", promise(store, prop)

    def step(what: str) -> Progress:
        return tick(f"{store}: {what}")

    if prop == "durability":
        if kind == "sim":
            return cells.not_measured(store, prop, p, "the simulated store keeps no disk: "
                                      "neither a kill -9 nor a power loss is modelled")
        m = durability(kind, sc.regions, sc.plan, sc.seed, out, sc.run_dir, step, root)
        return cells.durability_cell(store, m, p)
    assert target is not None
    if prop in ("latency", "geography") and not lat:
        lat.append(measure.latency(target, sc.plan, out, sc.run_dir, sc.seed, step))
    if prop == "latency":
        return cells.latency_cell(store, lat[0], p)
    if prop == "geography":
        near = _nearest_rtt(target.regions, rs_name)
        if not near:
            return cells.not_measured(store, prop, p, "one region: no WAN to place replicas "
                                      "across")
        return cells.geography_cell(store, lat[0], target.node_regions, near, p)
    if prop == "availability":
        m = measure.availability(target, sc.plan, out, sc.run_dir, sc.seed, step)
        return cells.availability_cell(store, m, p, _LOCAL_READS.get(kind, True))
    if prop == "consistency":
        m = measure.consistency(target, sc.plan, out, sc.run_dir, sc.seed, step)
        return cells.consistency_cell(store, m, p, _STRONG.get(kind, False))
    m = measure.transactionality(target, sc.plan, features, out, sc.run_dir, sc.seed, step)
    return cells.transactionality_cell(store, m, p)


def run(sc: Scorecard, tick: Callable[[str], Progress], root: Path = ROOT) -> Scorecard:
    """Fill ``sc`` store by store; a store that fails (its server would not start) gets its
    error recorded and the others go on; Ctrl-C stops at once with what was measured."""
    t0 = time.monotonic()
    try:
        for store in sc.kinds:
            try:
                score_store(sc, store, tick, root)
            except (ValueError, OSError) as err:
                sc.errors[store] = f"{type(err).__name__}: {err}"
                done = {c.prop for c in sc.cells if c.store == store}
                for prop in sc.properties:
                    if prop not in done:
                        sc.add(cells.not_measured(store, prop, promise(store, prop),
                                                  f"the run failed: {err}"))
    except (KeyboardInterrupt, Interrupted):
        sc.interrupted = True
    finally:
        sc.wall_s = time.monotonic() - t0
        sc.save()
    return sc


def order(sc: dict[str, Any]) -> list[tuple[str, list[dict[str, Any] | None]]]:
    """Return rows (store, cells in PROPERTIES order; None where not measured yet)."""
    by = {(c["store"], c["prop"]): c for c in sc["cells"]}
    return [(k, [by.get((k, p)) for p in sc["properties"]]) for k in sc["kinds"]]


__all__ = ["PROPERTIES", "Scorecard", "load", "order", "run", "score_store"]

"""Run a scorecard: per store, start its cluster (none for sim://), run what each asked
property needs, turn the measurements into cells, stop the cluster; ``scorecard.json`` is
rewritten after every cell, so an interrupted run keeps every cell measured so far.

Ctrl-C (or SIGTERM) stops the run at once, whatever code it lands in: an interrupt this
process received since the run began is looked for after every cell, so one that a part
caught and carried on from (saving what it had, say) still ends the run. The clusters a
scorecard starts are named ``<name>-<kind>`` (``--name``, default ``scorecard``); one of
that name whose processes are gone (a run killed before it could remove it) is replaced."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicalab.cluster import base
from replicalab.cluster.kinds import StoreKind
from replicalab.cluster.process import interrupts_deferred
from replicalab.cluster.state import ROOT, check_name
from replicalab.experiments import cells, properties
from replicalab.experiments.measure import Interrupted, Progress, Target
from replicalab.experiments.plan import RENAME, Plan, Subject, resolve_store
from replicalab.experiments.promises import sim_rules
from replicalab.experiments.property import Context, NotMeasured, Property
from replicalab.history.rundir import make_run_dir
from replicalab.regions import region_set
from replicalab.runtime import interrupts
from replicalab.stores import open_store
from replicalab.stores.base import redact_url

SCHEMA_VERSION = 1


@dataclass
class Scorecard:
    """A scorecard being filled: where it is saved, what was asked, the cells so far.
    ``kinds`` are the rows: store texts (``redis``, ``zk``, a sim:// URL), resolved here
    once into ``subjects``, or subjects resolved already; it then holds their labels."""

    run_dir: Path
    kinds: tuple[str | Subject, ...]
    properties: tuple[str, ...]
    regions: str
    plan: Plan
    seed: int
    hosts: str | None = None  # inventory the clusters run on (None: loopback)
    cells: list[cells.Cell] = field(default_factory=list)
    interrupted: bool = False
    errors: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    stores: dict[str, dict[str, Any]] = field(default_factory=dict)
    name: str = "scorecard"
    subjects: tuple[Subject, ...] = field(init=False)

    def __post_init__(self) -> None:
        # ``kinds`` may be given as text (resolved here, once) or as resolved stores
        check_name(self.name)
        self.subjects = tuple(k if isinstance(k, Subject) else resolve_store(k)
                              for k in self.kinds)
        self.kinds = tuple(s.label for s in self.subjects)

    def to_json(self) -> dict[str, Any]:
        """Return the scorecard as saved in scorecard.json."""
        return {"schema_version": SCHEMA_VERSION, "kinds": list(self.kinds),
                "properties": list(self.properties), "regions": self.regions,
                "plan": self.plan.to_json(), "seed": self.seed,
                "interrupted": self.interrupted, "errors": self.errors,
                "hosts": self.hosts,
                "wall_s": round(self.wall_s, 1), "stores": self.stores, "name": self.name,
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

    def unmeasured(self) -> list[str]:
        """Return what could not be measured because a run failed, one line each ("redis
        durability: the run failed: ..."); a property that does not apply to a store (a
        simulation keeps no disk) is not listed. Empty for a complete scorecard."""
        return unmeasured(self.to_json())


def begin(out: Path, stores: tuple[Subject, ...], props: tuple[str, ...], regions: str,
          plan: Plan, seed: int, name: str = "scorecard", hosts: str | None = None
          ) -> Scorecard:
    """Return a new scorecard of ``stores`` in a fresh run directory under ``out``, its
    (empty) scorecard.json saved (ValueError naming ``--out`` if it cannot be written).
    A Ctrl-C that comes meanwhile is counted, not raised (:func:`run` with the count taken
    before this call stops before the first store and saves the scorecard interrupted):
    raised here it would leave the caller no scorecard to mark. ``hosts``: the inventory
    its clusters run on."""
    with interrupts_deferred():
        run_dir = make_run_dir(out, "scorecard", "-".join(
            "sim" if s.kind is None else s.label for s in stores))
        (run_dir / "runs").mkdir(exist_ok=True)
        sc = Scorecard(run_dir, stores, props, regions, plan, seed, hosts, name=name)
        sc.save()
    return sc


def load(run_dir: Path) -> dict[str, Any]:
    """Return a saved scorecard.json (ValueError naming the fix if there is none)."""
    path = run_dir / "scorecard.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist; pass a scorecard run directory") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); re-run the scorecard") from None


def unmeasured(sc: dict[str, Any]) -> list[str]:
    """Return the failed cells of a saved scorecard (see :meth:`Scorecard.unmeasured`)."""
    return [f"{c['store']} {c['prop']}: {c['reason']}" for c in sc["cells"]
            if c.get("failed")]


def unmeasured_line(sc: dict[str, Any]) -> str:
    """Return the line a scorecard with failed cells ends on: how many, the first one's
    reason (which names its fix), and the command that measures just those again; "" when
    every cell was measured or does not apply."""
    failed = [c for c in sc["cells"] if c.get("failed")]
    if not failed:
        return ""
    stores = ",".join(dict.fromkeys(c["store"] for c in failed))
    props = ",".join(p for p in sc["properties"] if any(c["prop"] == p for c in failed))
    n = len(failed)
    again = f"replicalab scorecard --kinds '{stores}' --only {props}" + (
        f" --name {sc['name']}" if sc.get("name", "scorecard") != "scorecard" else "") + (
        f" --hosts {sc['hosts']}" if sc.get("hosts") else "")
    return (f"{n} cell{'s' if n > 1 else ''} could not be measured; {failed[0]['store']} "
            f"{failed[0]['prop']}: {failed[0]['reason']}; once fixed, `{again}` measures "
            f"{'them' if n > 1 else 'it'} again")


def _stop_if_interrupted(since: int) -> None:
    """Raise :class:`Interrupted` if this process received an interrupt since the count was
    ``since`` (one caught by a part that carried on still ends the run)."""
    if interrupts.count() > since:
        raise Interrupted


def _sim_target(url: str) -> tuple[Target, frozenset[str], str | None]:
    store = open_store(url, 1)
    info = store.info
    rs = info.params.get("regions") if isinstance(info.params.get("regions"), str) else None
    if rs is None and len(info.regions) > 1:
        rs = next((name for name in ("dc3", "aws5") if set(info.regions)
                   <= set(region_set(name).regions)), None)
    role = sim_rules(info.params, tuple(info.regions)).leader_role
    return (Target(url, url, None, tuple(info.regions), 0, info.regions[0],
                   tuple(info.regions), leader_role=role),
            frozenset(f.value for f in info.features), rs)


def _cluster_target(kind: StoreKind, regions: str, root: Path, name: str,
                    hosts: str | None = None) -> Target:
    c = base.up(kind.name, 3, regions, name=f"{name}-{kind.name}", root=root, hosts=hosts,
                replace_stale=True, rename=RENAME)
    lead = base.find_leader(c.name, root)
    return Target(kind.name, c.url, c.name, region_set(regions).regions, lead.index,
                  lead.region, tuple(n.region for n in c.nodes), str(root),
                  leader_role=kind.leader_word if lead.is_leader else
                  "coordinator" if kind.leaderless else "node")


def _add(sc: Scorecard, ctx: Context, prop: Property) -> None:
    """Measure and grade ``prop`` into ``sc``: a grey cell naming why where it cannot be
    measured on this store or its run failed."""
    label, p = ctx.subject.label, prop.promise_for(ctx.subject.kind)
    try:
        cell = prop.grade(ctx, prop.measure(ctx), p)
    except NotMeasured as why:
        cell = cells.not_measured(label, prop.name, p, str(why))
    except ValueError as err:  # its run failed: say why in its cell
        cell = cells.not_measured(label, prop.name, p, f"the run failed: {err}", failed=True)
    sc.add(cell)


def score_store(sc: Scorecard, subject: Subject, tick: Callable[[str], Progress],
                root: Path = ROOT) -> None:
    """Measure every asked property of ``subject`` into ``sc`` (its cluster is stopped
    however this ends). Properties with clusters of their own (durability) run first, on
    clusters that are down before the main cluster starts (a kind on fixed ports,
    Cassandra, runs one cluster at a time)."""
    asked = [properties.get(p) for p in sc.properties]
    ctx = Context(subject, sc.plan, sc.seed, sc.regions, sc.run_dir / "runs", sc.run_dir,
                  root, tick, hosts=sc.hosts, name=sc.name)
    since = interrupts.count()
    for prop in asked:
        if not prop.needs_cluster:
            _add(sc, ctx, prop)
            _stop_if_interrupted(since)
    rest = [p for p in asked if p.needs_cluster]
    if not rest:
        return
    try:
        tick(f"{subject.label}: starting")
        if subject.kind is None:
            ctx.target, ctx.features, ctx.rs_name = _sim_target(subject.label)
        else:
            ctx.target = _cluster_target(subject.kind, sc.regions, root, sc.name, sc.hosts)
            ctx.features = frozenset(f.value for f in open_store(ctx.target.url, 1).info.features)
            ctx.rs_name = sc.regions
        t = ctx.target
        sc.stores[subject.label] = {"url": redact_url(t.url.split("?")[0]),  # s3:// has a secret
                                    "regions": list(t.regions), "leader": t.leader,
                                    "leader_region": t.leader_region,
                                    "features": sorted(ctx.features)}
        if subject.kind is not None:
            sc.stores[subject.label]["capabilities"] = subject.kind.capabilities(ctx.features)
        for prop in rest:
            _stop_if_interrupted(since)
            _add(sc, ctx, prop)
        _stop_if_interrupted(since)
    finally:
        if ctx.target is not None and ctx.target.cluster is not None:
            base.down(ctx.target.cluster, root)


def run(sc: Scorecard, tick: Callable[[str], Progress], root: Path = ROOT,
        since: int | None = None) -> Scorecard:
    """Fill ``sc`` store by store; a store that fails (its server would not start) gets its
    error recorded and the others go on; Ctrl-C stops at once with what was measured.
    ``since``: the interrupt count when the scorecard began (default: now), so that one
    received before this call still stops it."""
    t0 = time.monotonic()
    since = interrupts.count() if since is None else since
    try:
        _stop_if_interrupted(since)  # one that came before this call: measure nothing
        for subject in sc.subjects:
            try:
                score_store(sc, subject, tick, root)
            except (ValueError, OSError) as err:
                store = subject.label
                sc.errors[store] = f"{type(err).__name__}: {err}"
                done = {c.prop for c in sc.cells if c.store == store}
                for name in sc.properties:
                    if name not in done:
                        p = properties.get(name).promise_for(subject.kind)
                        sc.add(cells.not_measured(store, name, p, f"the run failed: {err}",
                                                  failed=True))
            _stop_if_interrupted(since)
    except (KeyboardInterrupt, Interrupted):
        sc.interrupted = True
    finally:
        sc.wall_s = time.monotonic() - t0
        sc.save()
    return sc


def order(sc: dict[str, Any]) -> list[tuple[str, list[dict[str, Any] | None]]]:
    """Return rows (store, cells in the order of its properties; None where not measured
    yet)."""
    by = {(c["store"], c["prop"]): c for c in sc["cells"]}
    return [(k, [by.get((k, p)) for p in sc["properties"]]) for k in sc["kinds"]]


__all__ = ["Scorecard", "begin", "load", "order", "run", "score_store", "unmeasured",
           "unmeasured_line"]

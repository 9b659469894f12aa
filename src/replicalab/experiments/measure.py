"""The runs behind each cell of one store's row: probes of existing workloads, with faults,
on a store that is already up. Every run is saved as a sub-run (its own run directory);
what is kept here is the figures a cell shows and where they came from."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.cluster import base as cluster_base
from replicalab.experiments import figures
from replicalab.experiments.plan import Plan
from replicalab.faults.schedule import Fault
from replicalab.history import NEMESIS, load_history
from replicalab.history.rundir import Run
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.latency import LatencyConfig
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import StalenessConfig

Progress = Callable[[float], None] | None


@dataclass
class Target:
    """One store as the scorecard probes it: its row name, URL, the cluster faults act on
    (None for sim://), its regions in order and where its leader/primary sits."""

    store: str
    url: str
    cluster: str | None
    regions: tuple[str, ...]
    leader: int = 0
    leader_region: str | None = None
    node_regions: tuple[str, ...] = ()
    cluster_root: str = ".replicalab"
    notes: list[str] = field(default_factory=list)
    # what the node a "leader crash" takes is to this store: "leader", "primary"; for a
    # leaderless store the writer's "coordinator" (Cassandra) or a "replica" (sim://quorum)
    leader_role: str = "leader"

    @property
    def writer_region(self) -> str:
        """Return the writer's region: the first (where Redis's and PostgreSQL's primary
        sits), as in ``compare``."""
        return self.regions[0]

    @property
    def reader_region(self) -> str:
        """Return the remote readers' region: the second, as in ``compare``."""
        return self.regions[1 % len(self.regions)]


class Interrupted(KeyboardInterrupt):
    """A sub-run was cut short by Ctrl-C or SIGTERM: its directory is saved, stop here."""


def probe(spec: ProbeSpec, out: Path, progress: Progress = None) -> Run:
    """Run ``spec`` under ``out``; raise :class:`Interrupted` if it was cut short (its
    history saved unchecked, at once: no cell is made of it, and the command must end
    within a second)."""
    run = run_probe(spec, out, progress, check_interrupted=False)
    if run.interrupted:
        raise Interrupted
    return run


def rel(run: Run, base: Path) -> str:
    try:
        return str(run.run_dir.relative_to(base))
    except ValueError:
        return str(run.run_dir)


def latency(t: Target, plan: Plan, out: Path, base: Path, seed: int,
            progress: Callable[[str], Progress]) -> dict[str, Any]:
    """Return per region the latency workload's variants (count, p50/p99/p99.9 ms)."""
    per_region, runs = {}, []
    for region in t.regions:
        run = probe(ProbeSpec(store=t.url, workload="latency",
                              config=LatencyConfig(ops=plan.latency_ops, region=region),
                              options=ProbeOptions(duration_s=120, seed=seed)), out,
                    progress(f"latency from {region}"))
        per_region[region] = figures.latency(run.results)
        runs.append(rel(run, base))
    return {"regions": per_region, "runs": runs}


def staleness_spec(t: Target, plan: Plan, consistency: str, seed: int,
                   faults: tuple[Fault, ...] = (), duration_s: float | None = None,
                   writer: str | None = None, reader: str | None = None,
                   placement: str = "separate-clients",
                   write_interval_s: float = 1.0) -> ProbeSpec:
    """Return the staleness probe ``compare`` runs (writer in the first region, reader at
    the second region's replica, a write a second, 50 reads a second), with ``faults``."""
    return ProbeSpec(store=t.url, workload="staleness", options=ProbeOptions(
        consistency=consistency, duration_s=duration_s or plan.staleness_s,
        write_interval_s=write_interval_s, read_rate=50, period_s=1.0, seed=seed),
        config=StalenessConfig(placement=placement, writer_region=writer or t.writer_region,
                               reader_region=reader or t.reader_region),
        cluster=t.cluster if faults else None, cluster_root=t.cluster_root, faults=faults)


def staleness_figures(results: dict[str, Any]) -> dict[str, Any]:
    """Return a consistency cell's figures of one staleness probe: reads, stale fraction and
    window (from :mod:`figures`, as ``compare``'s are) and monotonic-read violations."""
    mr = results["monotonic_reads"]
    return {**figures.staleness(results), "monotonic_violations": mr["violations"],
            "monotonic_pairs": mr["pairs"]}


def consistency(t: Target, plan: Plan, out: Path, base: Path, seed: int,
                progress: Callable[[str], Progress]) -> dict[str, Any]:
    """Return staleness at the remote replica (eventual and consistent reads), the session
    guarantees of one client there, and the register test's verdicts."""
    res: dict[str, Any] = {"runs": []}
    # a quick run writes more often than compare (a write each 0.5 s): the first write of a
    # run creates the key (on ZooKeeper its parents too) and reads waiting for it count as
    # stale, which would weigh a quarter of a 4 s run at one write a second
    every_s = plan.staleness_write_interval_s
    for c in ("eventual", "consistent"):
        run = probe(staleness_spec(t, plan, c, seed, write_interval_s=every_s), out,
                    progress(f"staleness, {c} reads"))
        res[c] = {**staleness_figures(run.results), "run": rel(run, base)}
        res["runs"].append(rel(run, base))
    run = probe(staleness_spec(t, plan, "eventual", seed, placement="same-client",
                               writer=t.reader_region, reader=t.reader_region,
                               write_interval_s=every_s), out,
                progress("read-your-writes, one client"))
    ryw, mr = run.results["read_your_writes"], run.results["monotonic_reads"]
    res["session"] = {"region": t.reader_region, "ryw_reads": ryw["reads"],
                      "ryw_violations": ryw["violations"], "mr_pairs": mr["pairs"],
                      "mr_violations": mr["violations"], "run": rel(run, base)}
    res["runs"].append(rel(run, base))
    for c in ("eventual", "consistent"):
        run = probe(ProbeSpec(store=t.url, workload="register", options=ProbeOptions(
            consistency=c, duration_s=plan.register_s, seed=seed),
            config=RegisterConfig(keys=3, clients=6, writer_region=t.writer_region,
                                  reader_region=t.reader_region, check_timeout_s=30.0)),
            out, progress(f"register test, {c} reads"))
        lin = run.results["linearizability"]
        why = next((p.get("explanation") for p in lin["parts"] if p.get("explanation")), "")
        res[f"register_{c}"] = {"valid": lin["valid"], "ops": lin["ops"],
                                "keys_not_linearizable": lin["keys_not_linearizable"],
                                "explanation": why, "run": rel(run, base)}
        res["runs"].append(rel(run, base))
    return res


def recovery_ms(run_dir: Path) -> float | None:
    """Return ms from the last heal until every client that failed during the fault had an
    ok operation again (0 if none failed; None if one never recovered or no heal)."""
    h, _ = load_history(run_dir)
    proc, types = h.column("process"), h.types()
    heals = [i for i in np.flatnonzero(proc == NEMESIS).tolist()
             if h.f[i] == h.f_code("heal") and types[i] == 1]
    if not heals:
        return None
    heal_ns = int(h.column("complete_ns")[heals[-1]])
    comp = h.column("complete_ns")
    worst = 0.0
    for p in sorted(set(proc[proc >= 0].tolist())):
        mine = proc == p
        if not (mine & (types != 1) & (types != 0)).any():
            continue
        later = comp[mine & (types == 1) & (comp >= heal_ns)]
        if not len(later):
            return None
        worst = max(worst, (int(later.min()) - heal_ns) / 1e6)
    return round(worst, 1)


def _fault_run(t: Target, plan: Plan, fault: Fault, consistency_: str, region: str,
               out: Path, base: Path, seed: int, progress: Progress) -> dict[str, Any]:
    """Run one availability probe under ``fault``: with eventual reads both clients sit in
    ``region`` (reads at its replica, writes from it); with consistent reads the placement
    is exactly ``compare``'s (writer in the first region, reader in ``region``), so the
    consistent-read figure is the one ``compare --fault`` measures."""
    writer = region if consistency_ == "eventual" else t.writer_region
    run = probe(staleness_spec(t, plan, consistency_, seed, (fault,), plan.fault_probe_s,
                               writer=writer, reader=region), out, progress)
    return {**fault_figures(run.results), "writer_region": writer,
            "recovery_ms": recovery_ms(run.run_dir),
            "lost_writes": run.results["lost_writes"]["lost"], "run": rel(run, base)}


def fault_figures(results: dict[str, Any]) -> dict[str, Any]:
    """Return an availability cell's figures of one staleness probe under a fault: reads'
    and writes' availability by time while the fault lasted (the issue's "while that
    region is cut off"), over the whole run (which mixes in the recovery after the heal,
    varying run to run) and by op count; from :mod:`figures`, as ``compare``'s are."""
    reads = figures.availability(results, "read")
    writes = figures.availability(results, "write")
    return {"reads": reads["during"], "writes": writes["during"],
            "reads_run": reads["run"], "writes_run": writes["run"],
            "reads_ops": reads["ops"], "writes_ops": writes["ops"]}


def current_leader(t: Target) -> int | None:
    """Return the node index that leads ``t``'s cluster now (None for sim://, or for a
    store without a leader: its stand-in node stays ``t.leader``)."""
    if t.cluster is None or t.leader_role not in ("leader", "primary"):
        return None
    deadline = time.monotonic() + 15.0  # an election after the last fault may still run
    while True:
        lead = cluster_base.find_leader(t.cluster, Path(t.cluster_root))
        if lead.is_leader or time.monotonic() > deadline:
            return lead.index if lead.is_leader else None
        time.sleep(0.25)


def availability(t: Target, plan: Plan, out: Path, base: Path, seed: int,
                 progress: Callable[[str], Progress]) -> dict[str, Any]:
    """Return availability by time of reads (eventual, consistent) and writes from a cut-off
    region and while the leader/primary is crashed, each with its recovery after the heal."""
    res: dict[str, Any] = {"runs": [], "faults": []}
    cut = t.regions if plan.all_cut_regions else t.regions[1:2]
    if len(set(t.regions)) < 2:
        cut = ()
        res["notes"] = ["one region only: no region to cut off"]
    faults = [(f"{r} cut off", Fault("partition", plan.fault_at_s, plan.fault_for_s,
                                     region=r), r, {"cut_region": r}) for r in cut]
    faults.append((f"{t.leader_role} n{t.leader} down",
                   Fault("crash", plan.fault_at_s, plan.fault_for_s, node=t.leader),
                   t.reader_region, {"crashed_node": t.leader, "crashed_role": t.leader_role}))
    for label, fault, region, what in faults:
        entry: dict[str, Any] = {"fault": label, "region": region,
                                 "window": f"{fault.at_s:g}s-{fault.at_s + fault.for_s:g}s",
                                 **what}
        for c in ("eventual", "consistent"):
            # an earlier fault (a region cut off, this fault's own first run) may have moved
            # the leader: ask where it is now, and crash that node, not the one that led when
            # the cluster started
            lead = current_leader(t)
            if "crashed_node" in what and lead is not None:
                fault = Fault("crash", fault.at_s, fault.for_s, node=lead)
            r = _fault_run(t, plan, fault, c, region, out, base, seed,
                           progress(f"{label}, {c} reads"))
            r["leader_before"] = t.leader if lead is None else lead
            if "crashed_node" in what:
                r["crashed_node"] = fault.node
            entry[c] = r
            res["runs"].append(r["run"])
        if "crashed_node" in what:
            entry["crashed_node"] = entry["eventual"]["crashed_node"]
            entry["fault"] = f"{t.leader_role} n{entry['crashed_node']} down"
            if entry["consistent"]["crashed_node"] != entry["crashed_node"]:
                entry["crashed_nodes"] = [entry["eventual"]["crashed_node"],
                                          entry["consistent"]["crashed_node"]]
                entry["fault"] = (f"{t.leader_role} n{entry['crashed_node']}, then "
                                  f"n{entry['consistent']['crashed_node']} down")
        res["faults"].append(entry)
    return res

"""Durability runs: acknowledged writes lost after a kill -9 of the leader/primary and after
a power loss of every node, with each server's data on its own power-loss file system, under
the store's setting as the lab configures it and under its documented alternatives.

One writer writes as fast as the plan says; the fault comes at the end of the writes (the
run ends just after it, the nodes restart after the run, so no write acknowledged after the
fault can hide an earlier one); the runner then reads every key back (retrying while the
store recovers) and ``lost_writes`` counts the acknowledged writes newer than what survived.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replicalab.cluster import base
from replicalab.cluster.kinds import DurabilityVariant, StoreKind
from replicalab.cluster.state import ROOT, load
from replicalab.experiments.measure import Progress, probe
from replicalab.experiments.plan import RENAME, Plan
from replicalab.faults.schedule import Fault
from replicalab.stores import StoreError, open_store
from replicalab.stores.base import redact_url
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec
from replicalab.workloads.staleness import StalenessConfig

AFTER_FAULT_S = 0.3
"""How long the writer keeps trying after the fault (its writes fail: the run shows it)."""
POWER_OFF_S = 1.5
"""When the nodes restart after the fault; after the run's end, so the run ends first."""


def variants(kind: StoreKind, plan: Plan) -> tuple[DurabilityVariant, ...]:
    """Return the settings a scorecard of ``plan`` compares for ``kind``."""
    return tuple(v for v in kind.durability if v.quick or not plan.quick)


READY_WAIT_S = 90.0
"""How long a durability cluster may take to accept writes again after the last fault."""
READY_KEY = "scorecard/ready/probe"


def wait_writable(url: str, timeout_s: float = READY_WAIT_S) -> None:
    """Return once ``url`` acknowledges a write (a cluster restarted by the previous run
    may still be electing or recovering); ValueError naming the wait if it never does."""

    async def attempt() -> bool:
        store = open_store(url, 1)
        try:
            client = await store.connect()
            try:
                await client.write({READY_KEY: "1"})
                await client.delete([READY_KEY])
                return True
            finally:
                await client.close()
        except (StoreError, ValueError, OSError, TimeoutError):
            return False  # not up yet
        finally:
            await store.close()

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if asyncio.run(attempt()):
            return
        time.sleep(0.5)
    raise ValueError(f"{redact_url(url)} did not accept a write within {timeout_s:g} s after "
                     "its restart; see the servers' logs in the cluster directory")


def _run(url: str, cluster: str, fault: Fault, plan: Plan, writer_region: str | None, seed: int,
         out: Path, base_dir: Path, root: Path, progress: Progress) -> dict[str, Any]:
    wait_writable(url)
    spec = ProbeSpec(store=url, workload="staleness", options=ProbeOptions(
        duration_s=plan.durability_s + AFTER_FAULT_S,
        write_interval_s=plan.durability_write_interval_s, read_rate=5.0, period_s=1.0,
        seed=seed), config=StalenessConfig(placement="same-client",
                                           writer_region=writer_region),
        cluster=cluster, cluster_root=str(root), faults=(fault,))
    run = probe(spec, out, progress)
    lw = run.results["lost_writes"]
    checked = lw["checked"] and lw["keys"] > 0
    entry: dict[str, Any] = {
        "checked": checked, "recovered": checked,
        "acknowledged": lw["acknowledged"] if checked else run.results["ops"]["writes"],
        "lost": lw["lost"], "error": run.error,
        "run": str(run.run_dir.relative_to(base_dir)) if run.run_dir.is_relative_to(base_dir)
        else str(run.run_dir)}
    if not checked:
        # no read succeeded for FINAL_SETTLE_S after the restart: say what the servers said
        entry["complaints"] = server_complaints(cluster, root)
        if lw.get("why"):
            entry["why"] = lw["why"]
    return entry


def server_complaints(name: str, root: Path, limit: int = 3) -> list[str]:
    """Return, per node, the last "Caused by" line of its server.log, else its last ERROR
    line (what a server that would not come back said), at most ``limit``."""
    out = []
    for node in load(name, root).nodes:
        log = Path(node.data_dir) / "server.log"
        try:
            lines = log.read_text(errors="replace").splitlines()[-400:]
        except OSError:
            continue
        cause = [x.strip() for x in lines if x.lstrip().startswith("Caused by")]
        bad = cause or [x.strip() for x in lines if "ERROR" in x or "FATAL" in x]
        if bad:
            out.append(f"n{node.index}: {bad[-1][:300]}")
    return out[:limit]


def durability(kind: StoreKind, regions: str, plan: Plan, seed: int, out: Path, base_dir: Path,
               progress: Callable[[str], Progress], root: Path = ROOT,
               name: str = "scorecard") -> dict[str, Any]:
    """Return, per setting, the acknowledged writes lost under a kill -9 of the leader and
    under a power loss of every node (each with its sub-run), on clusters named
    ``<name>-<kind>-durability-<n>``."""
    res: dict[str, Any] = {"variants": [], "runs": []}
    clusters: dict[tuple[tuple[str, str], ...], str] = {}
    todo = variants(kind, plan)
    try:
        for n, v in enumerate(todo):
            if v.settings not in clusters:
                progress(f"durability: starting {kind.name} on power-loss file systems "
                         f"({v.label})")
                c = base.up(kind.name, 3, regions,
                            name=f"{name}-{kind.name}-durability-{n}", root=root,
                            settings=dict(v.settings), power_loss_fs=True,
                            replace_stale=True, rename=RENAME)
                clusters[v.settings] = c.name
            cname = clusters[v.settings]
            c = load(cname, root)
            url = c.url + (f"&{v.url_params}" if v.url_params else "")
            entry: dict[str, Any] = {"label": v.label, "promise": v.promise,
                                     "source": v.source, "keeps_on_kill": v.keeps_on_kill,
                                     "keeps_on_power_loss": v.keeps_on_power_loss}
            lead = base.find_leader(cname, root)
            leader_i = lead.index
            res["killed"] = f"the {kind.leader_word}" if lead.is_leader \
                else f"the writer's coordinator n{leader_i} (there is no leader)"
            for key, fault in (("kill", Fault("crash", plan.durability_s, POWER_OFF_S,
                                              node=leader_i)),
                               ("power_loss", Fault("power-loss", plan.durability_s,
                                                    POWER_OFF_S))):
                what = f"kill -9 of {res['killed']}" if key == "kill" else "power loss"
                # the client in no region reaches every node directly: placed in a region,
                # its reads of the nearest replica (another region) would pace its writes
                # by a WAN round trip; what survives is what is counted
                entry[key] = _run(url, cname, fault, plan, None, seed, out,
                                  base_dir, root, progress(f"durability, {v.label}: {what}"))
                entry[key]["fault"] = f"{fault.label} at {fault.at_s:g}s"
                res["runs"].append(entry[key]["run"])
            res["variants"].append(entry)
            if all(later.settings != v.settings for later in todo[n + 1:]):
                # no later setting needs this cluster: one on power-loss file systems at a
                # time (three Cassandra JVMs each on a 2-core machine); forgotten once it
                # is down, so that a Ctrl-C meanwhile still has it removed on the way out
                base.down(cname, root)
                del clusters[v.settings]
    finally:
        if clusters:
            with contextlib.suppress(ValueError):  # down already (a Ctrl-C came just after)
                base.down_many(list(clusters.values()), root)
    return res

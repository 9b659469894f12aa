"""Carry out faults on a running cluster and record them in the history as nemesis ops.

crash: SIGKILL the node's process group, restart it from its data directory when the fault
ends. power-loss (the node, the region's nodes, or every node when no target is named):
SIGKILL their servers at once, drop what their power-loss file systems never synced and
mount them again; restart the servers when the fault ends (the cluster must have been
started with its data on those file systems: ``cluster up --power-loss-fs``).
pause: SIGSTOP, then SIGCONT. partition: a timeout toxic on every proxied link to or
from the node (or every link crossing the region's border), removed at the end. slow: add
``ms`` to both directions of those links, restored at the end.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from replicalab.cluster import base, loopback, placement, powerloss, process
from replicalab.cluster.state import Cluster, Link, load
from replicalab.cluster.toxiproxy import Toxiproxy
from replicalab.faults.hosts import HostNemesis
from replicalab.faults.schedule import Fault, check_cluster_faults
from replicalab.history import NEMESIS, History
from replicalab.runtime import Runtime


@dataclass
class Nemesis:
    """Acts on the cluster ``name`` saved under ``root``."""

    name: str
    root: Path
    held: dict[int, int] = field(default_factory=dict)
    """Per fault (its id), the fd of the shared lock on the cluster's loopback block held
    while its servers are down (see :meth:`_hold_block`)."""
    on_hosts: HostNemesis | None = None
    """The nemesis of a cluster on hosts (faults/hosts.py), made on first use."""

    def _hosts(self, c: Cluster) -> HostNemesis | None:
        if not placement.on_hosts(c):
            return None
        if self.on_hosts is None:
            self.on_hosts = HostNemesis(self.root)
        return self.on_hosts

    def cluster(self) -> Cluster:
        """Return the cluster as saved now (pids change on restart)."""
        return load(self.name, self.root)

    def check(self, faults: list[Fault]) -> None:
        """Raise ValueError if a fault names a node or region the cluster does not have."""
        check_cluster_faults(faults)
        c = self.cluster()
        regions = {n.region for n in c.nodes}
        for f in faults:
            if f.node is not None and f.node >= len(c.nodes):
                raise ValueError(f"fault {f.label!r}: cluster {c.name} has nodes n0..n"
                                 f"{len(c.nodes) - 1}")
            if f.region is not None and f.region not in regions:
                raise ValueError(f"fault {f.label!r}: cluster {c.name} has regions "
                                 f"{', '.join(sorted(regions))}")
            on_hosts = self._hosts(c)
            if on_hosts is not None:
                on_hosts.check(c, f)
                continue
            if f.action == "power-loss" and not base.power_loss_mounts(c):
                raise ValueError(f"fault {f.label!r}: cluster {c.name}'s data is not on the "
                                 "power-loss file system; start it with `replicalab cluster "
                                 f"up {c.kind} --power-loss-fs`")
            if f.action in ("partition", "slow") and not self._links(c, f):
                raise ValueError(f"fault {f.label!r}: no proxied link touches that target, so "
                                 "it cannot be cut or slowed")

    @staticmethod
    def _links(c: Cluster, f: Fault) -> list[Link]:
        if f.node is not None:
            me = f"n{f.node}"
            return [x for x in c.links if me in (x.src, x.dst)]
        return [x for x in c.links if (x.src_region == f.region) != (x.dst_region == f.region)]

    def _nodes(self, c: Cluster, f: Fault) -> list[int]:
        if f.node is None and f.region is None:
            return [n.index for n in c.nodes]
        return [f.node] if f.node is not None else [n.index for n in c.nodes
                                                     if n.region == f.region]

    def _power_loss(self, c: Cluster, f: Fault) -> None:
        """Kill the target nodes' servers at once, then drop what their file systems never
        synced and mount them again (the lost pages are logged beside each mount)."""
        nodes = self._nodes(c, f)
        for i in nodes:
            process.signal_group(c.nodes[i].pid, signal.SIGKILL)
        for i in nodes:
            process.kill9(c.nodes[i].pid)  # waits until it is gone
        mounts = base.power_loss_mounts(c)
        for i in nodes:
            data = Path(c.nodes[i].data_dir)
            log = data.with_name(data.name + ".powerfs.log")
            new, (pages, files) = powerloss.power_loss(mounts[i], log)
            with log.open("a") as out:
                out.write(f"replicalab: power loss dropped {pages} unsynced pages of "
                          f"{files} files\n")
            c.extra["powerfs"][str(i)] = new.to_json()
            self._leave_with_cluster(c, [new.pid])
        c.save(self.root)

    @staticmethod
    def _leave_with_cluster(c: Cluster, pids: list[int]) -> None:
        """Hand ``pids`` (a restarted server, a remounted file system) over to the cluster
        when this process does not own the cluster (``cluster up`` handed it over): they
        must outlive this command, as the rest of the cluster does."""
        if c.toxiproxy_pid and c.toxiproxy_pid not in process.owned():
            process.release(pids)

    def _hold_block(self, c: Cluster, f: Fault) -> None:
        """Keep the cluster's loopback block (Cassandra) claimed while ``f`` has its servers
        down: their wrappers held it, and with every node down another cluster starting
        then would claim the block and take the addresses the nodes restart on."""
        lock = c.extra.get("lock")
        if lock and id(f) not in self.held:
            self.held[id(f)] = loopback.hold_shared(Path(str(lock)))

    def _release_block(self, f: Fault) -> None:
        fd = self.held.pop(id(f), None)
        if fd is not None:
            os.close(fd)

    def start(self, f: Fault) -> None:
        """Begin fault ``f`` (blocking; call from a thread)."""
        c = self.cluster()
        on_hosts = self._hosts(c)
        if on_hosts is not None:
            on_hosts.start(c, f)
            return
        if f.action in ("power-loss", "crash"):
            self._hold_block(c, f)
        if f.action == "power-loss":
            self._power_loss(c, f)
        elif f.action == "crash":
            for i in self._nodes(c, f):
                process.kill9(c.nodes[i].pid)
        elif f.action == "pause":
            for i in self._nodes(c, f):
                process.signal_group(c.nodes[i].pid, signal.SIGSTOP)
        else:
            self._set_links(c, f, True)

    def end(self, f: Fault) -> None:
        """End fault ``f``: restart, resume, heal or restore (blocking; call from a thread)."""
        c = self.cluster()
        on_hosts = self._hosts(c)
        if on_hosts is not None:
            on_hosts.end(c, f)
            return
        if f.action in ("crash", "power-loss"):
            nodes = [c.nodes[i] for i in self._nodes(c, f)]
            try:
                base.restart_nodes(base.driver(c.kind), c, nodes, self.root)
            finally:
                self._release_block(f)  # the restarted wrappers hold it now
            self._leave_with_cluster(c, [n.pid for n in nodes])
            c.save(self.root)
        elif f.action == "pause":
            for i in self._nodes(c, f):
                process.signal_group(c.nodes[i].pid, signal.SIGCONT)
        else:
            self._set_links(c, f, False)

    def _set_links(self, c: Cluster, f: Fault, on: bool) -> None:
        """Cut or slow (``on``) the links of link fault ``f``, or heal and restore them."""
        tp = Toxiproxy(c.toxiproxy_port)
        try:
            for link in self._links(c, f):
                if f.action == "partition":
                    (tp.add_timeout if on else tp.remove_timeout)(link.name)
                elif on:
                    tp.set_latency(link.name, link.downstream_ms + f.extra_ms,
                                   link.upstream_ms + f.extra_ms, link.jitter_ms)
                else:
                    tp.set_latency(link.name, link.downstream_ms, link.upstream_ms,
                                   link.jitter_ms)
        finally:
            tp.close()

    async def run(self, faults: list[Fault], h: History, rt: Runtime, t0_ns: int,
                  stop_ns: int) -> None:
        """Carry out ``faults`` on schedule (see :func:`run_schedule`), each action in a
        thread: they block on processes and the Toxiproxy API."""

        async def act(f: Fault, ending: bool) -> None:
            await asyncio.to_thread(self.end if ending else self.start, f)

        await run_schedule(faults, h, rt, t0_ns, stop_ns, act)


async def run_schedule(faults: list[Fault], h: History, rt: Runtime, t0_ns: int, stop_ns: int,
                       act: Callable[[Fault, bool], Awaitable[None]]) -> None:
    """Carry out ``faults`` on schedule (times from ``t0_ns``) by ``act(fault, ending)``,
    recording each as an op of process nemesis: ``f`` is the action while it starts, the
    heal when it ends. Faults due after ``stop_ns`` are not started; a failed action is
    recorded as a failed op, not raised. A schedule cut short (the run interrupted, or
    stopped by a failed store) heals every fault it started and had not yet ended, so no
    node is left down and no link cut."""
    events = sorted([(f.at_s, 0, f) for f in faults] + [(f.at_s + f.for_s, 1, f)
                                                         for f in faults],
                    key=lambda e: (e[0], e[1]))
    started: set[int] = set()
    ended: set[int] = set()

    async def do(f: Fault, ending: bool) -> None:
        if ending:
            ended.add(id(f))  # before acting: a heal cut short runs on in its thread
        else:
            started.add(id(f))
        i = h.invoke(NEMESIS, "heal" if ending else f.action, (f.target,), (f.label,),
                     "none", rt.now_ns())
        try:
            await act(f, ending)
        except Exception as err:  # a failed fault action is recorded, not fatal
            h.fail(i, rt.now_ns(), f"{type(err).__name__}: {err}")
        else:
            h.ok(i, rt.now_ns(), node=f.target)

    try:
        for at_s, ending, f in events:
            due = t0_ns + int(at_s * 1e9)
            if (ending and id(f) not in started) or (not ending and due >= stop_ns):
                continue  # never started, or due after the run: nothing to do or undo
            if due > rt.now_ns():
                await rt.sleep_ns(due - rt.now_ns())
            await do(f, bool(ending))
    finally:
        for f in faults:
            if id(f) in started and id(f) not in ended:
                await do(f, True)

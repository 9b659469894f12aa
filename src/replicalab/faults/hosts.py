"""Faults on a cluster that runs on hosts, with the operating system's own tools over SSH
(as Jepsen's nemesis does), each armed on the host to undo itself (``hosts/expiry.py``): a
controller that dies, even by SIGKILL, leaves hosts that heal within the fault's length
plus ``expiry.MARGIN_S``. The heal the run records is the controller's.

crash: SIGKILL the server's process group; the timer starts it again from the ``start.sh``
in its data directory if it is not running; the controller's heal restarts it through the
driver (and waits until it answers). pause: SIGSTOP, then SIGCONT. partition: on every host
on one side, an nftables table of the fault's own dropping packets to and from the other
side's inventory addresses, and only those: the controller's SSH comes from no inventory
address. slow: the links' Toxiproxy proxies on the hosts (emulated WAN; set with ``curl``
on the host, so the timer there can restore them), else ``tc netem`` where the hosts'
kernels have it (refused, saying so, where they do not).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from replicalab.cluster import base, placement, toxiproxy
from replicalab.cluster.state import Cluster, Node
from replicalab.faults.schedule import Fault
from replicalab.hosts import expiry, nft
from replicalab.hosts.ssh import SshHost, each, running_test

_RUNNING = running_test("$p")


def _pid_file(node: Node) -> str:
    return shlex.quote(node.data_dir + "/server.pid")


def _restart_if_down(node: Node) -> str:
    """Return a shell line that starts ``node``'s server again from its start.sh unless
    the process in its pid file runs."""
    d = node.data_dir
    return (f"p=$(cat {_pid_file(node)} 2>/dev/null); if [ -z \"$p\" ] || ! {_RUNNING}; "
            f"then setsid sh {shlex.quote(d + '/start.sh')} >>{shlex.quote(d + '/server.log')}"
            " 2>&1 </dev/null & fi")


def _signal_line(node: Node, sig: str) -> str:
    """Return a shell line sending ``sig`` to the group of the process in ``node``'s pid
    file (the server now, even one a timer restarted)."""
    return (f"p=$(cat {_pid_file(node)}); kill -s {sig} -- -$p 2>/dev/null; "
            f"kill -s {sig} $p 2>/dev/null; true")


def netem_available(host: SshHost) -> bool:
    """Return True if ``host``'s kernel has ``tc netem`` (tried on a dummy interface made
    and removed for the test)."""
    probe = ("ip link add rlnetemprobe type dummy 2>/dev/null || exit 1; "
             "tc qdisc add dev rlnetemprobe root netem delay 1ms; rc=$?; "
             "ip link del rlnetemprobe; exit $rc")
    return host.run(probe, check=False).ok


@dataclass
class HostNemesis:
    """Installs and heals faults on cluster ``c``'s hosts; remembers each fault's tag."""

    root: Path
    tags: dict[int, str] = field(default_factory=dict)

    def _tag(self, c: Cluster, f: Fault) -> str:
        if id(f) not in self.tags:
            key = f"{c.name}|{f.label}|{f.at_s}|{id(f)}"
            self.tags[id(f)] = "rlf" + hashlib.sha1(key.encode()).hexdigest()[:10]
        return self.tags[id(f)]

    @staticmethod
    def targets(c: Cluster, f: Fault) -> list[Node]:
        """Return the nodes ``f`` acts on (its node, or its region's)."""
        if f.node is not None:
            return [c.nodes[f.node]]
        return [n for n in c.nodes if n.region == f.region]

    def check(self, c: Cluster, f: Fault) -> None:
        """Raise ValueError for a fault these hosts cannot take."""
        if f.action == "power-loss":
            raise ValueError(f"fault {f.label!r}: a power loss needs the power-loss file "
                             "system, which runs on this machine, not on hosts")
        if f.action == "partition" and len(self.targets(c, f)) == len(c.nodes):
            raise ValueError(f"fault {f.label!r}: every node is on that side; partition a "
                             "node or a region that leaves others")
        if f.action == "slow" and c.links:
            host = placement.host_of(c, c.nodes[0])
            if not host.run("command -v curl", check=False).ok:
                raise ValueError(f"fault {f.label!r}: host {host.spec.name} has no curl, "
                                 "which sets its Toxiproxy links' latency; apt-get install "
                                 "curl there")
        if f.action == "slow" and not c.links:
            host = placement.host_of(c, c.nodes[0])
            if not netem_available(host):
                raise ValueError(f"fault {f.label!r}: host {host.spec.name}'s kernel has no "
                                 "tc netem (sch_netem), so a slow link cannot be made there; "
                                 "use emulated hosts (Toxiproxy) or a kernel with netem")

    def start(self, c: Cluster, f: Fault) -> None:
        """Install fault ``f`` on the hosts it touches, each armed to undo itself."""
        tag = self._tag(c, f)
        work = self._work(c, f, tag)
        each(work, lambda w: expiry.install(w[0], tag, w[1], w[2], f.for_s))
        if f.action == "partition":
            self._client_links(c, f, True)

    def end(self, c: Cluster, f: Fault) -> None:
        """Heal fault ``f``: stop its timers and undo it; a crashed server is started again
        through its driver, which waits until it answers."""
        tag = self._tag(c, f)
        work = self._work(c, f, tag)
        if f.action == "crash":
            each(work, lambda w: expiry.remove(w[0], tag, "true"))
            nodes = self.targets(c, f)
            for node in nodes:  # a timer that fired may have started it already
                if placement.read_pid(c, node) and placement.running(c, node):
                    continue
                base.restart_nodes(base.driver(c.kind), c, [node], self.root)
            c.save(self.root)
            return
        each(work, lambda w: expiry.remove(w[0], tag, w[2]))
        if f.action == "partition":
            self._client_links(c, f, False)

    def _work(self, c: Cluster, f: Fault, tag: str) -> list[tuple[SshHost, str, str]]:
        """Return (host, do, undo) per host the fault touches."""
        inv = placement.load_inventory(c)
        hosts = {n.index: placement.host_of(c, n, inv) for n in c.nodes}
        nodes = self.targets(c, f)
        if f.action == "crash":
            return [(hosts[n.index], _signal_line(n, "KILL"), _restart_if_down(n))
                    for n in nodes]
        if f.action == "pause":
            return [(hosts[n.index], _signal_line(n, "STOP"), _signal_line(n, "CONT"))
                    for n in nodes]
        if f.action == "partition":
            side = {n.index for n in nodes}
            out = []
            for n in c.nodes:
                other = [placement.address(m) for m in c.nodes
                         if (m.index in side) != (n.index in side)]
                out.append((hosts[n.index], nft.install_line(nft.drop_between(tag, other)),
                            nft.delete_line("inet", tag)))
            return out
        if f.action == "slow":
            if c.links:  # emulated WAN: the proxies on the links' source hosts carry it
                return self._slow_links(c, f, hosts)
            dev = "$(ip -o -4 route get {} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')"
            out = []
            for n in nodes:
                peers = [m for m in c.nodes if m.region != n.region or f.node is not None]
                peers = [m for m in peers if m.index != n.index]
                if not peers:
                    continue
                d = dev.format(placement.address(peers[0]))
                filters = "; ".join(
                    f"tc filter add dev {d} parent 1: protocol ip u32 match ip dst "
                    f"{placement.address(m)}/32 flowid 1:3" for m in peers)
                do = (f"tc qdisc add dev {d} root handle 1: prio && tc qdisc add dev {d} "
                      f"parent 1:3 handle 30: netem delay {f.extra_ms:g}ms && {filters}")
                out.append((hosts[n.index], do, f"tc qdisc del dev {d} root 2>/dev/null; true"))
            return out
        raise ValueError(f"fault {f.label!r} cannot act on hosts")

    @staticmethod
    def _client_links(c: Cluster, f: Fault, on: bool) -> None:
        """Cut (or heal) the client links crossing the partition, as on loopback: a client
        placed in a cut-off region reaches no node outside it through this machine's
        Toxiproxy, and no client outside reaches its nodes. (They are this machine's, so
        they heal with the controller's heal or ``cluster down``, not by a host's timer.)"""
        if f.node is not None:
            me = f"n{f.node}"
            links = [x for x in c.links if x.kind == "client" and x.dst == me]
        else:
            links = [x for x in c.links if x.kind == "client"
                     and (x.src_region == f.region) != (x.dst_region == f.region)]
        if not links or not c.toxiproxy_port:
            return
        tp = toxiproxy.Toxiproxy(c.toxiproxy_port)
        try:
            for link in links:
                (tp.add_timeout if on else tp.remove_timeout)(link.name)
        finally:
            tp.close()

    def _slow_links(self, c: Cluster, f: Fault, hosts: dict[int, SshHost]
                    ) -> list[tuple[SshHost, str, str]]:
        """Return (host, do, undo) per host whose Toxiproxy carries a replication link
        touching the targets: add ``f.extra_ms`` each way, then restore."""
        targets = {f"n{n.index}" for n in self.targets(c, f)}
        per_host: dict[int, tuple[list[str], list[str]]] = {}
        for link in c.links:
            if link.kind != "replication" or not targets & {link.src, link.dst}:
                continue
            if f.node is None and link.src_region == link.dst_region:
                continue
            src = c.nodes[int(link.src.removeprefix("n"))]
            api = (f"http://{placement.address(src)}:{src.extra['toxiproxy']['api']}"
                   f"/proxies/{link.name}/toxics")
            do, undo = per_host.setdefault(src.index, ([], []))
            do += _latency_lines(api, link.downstream_ms + f.extra_ms,
                                 link.upstream_ms + f.extra_ms, link.jitter_ms)
            undo += _latency_lines(api, link.downstream_ms, link.upstream_ms, link.jitter_ms)
        return [(hosts[i], " && ".join(do), "; ".join(undo))
                for i, (do, undo) in per_host.items()]


def _latency_lines(api: str, downstream_ms: float, upstream_ms: float, jitter_ms: float
                   ) -> list[str]:
    """Return curl lines that set a proxy's latency toxics (as ``Toxiproxy.set_latency``
    does: each replaced, none for 0 ms) through its API at ``api`` (…/toxics)."""
    lines = []
    for stream, ms in (("downstream", downstream_ms), ("upstream", upstream_ms)):
        lines.append(f"(curl -s -o /dev/null -X DELETE {api}/latency_{stream} || true)")
        if ms > 0:
            body = json.dumps({"name": f"latency_{stream}", "type": "latency",
                               "stream": stream, "toxicity": 1.0,
                               "attributes": {"latency": round(ms),
                                              "jitter": round(jitter_ms)}})
            lines.append(f"curl -sf -o /dev/null -X POST {api} -d {shlex.quote(body)}")
    return lines

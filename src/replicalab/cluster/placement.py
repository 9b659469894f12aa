"""Where a cluster's servers run: on this machine (the loopback path) or on the hosts of an
inventory (``cluster up KIND --hosts INVENTORY``), one node per host, reached over SSH.

The one seam drivers use for both: :func:`address` (what a server binds and clients dial),
:func:`start` (start a server from its argv, output to a log in its data directory),
:func:`running`. A driver that can run on hosts names the binaries it needs there
(``host_binaries``). On hosts a node's pid lives in ``node.extra["host_pid"]`` (``node.pid``
stays 0: local process handling never touches a remote pid), and each server is started by
a ``start.sh`` in its data directory that writes its pid file first, so a timer on the host
(a crash fault's expiry) can start it again without the controller.

Links on hosts. With an inventory whose ``wan = "emulated"`` (emulated hosts), a link from
node i to node j is a proxy of a Toxiproxy server on i's host (127.0.0.1 there) whose
upstream is j's address, carrying the region matrix's delays as on loopback; i's server
dials the proxy. With ``wan = "real"`` the machines' network is the WAN: i dials j itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import shlex
import time
from pathlib import Path

from replicalab.cluster import process, toxiproxy
from replicalab.cluster.ports import allocate, wait_listening_on
from replicalab.cluster.state import Cluster, Link, Node
from replicalab.hosts import inventory, nft
from replicalab.hosts.ssh import SshHost, each, running_test

_STOP_GRACE_S = 5.0


def on_hosts(c: Cluster) -> bool:
    """Return True if cluster ``c`` runs on the hosts of an inventory."""
    return bool(c.extra.get("hosts"))


def address(node: Node) -> str:
    """Return the address ``node``'s server binds and clients dial (127.0.0.1 on loopback,
    its host's address on hosts, its own loopback address for Cassandra)."""
    return str(node.extra.get("address", "127.0.0.1"))


def load_inventory(c: Cluster) -> inventory.Inventory:
    """Return the inventory cluster ``c`` runs on."""
    return inventory.load(str(c.extra["hosts"]))


def host_of(c: Cluster, node: Node, inv: inventory.Inventory | None = None) -> SshHost:
    """Return the host ``node`` runs on."""
    inv = inv or load_inventory(c)
    return SshHost(inv.host(str(node.extra["host"])), inv.known_hosts)


def node_dir(c: Cluster, spec: inventory.HostSpec, index: int) -> str:
    """Return node ``index``'s data directory on its host."""
    return f"{spec.root}/clusters/{c.name}/n{index}"


def check_hosts(inv: inventory.Inventory, binaries: tuple[str, ...]) -> None:
    """Raise ValueError naming the first host that does not answer or lacks a binary."""
    hosts = [SshHost(h, inv.known_hosts) for h in inv.hosts]
    need = " ".join(shlex.quote(b) for b in binaries)

    def missing(h: SshHost) -> str:
        return h.run(f"for b in {need}; do command -v $b >/dev/null || echo $b; done",
                     timeout_s=30).out.strip()

    for h, gone in zip(hosts, each(hosts, missing), strict=True):
        if gone:
            raise ValueError(f"host {h.spec.name} has no {gone.split()[0]}; install it there "
                             "(docs/hosts.md lists the Debian packages)")


def start(c: Cluster, node: Node, argv: list[str], log_name: str = "server.log",
          cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    """Start ``argv`` as ``node``'s server, output to ``log_name`` in its data directory:
    a local process (``node.pid``) or, on hosts, over SSH (``node.extra["host_pid"]``)."""
    if not on_hosts(c):
        Path(node.data_dir).mkdir(parents=True, exist_ok=True)
        node.pid = process.start(argv, Path(node.data_dir) / log_name, cwd=cwd, env=env)
        return
    host = host_of(c, node)
    d = node.data_dir
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    script = (f"#!/bin/sh\n# node n{node.index} of cluster {c.name} (replicalab)\n"
              f"cd {shlex.quote(str(cwd or d))}\n{exports}"
              f"echo $$ > {shlex.quote(d + '/server.pid')}\n"
              f"exec {shlex.join(argv)}\n")
    host.put(script.encode(), f"{d}/start.sh", 0o755)
    node.extra["host_pid"] = host.start(f"sh {shlex.quote(d + '/start.sh')}",
                                        f"{d}/{log_name}", f"{d}/server.pid")


def pid(node: Node) -> int:
    """Return the pid of ``node``'s server, on its host or here (0: none)."""
    return int(node.extra.get("host_pid", 0)) or node.pid


def running(c: Cluster, node: Node) -> bool:
    """Return True if ``node``'s server process runs (asked over SSH on hosts)."""
    if not on_hosts(c):
        return process.alive(node.pid) and not process.reused(node.pid)
    try:
        return bool(pid(node)) and host_of(c, node).alive(pid(node))
    except ValueError:
        return False


def signal(c: Cluster, node: Node, sig: str) -> None:
    """Send ``sig`` (KILL, STOP, CONT, TERM) to the process group of ``node``'s server on
    its host."""
    host_of(c, node).signal(pid(node), sig)


def read_pid(c: Cluster, node: Node) -> int:
    """Return the pid in ``node``'s pid file on its host (a server a timer there started
    again has a new one), and remember it."""
    text = host_of(c, node).run(f"cat {shlex.quote(node.data_dir + '/server.pid')}",
                                check=False).out.strip()
    if text.isdigit():
        node.extra["host_pid"] = int(text)
    return pid(node)


def wait_listening(node: Node, port: int, timeout_s: float) -> bool:
    """Return True once ``node``'s ``port`` accepts connections from here."""
    return wait_listening_on(address(node), port, timeout_s)


# -- links on hosts -----------------------------------------------------------------------


def _toxiproxy_on(c: Cluster, node: Node, root: Path) -> toxiproxy.Toxiproxy:
    """Return a client of the Toxiproxy on ``node``'s host, started there on first use."""
    tp = node.extra.get("toxiproxy")
    if not tp:
        inv = load_inventory(c)
        # emulated hosts share this machine's file system: its Toxiproxy build is theirs
        binary = str(toxiproxy.binary(root)) if inv.emulated_set else inv.toxiproxy
        api = allocate(1, avoid=c.reserved_ports())[0]
        d = node.data_dir
        pid_ = host_of(c, node, inv).start(
            f"{shlex.quote(binary)} -host {address(node)} -port {api}", f"{d}/toxiproxy.log",
            f"{d}/toxiproxy.pid")
        tp = node.extra["toxiproxy"] = {"pid": pid_, "api": api}
        if not wait_listening_on(address(node), api, 15):
            raise ValueError(f"Toxiproxy did not start on host {node.extra['host']}; see "
                             f"{d}/toxiproxy.log there")
    return toxiproxy.Toxiproxy(int(tp["api"]), address(node))


def toxiproxy_of_link(c: Cluster, link: Link) -> toxiproxy.Toxiproxy:
    """Return a client of the Toxiproxy that carries ``link`` (its source's host's)."""
    node = c.nodes[int(link.src.removeprefix("n"))]
    return toxiproxy.Toxiproxy(int(node.extra["toxiproxy"]["api"]), address(node))


def peer_link(c: Cluster, root: Path, name: str, src: Node, dst: Node, dst_port: int,
              delays: tuple[float, float, float]) -> tuple[str, int]:
    """Return (address, port) that ``src``'s server dials to reach ``dst_port`` of ``dst``:
    a proxy of the Toxiproxy on src's host carrying ``delays`` (there, back, jitter ms) when
    the WAN is emulated, else dst itself."""
    if load_inventory(c).wan != "emulated":
        return address(dst), dst_port
    tp = _toxiproxy_on(c, src, root)
    try:
        listen = allocate(1, avoid=c.reserved_ports())[0]
        there, back, jitter = delays
        tp.create(name, listen, dst_port, address(dst))
        tp.set_latency(name, downstream_ms=back, upstream_ms=there, jitter_ms=jitter)
    finally:
        tp.close()
    c.links.append(Link(name, listen, dst_port, f"n{src.index}", f"n{dst.index}", src.region,
                        dst.region, back, there, jitter, "replication"))
    return "127.0.0.1", listen


def _redirect_table(c: Cluster) -> str:
    return "rlw_" + hashlib.sha1(c.name.encode()).hexdigest()[:12]


def redirect(c: Cluster, node: Node, rules: list[tuple[str, int, int]]) -> None:
    """Make ``node``'s host send its own connections to (address, port) to local port
    ``to`` (an nftables table of the cluster's own, removed by :func:`down`)."""
    if rules:
        host_of(c, node).run(nft.install_line(nft.redirects(_redirect_table(c), rules)))


def down(c: Cluster) -> None:
    """Stop every process cluster ``c`` started on its hosts (servers, Toxiproxies, fault
    timers left), remove its redirects and its directories there. A host that does not
    answer is skipped (its emulated set may be gone already)."""
    try:
        inv = load_inventory(c)
    except ValueError:
        return
    table = _redirect_table(c)

    def stop(node: Node) -> None:
        pids = [p for p in (pid(node), int(node.extra.get("toxiproxy", {}).get("pid", 0)))
                if p]
        group = " ".join(f"-{p}" for p in pids)
        d = shlex.quote(str(Path(node.data_dir).parent))
        wait = " ".join(str(p) for p in pids)
        line = (f"kill -s CONT -- {group} 2>/dev/null; kill -s TERM -- {group} 2>/dev/null; "
                f"i=0; while [ $i -lt {int(_STOP_GRACE_S * 10)} ]; do up=; "
                f"for p in {wait}; do {running_test('$p')} && up=1; done; "
                "[ -z \"$up\" ] && break; sleep 0.1; i=$((i+1)); done; "
                f"kill -s KILL -- {group} 2>/dev/null; "
                f"{nft.delete_line('ip', table)}; rm -rf {d}") if pids else \
            f"{nft.delete_line('ip', table)}; rm -rf {d}"
        with contextlib.suppress(ValueError):
            host_of(c, node, inv).run(line, timeout_s=_STOP_GRACE_S + 20)

    each(c.nodes, stop)


def wait_gone(c: Cluster, node: Node, timeout_s: float = 5.0) -> bool:
    """Return True once ``node``'s server process has exited on its host."""
    deadline = time.monotonic() + timeout_s
    while running(c, node):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


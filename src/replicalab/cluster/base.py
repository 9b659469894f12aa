"""Bring clusters up and down: ports, Toxiproxy links from the region matrix, the drivers.

A driver knows one server kind (how to start a node, which links it needs, the store URL,
how to read its role and lag); everything else is shared here.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from replicalab.cluster import kinds as store_kinds
from replicalab.cluster import placement, powerloss, process, toxiproxy
from replicalab.cluster.ports import allocate
from replicalab.cluster.state import Cluster, Link, Node, load, names, state_root
from replicalab.errors import ParameterError
from replicalab.hosts import emulated, inventory
from replicalab.regions import region_set


class Driver(Protocol):
    """One kind of server."""

    kind: str
    ports_per_node: int  # consecutive ports each node needs (client, peer, ...)

    def check_installed(self) -> None:
        """Raise ValueError naming the missing binary and how to install it."""
        ...

    def start(self, c: Cluster, links: LinkMaker, root: Path) -> None:
        """Start every node of ``c`` (filling pids/roles), create the links it needs."""
        ...

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        """(Re)start one node from its data directory (used after a crash)."""
        ...

    def url(self, c: Cluster) -> str:
        """Return the store URL a probe should use."""
        ...

    def status(self, c: Cluster) -> list[dict[str, str]]:
        """Return one row per node: role, replication state or lag (strings)."""
        ...


def restart_nodes(drv: Driver, c: Cluster, nodes: list[Node], root: Path) -> None:
    """(Re)start ``nodes`` from their data directories: at once when the driver can
    (``start_nodes``: three Cassandra JVMs on power-loss file systems took 64 s one after
    the other, 22 s together), else one after the other."""
    together = getattr(drv, "start_nodes", None)
    if together is not None:
        together(c, nodes, root)
        return
    for node in nodes:
        drv.start_node(c, node, root)


class LinkMaker:
    """Creates Toxiproxy proxies carrying the region matrix's one-way delays."""

    def __init__(self, c: Cluster, tp: toxiproxy.Toxiproxy, root: Path | None = None) -> None:
        self.c = c
        self.tp = tp
        self.rs = region_set(c.regions)
        self.root = root or state_root()

    def delays(self, src_region: str, dst_region: str) -> tuple[float, float, float]:
        """Return (src->dst ms, dst->src ms, jitter ms) for a connection from src to dst.

        Inside one region the delay (~0.2 ms) is below Toxiproxy's 1 ms resolution: no toxic.
        """
        if src_region == dst_region:
            return 0.0, 0.0, 0.0
        there, sd = self.rs.one_way_ms(src_region, dst_region)
        back, _ = self.rs.one_way_ms(dst_region, src_region)
        return there, back, sd

    def link(self, name: str, src: str, src_region: str, dst: Node, kind: str = "replication",
             dst_port: int | None = None, dst_host: str = "127.0.0.1") -> int:
        """Create a proxy for ``src`` connecting to ``dst`` (at ``dst_host``, 127.0.0.1
        unless the server has an address of its own); return the 127.0.0.1 port to connect
        to."""
        listen = allocate(1, avoid=self.c.reserved_ports())[0]
        upstream = dst_port or dst.port
        there, back, jitter = self.delays(src_region, dst.region)
        self.tp.create(name, listen, upstream, dst_host)
        # toxiproxy: upstream = client->server (src->dst), downstream = server->client
        self.tp.set_latency(name, downstream_ms=back, upstream_ms=there, jitter_ms=jitter)
        self.c.links.append(Link(name, listen, upstream, src, f"n{dst.index}", src_region,
                                 dst.region, back, there, jitter, kind))
        return listen

    def peer(self, name: str, src: Node, dst: Node, dst_port: int | None = None
             ) -> tuple[str, int]:
        """Return (address, port) that ``src``'s server dials to reach ``dst_port`` (default
        its port) of ``dst`` through a link carrying the region delays: a proxy here on
        loopback, on src's host on emulated hosts (``cluster/placement.py``)."""
        port = dst_port or dst.port
        if placement.on_hosts(self.c):
            return placement.peer_link(self.c, self.root, name, src, dst, port,
                                       self.delays(src.region, dst.region))
        return "127.0.0.1", self.link(name, f"n{src.index}", src.region, dst, dst_port=port)

    def client_links(self) -> str:
        """Create one client link per region of the region set and node outside it (a
        client placed in that region reaches the node through it, paying the WAN both
        ways) and return the store URL parameter naming them, ``&client_links=REGION:
        NODE:PORT,...`` ("" when every node shares the one region)."""
        entries = []
        for region in self.rs.regions:
            for node in self.c.nodes:
                if node.region == region:
                    continue  # inside one region: below Toxiproxy's resolution, direct
                port = self.link(f"client-{region}-{node.index}", f"client-{region}", region,
                                 node, kind="client", dst_port=node.client_port,
                                 dst_host=str(node.extra.get("address", "127.0.0.1")))
                entries.append(f"{region}:{node.index}:{port}")
        return f"&client_links={','.join(entries)}" if entries else ""


def kinds() -> list[str]:
    """Return the cluster kinds replicalab can start (their display names)."""
    return store_kinds.names()


def driver(kind: str) -> Driver:
    """Return the driver for ``kind``, any accepted spelling (ValueError listing the kinds)."""
    return store_kinds.resolve(kind).make_driver()  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Leader:
    """The node a "leader" fault takes and the figures name: the leader or primary as the
    cluster's status reports it, else node 0 (a kind without a leader such as Cassandra, or
    none elected yet), the writer's coordinator."""

    index: int
    region: str
    is_leader: bool  # False: node 0 stands in (no leader/primary reported)

    @property
    def role(self) -> str:
        """Return what the node is, as the scorecard words it."""
        return "leader/primary" if self.is_leader else \
            "node (no leader: the writer's coordinator)"


def find_leader(name: str, root: Path | None = None) -> Leader:
    """Return cluster ``name``'s leader or primary (see :class:`Leader`): the one place that
    asks a cluster where its leader is."""
    c, rows = status(name, root)
    i = None if store_kinds.resolve(c.kind).leaderless else next(
        (i for i, s in enumerate(rows) if s.get("role") in ("leader", "primary")), None)
    return Leader(0, c.nodes[0].region, False) if i is None \
        else Leader(i, c.nodes[i].region, True)


class ClusterExists(ValueError):
    """A cluster of the name asked for is saved already; the message says whether its
    processes still run and how to remove it (``rename``: the caller's other way out, e.g.
    "pick another --name"; empty for a command that takes no name)."""

    def __init__(self, name: str, gone: bool, rename: str = "") -> None:
        self.name, self.gone = name, gone
        state = ("its processes are gone: a record left by a run that was killed" if gone
                 else "it is running")
        super().__init__(f"a cluster named {name!r} exists ({state}); `replicalab cluster "
                         f"down {name}` removes it" + (f", or {rename}" if rename else ""))


def up(kind: str, nodes: int, regions: str, name: str | None = None,
       base_port: int | None = None, client_region: str | None = None,
       root: Path | None = None, settings: dict[str, str] | None = None,
       power_loss_fs: bool = False, hosts: Path | str | None = None,
       replace_stale: bool = False, rename: str = "pick another --name") -> Cluster:
    """Start a cluster and return its saved description (ValueError on bad input;
    :class:`ClusterExists` when ``name`` is taken, naming ``rename`` as the other way out).

    ``settings`` are server settings over the lab's defaults (see ``state.settings``);
    ``power_loss_fs`` puts every node's data directory on its own power-loss file system
    (cluster/powerfs.py), so that a ``power-loss`` fault can drop what a server never synced.
    ``hosts`` names an inventory (or a set of emulated hosts): one node per host (``nodes``
    is then the host count), each in its host's region, started over SSH
    (``cluster/placement.py``).
    ``replace_stale``: a saved cluster of that name whose processes are all gone (a command
    that owns the name was killed before it could remove it) is removed first, not refused.
    """
    kind = store_kinds.resolve(kind).name  # one spelling in cluster.json
    root = root or state_root()
    drv = driver(kind)
    rs = region_set(regions)
    inv = inventory.load(emulated.resolve(hosts, root)) if hosts is not None else None
    if inv is not None:
        if power_loss_fs:
            raise ParameterError("power_loss_fs", "mounts a FUSE file system here, not on "
                                                  "hosts; leave it out with {hosts}",
                                 {"hosts": "hosts"})
        nodes = len(inv.hosts)
        for h in inv.hosts:
            if h.region and h.region not in rs.regions:
                raise ParameterError("regions", f"{regions!r} does not hold host {h.name}'s "
                                                f"region {h.region!r} (it has "
                                                f"{', '.join(rs.regions)}); pass the regions "
                                                "the inventory uses")
    if nodes < 1 or nodes > 15:
        raise ParameterError("nodes", f"{nodes} must be between 1 and 15")
    if client_region is not None:
        rs.index(client_region)
    name = name or f"{kind}-{regions}"
    if name in names(root):
        try:
            dead = gone(load(name, root))
        except (ValueError, OSError):  # a record half written: nothing of it runs
            dead = True
        if not (dead and replace_stale):
            raise ClusterExists(name, dead, rename)
        remove(name, root)
    if inv is None:
        drv.check_installed()
    else:
        binaries = getattr(drv, "host_binaries", None)
        if binaries is None:
            able = [k for k in kinds() if getattr(driver(k), "host_binaries", None)]
            raise ValueError(f"{kind} clusters cannot run on hosts yet; use one of "
                             f"{', '.join(able)}")
        placement.check_hosts(inv, binaries + (("nft",) if inv.wan == "emulated" else ()))
    if power_loss_fs:
        powerloss.check_available()
    ports = allocate(nodes * drv.ports_per_node + 1, base_port)
    c = Cluster(kind, name, regions, [], toxiproxy_port=ports[-1],
                client_region=client_region,
                extra={"settings": dict(settings)} if settings else {})
    if inv is not None:
        c.extra["hosts"] = str(inv.path)
    base = c.directory(root)
    k = drv.ports_per_node
    for i in range(nodes):
        mine = ports[i * k:(i + 1) * k]
        # a driver whose servers have addresses of their own (fixed ports) takes none here
        c.nodes.append(Node(i, rs.regions[i % len(rs.regions)], "", mine[0] if k else 0,
                            str(base / f"n{i}"), peer_port=mine[1] if k > 1 else 0,
                            client_port=mine[0] if k else 0, extra={"ports": mine}))
        if inv is not None:  # one node per host, in the host's region, its files there
            h, node = inv.hosts[i], c.nodes[-1]
            node.region = h.region or node.region
            node.data_dir = placement.node_dir(c, h, i)
            node.extra.update(host=h.name, address=h.address)
    before = set(process.owned())
    try:
        c.save(root)
        if power_loss_fs:
            mount_power_loss_fs(c, root)
        c.toxiproxy_pid = toxiproxy.start_server(root, c.toxiproxy_port, base / "toxiproxy.log")
        c.save(root)
        tp = toxiproxy.Toxiproxy(c.toxiproxy_port)
        try:
            links = LinkMaker(c, tp, root)
            drv.start(c, links, root)
            client_links = links.client_links()
        finally:
            tp.close()
        c.url = (drv.url(c) + client_links
                 + (f"&client_region={client_region}" if client_region else ""))
        c.save(root)
        for m in power_loss_mounts(c).values():
            # what set-up wrote is on the disk, as it would be long before a test on a real
            # machine: a power loss drops only what the servers write from now on
            powerloss.sync_all(m)
    except BaseException:
        # an error, Ctrl-C or SIGTERM while starting: stop what was started, including a
        # server whose pid was not saved yet
        with process.signals_held():
            with contextlib.suppress(ValueError, OSError):  # e.g. cluster.json half written
                down(name, root)
            process.stop_many(set(process.owned()) - before)
            shutil.rmtree(base, ignore_errors=True)
        raise
    return c


def down(name: str, root: Path | None = None) -> list[int]:
    """Stop exactly what cluster ``name`` started and delete its directory; return the pids."""
    return down_many([name], root)


def remove(name: str, root: Path | None = None) -> None:
    """Remove cluster ``name`` whatever state its record is in (a record half written by a
    command killed while it started the cluster has no processes to stop)."""
    root = root or state_root()
    try:
        down(name, root)
    except (ValueError, OSError):
        shutil.rmtree(root / "clusters" / name, ignore_errors=True)


def down_many(cluster_names: list[str], root: Path | None = None, also: list[int] | None = None
              ) -> list[int]:
    """Stop every process of the named clusters (and the pids ``also``) at once, delete the
    clusters' directories and return the pids stopped. A name with no saved cluster is
    skipped when others are given (ValueError from :func:`load` when it is the only one).
    A Ctrl-C or SIGTERM meanwhile acts once the clusters are gone, records included: cut
    half way, it left a record whose processes were stopped, which the next command that
    wanted the name refused."""
    with process.signals_deferred():
        return _down_many(cluster_names, root or state_root(), also)


def _down_many(cluster_names: list[str], root: Path, also: list[int] | None) -> list[int]:
    pids, dirs, mounts = list(also or []), [], []
    for name in cluster_names:
        try:
            c = load(name, root)
        except (ValueError, OSError):
            if len(cluster_names) == 1:
                raise
            continue
        if placement.on_hosts(c):
            placement.down(c)  # its servers, Toxiproxies and files on the hosts
        pids += [n.pid for n in c.nodes if n.pid] + ([c.toxiproxy_pid] if c.toxiproxy_pid
                                                     else [])
        dirs.append(c.directory(root))
        mounts += power_loss_mounts(c).values()
    process.stop_many(pids)
    for m in mounts:  # once no server holds a file there
        powerloss.unmount(m)
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    return pids


def keep(c: Cluster) -> None:
    """Hand cluster ``c``'s processes over so they outlive this process (``cluster up``);
    ``down`` stops them later, from any process."""
    process.release([n.pid for n in c.nodes if n.pid] + [c.toxiproxy_pid]
                    + [m.pid for m in power_loss_mounts(c).values()])


def mount_power_loss_fs(c: Cluster, root: Path | None = None) -> None:
    """Mount a power-loss file system on each node's data directory (its disk beside it,
    ``n<i>.disk``) and record the mounts in the saved cluster."""
    c.extra["powerfs"] = {}
    for node in c.nodes:
        data = Path(node.data_dir)
        m = powerloss.mount(data.with_name(data.name + ".disk"), data,
                            data.with_name(data.name + ".powerfs.log"))
        c.extra["powerfs"][str(node.index)] = m.to_json()
        c.save(root)


def power_loss_mounts(c: Cluster) -> dict[int, powerloss.Mount]:
    """Return {node index: mount} of a cluster on power-loss file systems ({} if not)."""
    return {int(i): powerloss.Mount(**m) for i, m in c.extra.get("powerfs", {}).items()}


def gone(c: Cluster) -> bool:
    """Return True if every process cluster ``c`` started has died (or its pid now names
    another process): nothing to ask, ``cluster down`` only removes its state."""
    return not any(process.alive(p) and not process.reused(p) for p in c.pids())


def status(name: str, root: Path | None = None) -> tuple[Cluster, list[dict[str, str]]]:
    """Return the cluster and one status row per node (alive, role, ports, lag); for a
    cluster whose processes all died (:func:`gone`), rows saying so without asking it."""
    c = load(name, root)
    if gone(c):
        return c, [{"node": f"n{n.index}", "region": n.region, "role": n.role, "alive": "no",
                    "pid": str(n.pid), "port": str(n.port), "state": "process gone"}
                   for n in c.nodes]
    rows = driver(c.kind).status(c)
    for node, row in zip(c.nodes, rows, strict=True):
        row.setdefault("alive", "yes" if placement.running(c, node) else "no")
    return c, rows

"""Data centres on one machine: one store instance per region and WAN links between them.

Each data centre of a region set (``dc3`` by default: US-E, US-W, EU) gets its own store —
a one-node Redis or PostgreSQL started through ``cluster/``, or an in-process simulated store
in real time — and every ordered pair of data centres gets a Toxiproxy link carrying the
region matrix's one-way delays in both directions. ``cassandra`` is one cluster instead, one
node (one Cassandra data centre) per region, its internode links delayed by the cluster
itself: DC d's store is its own keyspace ``bc_<d>`` (replicated to every DC) reached through
d's node at LOCAL_QUORUM, conditional writes at LOCAL_SERIAL (Paxos inside d), so d's state
stays in d as with one server per DC; the native-counter baseline shares keyspace
``bc_native``. A middleware in data centre A reaches B's
store (or B's middleware server) only through such a link, so a cross-DC call pays the WAN
round trip and a local one does not.

Faults between data centres (``cut``, ``stop_store``/``start_store``) act on these links and
servers as ``faults/`` acts on a cluster's: a cut link swallows everything in both directions
(a Toxiproxy timeout toxic; a simulated link holds a call for ``LINK_TIMEOUT_S`` and fails
it), a stopped store's server is killed with SIGKILL and restarted from its data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from replicalab.cluster import base as cluster
from replicalab.cluster import process, toxiproxy
from replicalab.cluster.ports import allocate
from replicalab.cluster.state import load as load_cluster
from replicalab.regions import region_set
from replicalab.stores import Store, Unavailable, open_store
from replicalab.stores.base import Client, ReadResult, StoreInfo, WriteResult

KINDS = ("redis", "postgresql", "cassandra", "sim")
_LOCAL_LEVELS = ("eventual_cl=LOCAL_QUORUM&consistent_cl=LOCAL_QUORUM&write_cl=LOCAL_QUORUM"
                 "&serial_cl=LOCAL_SERIAL")
NATIVE_KEYSPACE = "bc_native"
LINK_TIMEOUT_S = 2.0
"""How long a call over a cut simulated link waits before it fails (s): the real adapters'
default ``timeout_ms`` (2000), which is what a call over a cut Toxiproxy link waits."""


def dc_keyspace(dc: str) -> str:
    """Return the keyspace holding data centre ``dc``'s counter state on Cassandra."""
    return "bc_" + "".join(ch if ch.isalnum() else "_" for ch in dc.lower())
# a single-node primary: consistent reads and conditional writes, answered locally
_SIM_URL = "sim://primary?clock=real&regions=lan&replication=async"


def _with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


@dataclass
class DataCentres:
    """The stores of several data centres and the WAN links between them."""

    kind: str
    regions: str
    dcs: tuple[str, ...]
    root: Path
    name: str
    urls: dict[str, str] = field(default_factory=dict)
    clusters: list[str] = field(default_factory=list)
    toxiproxy_pid: int = 0
    toxiproxy_port: int = 0
    links: dict[tuple[str, str, int, str], int] = field(default_factory=dict)
    cuts: set[frozenset[str]] = field(default_factory=set)
    stopped: set[str] = field(default_factory=set)
    _sim: dict[str, Store] = field(default_factory=dict)

    def one_way_ms(self, src_dc: str, dst_dc: str) -> float:
        """Return the mean one-way delay from ``src_dc`` to ``dst_dc`` in ms (0 inside one)."""
        if src_dc == dst_dc:
            return 0.0
        return region_set(self.regions).one_way_ms(src_dc, dst_dc)[0]

    def _check(self, *dcs: str | None) -> None:
        for dc in dcs:
            if dc is not None and dc not in self.dcs:
                raise ValueError(f"data centre {dc!r} is not one of {', '.join(self.dcs)}")

    def proxy(self, src_dc: str, dst_dc: str, upstream_port: int,
              upstream_host: str = "127.0.0.1") -> int:
        """Return the port of a link from ``src_dc`` to ``dst_dc`` in front of
        ``upstream_host``:``upstream_port`` (created once, carrying both one-way delays)."""
        self._check(src_dc, dst_dc)
        key = (src_dc, dst_dc, upstream_port, upstream_host)
        if key not in self.links:
            if not self.toxiproxy_port:
                self.toxiproxy_port = allocate(1)[0]
                self.root.mkdir(parents=True, exist_ok=True)
                self.toxiproxy_pid = toxiproxy.start_server(
                    self.root, self.toxiproxy_port, self.root / f"{self.name}-toxiproxy.log")
            listen = allocate(1, avoid=set(self.links.values()) | {self.toxiproxy_port})[0]
            rs = region_set(self.regions)
            there, sd = rs.one_way_ms(src_dc, dst_dc) if src_dc != dst_dc else (0.0, 0.0)
            back = rs.one_way_ms(dst_dc, src_dc)[0] if src_dc != dst_dc else 0.0
            tp = toxiproxy.Toxiproxy(self.toxiproxy_port)
            try:
                link = _link_name(key)
                tp.create(link, listen, upstream_port, upstream_host)
                # upstream = client->server (src->dst), downstream = the reply
                tp.set_latency(link, downstream_ms=back, upstream_ms=there, jitter_ms=sd)
                if frozenset((src_dc, dst_dc)) in self.cuts:  # made while cut: cut
                    tp.add_timeout(link)
            finally:
                tp.close()
            self.links[key] = listen
        return self.links[key]

    def _no_faults_on_cassandra(self, what: str) -> None:
        if self.kind == "cassandra":
            raise ValueError(f"{what} of data centres on one Cassandra cluster is not "
                             "supported here (its DCs talk over the cluster's own links); use "
                             "redis, postgresql or sim data centres")

    def cut(self, a: str, b: str, on: bool = True) -> None:
        """Partition data centres ``a`` and ``b`` (``on``) or heal them: every link between
        them, either way, swallows all data without closing (a call waits for its own
        timeout); a link made while they are cut is made cut."""
        self._check(a, b)
        self._no_faults_on_cassandra("a partition")
        if a == b:
            raise ValueError(f"cannot cut {a} from itself; name two data centres")
        pair = frozenset((a, b))
        (self.cuts.add if on else self.cuts.discard)(pair)
        if self.kind == "sim" or not self.toxiproxy_port:
            return  # simulated links look at ``cuts`` on every call; no real link exists yet
        tp = toxiproxy.Toxiproxy(self.toxiproxy_port)
        try:
            for key in self.links:
                if frozenset(key[:2]) == pair:
                    if on:
                        tp.add_timeout(_link_name(key))
                    else:
                        tp.remove_timeout(_link_name(key))
        finally:
            tp.close()

    def is_cut(self, a: str, b: str) -> bool:
        """Return True while the WAN between ``a`` and ``b`` is cut."""
        return frozenset((a, b)) in self.cuts

    def _cluster_of(self, dc: str) -> Any:
        return load_cluster(self.clusters[self.dcs.index(dc)], self.root)

    def stop_store(self, dc: str) -> None:
        """Kill ``dc``'s store server with SIGKILL (its data directory stays: what it wrote
        survives as far as the server made it durable). A simulated store stops answering."""
        self._check(dc)
        self._no_faults_on_cassandra("stopping the store")
        self.stopped.add(dc)
        if self.kind == "sim":
            return
        for node in self._cluster_of(dc).nodes:
            process.kill9(node.pid)

    def start_store(self, dc: str) -> None:
        """Restart ``dc``'s store server from its data directory (after :meth:`stop_store`)
        and return once it listens; a store that was not stopped is left as it is (a second
        server on its port would fail, and its pid would replace the running one's)."""
        self._check(dc)
        self._no_faults_on_cassandra("restarting the store")
        if dc not in self.stopped:
            return
        if self.kind != "sim":
            c = self._cluster_of(dc)
            cluster.restart_nodes(cluster.driver(c.kind), c, list(c.nodes), self.root)
            c.save(self.root)
        self.stopped.discard(dc)

    def url(self, dc: str, from_dc: str | None = None) -> str:
        """Return the URL of ``dc``'s store as reached from ``from_dc`` (direct when None or
        the same data centre, else through a WAN link). Simulated stores have no URL: use
        :meth:`store`."""
        self._check(dc, from_dc)
        if self.kind == "sim":
            raise ValueError("simulated data centres live in this process: use store(dc)")
        url = self.urls[dc]
        if from_dc is None or from_dc == dc:
            return url
        parts = urlsplit(url)
        return _with_port(url, self.proxy(from_dc, dc, parts.port or 0,
                                          parts.hostname or "127.0.0.1"))

    def store(self, dc: str, from_dc: str | None = None) -> Store:
        """Return an opened Store of ``dc`` as reached from ``from_dc`` (the caller closes
        stores of real kinds; simulated ones are shared and closed by :meth:`down`)."""
        self._check(dc, from_dc)
        if self.kind != "sim":
            return open_store(self.url(dc, from_dc))
        if dc not in self._sim:
            self._sim[dc] = open_store(_SIM_URL)
        if from_dc is None or from_dc == dc:
            return self._sim[dc]
        return LinkedStore(self._sim[dc], self.one_way_ms(from_dc, dc),
                           self.one_way_ms(dc, from_dc), self, from_dc, dc)

    def native_store(self, dc: str) -> Store:
        """Return a store of the shared native-counter keyspace pinned to ``dc``'s node
        (Cassandra only: its counters replicate between DCs by themselves)."""
        self._check(dc)
        if self.kind != "cassandra":
            raise ValueError(f"native counters are Cassandra's; this topology is {self.kind}")
        return open_store(self.urls[dc].replace(f"keyspace={dc_keyspace(dc)}",
                                                f"keyspace={NATIVE_KEYSPACE}"))

    def down(self) -> None:
        """Stop every server and link this topology started."""
        # every server and the links' Toxiproxy at once: an interrupted run stops quickly
        with contextlib.suppress(ValueError, OSError):  # already gone
            cluster.down_many(list(self.clusters), self.root,
                              also=[self.toxiproxy_pid] if self.toxiproxy_pid else [])
        self.clusters.clear()
        self.toxiproxy_pid = 0
        self.links.clear()
        self._sim.clear()  # simulated stores hold no OS resources

    def __enter__(self) -> DataCentres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


def _link_name(key: tuple[str, str, int, str]) -> str:
    """Return the Toxiproxy name of the link ``(src_dc, dst_dc, upstream_port, host)``."""
    src_dc, dst_dc, upstream_port, upstream_host = key
    return f"{src_dc}-{dst_dc}-{upstream_host}-{upstream_port}"


def start(kind: str, root: Path, name: str, regions: str = "dc3",
          settings: dict[str, str] | None = None) -> DataCentres:
    """Start one store per data centre of ``regions`` and return the topology (ValueError
    naming the problem on bad input; everything started is stopped on failure).
    ``settings`` are server settings of every DC's store (``cluster up --set``), e.g.
    Redis ``appendonly yes`` so that a killed server restarts with what it acknowledged."""
    if kind not in KINDS:
        raise ValueError(f"store kind {kind!r}: use one of {', '.join(KINDS)}")
    dcs = tuple(region_set(regions).regions)
    t = DataCentres(kind, regions, dcs, Path(root), name)
    if kind == "sim":
        return t
    try:
        if kind == "cassandra":
            _start_cassandra(t, name)
            return t
        for dc in dcs:
            cname = f"{name}-{dc}".lower()
            c = cluster.up(kind, 1, "lan", name=cname, root=t.root,  # "postgresql": an alias
                           settings=settings)
            t.clusters.append(cname)
            t.urls[dc] = c.url
    except BaseException:
        t.down()
        raise
    return t


def on_cassandra(c: Any, root: Path, name: str) -> DataCentres:
    """Return data centres over a running Cassandra cluster ``c`` (one node per region, as
    ``cluster up cassandra`` starts it), which :meth:`DataCentres.down` leaves running (it
    stops only the WAN links it made)."""
    dcs = tuple(n.region for n in c.nodes)
    if len(set(dcs)) != len(dcs):
        raise ValueError(f"cluster {c.name} has several nodes in one region; the counters "
                         "need one node per data centre")
    t = DataCentres("cassandra", c.regions, dcs, Path(root), name)
    _use_cassandra(t, c)
    return t


def _start_cassandra(t: DataCentres, name: str) -> None:
    """One Cassandra node per data centre (see :func:`_use_cassandra`)."""
    cname = f"{name}-cassandra".lower()
    c = cluster.up("cassandra", len(t.dcs), t.regions, name=cname, root=t.root)
    t.clusters.append(cname)
    _use_cassandra(t, c)


def _use_cassandra(t: DataCentres, c: Any) -> None:
    """Point each DC at its node and keyspace; create the keyspaces before any client
    connects (concurrent schema changes from several clients can disagree)."""
    for node in c.nodes:
        address = node.extra["address"]
        t.urls[node.region] = (f"cassandra://{address}:{node.client_port}?keyspace="
                               f"{dc_keyspace(node.region)}&{_LOCAL_LEVELS}")
    first = c.nodes[0]
    setup = f"cassandra://{first.extra['address']}:{first.client_port}?keyspace="

    async def create() -> None:
        for ks in [*(dc_keyspace(dc) for dc in t.dcs), NATIVE_KEYSPACE]:
            store = open_store(setup + ks)
            try:
                await store.connect()
            finally:
                await store.close()

    asyncio.run(create())


class LinkedStore:
    """A store reached over a WAN link: every call waits the one-way delay each way. With
    its topology (``topo``, ``src``, ``dst``) a call over a cut link waits
    ``LINK_TIMEOUT_S`` and fails, one to a stopped store fails on arrival."""

    def __init__(self, inner: Store, there_ms: float, back_ms: float,
                 topo: DataCentres | None = None, src: str = "", dst: str = "") -> None:
        self.inner = inner
        self.runtime = inner.runtime
        self.there_ms = there_ms
        self.back_ms = back_ms
        self.topo = topo
        self.src = src
        self.dst = dst

    def check(self, sent_s: float) -> None:
        """Raise Unavailable when the destination store is stopped; when the link is cut,
        wait out the timeout first (from ``sent_s``, the loop time the call was sent)."""
        if self.topo is None:
            return
        if self.topo.is_cut(self.src, self.dst):
            raise _CutLink(sent_s + LINK_TIMEOUT_S)
        if self.dst in self.topo.stopped:
            raise Unavailable(f"{self.dst}'s store is down (connection refused)")

    @property
    def info(self) -> StoreInfo:
        """The inner store's description."""
        return self.inner.info

    async def connect(self, region: str | None = None) -> Client:
        """Return a client whose calls pay the link's delays."""
        return _LinkedClient(await self.inner.connect(region), self)

    async def close(self) -> None:
        """Nothing to release: the inner store belongs to the topology."""


@dataclass
class _LinkedClient:
    inner: Client
    link: LinkedStore

    async def _call(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kw: Any) -> Any:
        # the call is created only once the request has crossed the link, so a caller that
        # gives up during the delay leaves no un-awaited coroutine behind
        loop = asyncio.get_running_loop()
        sent_s = loop.time()
        try:
            await asyncio.sleep(self.link.there_ms / 1000)
            self.link.check(sent_s)
            try:
                return await fn(*args, **kw)
            finally:
                await asyncio.sleep(self.link.back_ms / 1000)
                self.link.check(sent_s)  # the reply is swallowed by a cut made meanwhile
        except _CutLink as cut:
            await asyncio.sleep(max(0.0, cut.deadline_s - loop.time()))
            raise Unavailable(f"{self.link.dst}: no reply within {LINK_TIMEOUT_S * 1000:g} ms "
                              "(the link is cut)") from None

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        return await self._call(self.inner.read, keys, consistent=consistent)

    async def write(self, values: Mapping[str, Any], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        return await self._call(self.inner.write, values, expect=expect)

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        return await self._call(self.inner.delete, keys)

    async def close(self) -> None:
        await self.inner.close()


class _CutLink(Exception):
    """A call met a cut link; it fails once ``deadline_s`` (loop time) has passed."""

    def __init__(self, deadline_s: float) -> None:
        super().__init__("cut")
        self.deadline_s = deadline_s

"""``cassandra://`` — Apache Cassandra through cassandra-driver, consistency level per
operation, lightweight transactions for conditional writes, in real time.

URL: ``cassandra://A0:9042?hosts=A1:9042,A2:9042&node_regions=US-E,US-W,EU&regions=dc3
&eventual_cl=ONE&consistent_cl=QUORUM&write_cl=QUORUM&serial_cl=SERIAL&keyspace=replicalab
&read=nearest|random&timeout_ms=2000`` (what ``replicalab cluster up cassandra`` prints, with
the consistency levels at their defaults). The host before ``?`` is node n0, ``hosts`` the
others in order; ``node_regions`` names each node's region, which is its data centre.

Mapping: element ``domain/item/attribute`` = the row ``(domain, item, attribute)`` of table
``elements`` (``PRIMARY KEY ((domain, item), attribute)``, column ``value``) in the keyspace
(NetworkTopologyStrategy, one replica per node of each data centre, at most 3, created on
first use). An item is one partition: a write of several elements of one item is one
single-partition batch, atomic and isolated; elements of several items go in one logged
batch (atomic, not isolated). A read of several elements of one item is one query (one
partition: a consistent view); of several items, one query per item.

Consistency level per operation: an eventual read at ``eventual_cl`` (ONE), a consistent read
at ``consistent_cl`` (QUORUM; SERIAL or LOCAL_SERIAL make it a Paxos read), writes and
deletes at ``write_cl`` (QUORUM). ``writes=lwt`` makes every write and delete a
lightweight transaction too (its condition, value differs from a NUL character, always
holds): with SERIAL reads, all operations then go through Paxos, which is what makes a
register linearizable. A conditional write is a lightweight transaction: every element the
condition names gets ``IF value = ?`` (``IF value = null`` for "must not exist"), Paxos at
``serial_cl`` (SERIAL), the commit at ``write_cl``; all its elements must be in one item. An
element named only in the condition is written back with its expected value (a condition
cannot stand alone in CQL); one expected absent is "set to null" (a tombstone: the element
stays absent). A condition that does not hold raises ConditionFailed.

Which node answers: every client is pinned to ONE node, its coordinator, by a white-list
load-balancing policy: ``nearest`` = the node of the client's region (else the node with the
lowest RTT from it, else n0), ``random`` = a random node per client. At ONE the coordinator
reads its own replica (the snitch ranks the local node first), so "the reader at US-W"
reads US-W's copy — if the keyspace holds one there: the keyspace is created only from a
ring in which every node known has its data centre and status (``ring_view``), and a URL
that places its nodes in regions is refused when the keyspace holds no replica in one of
them (``_check_replicas``). ``read_path`` traces one read: the coordinator that answered
and the replicas it read (a history's ``node`` is the coordinator, never the replica).
Timeouts (the driver's ``timeout_ms`` or the coordinator's own) are Unavailable (the
outcome is unknown); a coordinator that refuses a request because too few replicas are
alive (Cassandra's UnavailableException) is a StoreError: nothing was written.

Transactions (``transact``): Cassandra has none across partitions; what an application gets
is reads at a consistency level and a logged batch. Transactional keys live in table
``txn_elements`` (same key as ``elements``; a list-append key in the ``list<int>`` column
``l``, a register in the ``int`` column ``r``), created at the first transaction. Each read
micro-operation is one SELECT at ``txn_read_cl`` (default ``ONE``), with the transaction's
own earlier writes laid over what it returns (as a client library would); every append
(``l = l + [x]``) and write is held back and sent at the end as one batch at ``write_cl``
(logged when it spans partitions): atomic, eventually, but isolated from nothing.
``txn=lwt``: a transaction whose keys all lie in one item (one partition) runs as a
lightweight transaction instead: every key read at ``serial_cl`` (a Paxos read), the
micro-operations played out, then one conditional batch setting each key to its new value
``IF`` it still holds what was read (Paxos: isolated, serializable within the partition);
a condition that fails raises TxnAborted. A transaction spanning items is refused
(Unsupported: Cassandra has no multi-partition lightweight transactions).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from replicalab.runtime import RealRuntime

# an import list: every adapter names the same parts of the Store contract (duplicates lists it)
from replicalab.stores.base import (
    ABSENT,
    ALL_FEATURES,
    ConditionFailed,
    Feature,
    MicroOp,
    ReadResult,
    StoreError,
    StoreInfo,
    TxnAborted,
    Unavailable,
    Unsupported,
    WriteResult,
    parse_element,
)
from replicalab.stores.txnops import check_ops, decode_stored, encode_list, keys_of, play
from replicalab.stores.url import Endpoint, StoreUrl, parse_store_url

DEFAULT_KEYSPACE = "replicalab"
TABLE = "elements"
CONSISTENCY_LEVELS = ("ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM",
                      "EACH_QUORUM", "LOCAL_ONE", "SERIAL", "LOCAL_SERIAL")
_SERIAL = ("SERIAL", "LOCAL_SERIAL")
_PARAMS = ("hosts", "eventual_cl", "consistent_cl", "write_cl", "serial_cl", "keyspace",
           "writes", "txn_read_cl", "txn")
TXN_MODES = ("batch", "lwt")
TXN_TABLE = "txn_elements"
WRITE_MODES = ("plain", "lwt")
RING_WAIT_S = 30.0
"""How long a first connection waits for the ring to show every node the URL names before
it creates the keyspace (s)."""
SCHEMA_WAIT_S = 90.0
"""How long opening a coordinator waits for it to know the probe's table, and retries a
connection or schema change that timed out (s). On a busy machine a node can lag the
others' schema changes by tens of seconds; preparing a statement on it before then fails
with "keyspace ... does not exist"."""
NEVER = "\x00"
"""A value no workload writes: ``IF value != NEVER`` is a condition that always holds, so
``writes=lwt`` puts every write through Paxos."""

# the driver logs every refused connection and lost node; errors reach callers instead
for _name in ("cassandra", "cassandra.cluster", "cassandra.connection", "cassandra.pool"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


def _cl(u: StoreUrl, key: str, default: str, allowed: Sequence[str] = CONSISTENCY_LEVELS
        ) -> str:
    value = u.query.get(key, default).upper()
    if value not in allowed:
        raise ValueError(f"parameter {key}={u.query.get(key)!r} of cassandra:// must be one "
                         f"of {', '.join(allowed)}")
    return value


def _ident(text: str, what: str) -> str:
    if not text or not (text[0].isalpha() and text.replace("_", "").isalnum()) \
            or len(text) > 48:
        raise ValueError(f"{what} {text!r} must be a CQL identifier (letters, digits, _; "
                         "starting with a letter; at most 48 characters)")
    return text.lower()


@dataclass(frozen=True)
class Levels:
    """The consistency level of each kind of operation (names of cassandra's levels)."""

    eventual: str = "ONE"
    consistent: str = "QUORUM"
    write: str = "QUORUM"
    serial: str = "SERIAL"
    lwt_writes: bool = False


def parse_levels(u: StoreUrl) -> Levels:
    """Return the URL's consistency levels (ValueError naming a bad one)."""
    writes = tuple(x for x in CONSISTENCY_LEVELS if x not in _SERIAL)
    lv = Levels(eventual=_cl(u, "eventual_cl", "ONE"),
                consistent=_cl(u, "consistent_cl", "QUORUM"),
                write=_cl(u, "write_cl", "QUORUM", writes),
                serial=_cl(u, "serial_cl", "SERIAL", _SERIAL),
                lwt_writes=u.choice("writes", WRITE_MODES, "plain") == "lwt")
    if lv.eventual == "ANY" or lv.consistent == "ANY":
        raise ValueError("consistency level ANY is for writes only; give a read level such "
                         "as ONE or QUORUM")
    return lv


def _driver() -> Any:
    try:
        import cassandra.cluster
    except ImportError as err:  # pragma: no cover - a dependency of the package
        raise ValueError(f"cassandra-driver is not installed ({err}); pip install "
                         "cassandra-driver") from None
    import cassandra

    return cassandra


@dataclass
class _Node:
    """One coordinator: its driver Cluster, Session and prepared statements."""

    endpoint: Endpoint
    cluster: Any
    session: Any
    stmts: dict[str, Any] = field(default_factory=dict)


class CassandraStore:
    """An opened Cassandra cluster: one driver session per coordinator node used."""

    def __init__(self, url: str, seed: int) -> None:
        u = parse_store_url(url, "hosts", _PARAMS[1:], "cassandra://127.0.0.1:9042")
        self.url = u
        self.levels = parse_levels(u)
        self.txn_read_cl = _cl(u, "txn_read_cl", "ONE",
                               tuple(x for x in CONSISTENCY_LEVELS if x != "ANY"))
        self.txn_mode = u.choice("txn", TXN_MODES, "batch")
        self.keyspace = _ident(u.query.get("keyspace", DEFAULT_KEYSPACE), "keyspace")
        self.nodes = list(u.nodes)
        self.timeout_s = u.timeout_s
        self.rng = random.Random(seed)
        self.runtime = RealRuntime()
        lv = self.levels
        self.info = StoreInfo(
            url=url, kind="cassandra", features=ALL_FEATURES | {Feature.TRANSACTIONS},
            regions=u.region_names(),
            params={"read": u.read, "timeout_ms": round(self.timeout_s * 1000),
                    "txn_read_cl": self.txn_read_cl, "txn": self.txn_mode,
                    "transactions": ("reads one by one, then one (logged) batch of appends"
                                     if self.txn_mode == "batch" else
                                     "one lightweight transaction per partition"),
                    "keyspace": self.keyspace, "eventual_cl": lv.eventual,
                    "consistent_cl": lv.consistent, "write_cl": lv.write,
                    "serial_cl": lv.serial,
                    "nodes": {n.name: f"{n.host}:{n.port} ({n.region})" for n in self.nodes},
                    "conditional_write": f"lightweight transaction (Paxos at {lv.serial}, "
                                         f"commit at {lv.write})",
                    "multi_write": "one batch: single-partition (one item) atomic and "
                                   "isolated; several items a logged batch",
                    "multi_read_snapshot": "within one item"},
            eventual_read_served_by=f"the coordinator each client is pinned to ({u.read}; "
                                    f"read at {lv.eventual}: at ONE it reads its own replica)")
        self._coordinators: dict[str, _Node] = {}
        self._lock = asyncio.Lock()
        self._schema_ready = False
        self._txn_table_ready = False
        self._txn_keys: set[str] = set()

    def node_for(self, region: str | None) -> Endpoint:
        """Return the node a client in ``region`` is pinned to."""
        return self.url.pick(self.nodes, region, self.rng)

    async def connect(self, region: str | None = None) -> CassandraClient:
        """Return a client pinned to one coordinator (see the module doc); ValueError if
        that node cannot be reached."""
        region = self.url.placed(region)
        ep = self.url.via(self.node_for(region), region)  # client links: the WAN
        key = f"{ep.name}@{ep.host}:{ep.port}"
        async with self._lock:
            node = self._coordinators.get(key)
            if node is None:
                node = await asyncio.to_thread(self._open, ep)
                self._coordinators[key] = node
        return CassandraClient(self, node)

    def _open(self, ep: Endpoint, deadline: float | None = None) -> _Node:
        """Return ``ep`` connected, the schema made (once per store) and known to it, the
        statements prepared; a connection or schema change that timed out is tried again
        on a new connection until ``deadline`` (monotonic s; SCHEMA_WAIT_S from now)."""
        deadline = deadline or time.monotonic() + SCHEMA_WAIT_S
        _driver()
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import WhiteListRoundRobinPolicy
        from cassandra.query import tuple_factory

        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([ep.host]),
                                   request_timeout=self.timeout_s, row_factory=tuple_factory)
        cluster = Cluster([ep.host], port=ep.port, protocol_version=5,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                          schema_metadata_enabled=False, token_metadata_enabled=False,
                          connect_timeout=self.timeout_s,
                          control_connection_timeout=self.timeout_s,
                          idle_heartbeat_interval=5, reconnection_policy=_quick_reconnect(),
                          max_schema_agreement_wait=SCHEMA_WAIT_S)
        try:
            session = cluster.connect()
            if not self._schema_ready:
                ensure_schema(session, self.keyspace, len(self.nodes))
                self._check_replicas(session)
                self._schema_ready = True
            for table in (TABLE, TXN_TABLE) if self._txn_table_ready else (TABLE,):
                await_table(session, self.keyspace, table, deadline)
            node = _Node(ep, cluster, session)
            _prepare(node, self.keyspace)
        except ValueError:  # the ring or the keyspace, named by ring_view / _check_replicas
            cluster.shutdown()
            raise
        except Exception as err:  # NoHostAvailable, timeouts, refused schema changes...
            cluster.shutdown()
            if _timed_out(err) and time.monotonic() < deadline:
                return self._open(ep, deadline)  # a stalled node: a new connection
            raise ValueError(f"cannot reach Cassandra at {ep.host}:{ep.port} "
                             f"({type(err).__name__}: {err}); is the cluster up? "
                             "(`replicalab cluster status`)") from None
        return node

    def _check_replicas(self, session: Any) -> None:
        """Raise ValueError when the keyspace holds no replica in a data centre of a node
        the URL places in a region (``node_regions``, what ``cluster up`` prints): a read
        at ONE through that node would be served from another data centre, a WAN round trip
        away, and every probe there would measure the wrong path. A URL that names no
        regions (its nodes are ``local``) names no data centre to check."""
        if "node_regions" not in self.url.query:
            return
        have = keyspace_replication(session, self.keyspace)
        missing = missing_replicas(have, [n.region for n in self.nodes])
        if missing:
            shown = {k: v for k, v in have.items() if k != "class"}
            raise ValueError(f"keyspace {self.keyspace} holds no replica in data centre "
                             f"{', '.join(missing)} (its replication: {shown}), so reads "
                             "there would be served from another data centre; drop it "
                             f"(cqlsh: DROP KEYSPACE {self.keyspace}) or start a fresh "
                             "cluster")

    async def remove_keys(self, keys: Sequence[str]) -> int:
        """Delete ``keys`` at the write level (their transactional rows too), in batches of
        100 per statement kind; return how many deletes were sent (Cassandra does not say
        whether a row existed)."""
        client = await self.connect()
        txn = [k for k in keys if k in self._txn_keys]
        for i in range(0, len(keys), 100):
            await client.delete(list(keys[i:i + 100]))
        for i in range(0, len(txn), 100):
            await client.delete_txn_rows(txn[i:i + 100])
        self._txn_keys.difference_update(txn)
        return len(keys)

    def name_of(self, address: str | None) -> str:
        """Return the node name (``n<i>``) serving at ``address`` (the address if unknown)."""
        for n in self.nodes:
            if n.host == address:
                return n.name
        return address or ""

    async def close(self) -> None:
        """Shut every driver session down."""
        nodes, self._coordinators = list(self._coordinators.values()), {}
        for node in nodes:
            await asyncio.to_thread(node.cluster.shutdown)


def _quick_reconnect() -> Any:
    from cassandra.policies import ConstantReconnectionPolicy

    # a node back from a crash or partition is found within a second, not minutes
    return ConstantReconnectionPolicy(delay=0.5, max_attempts=None)


Member = tuple[str | None, str | None]
"""A node as the connected node knows it: (data centre, gossip status such as NORMAL; None
while gossip has not brought it)."""
_GONE = ("LEFT", "removed", "removing")


def ring_members(session: Any) -> list[Member]:
    """Return every node the connected node knows, itself included, as (data centre, status):
    from its gossip (``system_views.gossip_info``, Cassandra 4.1 on), which knows a node from
    its first gossip round, before the node is a member of the ring and has a row in
    ``system.peers_v2``; a node left or removed is left out."""
    rows = session.execute("SELECT dc, status_with_port FROM system_views.gossip_info")
    out = []
    for dc, status in rows:
        state = (status or "").split(",")[0] or None
        if state not in _GONE:
            out.append((dc or None, state))
    return out


def data_centres_of(members: Sequence[Member]) -> dict[str, int] | None:
    """Return {data centre: nodes} of a ring's members, or None while any member is known
    without its data centre or its status (still starting, in that node's view): a keyspace
    made from such a view would hold no replica in that node's data centre."""
    counts: dict[str, int] = defaultdict(int)
    for dc, status in members:
        if dc is None or status is None:
            return None
        counts[dc] += 1
    return dict(counts)


def ring_view(session: Any, nodes: int, wait_s: float = RING_WAIT_S) -> dict[str, int]:
    """Return {data centre: nodes} once every node the connected node knows has its data
    centre and status, and it knows at least ``nodes`` (ValueError after ``wait_s``).

    Right after a cluster starts, or on a machine too busy for gossip to keep up, a
    coordinator can know a peer without its data centre, or before the peer has joined the
    ring: a keyspace created from that view would hold no replica there, and every read at
    ONE in that data centre would be served from another one for as long as the keyspace
    exists (heldout-2 and -6 of docs/models/pbs.md: US-W's reads took 168 ms, from EU)."""
    deadline = time.monotonic() + wait_s
    while True:
        members = ring_members(session)
        dcs = data_centres_of(members)
        if dcs is not None and sum(dcs.values()) >= nodes:
            return dcs
        if time.monotonic() > deadline:
            known = sum(1 for dc, st in members if dc is not None and st is not None)
            raise ValueError(f"the coordinator knows {known} of the {max(nodes, len(members))}"
                             f" nodes with their data centres after {wait_s:.0f} s "
                             f"({', '.join(sorted({dc for dc, _ in members if dc})) or 'none'}"
                             "); is every node up? (`replicalab cluster status`)")
        time.sleep(0.2)


def missing_replicas(replication: Mapping[str, str], data_centres: Sequence[str]
                     ) -> list[str]:
    """Return the data centres of ``data_centres`` where a keyspace of this ``replication``
    holds no replica."""
    return [dc for dc in dict.fromkeys(data_centres)
            if int(replication.get(dc, "0") or 0) < 1]


def ensure_schema(session: Any, keyspace: str, nodes: int = 1) -> None:
    """Create the keyspace (one replica per node of every data centre, at most 3 each, as
    the ring is seen once it holds the ``nodes`` nodes the URL names) and the elements table
    unless they exist."""
    have = list(session.execute("SELECT keyspace_name FROM system_schema.tables WHERE "
                                "keyspace_name = %s AND table_name = %s", (keyspace, TABLE)))
    if have:
        return
    rf = ", ".join(f"'{dc}': {min(n, 3)}" for dc, n in sorted(ring_view(session,
                                                                         nodes).items()))
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
                    f"{{'class': 'NetworkTopologyStrategy', {rf}}}", timeout=30)
    session.execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.{TABLE} (domain text, item text, "
                    "attribute text, value text, PRIMARY KEY ((domain, item), attribute))",
                    timeout=30)


def await_table(session: Any, keyspace: str, table: str, deadline: float) -> None:
    """Return once the connected node can prepare a statement on ``keyspace.table`` (a
    schema change made through another node reaches it by gossip, and its rows in
    ``system_schema`` come before the node serves the table); ValueError at ``deadline``
    (monotonic s)."""
    from cassandra import InvalidRequest

    while True:
        try:
            session.prepare(f"SELECT * FROM {keyspace}.{table} LIMIT 1")
            return
        except InvalidRequest as err:
            if "does not exist" not in str(err):
                raise
        if time.monotonic() > deadline:
            host = session.cluster.contact_points[0]
            raise ValueError(f"Cassandra at {host} does not know table {keyspace}.{table}, "
                             "made through another node, after waiting for it: its schema "
                             "lags the cluster's; see its server.log (`replicalab cluster "
                             "status`)")
        time.sleep(0.2)


def _timed_out(err: BaseException) -> bool:
    """Return whether ``err`` is the driver giving up on a node that did not answer in
    time (an overloaded or paused node, not a refused connection or a bad request)."""
    from cassandra import OperationTimedOut

    return isinstance(err, OperationTimedOut)


def keyspace_replication(session: Any, keyspace: str) -> dict[str, str]:
    """Return the keyspace's replication as the connected node holds it ({} if none):
    ``{'class': ..., '<data centre>': '<replicas>', ...}``."""
    rows = list(session.execute("SELECT replication FROM system_schema.keyspaces WHERE "
                                "keyspace_name = %s", (keyspace,)))
    return dict(rows[0][0]) if rows else {}


@dataclass(frozen=True)
class ReadPath:
    """Where one traced read went: the node the client meant to use, the coordinator that
    answered, the replicas the coordinator's trace shows it reading, the keyspace's
    replication as that coordinator holds it, and the read's latency (ms)."""

    key: str
    level: str
    intended: str
    coordinator: str
    replicas: tuple[str, ...]
    replication: dict[str, str]
    took_ms: float
    trace: tuple[tuple[str, str], ...] = ()  # (node, what it did), as traced

    @property
    def local(self) -> bool:
        """Return whether the coordinator the client meant to use answered, reading its own
        replica first (a speculative retry may add another after it)."""
        return self.coordinator == self.intended and self.replicas[:1] == (self.intended,)

    def to_json(self) -> dict[str, Any]:
        """Return the path as JSON (node names, ms)."""
        return {"key": self.key, "level": self.level, "intended": self.intended,
                "coordinator": self.coordinator, "replicas": list(self.replicas),
                "replication": self.replication, "took_ms": self.took_ms,
                "local": self.local, "trace": [list(x) for x in self.trace]}


def read_path(client: CassandraClient, key: str) -> ReadPath:
    """Return where one eventual read of ``key`` from ``client`` went (blocking: a traced
    read, then the trace fetched from ``system_traces``; a few ms on the cluster's own
    links). What a staleness probe's history cannot tell: its ``node`` is the coordinator
    the client is pinned to, not the replica that answered."""
    from cassandra.query import SimpleStatement

    store, level = client.store, client.store.levels.eventual
    e = parse_element(key)
    stmt = SimpleStatement(f"SELECT value FROM {store.keyspace}.{TABLE} WHERE domain = %s "
                           "AND item = %s AND attribute = %s", consistency_level=_level(level))
    t0 = time.perf_counter_ns()
    rs = client.node.session.execute(stmt, (e.domain, e.item, e.attribute), trace=True,
                                     timeout=store.timeout_s)
    took_ms = (time.perf_counter_ns() - t0) / 1e6
    traced = session_trace(client.node.session, rs)
    # the coordinator as the server traced it: the driver's coordinator_host is the address
    # it connected to, a Toxiproxy client link's for a client in another region
    coordinator = store.name_of(traced[0])
    return ReadPath(key, level, client.name, coordinator, replicas_read(store, traced),
                    keyspace_replication(client.node.session, store.keyspace),
                    round(took_ms, 3),
                    tuple((store.name_of(src), text) for src, text in traced[1]))


def session_trace(session: Any, rs: Any) -> tuple[str, list[tuple[str, str]]]:
    """Return a traced request's coordinator address and events (source address,
    description), fetched at ONE: ``system_traces`` is SimpleStrategy with two replicas,
    which the coordinator's own data centre may not hold (the driver's LOCAL_ONE is then
    refused)."""
    from cassandra import ConsistencyLevel
    from cassandra.query import QueryTrace

    trace = QueryTrace(rs.response_future.get_query_trace_ids()[-1], session)
    trace.populate(max_wait=10.0, query_cl=ConsistencyLevel.ONE)
    return str(trace.coordinator), [(str(ev.source), str(ev.description))
                                    for ev in trace.events or ()]


_SENT_TO = re.compile(r"(?:reading (?:data|digest) from|READ_REQ message to) /([0-9.]+)")


def replicas_read(store: CassandraStore, trace: tuple[str, list[tuple[str, str]]]
                  ) -> tuple[str, ...]:
    """Return the node names a coordinator's trace shows reading: itself when it ran the
    query locally, each replica it sent a read to (in trace order, each once)."""
    coordinator, events = trace
    out: list[str] = []
    for source, text in events:
        m = _SENT_TO.search(text)
        if m:
            out.append(store.name_of(m.group(1)))
        elif source == coordinator and "single-partition query" in text:
            out.append(store.name_of(source))
    return tuple(dict.fromkeys(out))


def _prepare(node: _Node, ks: str) -> None:
    s, t = node.session, f"{ks}.{TABLE}"
    where = "domain = ? AND item = ? AND attribute = ?"
    node.stmts = {
        "read": s.prepare(f"SELECT value FROM {t} WHERE {where}"),
        "read_item": s.prepare(f"SELECT attribute, value FROM {t} WHERE domain = ? AND "
                               "item = ? AND attribute IN ?"),
        "write": s.prepare(f"UPDATE {t} SET value = ? WHERE {where}"),
        "delete": s.prepare(f"DELETE FROM {t} WHERE {where}"),
        "cas": s.prepare(f"UPDATE {t} SET value = ? WHERE {where} IF value = ?"),
        "lwt_write": s.prepare(f"UPDATE {t} SET value = ? WHERE {where} IF value != ?"),
        "lwt_delete": s.prepare(f"DELETE FROM {t} WHERE {where} IF value != ?"),
    }


def _level(name: str) -> int:
    from cassandra import ConsistencyLevel

    return int(getattr(ConsistencyLevel, name))


def _error(err: BaseException, who: str) -> StoreError:
    """Return the store error for a driver error. Only what certainly did not happen is a
    plain StoreError (recorded ``fail``): a coordinator that refused the request (too few
    replicas alive, overloaded, bootstrapping) or an invalid request. Everything else is
    Unavailable (``info``): timeouts, lost connections, and server errors such as 0x1700
    "CAS operation result is unknown", whose write may have been applied."""
    import cassandra
    from cassandra.protocol import (
        IsBootstrappingErrorMessage,
        OverloadedErrorMessage,
        RequestValidationException,
    )

    text = f"{who}: {type(err).__name__}: {err}"[:400]
    if isinstance(err, cassandra.Unavailable):
        return StoreError(text + " (too few replicas alive: nothing was written)")
    if isinstance(err, OverloadedErrorMessage | IsBootstrappingErrorMessage
                  | RequestValidationException):
        return StoreError(text)
    return Unavailable(text)


@dataclass
class CassandraClient:
    """One client: requests go to the coordinator it is pinned to."""

    store: CassandraStore
    node: _Node

    @property
    def name(self) -> str:
        """Return the coordinator's node name."""
        return self.node.endpoint.name

    async def _run(self, stmt: Any, params: Sequence[Any] | None = None,
                   timeout_s: float | None = None) -> tuple[list[Any], str]:
        """Execute ``stmt`` at the coordinator; return (rows, serving node name)."""
        timeout_s = timeout_s or self.store.timeout_s
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[Any]] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:
            if not fut.done():
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)

        def done(rows: Any) -> None:  # the driver's event thread
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, True, list(rows or []))

        def failed(err: BaseException) -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, False, err)

        try:
            rf = self.node.session.execute_async(stmt, params, timeout=timeout_s)
        except Exception as err:
            raise _error(err, self.name) from None
        rf.add_callbacks(done, failed)
        try:
            rows = await asyncio.wait_for(fut, timeout_s + 1.0)
        except TimeoutError:
            raise Unavailable(f"{self.name}: no answer within "
                              f"{timeout_s * 1000 + 1000:.0f} ms") from None
        except StoreError:
            raise
        except Exception as err:
            raise _error(err, self.name) from None
        host = getattr(rf, "coordinator_host", None)
        address = str(host).rsplit(":", 1)[0] if host else self.node.endpoint.host
        name = self.store.name_of(address)
        # a coordinator reached through a client link answers from the proxy's address
        return rows, self.node.endpoint.name if name == address else name

    def _bind(self, name: str, values: Sequence[Any], level: str,
              serial: str | None = None) -> Any:
        stmt = self.node.stmts[name].bind(values)
        stmt.consistency_level = _level(level)
        if serial is not None:
            stmt.serial_consistency_level = _level(serial)
        return stmt

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` at the eventual or consistent level."""
        level = self.store.levels.consistent if consistent else self.store.levels.eventual
        elements = [parse_element(k) for k in keys]
        if len(keys) == 1:
            e = elements[0]
            rows, node = await self._run(self._bind("read", (e.domain, e.item, e.attribute),
                                                    level))
            return ReadResult((rows[0][0] if rows else None,), node)
        items: dict[tuple[str, str], list[str]] = defaultdict(list)
        for e in elements:
            items[(e.domain, e.item)].append(e.attribute)
        answers = await asyncio.gather(*(
            self._run(self._bind("read_item", (d, i, list(dict.fromkeys(attrs))), level))
            for (d, i), attrs in items.items()))
        found: dict[tuple[str, str, str], str | None] = {}
        for ((d, i), _), (rows, _) in zip(items.items(), answers, strict=True):
            for attribute, value in rows:
                found[(d, i, attribute)] = value
        node = answers[0][1] if answers else self.name
        return ReadResult(tuple(found.get((e.domain, e.item, e.attribute))
                                for e in elements), node)

    def _batch(self, stmts: list[Any], partitions: int, level: str,
               serial: str | None = None) -> Any:
        from cassandra.query import BatchStatement, BatchType

        kind = BatchType.UNLOGGED if partitions == 1 else BatchType.LOGGED
        batch = BatchStatement(batch_type=kind, consistency_level=_level(level))
        if serial is not None:
            batch.serial_consistency_level = _level(serial)
        for s in stmts:
            batch.add(s)
        return batch

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` in one call (a batch for several); with ``expect``, as one
        lightweight transaction (ConditionFailed when it does not hold)."""
        lv = self.store.levels
        if expect or lv.lwt_writes:
            return await self._cas(values, expect or {})
        stmts, parts = [], set()
        for k, v in values.items():
            e = parse_element(k)
            parts.add((e.domain, e.item))
            stmts.append(self._bind("write", (v, e.domain, e.item, e.attribute), lv.write))
        stmt = stmts[0] if len(stmts) == 1 else self._batch(stmts, len(parts), lv.write)
        _, node = await self._run(stmt)
        return WriteResult(node)

    async def _cas(self, values: Mapping[str, str], expect: Mapping[str, Any]) -> WriteResult:
        lv = self.store.levels
        keys = list(dict.fromkeys([*values, *expect]))
        elements = {k: parse_element(k) for k in keys}
        if len({(e.domain, e.item) for e in elements.values()}) > 1:
            raise Unsupported("a conditional write on Cassandra must keep to one item "
                              "(one partition): a lightweight transaction cannot span "
                              "partitions")
        stmts = []
        for k in keys:
            e = elements[k]
            if k in expect:
                want = None if expect[k] is ABSENT else str(expect[k])
                new = values.get(k, want)
                stmts.append(self._bind("cas", (new, e.domain, e.item, e.attribute, want),
                                        lv.write, lv.serial))
            elif lv.lwt_writes:
                stmts.append(self._bind("lwt_write", (values[k], e.domain, e.item,
                                                      e.attribute, NEVER), lv.write, lv.serial))
            else:
                stmts.append(self._bind("write", (values[k], e.domain, e.item, e.attribute),
                                        lv.write))
        return await self._lwt(stmts, lv)

    async def _lwt(self, stmts: list[Any], lv: Levels) -> WriteResult:
        stmt = stmts[0] if len(stmts) == 1 else self._batch(stmts, 1, lv.write, lv.serial)
        rows, node = await self._run(stmt)
        if not rows or not rows[0][0]:
            raise ConditionFailed(f"{node}: condition failed")
        return WriteResult(node)

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` at the write level in one call (a batch for several)."""
        lv = self.store.levels
        stmts, parts = [], set()
        for k in keys:
            e = parse_element(k)
            parts.add((e.domain, e.item))
            if lv.lwt_writes:
                stmts.append(self._bind("lwt_delete", (e.domain, e.item, e.attribute, NEVER),
                                        lv.write, lv.serial))
            else:
                stmts.append(self._bind("delete", (e.domain, e.item, e.attribute), lv.write))
        if lv.lwt_writes:
            if len(parts) > 1:
                raise Unsupported("with writes=lwt a delete must keep to one item (one "
                                  "partition)")
            return await self._lwt(stmts, lv)
        stmt = stmts[0] if len(stmts) == 1 else self._batch(stmts, len(parts), lv.write)
        _, node = await self._run(stmt)
        return WriteResult(node)

    async def _ensure_txn_table(self) -> None:
        store = self.store
        async with store._lock:
            if store._txn_table_ready:
                return
            await self.cql(f"CREATE TABLE IF NOT EXISTS {store.keyspace}.{TXN_TABLE} (domain "
                           "text, item text, attribute text, l list<int>, r int, PRIMARY KEY "
                           "((domain, item), attribute))", level="ONE", timeout_s=30.0)
            deadline = time.monotonic() + SCHEMA_WAIT_S
            for node in list(store._coordinators.values()):  # made through one of them
                await asyncio.to_thread(await_table, node.session, store.keyspace, TXN_TABLE,
                                        deadline)
            store._txn_table_ready = True

    async def transact(self, ops: list[MicroOp], *, gap_ns: int = 0) -> list[MicroOp]:
        """Run ``ops`` as Cassandra can: each read one SELECT at ``txn_read_cl`` (with the
        transaction's own earlier writes laid over it), the appends and writes then one
        batch at ``write_cl`` (``gap_ns`` between micro-operations); return the ops with
        reads filled. Nothing is isolated: no TxnAborted, ever."""
        check_ops(ops)
        await self._ensure_txn_table()
        if self.store.txn_mode == "lwt":
            return await self._transact_lwt(ops, gap_ns)
        store, lv = self.store, self.store.levels
        t = f"{store.keyspace}.{TXN_TABLE}"
        where = "WHERE domain = ? AND item = ? AND attribute = ?"
        pending_lists: dict[str, list[int]] = {}
        pending_regs: dict[str, int] = {}
        writes: list[tuple[str, tuple[Any, ...], tuple[str, str]]] = []
        out: list[MicroOp] = []
        for n, (f, k, v) in enumerate(ops):
            if n and gap_ns:
                await store.runtime.sleep_ns(gap_ns)
            e = parse_element(k)
            if f == "r":
                rows = await self.cql(f"SELECT l, r FROM {t} {where}",
                                      (e.domain, e.item, e.attribute), store.txn_read_cl)
                lst, reg = (rows[0][0], rows[0][1]) if rows else (None, None)
                if k in pending_regs:
                    out.append((f, k, pending_regs[k]))
                elif lst is not None or k in pending_lists:
                    out.append((f, k, [*(lst or []), *pending_lists.get(k, [])]))
                else:
                    out.append((f, k, reg))
                continue
            if f == "append":
                pending_lists.setdefault(k, []).append(int(v))
                writes.append((f"UPDATE {t} SET l = l + ? {where}",
                               ([int(v)], e.domain, e.item, e.attribute), (e.domain, e.item)))
            else:
                pending_regs[k] = int(v)
                writes.append((f"UPDATE {t} SET r = ? {where}",
                               (int(v), e.domain, e.item, e.attribute), (e.domain, e.item)))
            store._txn_keys.add(k)
            out.append((f, k, v))
        if writes:
            stmts = []
            for query, params, _ in writes:
                prepared = await self._prepared(query)
                stmts.append(prepared.bind(list(params)))
            parts = len({p for _, _, p in writes})
            if len(stmts) == 1:
                stmts[0].consistency_level = _level(lv.write)
                await self._run(stmts[0])
            else:
                await self._run(self._batch(stmts, parts, lv.write))
        return out

    async def _prepared(self, query: str) -> Any:
        """Return ``query`` prepared on this client's node (prepared once per node)."""
        prepared = self.node.stmts.get(query)
        if prepared is None:
            try:
                prepared = await asyncio.to_thread(self.node.session.prepare, query)
            except Exception as err:
                raise _error(err, self.name) from None
            self.node.stmts[query] = prepared
        return prepared

    async def _transact_lwt(self, ops: list[MicroOp], gap_ns: int) -> list[MicroOp]:
        """Run ``ops`` (keys in one partition) as one lightweight transaction: Paxos reads,
        then one batch conditioned on every value read (TxnAborted if any changed)."""
        store, lv = self.store, self.store.levels
        keys = keys_of(ops)
        els = {k: parse_element(k) for k in keys}
        if len({(e.domain, e.item) for e in els.values()}) > 1:
            raise Unsupported("txn=lwt: a transaction's keys must lie in one item (one "
                              "partition); Cassandra has no multi-partition lightweight "
                              "transactions")
        t = f"{store.keyspace}.{TXN_TABLE}"
        where = "WHERE domain = ? AND item = ? AND attribute = ?"
        held: dict[str, tuple[Any, Any]] = {}
        for k in keys:
            e = els[k]
            rows = await self.cql(f"SELECT l, r FROM {t} {where}",
                                  (e.domain, e.item, e.attribute), lv.serial)
            held[k] = (list(rows[0][0]) if rows and rows[0][0] else None,
                       rows[0][1] if rows else None)
        stored = {k: (encode_list(lst) if lst is not None else
                      None if reg is None else str(reg)) for k, (lst, reg) in held.items()}
        played = play(ops, stored)
        if gap_ns and len(ops) > 1:
            await store.runtime.sleep_ns(gap_ns * (len(ops) - 1))
        query = f"UPDATE {t} SET l = ?, r = ? {where} IF l = ? AND r = ?"
        prepared = await self._prepared(query)
        stmts = []
        for k in keys:
            e = els[k]
            lst, reg = held[k]
            new_l, new_r = lst, reg
            if k in played.writes:
                value = decode_stored(played.writes[k])
                new_l, new_r = (value, None) if isinstance(value, list) else (None, value)
            stmts.append(prepared.bind([new_l, new_r, e.domain, e.item, e.attribute,
                                        lst, reg]))
            store._txn_keys.add(k)
        stmt = stmts[0] if len(stmts) == 1 else self._batch(stmts, 1, lv.write, lv.serial)
        if len(stmts) == 1:
            stmt.consistency_level = _level(lv.write)
            stmt.serial_consistency_level = _level(lv.serial)
        rows, _ = await self._run(stmt)
        if not rows or not rows[0][0]:
            raise TxnAborted(f"{self.name}: a key read changed before the lightweight "
                             "transaction")
        return played.ops

    async def delete_txn_rows(self, keys: Sequence[str]) -> None:
        """Delete the transactional rows of ``keys`` at the write level, one by one."""
        t = f"{self.store.keyspace}.{TXN_TABLE}"
        for k in keys:
            e = parse_element(k)
            await self.cql(f"DELETE FROM {t} WHERE domain = ? AND item = ? AND attribute = ?",
                           (e.domain, e.item, e.attribute), self.store.levels.write)

    async def cql(self, query: str, params: Sequence[Any] = (), level: str = "ONE",
                  serial: str | None = None, timeout_s: float | None = None
                  ) -> list[tuple[Any, ...]]:
        """Run one CQL statement (prepared once per coordinator; schema statements, which
        take no parameters, are sent as they are) at consistency ``level`` and return its
        rows: for what the Store contract cannot say, such as Cassandra's native counter
        columns (``counters/native.py``). ``timeout_s`` replaces the URL's ``timeout_ms``
        (a schema change waits for every node to agree). Errors as for reads and writes."""
        if query.lstrip().upper().startswith(("CREATE ", "DROP ", "ALTER ")):
            from cassandra.query import SimpleStatement

            stmt = SimpleStatement(query, consistency_level=_level(level))
            rows, _ = await self._run(stmt, timeout_s=timeout_s)
            return [tuple(r) for r in rows]
        prepared = await self._prepared(query)
        stmt = prepared.bind(list(params))
        stmt.consistency_level = _level(level)
        if serial is not None:
            stmt.serial_consistency_level = _level(serial)
        rows, _ = await self._run(stmt, timeout_s=timeout_s)
        return [tuple(r) for r in rows]

    async def close(self) -> None:
        """Sessions are shared per coordinator and closed by the store."""


def open_cassandra(url: str, seed: int) -> CassandraStore:
    """Return a Cassandra store for ``url``."""
    return CassandraStore(url, seed)

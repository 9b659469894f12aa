"""Store kinds: one record per store replicalab can start, probe and grade.

A record holds its display name and the other spellings accepted (``postgresql`` for
``postgres``, ``zk`` for ``zookeeper``), the URL schemes of its adapter, its cluster driver,
whether it has a leader (how the leader/primary is found: :func:`replicalab.cluster.base.
find_leader`), which of its reads are local and which strong, the durability settings its
documentation describes, and what the documentation promises per scorecard property with
where it says so, and what isolation its transactions promise for a given URL (with the
documentation that says so). Everything that lists, starts, probes, grades or documents
stores reads these records: ``cluster up``'s kinds, ``compare --kinds``, ``scorecard
--kinds`` and its cells, the help texts, the isolation a transactional run is graded
against (:func:`isolation_promise`: no scheme is named anywhere else).

The record sits in ``cluster/`` because it names a cluster driver (a module of this layer)
and an adapter (of ``stores/``, below); what it promises is plain data the scorecard in
``experiments/`` reads. A kind from another package is one record and one line of that
package's metadata::

    [project.entry-points."replicalab.store_kinds"]
    mykv = "mykv.kind:MYKV"      # MYKV = StoreKind(name="mykv", schemes=("mykv",),
                                 #   driver="mykv.driver:Driver", adapter="mykv.store:open")

found the first time a name (or a URL scheme) replicalab does not ship is asked for; its
``mykv://`` URLs then open with its adapter. At run time (a test) it is one call,
``register(StoreKind(...))``. The shipped kinds are declared in the same group
(pyproject.toml) and registered below; the adapters they name are also the lines of
``stores/registry.py``, which opens their URLs without loading these records.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replicalab import plugins
from replicalab.stores import registry as store_registry
from replicalab.stores.base import redact_url


@dataclass(frozen=True)
class Promise:
    """One documented promise and its source (a URL or a document name)."""

    text: str
    source: str


@dataclass(frozen=True)
class DurabilityVariant:
    """One server setting a durability run uses: its label, the cluster settings or store
    URL parameters that make it, and whether its documentation promises that no
    acknowledged write is lost (under a kill -9, and under a power loss)."""

    label: str
    settings: tuple[tuple[str, str], ...] = ()
    url_params: str = ""
    keeps_on_kill: bool = True
    keeps_on_power_loss: bool = True
    promise: str = ""
    source: str = ""
    quick: bool = True  # also in a --quick scorecard


@dataclass(frozen=True)
class TxnVariant:
    """One way the kind runs transactions and the isolation its documentation promises for
    it: a label (PostgreSQL's level), the store URL parameters that choose it, the promised
    model in the transaction checker's names (``strict-serializable``, ``serializable``,
    ``snapshot-isolation``, ...; ``none``: atomic at most, not isolated), the promise in
    words and where the documentation says so."""

    label: str
    url_params: str
    model: str
    promise: str
    source: str


@dataclass(frozen=True)
class Isolation:
    """What a kind's transactions promise for the URLs whose parameters include every pair
    of ``when`` (``()``: any URL; a kind's rules are tried in order, the first that holds
    wins): the model in the transaction checker's names (``strict-serializable``,
    ``serializable``, ``snapshot-isolation``, ``read-committed``, ...; ``none``: a read
    path or a batch that isolates nothing, every anomaly to be expected) and the
    documentation that says so."""

    model: str
    source: str
    when: tuple[tuple[str, str], ...] = ()

    def holds(self, query: dict[str, str]) -> bool:
        """Return True when the URL parameters ``query`` choose this rule."""
        return all(query.get(k) == v for k, v in self.when)


@dataclass(frozen=True)
class StoreKind:
    """What replicalab knows of one store kind (see the module's docstring).

    ``driver`` is ``"module:Class"`` or a callable returning the cluster driver;
    ``adapter`` is ``"module:function"`` or the opener ``(url, seed) -> Store`` of
    ``schemes`` (None: the adapter ``stores/registry.py`` ships for them).
    ``durability_promised`` picks the durability setting whose promise the scorecard's cell
    shows (index into ``durability``). ``isolation``: what its transactions promise per URL
    (:class:`Isolation`; none: the kind has no transactions)."""

    name: str
    schemes: tuple[str, ...]
    driver: str | Callable[[], Any]
    aliases: tuple[str, ...] = ()
    adapter: str | Callable[[str, int], Any] | None = None
    leaderless: bool = False  # no leader/primary: a "leader" crash takes node 0, the writer's
    # coordinator
    leader_word: str = "leader"  # what its documentation calls the node that orders writes
    local_reads: bool = True  # eventual reads served by a replica cut off from its leader
    strong_reads: bool = False  # the adapter's consistent read is promised linearizable
    durability: tuple[DurabilityVariant, ...] = ()
    durability_promised: int = -1
    promises: Mapping[str, Promise] = field(default_factory=dict)
    transactions: tuple[TxnVariant, ...] = ()  # the isolation promised, per way (level)
    isolation: tuple[Isolation, ...] = ()

    def isolation_for(self, url: str) -> tuple[str, str]:
        """Return (model, documentation source) the transactions of the store at ``url``
        promise; ValueError (one line) when this kind has no transactions."""
        return _promised(self.isolation, url)

    @property
    def names(self) -> tuple[str, ...]:
        """Return every spelling this kind answers to: its name, then its aliases."""
        return (self.name, *self.aliases)

    def make_driver(self) -> Any:
        """Return a new cluster driver of this kind."""
        if isinstance(self.driver, str):
            module, cls = self.driver.split(":")
            return getattr(importlib.import_module(module), cls)()
        return self.driver()

    def promise(self, prop: str) -> Promise | None:
        """Return what the documentation promises for scorecard property ``prop`` (None when
        the record says nothing of it); durability's is the chosen setting's."""
        if prop == "durability" and self.durability:
            v = self.durability[self.durability_promised]
            return Promise(f"{v.label}: {v.promise}", v.source)
        if prop == "transactionality" and self.transactions:
            return Promise("; ".join(f"{v.label}: {v.promise}" for v in self.transactions),
                           " and ".join(dict.fromkeys(v.source for v in self.transactions)))
        return self.promises.get(prop)

    def capabilities(self, features: frozenset[str]) -> dict[str, Any]:
        """Return what this kind offers, from its adapter's declared ``features`` (the
        ``Feature`` values of an opened store) and this record: conditional writes,
        transactions, replica (eventual) reads, strong reads, the durability settings."""
        return {"conditional_writes": "conditional-write" in features,
                "transactions": "transactions" in features,
                "atomic_multi_writes": "atomic-multi-write" in features,
                "replica_reads": "eventual-read" in features and self.local_reads,
                "strong_reads": self.strong_reads,
                "durability_settings": [v.label for v in self.durability]}


PG_DOC = "https://www.postgresql.org/docs/current/transaction-iso.html"
PG_STANDBY_DOC = "https://www.postgresql.org/docs/current/hot-standby.html"
ETCD_DOC = "https://etcd.io/docs/v3.4/learning/api_guarantees/"
ZK_DOC = "https://zookeeper.apache.org/doc/r3.8.4/zookeeperProgrammers.html#ch_zkGuarantees"
REDIS_DOC = "https://redis.io/docs/latest/develop/interact/transactions/"
CASSANDRA_DOC = "https://cassandra.apache.org/doc/5.0/cassandra/developing/cql/dml.html"
CASSANDRA_LWT_DOC = ("https://cassandra.apache.org/doc/5.0/cassandra/architecture/"
                     "guarantees.html#lightweight-transactions-with-linearizable-consistency")
SIM_DOC = "docs/transactions.md#simulated-stores"
S3_DOC = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html"

_REDIS_PERSIST = ("https://redis.io/docs/latest/operate/oss_and_stack/management/"
                  "persistence/")
_PG_WAL = "https://www.postgresql.org/docs/15/runtime-config-wal.html#GUC-SYNCHRONOUS-COMMIT"
_ZK_ADMIN = "https://zookeeper.apache.org/doc/r3.8.4/zookeeperAdmin.html (forceSync)"
_ETCD_GUARANTEES = "https://etcd.io/docs/v3.4/learning/api_guarantees/"
_ZK_GUARANTEES = ("https://zookeeper.apache.org/doc/r3.8.4/zookeeperProgrammers.html"
                  "#ch_zkGuarantees")
_REDIS_REPL = ("https://redis.io/docs/latest/operate/oss_and_stack/management/replication/")
_PG_HOT = "https://www.postgresql.org/docs/15/hot-standby.html"
_CASSANDRA_YAML = ("https://github.com/apache/cassandra/blob/cassandra-5.0/conf/cassandra.yaml "
                   "(commitlog_sync)")
_CASSANDRA_DYNAMO = ("https://cassandra.apache.org/doc/5.0/cassandra/architecture/dynamo.html"
                     "#tunable-consistency")
_CASSANDRA_DML = "https://cassandra.apache.org/doc/5.0/cassandra/developing/cql/dml.html"

# The StoreKind records are data (one per store, alike in shape by design).
REDIS = StoreKind(
    name="redis", schemes=("redis", "rediss"), driver="replicalab.cluster.redis:RedisDriver",
    adapter="replicalab.stores.redis:open_redis",
    leader_word="primary", local_reads=True, strong_reads=False,
    durability=(
        DurabilityVariant("appendonly no (the lab's setting)", (), "", False, False,
                          "no persistence: a restarted server starts empty (RDB snapshots "
                          "are off here), so every write since the start is lost", _REDIS_PERSIST),
        DurabilityVariant("appendfsync no", (("appendonly", "yes"), ("appendfsync", "no")),
                          "", True, False, "the OS decides when the AOF reaches the disk: a "
                          "crashed server loses nothing the OS holds, a power loss may lose "
                          "much", _REDIS_PERSIST, quick=False),
        DurabilityVariant("appendfsync everysec", (("appendonly", "yes"),
                                                   ("appendfsync", "everysec")),
                          "", True, False, "Redis's default with AOF: \"you can lose 1 second "
                          "worth of writes\"", _REDIS_PERSIST, quick=False),
        DurabilityVariant("appendfsync always", (("appendonly", "yes"),
                                                 ("appendfsync", "always")),
                          "", True, True, "fsync before every reply: \"very very slow, very "
                          "safe\"", _REDIS_PERSIST),
    ),
    promises={
        "consistency": Promise("asynchronous replication: a replica may serve stale values; "
                               "no linearizability promised (a read at the primary is the "
                               "freshest)", _REDIS_REPL),
        "availability": Promise("a replica keeps serving (stale) reads without its primary; "
                                "writes need the primary (no automatic failover without "
                                "Sentinel)", _REDIS_REPL),
    },
    transactions=(
        TxnVariant("MULTI/EXEC with WATCH on the primary", "", "serializable",
                   "serializable: \"all the commands in a transaction are serialized and "
                   "executed sequentially\", and EXEC fails if a WATCHed key changed "
                   "(optimistic locking)", REDIS_DOC),
    ),
    isolation=(Isolation("serializable", REDIS_DOC),),
)

POSTGRES = StoreKind(
    name="postgres", schemes=("postgresql",), aliases=("postgresql",),
    driver="replicalab.cluster.postgres:PostgresDriver",
    adapter="replicalab.stores.postgres:open_postgres",
    leader_word="primary", local_reads=True, strong_reads=False,
    durability=(
        DurabilityVariant("synchronous_commit off", (("fsync", "on"),), "synchronous_commit=off",
                          False, False, "a commit returns before its WAL is flushed: up to "
                          "3 x wal_writer_delay of commits can be lost in a crash",
                          _PG_WAL),
        DurabilityVariant("synchronous_commit local (the lab's setting)", (("fsync", "on"),),
                          "synchronous_commit=local", True, True, "a commit returns once its "
                          "WAL is flushed on the primary", _PG_WAL, quick=False),
        DurabilityVariant("synchronous_commit on", (("fsync", "on"),), "synchronous_commit=on",
                          True, True, "a commit returns once its WAL is flushed on the "
                          "primary and the standbys named (here all)", _PG_WAL),
    ),
    promises={
        "consistency": Promise("hot standbys lag the primary (reads there may be stale); the "
                               "primary serves its committed state", _PG_HOT),
        "availability": Promise("a hot standby keeps serving reads without its primary; "
                                "writes need the primary", _PG_HOT),
    },
    # lock_timeout_ms: a transaction blocked on a row lock gives up after 20 ms (an abort)
    # instead of waiting a second for the deadlock detector: hot keys stay busy
    transactions=(
        TxnVariant("SERIALIZABLE", "isolation=serializable&lock_timeout_ms=20", "serializable",
                   "serializable: concurrent serializable transactions are \"guaranteed to "
                   "produce the same effect as running them one at a time in some order\" "
                   "(a conflicting one fails with a serialization failure)",
                   PG_DOC),
        TxnVariant("REPEATABLE READ", "isolation=repeatable-read&lock_timeout_ms=20",
                   "snapshot-isolation", "snapshot isolation: each transaction reads one "
                   "snapshot and a concurrent update of a row it updates aborts it, but write "
                   "skew (G2-item) is allowed", PG_DOC),
    ),
    # REPEATABLE READ is snapshot isolation (the docs: it "does not allow phantom reads"
    # yet admits write skew, serialization anomalies); transactions reading a standby
    # (txn_reads=standby) isolate nothing
    isolation=(Isolation("none", PG_STANDBY_DOC, (("txn_reads", "standby"),)),
               Isolation("serializable", PG_DOC, (("isolation", "serializable"),)),
               Isolation("snapshot-isolation", PG_DOC, (("isolation", "repeatable-read"),)),
               Isolation("read-committed", PG_DOC)),
)

ETCD = StoreKind(
    name="etcd", schemes=("etcd",), driver="replicalab.cluster.etcd:EtcdDriver",
    adapter="replicalab.stores.etcd:open_etcd",
    local_reads=True, strong_reads=True,  # the linearizable read
    durability=(
        DurabilityVariant("defaults", (), "", True, True, "a write is acknowledged once a "
                          "majority has it in its fsynced WAL: \"any completed operations are "
                          "durable\"", _ETCD_GUARANTEES),
    ),
    promises={
        "consistency": Promise("linearizable reads by default; serializable reads may be "
                               "stale", _ETCD_GUARANTEES),
        "availability": Promise("a member cut off from the majority cannot serve "
                                "linearizable reads or writes; serializable reads stay local",
                                _ETCD_GUARANTEES),
    },
    transactions=(
        TxnVariant("Txn guarded by the revisions read", "", "strict-serializable",
                   "strict serializability: a Txn reads at one revision and applies its "
                   "writes atomically through the Raft log, in real-time order",
                   ETCD_DOC),
    ),
    isolation=(Isolation("strict-serializable", ETCD_DOC),),
)

ZOOKEEPER = StoreKind(
    name="zookeeper", schemes=("zk",), aliases=("zk",),
    driver="replicalab.cluster.zookeeper:ZookeeperDriver",
    adapter="replicalab.stores.zookeeper:open_zk",
    # a server that loses its quorum stops serving clients (read-only mode is off); sync +
    # read is the strong read
    local_reads=False, strong_reads=True,
    durability=(
        DurabilityVariant("forceSync=yes (ZooKeeper's default)", (("forceSync", "yes"),), "",
                          True, True, "an update is synced to the transaction log on a "
                          "quorum before it is acknowledged", _ZK_ADMIN),
        DurabilityVariant("forceSync=no (the lab's setting)", (("forceSync", "no"),), "",
                          True, False, "no fsync of the transaction log: \"risk of data "
                          "loss\" on a power failure", _ZK_ADMIN, quick=False),
    ),
    durability_promised=0,  # the cell shows the default's promise, not the lab's setting's
    promises={
        "consistency": Promise("sequential consistency: a server may serve stale data; "
                               "sync() then read gives the latest", _ZK_GUARANTEES),
        "availability": Promise("a server that loses its quorum stops serving clients "
                                "(read-only mode is off)", _ZK_GUARANTEES),
    },
    transactions=(
        TxnVariant("multi() with version checks", "", "strict-serializable",
                   "strict serializability: multi() applies all its operations or none, "
                   "every update is ordered by the leader, and the version checks abort a "
                   "multi whose reads changed", ZK_DOC),
    ),
    isolation=(Isolation("strict-serializable", ZK_DOC),),
)

CASSANDRA = StoreKind(
    name="cassandra", schemes=("cassandra",), driver="replicalab.cluster.cassandra:CassandraDriver",
    adapter="replicalab.stores.cassandra:open_cassandra",
    # no leader; a read at ONE needs one live replica, its own; a QUORUM read is not
    # linearizable (only SERIAL reads with lightweight transactions are)
    leaderless=True, local_reads=True, strong_reads=False,
    # both in a quick run: the question of its row is exactly periodic against batch
    durability=(
        DurabilityVariant("commitlog_sync periodic (the default and the lab's)", (), "", True,
                          False, "\"writes may be acked immediately and the CommitLog is "
                          "simply synced every commitlog_sync_period\" (10 s): a node that "
                          "loses power loses what it acked since the last sync", _CASSANDRA_YAML),
        DurabilityVariant("commitlog_sync batch", (("commitlog_sync", "batch"),), "", True,
                          True, "\"Cassandra won't ack writes until the commit log has been "
                          "flushed to disk\"", _CASSANDRA_YAML),
    ),
    promises={
        "consistency": Promise("tunable: a read at ONE may be stale; QUORUM reads after QUORUM "
                               "writes see them (R + W > N); linearizable only for lightweight "
                               "transactions and SERIAL reads", _CASSANDRA_DYNAMO),
        "availability": Promise("no leader: a request at ONE needs one live replica, at "
                                "QUORUM a majority of the replicas; any node coordinates "
                                "writes", _CASSANDRA_DYNAMO),
    },
    transactions=(
        TxnVariant("reads at ONE, then a logged batch", "", "none",
                   "atomic, not isolated: a logged batch across partitions is applied "
                   "whole (eventually) but other clients may see it in part, and the "
                   "transaction's reads are separate queries", CASSANDRA_DOC),
    ),
    # txn=lwt: Paxos per partition, linearizable, one item only; else a logged batch:
    # atomic, eventually; isolated: no
    isolation=(Isolation("strict-serializable", CASSANDRA_LWT_DOC, (("txn", "lwt"),)),
               Isolation("none", CASSANDRA_DOC)),
)

_MINIO_CONSISTENCY = ("https://github.com/minio/minio/blob/master/docs/distributed/README.md "
                      "(Consistency Guarantees)")
_MINIO_SITES = "https://github.com/minio/minio/blob/master/docs/site-replication/README.md"
_MINIO_REPLICATION = ("https://github.com/minio/minio/blob/master/docs/bucket/replication/"
                      "README.md (\"replication is completed asynchronously\")")

MINIO = StoreKind(
    name="minio", schemes=("s3",), driver="replicalab.cluster.minio:MinioDriver",
    adapter="replicalab.stores.s3:open_s3",
    # sites are peers (every one takes writes); the s3:// adapter sends writes and consistent
    # reads to the first, the home site, and a "leader" fault takes it
    leader_word="home site", local_reads=True, strong_reads=True,
    durability=(
        DurabilityVariant("defaults (one drive per site)", (), "", True, True,
                          "its consistency guarantee rests on the drive honouring O_DIRECT "
                          "and fdatasync (the documentation warns that ext4 does not): an "
                          "acknowledged PUT is on the drive", _MINIO_CONSISTENCY),
    ),
    promises={
        "consistency": Promise("strict read-after-write and list-after-write consistency "
                               "inside a site; between sites, replication is asynchronous "
                               "(a read at another site may be stale)",
                               f"{_MINIO_CONSISTENCY} and {_MINIO_REPLICATION}"),
        "availability": Promise("each site serves reads and writes on its own; a site cut "
                                "off keeps serving and catches up when the link heals",
                                _MINIO_SITES),
    },
    transactions=(
        TxnVariant("conditional PUT per object (If-Match)", "", "none",
                   "no multi-object transactions: a conditional PUT makes one object's "
                   "read-modify-write atomic; several objects are written one by one",
                   S3_DOC),
    ),
    isolation=(Isolation("none", S3_DOC),),  # a conditional PUT per object, not together
)

SIMULATED = (Isolation("none", SIM_DOC),)
"""The simulated stores' transactions (no kind: replicalab starts no cluster for them): the
micro-operations one by one, isolating nothing."""

_KINDS: dict[str, StoreKind] = {}
_BY_NAME: dict[str, StoreKind] = {}
_ISOLATION: dict[str, tuple[Isolation, ...]] = {"sim": SIMULATED}
"""URL scheme -> its kind's isolation rules."""


def _promised(rules: tuple[Isolation, ...], url: str) -> tuple[str, str]:
    """Return (model, source) of the first rule that holds for ``url`` (ValueError: the
    one-line refusal of a store without transactions)."""
    query = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}
    for rule in rules:
        if rule.holds(query):
            return rule.model, rule.source
    raise ValueError(no_transactions(url))


def register(kind: StoreKind) -> StoreKind:
    """Add ``kind`` (ValueError when one of its names is taken by another kind, or it names
    an adapter of its own for a scheme replicalab ships); its schemes open with its
    ``adapter``. Return it."""
    for n in kind.names:
        other = _BY_NAME.get(n)
        if other is not None and other.name != kind.name:
            raise ValueError(f"store kind name {n!r} is taken by {other.name}")
    adapter = kind.adapter
    for scheme in kind.schemes if adapter is not None else ():
        shipped = store_registry._ADAPTERS.get(scheme)
        if shipped is not None and shipped != adapter:
            raise ValueError(f"store kind {kind.name}: the {scheme}:// scheme is replicalab's "
                             "own; give the kind a scheme of its own")
    _KINDS[kind.name] = kind
    _BY_NAME.update(dict.fromkeys(kind.names, kind))
    _ISOLATION.update(dict.fromkeys(kind.schemes, kind.isolation))
    for scheme in kind.schemes if adapter is not None else ():
        if scheme not in store_registry._ADAPTERS:
            store_registry.register(scheme, store_registry.lazy(adapter)
                                    if isinstance(adapter, str) else adapter)
    return kind


for _k in (REDIS, POSTGRES, ETCD, ZOOKEEPER, CASSANDRA, MINIO):  # the shipped kinds: a line each
    register(_k)
BUILTIN = tuple(_KINDS)
"""The shipped kinds' names (pyproject.toml declares each in ``replicalab.store_kinds``)."""


def _is_kind(obj: object) -> bool:
    return isinstance(obj, StoreKind)


def _load_installed() -> str | None:
    """Register every store kind installed packages declare (once per process); return the
    first error of a package that failed to load (None when all loaded)."""
    error = None
    for entry in plugins.declared(plugins.STORE_KINDS).values():
        if entry.builtin or entry.name in _BY_NAME:
            continue
        try:
            register(plugins.load(entry, "store kind", _is_kind, "a StoreKind record"))
        except ValueError as err:  # PluginError, or a name or scheme taken
            error = error or str(err)
    return error


def names(installed: bool = False) -> list[str]:
    """Return the display names of every kind, shipped first in their order; with
    ``installed``, also those installed packages declare (reading their metadata)."""
    if installed:
        _load_installed()
    return list(_KINDS)


def resolve(name: str) -> StoreKind:
    """Return the kind called ``name`` (any accepted spelling), the kinds installed packages
    declare included (ValueError listing the kinds, or naming the package that fails to
    load it)."""
    kind = _BY_NAME.get(name)
    if kind is not None:
        return kind
    entry = plugins.declared(plugins.STORE_KINDS).get(name)
    if entry is not None and not entry.builtin:
        return register(plugins.load(entry, "store kind", _is_kind, "a StoreKind record"))
    error = _load_installed()  # an alias of an installed kind
    if name in _BY_NAME:
        return _BY_NAME[name]
    raise ValueError(f"unknown cluster kind {name!r}; use one of {', '.join(names())} "
                     f"{plugins.outside_hint(plugins.STORE_KINDS, name)}"
                     + (f"; {error}" if error else ""))


def for_scheme(scheme: str) -> StoreKind | None:
    """Return the kind whose URLs have ``scheme`` (the installed ones included), None for a
    scheme no kind has (the simulator's, an outside adapter's)."""
    for kind in _KINDS.values():
        if scheme in kind.schemes:
            return kind
    _load_installed()
    return next((k for k in _KINDS.values() if scheme in k.schemes), None)


def isolation_promise(store_url: str) -> tuple[str, str]:
    """Return (model, documentation source) the transactions of the store at ``store_url``
    promise, from its kind's record; ValueError (one line) for a store without
    transactions or whose kind records none."""
    scheme = urlsplit(store_url).scheme.lower()
    if scheme not in _ISOLATION:
        for_scheme(scheme)  # an installed kind registers its rules
    return _promised(_ISOLATION.get(scheme, ()), store_url)


def txn_schemes() -> list[str]:
    """Return the URL schemes of the stores with transactions (a refusal's "use one of"),
    the kinds with the most isolation levels first, then the simulator's."""
    with_txn = [k for k in _KINDS.values() if k.isolation]
    with_txn.sort(key=lambda k: -len(k.isolation))
    return [*(f"{k.schemes[0]}://" for k in with_txn), "sim://"]


def no_transactions(store_url: str) -> str:
    """Return the one-line refusal for a store without transactions."""
    return (f"{redact_url(store_url)} has no transactions; use one of "
            f"{', '.join(txn_schemes())} (e.g. postgresql://...?isolation=serializable)")


def help_text() -> str:
    """Return the kinds as a help text lists them: ``redis, postgres, etcd, ...``."""
    return ", ".join(names())

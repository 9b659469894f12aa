"""What each store's documentation promises, property by property, with where it says so.

A cell shows the measured value beside the promise; the colour says whether the value meets
it (and seed 001's goals for latency). The texts paraphrase the cited pages.
"""

from __future__ import annotations

from dataclasses import dataclass


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


_REDIS_PERSIST = ("https://redis.io/docs/latest/operate/oss_and_stack/management/"
                  "persistence/")
_PG_WAL = "https://www.postgresql.org/docs/15/runtime-config-wal.html#GUC-SYNCHRONOUS-COMMIT"
_ZK_ADMIN = "https://zookeeper.apache.org/doc/r3.8.4/zookeeperAdmin.html (forceSync)"
_ETCD_GUARANTEES = "https://etcd.io/docs/v3.4/learning/api_guarantees/"
_ZK_GUARANTEES = ("https://zookeeper.apache.org/doc/r3.8.4/zookeeperProgrammers.html"
                  "#ch_zkGuarantees")
_REDIS_REPL = ("https://redis.io/docs/latest/operate/oss_and_stack/management/replication/")
_PG_HOT = "https://www.postgresql.org/docs/15/hot-standby.html"
_SEED003 = "seed 003 §4.3 (SimpleDB as hypothesised) and docs/simulator.md"
_CASSANDRA_YAML = ("https://github.com/apache/cassandra/blob/cassandra-5.0/conf/cassandra.yaml "
                   "(commitlog_sync)")
_CASSANDRA_DYNAMO = ("https://cassandra.apache.org/doc/5.0/cassandra/architecture/dynamo.html"
                     "#tunable-consistency")
_CASSANDRA_DML = "https://cassandra.apache.org/doc/5.0/cassandra/developing/cql/dml.html"

DURABILITY: dict[str, tuple[DurabilityVariant, ...]] = {
    "redis": (
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
    "postgres": (
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
    "etcd": (
        DurabilityVariant("defaults", (), "", True, True, "a write is acknowledged once a "
                          "majority has it in its fsynced WAL: \"any completed operations are "
                          "durable\"", _ETCD_GUARANTEES),
    ),
    "zookeeper": (
        DurabilityVariant("forceSync=yes (ZooKeeper's default)", (("forceSync", "yes"),), "",
                          True, True, "an update is synced to the transaction log on a "
                          "quorum before it is acknowledged", _ZK_ADMIN),
        DurabilityVariant("forceSync=no (the lab's setting)", (("forceSync", "no"),), "",
                          True, False, "no fsync of the transaction log: \"risk of data "
                          "loss\" on a power failure", _ZK_ADMIN, quick=False),
    ),
    # both in a quick run: the question of its row is exactly periodic against batch
    "cassandra": (
        DurabilityVariant("commitlog_sync periodic (the default and the lab's)", (), "", True,
                          False, "\"writes may be acked immediately and the CommitLog is "
                          "simply synced every commitlog_sync_period\" (10 s): a node that "
                          "loses power loses what it acked since the last sync", _CASSANDRA_YAML),
        DurabilityVariant("commitlog_sync batch", (("commitlog_sync", "batch"),), "", True,
                          True, "\"Cassandra won't ack writes until the commit log has been "
                          "flushed to disk\"", _CASSANDRA_YAML),
    ),
}
"""Per cluster kind, the settings its durability runs compare; the first is the store as
the lab configures it, the others its documented alternatives."""

_CONSISTENCY = {
    "redis": Promise("asynchronous replication: a replica may serve stale values; no "
                     "linearizability promised (a read at the primary is the freshest)",
                     _REDIS_REPL),
    "postgres": Promise("hot standbys lag the primary (reads there may be stale); the primary "
                        "serves its committed state", _PG_HOT),
    "etcd": Promise("linearizable reads by default; serializable reads may be stale",
                    _ETCD_GUARANTEES),
    "zookeeper": Promise("sequential consistency: a server may serve stale data; sync() then "
                         "read gives the latest", _ZK_GUARANTEES),
    "cassandra": Promise("tunable: a read at ONE may be stale; QUORUM reads after QUORUM "
                         "writes see them (R + W > N); linearizable only for lightweight "
                         "transactions and SERIAL reads", _CASSANDRA_DYNAMO),
}
_AVAILABILITY = {
    "redis": Promise("a replica keeps serving (stale) reads without its primary; writes need "
                     "the primary (no automatic failover without Sentinel)", _REDIS_REPL),
    "postgres": Promise("a hot standby keeps serving reads without its primary; writes need "
                        "the primary", _PG_HOT),
    "etcd": Promise("a member cut off from the majority cannot serve linearizable reads or "
                    "writes; serializable reads stay local", _ETCD_GUARANTEES),
    "zookeeper": Promise("a server that loses its quorum stops serving clients (read-only "
                         "mode is off)", _ZK_GUARANTEES),
    "cassandra": Promise("no leader: a request at ONE needs one live replica, at QUORUM a "
                         "majority of the replicas; any node coordinates writes",
                         _CASSANDRA_DYNAMO),
}
_TRANSACTIONS = {
    "redis": Promise("conditional writes by WATCH/MULTI or a script; MULTI/EXEC applies "
                     "several keys at once", "https://redis.io/docs/latest/develop/interact/"
                     "transactions/"),
    "postgres": Promise("ACID transactions: a conditional update and a multi-row write are "
                        "atomic", "https://www.postgresql.org/docs/15/transaction-iso.html"),
    "etcd": Promise("mini-transactions (compare-and-swap over several keys, applied "
                    "atomically)", _ETCD_GUARANTEES),
    "zookeeper": Promise("conditional setData by version; multi() applies several operations "
                         "atomically", _ZK_GUARANTEES),
    "cassandra": Promise("lightweight transactions (IF conditions, Paxos) within one "
                         "partition; a batch of one partition is atomic and isolated",
                         _CASSANDRA_DML),
}
_SIM = Promise("the simulated scheme's own rules (no documentation to promise more)", _SEED003)


def store_kind(store: str) -> str:
    """Return ``redis`` for a cluster kind, ``sim`` for a sim:// URL."""
    return "sim" if store.startswith("sim://") else store


def promise(store: str, prop: str) -> Promise:
    """Return the documented promise of ``store`` (a cluster kind or sim:// URL) for
    ``prop`` (seed 001's goals for latency and geography)."""
    if prop == "latency":
        return Promise("seed 001's goals: reads p99 under 50 ms, writes p99 under 500 ms",
                       "seed 001 (object-store microbenchmarks)")
    if prop == "geography":
        return Promise("replicas in every region serve local reads; a write pays the round "
                       "trips its replication protocol needs", "seed 001 (geographic "
                       "distribution) and docs/real-stores.md")
    kind = store_kind(store)
    if kind == "sim":
        return _SIM
    if prop == "durability":
        v = DURABILITY[kind][-1 if kind != "zookeeper" else 0]
        return Promise(f"{v.label}: {v.promise}", v.source)
    table = {"consistency": _CONSISTENCY, "availability": _AVAILABILITY,
             "transactionality": _TRANSACTIONS}[prop]
    return table[kind]

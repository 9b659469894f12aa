"""What isolation each store's transactions promise, with the documentation that says so.

The model names are the transactional checker's (Elle's): ``strict-serializable``,
``serializable``, ``snapshot-isolation``, ``read-committed``, ... and ``none`` for a read
path or a batch that promises no isolation at all (every anomaly is then to be expected).
A grade compares what a run observed with this promise.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from replicalab.stores.base import redact_url

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

_PG_LEVELS = {"read-committed": "read-committed", "repeatable-read": "snapshot-isolation",
              "serializable": "serializable"}
"""PostgreSQL's REPEATABLE READ is snapshot isolation (the docs: it "does not allow phantom
reads" yet admits write skew, serialization anomalies)."""

TXN_SCHEMES = ("postgresql://", "etcd://", "zk://", "redis://", "cassandra://", "sim://",
               "s3://")
"""The URL schemes whose stores offer transactions (for a refusal's "use one of")."""


def isolation_promise(store_url: str) -> tuple[str, str]:
    """Return (model, documentation URL) the transactions of ``store_url`` promise; ValueError
    for a store that has no transactions."""
    parts = urlsplit(store_url)
    scheme = parts.scheme.lower()
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    if scheme in ("postgresql", "postgres"):
        if query.get("txn_reads", "primary") == "standby":
            return "none", PG_STANDBY_DOC
        level = query.get("isolation", "read-committed")
        if level not in _PG_LEVELS:
            raise ValueError(f"isolation={level!r}: use one of {', '.join(_PG_LEVELS)}")
        return _PG_LEVELS[level], PG_DOC
    if scheme == "etcd":
        return "strict-serializable", ETCD_DOC
    if scheme == "zk":
        return "strict-serializable", ZK_DOC
    if scheme in ("redis", "rediss"):
        return "serializable", REDIS_DOC
    if scheme == "cassandra":
        if query.get("txn") == "lwt":  # Paxos per partition: linearizable, one item only
            return "strict-serializable", CASSANDRA_LWT_DOC
        return "none", CASSANDRA_DOC  # a logged batch: atomic, eventually; isolated: no
    if scheme == "sim":
        return "none", SIM_DOC  # micro-operations one by one
    if scheme == "s3":  # a conditional PUT per object: atomic each, not together
        return "none", S3_DOC
    raise ValueError(no_transactions(store_url))


def no_transactions(store_url: str) -> str:
    """Return the one-line refusal for a store without transactions."""
    return (f"{redact_url(store_url)} has no transactions; use one of {', '.join(TXN_SCHEMES)} "
            "(e.g. postgresql://...?isolation=serializable)")

"""Transactions on real stores, checked for Adya's anomalies: PostgreSQL at each isolation
level tells SERIALIZABLE from REPEATABLE READ (snapshot isolation: write skew) from READ
COMMITTED; etcd and ZooKeeper transactions show no anomaly, realtime included; reads at
replicas (PostgreSQL hot standbys, Cassandra at ONE) show anomalies.

Sizes are kept small (measured 2026-11-27: PostgreSQL 1-15 s per test, etcd 17-38 s,
ZooKeeper 26 s, Cassandra 20 s and 8 s, the file about 2.5 min with its clusters' start);
``benchmarks/txn_postgres_levels.py`` runs the full 3 x 20,000 transactions per level
(docs/transactions.md records its figures).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.txn import TxnConfig

pytestmark = pytest.mark.integration

HOT = dict(keys=6, clients=6, min_length=1, max_length=4)
"""A hot key set: few keys, several concurrent clients."""
G1 = {"G1a", "G1b", "G1c"}


def _run(url: str, tmp: Path, txns: int, workload: str = "list-append", seed: int = 1,
         **cfg) -> dict:
    spec = ProbeSpec(store=url, workload=workload,
                     options=ProbeOptions(duration_s=600, seed=seed),
                     config=TxnConfig(txns=txns, **{**HOT, **cfg}))
    run = run_probe(spec, tmp / f"runs-{seed}")
    assert not run.error, run.error
    res = run.results
    assert res["transactions"]["ok"] > txns // 4, res["transactions"]
    return res


def _types(res: dict) -> set[str]:
    return set(res["txn"]["anomaly_types"])


def _base(names: set[str]) -> set[str]:
    """Anomaly names without their -process/-realtime suffix."""
    return {n.removesuffix("-process").removesuffix("-realtime") for n in names}


def _pg(cluster_url: str, level: str) -> str:
    return f"{cluster_url}&isolation={level}&lock_timeout_ms=20"


def test_postgres_serializable_shows_no_anomaly(postgres_dc3, tmp_path: Path):
    res = _run(_pg(postgres_dc3[0].url, "serializable"), tmp_path, 5000)
    assert res["txn"]["valid"] is True, res["txn"]
    assert res["transactions"]["fail"] > 0  # the hot keys did conflict: some were refused


def test_postgres_repeatable_read_shows_write_skew_and_nothing_worse(postgres_dc3,
                                                                     tmp_path: Path):
    res = _run(_pg(postgres_dc3[0].url, "repeatable-read"), tmp_path, 5000)
    found = _base(_types(res))
    assert "G2-item" in found, res["txn"]
    assert not found & ({"G0", "G-single"} | G1), res["txn"]


def test_postgres_read_committed_shows_g_single_or_worse(postgres_dc3, tmp_path: Path):
    res = _run(_pg(postgres_dc3[0].url, "read-committed"), tmp_path, 5000)
    found = _base(_types(res))
    assert found & ({"G-single", "G-nonadjacent", "G0", "lost-update"} | G1), res["txn"]


def test_postgres_reads_at_a_hot_standby_show_anomalies(postgres_dc3, tmp_path: Path):
    url = _pg(postgres_dc3[0].url, "serializable") + "&txn_reads=standby"
    res = _run(url, tmp_path, 1000)
    assert res["txn"]["valid"] is False, res["txn"]


def test_postgres_rw_register_serializable_shows_no_anomaly(postgres_dc3, tmp_path: Path):
    res = _run(_pg(postgres_dc3[0].url, "serializable"), tmp_path, 2000,
               workload="rw-register")
    assert res["txn"]["valid"] is True, res["txn"]


def test_etcd_transactions_are_strict_serializable(etcd_dc3, tmp_path: Path):
    res = _run(etcd_dc3[0].url, tmp_path, 300, clients=4)
    assert res["txn"]["valid"] is True, res["txn"]
    assert res["transactions"]["fail"] > 0  # they did conflict: failed guards
    assert not res["txn"].get("not"), res["txn"]  # realtime included: nothing ruled out


def test_zookeeper_transactions_are_strict_serializable(zookeeper_dc3, tmp_path: Path):
    res = _run(zookeeper_dc3[0].url, tmp_path, 300, clients=4)
    assert res["txn"]["valid"] is True, res["txn"]
    assert res["transactions"]["fail"] > 0
    assert not res["txn"].get("not"), res["txn"]


def test_redis_watch_multi_exec_shows_no_anomaly(redis_dc3, tmp_path: Path):
    res = _run(redis_dc3[0].url, tmp_path, 2000)
    assert res["txn"]["valid"] is True, res["txn"]
    assert res["transactions"]["fail"] > 0  # EXEC answered nil: WATCH caught conflicts


def test_cassandra_batches_with_reads_at_one_show_anomalies(cassandra_dc3, tmp_path: Path):
    res = _run(cassandra_dc3[0].url + "&txn_read_cl=ONE", tmp_path, 600, clients=4)
    assert res["txn"]["valid"] is False, res["txn"]


def test_cassandra_lightweight_transactions_in_one_partition_show_no_anomaly(
        cassandra_dc3, tmp_path: Path):
    # Paxos among the client's data centre (LOCAL_SERIAL): across dc3's WAN a
    # lightweight transaction takes several round trips of 80-160 ms. Two keys and four
    # clients, so that conditions do fail: with six keys and three, 1-4 of 100 failed
    # (none once, in CI); with these, 23-30 quiet and 12-28 beside a CPU hog (2026-11-30)
    res = _run(cassandra_dc3[0].url + "&txn=lwt&serial_cl=LOCAL_SERIAL", tmp_path, 100,
               keys=2, clients=4, layout="one-item")
    assert res["txn"]["valid"] is True, res["txn"]
    assert res["transactions"]["fail"] > 0  # conditions that failed: they did conflict

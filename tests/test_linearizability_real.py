"""Jepsen's register test on real clusters on dc3 under one fault each: which reads come out
linearizable (docs/linearizability.md, "Real clusters", says why).

Writes and cas go through the leader's or primary's region; reads are placed where the
issue asks: etcd serializable reads at a partitioned follower, ZooKeeper plain reads at a
follower cut off from the leader, Redis reads at a partitioned replica, PostgreSQL reads at
a partitioned standby (not linearizable, each with a counterexample of a few operations);
etcd linearizable reads through a follower that crashes, Redis and PostgreSQL primary reads
while a replica is down (linearizable). Every run's history goes through ``replicalab
export --format edn`` and ``replicalab check`` and must get the same verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replicalab.cluster import base
from replicalab.cluster.state import Cluster
from replicalab.faults.schedule import parse_fault
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe

pytestmark = pytest.mark.integration

DURATION_S = 7.0
SMALL = 8
MIN_OPS = 20
"""A counterexample a person can read: a few operations (a stale read and the writes that
make it stale)."""


def _roles(c: Cluster, root: Path) -> list[str]:
    _, rows = base.status(c.name, root)
    return [r.get("role", "") for r in rows]


def _settled(c: Cluster, root: Path, leader_role: str, timeout_s: float = 30.0) -> list[str]:
    """Wait until exactly one node has ``leader_role`` and every other node follows it
    (an earlier fault, here or in another test, may still be settling); return roles."""
    deadline = time.monotonic() + timeout_s
    while True:
        roles = _roles(c, root)
        others = [r for r in roles if r != leader_role]
        if roles.count(leader_role) == 1 and all(r in ("follower", "replica", "standby")
                                                  for r in others):
            return roles
        assert time.monotonic() < deadline, f"{c.name} did not settle: {roles}"
        time.sleep(0.5)


def _serving(c: Cluster, region: str, timeout_s: float = 60.0) -> None:
    """Wait until consistent reads by a client in ``region`` answer three times in a row:
    after an earlier fault's heal an election may still be going on (etcd 3.4 has no
    pre-vote: a healed member's higher term unseats the leader), and a run started then
    spends its first seconds without answers."""
    from replicalab.stores import open_store

    store = open_store(c.url)
    rt = store.runtime

    async def three_reads() -> bool:
        try:
            client = await store.connect(region)
        except (ValueError, OSError):
            return False
        try:
            for _ in range(3):
                await client.read(["replicalab-test/serving"], consistent=True)
            return True
        except Exception:  # any failure means "not yet"
            return False
        finally:
            await client.close()

    async def wait() -> bool:
        deadline = time.monotonic() + timeout_s
        try:
            while not await three_reads():
                if time.monotonic() > deadline:
                    return False
                await rt.sleep_ns(500_000_000)
            return True
        finally:
            await store.close()

    assert rt.run(wait()), f"{c.name}: no consistent reads in {region} for {timeout_s:g} s"


def _register(c: Cluster, root: Path, out: Path, consistency: str, writer: str, reader: str,
              fault: str, duration_s: float = DURATION_S) -> dict[str, Any]:
    spec = ProbeSpec(store=c.url, workload="register",
                     options=ProbeOptions(consistency=consistency, duration_s=duration_s),
                     config=RegisterConfig(keys=3, clients=6, rate=25.0, writer_region=writer,
                                           reader_region=reader),
                     cluster=c.name, cluster_root=str(root), faults=(parse_fault(fault),))
    run = run_probe(spec, out)
    assert not run.error, run.error
    r = run.results
    assert [f["label"] for f in r["faults"]] == [parse_fault(fault).label]
    _round_trip(run.run_dir, r["linearizability"]["valid"])
    return r


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "replicalab.cli.main", *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def _round_trip(run_dir: Path, valid: Any) -> None:
    """The run's history exported as Jepsen EDN and checked again gets the same verdict."""
    edn = run_dir / "history.edn"
    p = _cli("export", str(run_dir), "--format", "edn", "--output", str(edn))
    assert p.returncode == 0, p.stderr
    p = _cli("check", str(edn), "--model", "kv", "--json")
    assert p.returncode == {True: 0, False: 1, "unknown": 3}[valid], p.stderr
    assert json.loads(p.stdout)["results"][0]["valid"] == valid


def _not_linearizable(r: dict[str, Any]) -> dict[str, Any]:
    lin = r["linearizability"]
    assert lin["valid"] is False, lin
    bad = [p for p in lin["parts"] if p["valid"] is False]
    part = min(bad, key=lambda p: len(p["counterexample"]))
    ce = part["counterexample"]
    assert 2 <= len(ce) <= SMALL, ce
    assert any(op["f"] == "read" for op in ce)
    assert part["explanation"]
    assert any(op["offending"] for tl in r["timeline"] for op in tl["ops"])
    return part


def _stale_run(run_once: Callable[[], dict[str, Any]], attempts: int = 3) -> dict[str, Any]:
    """Return the first run of ``run_once`` that is not linearizable or has at least
    MIN_OPS reads and writes. A run the machine starved (12 operations checked in 7 s, beside
    a CPU hog) had no chance to show a stale read and is run again; one with enough
    operations that is linearizable is returned, and fails."""
    for _ in range(attempts):
        r = run_once()
        if r["linearizability"]["valid"] is not True or (
                r["ops"]["reads"] >= MIN_OPS and r["ops"]["writes"] >= MIN_OPS):
            break
    return r


def _linearizable(r: dict[str, Any], min_reads: int = MIN_OPS) -> None:
    lin = r["linearizability"]
    assert lin["valid"] is True, [p["explanation"] for p in lin["parts"]]
    assert r["ops"]["reads"] >= min_reads and r["ops"]["writes"] >= min_reads


def test_etcd_serializable_reads_not_linearizable_linearizable_reads_are(etcd_dc3, tmp_path):
    """Serializable reads at a partitioned follower: not linearizable; linearizable reads
    through a follower that crashes and restarts: linearizable."""
    c, root = etcd_dc3

    def placed() -> tuple[int, str, str]:
        roles = _settled(c, root, "leader")
        leader = roles.index("leader")
        follower = next(i for i in range(len(roles)) if i != leader)
        return follower, c.nodes[leader].region, c.nodes[follower].region

    def partitioned() -> dict[str, Any]:
        follower, writer, reader = placed()
        return _register(c, root, tmp_path, "eventual", writer, reader,
                         f"at=2s partition node={follower} for=3s")

    try:
        _not_linearizable(_stale_run(partitioned))
        follower, writer, reader = placed()
        _serving(c, reader)
        # 10 s: the restarted follower may set off an election, and on a busy CI machine
        # the cluster answered "leader changed" for the last 2.6 s of a 7 s run
        r = _register(c, root, tmp_path, "consistent", writer, reader,
                      f"at=2s crash node={follower} for=2s", duration_s=10.0)
        _linearizable(r, min_reads=10)
    finally:
        _settled(c, root, "leader")


def test_zookeeper_plain_reads_at_a_lagging_follower_are_not_linearizable(zookeeper_dc3,
                                                                           tmp_path):
    c, root = zookeeper_dc3

    def partitioned() -> dict[str, Any]:
        roles = _settled(c, root, "leader")
        followers = [i for i, r in enumerate(roles) if r == "follower"]
        writer, reader = c.nodes[followers[0]].region, c.nodes[followers[-1]].region
        return _register(c, root, tmp_path, "eventual", writer, reader,
                         f"at=2s partition node={followers[-1]} for=3s")

    try:
        _not_linearizable(_stale_run(partitioned))
    finally:
        _settled(c, root, "leader")


def test_redis_replica_reads_are_not_linearizable_primary_reads_are(redis_dc3, tmp_path):
    c, root = redis_dc3
    _not_linearizable(_stale_run(lambda: _register(c, root, tmp_path, "eventual", "US-E", "US-W",
                                                   "at=2s partition node=1 for=3s")))
    r = _register(c, root, tmp_path, "consistent", "US-E", "US-W", "at=2s crash node=1 for=2s")
    _linearizable(r)


def test_postgres_standby_reads_are_not_linearizable_primary_reads_are(postgres_dc3,
                                                                       tmp_path):
    c, root = postgres_dc3
    _not_linearizable(_stale_run(lambda: _register(c, root, tmp_path, "eventual", "US-E", "US-W",
                                                   "at=2s partition node=1 for=3s")))
    r = _register(c, root, tmp_path, "consistent", "US-E", "US-W",
                  "at=2s partition node=1 for=3s")
    _linearizable(r)

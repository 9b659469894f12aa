"""Real ZooKeeper on emulated dc3 links: stale plain reads at a follower, fresh sync+reads,
no lost acknowledged writes, status, clean shutdown, missing installation."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from tests.freshcheck import fresh_after_ack

from faultcheck import crash_reader_node
from replicalab.checkers import visibility
from replicalab.checkers.extract import element_ops
from replicalab.cluster import base, process, state, zookeeper
from replicalab.cluster.ports import is_free
from replicalab.cluster.state import Cluster
from replicalab.experiments import windows
from replicalab.history import load_history
from replicalab.runtime.noise import NoiseFloor
from replicalab.stores import ABSENT, ConditionFailed, open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig

pytestmark = pytest.mark.integration


def _one_way_ms(c: Cluster, a: int, b: int) -> float:
    """Injected delay from server a to server b (the a->b quorum proxy's upstream)."""
    return next(x.upstream_ms for x in c.links if x.name == f"quorum-{a}-{b}")


def _write_path_ms(c: Cluster, leader: int, writer: int, reader: int) -> tuple[float, float]:
    """Return (visible at the reader's server, acknowledged to the writer) in ms after a write
    is sent to the writer's server: forward to the leader, proposal + ack to the fastest
    majority, then COMMIT from the leader to the reader's (and the writer's) server."""
    def d(a: int, b: int) -> float:
        return 0.0 if a == b else _one_way_ms(c, a, b)

    n = len(c.nodes)
    acks = sorted(d(leader, f) + d(f, leader) for f in range(n) if f != leader)
    commit = d(writer, leader) + acks[n // 2 - 1]  # the leader plus n//2 followers
    return commit + d(leader, reader), commit + d(leader, writer)


PREFIX = "zk-it/"  # the probes' keys stay under one prefix: warmed up, read after the run


def _probe(url: str, consistency: str, out: Path, cluster: str | None = None,
           root: Path | None = None) -> tuple[dict, Path]:
    spec = ProbeSpec(store=url, workload="staleness", key_prefix=PREFIX, keep_keys=True,
                     cluster=cluster, cluster_root=None if root is None else str(root),
                     options=ProbeOptions(consistency=consistency, duration_s=12,
                                          write_interval_s=1.0, read_rate=100),
                     config=StalenessConfig(placement="separate-clients",
                                               writer_region="US-E", reader_region="US-W",
                                               ranges="0-50,400-1000"))
    run = run_probe(spec, out)
    assert not run.error, run.error
    return run.results, run.run_dir


async def _ops(url: str, *steps, region: str | None = "US-W"):
    store = open_store(url, 1)
    try:
        client = await store.connect(region)
        return [await step(client) for step in steps]
    finally:
        await store.close()


def test_plain_reads_stale_for_the_leader_path_sync_reads_never(zookeeper_dc3, tmp_path):
    c, root = zookeeper_dc3
    _, rows = base.status(c.name, root)
    leader = next(i for i, r in enumerate(rows) if r["role"] == "leader")
    writer = next(n.index for n in c.nodes if n.region == "US-E")
    reader = next(n.index for n in c.nodes if n.region == "US-W")
    visible_ms, acked_ms = _write_path_ms(c, leader, writer, reader)
    # the probe's element exists before timing starts: creating it costs extra round trips
    asyncio.run(_ops(c.url, lambda cl: cl.write({PREFIX + KEY: "warm-up"})))

    # What we assert: a plain read at the reader's server (US-W) returns the new value once
    # the leader's COMMIT reached that server: d(leader -> US-W) - d(leader -> US-E) after the
    # writer's server answered (experiments/windows.py). Every write is judged against that
    # window, a miss accepted only where the run's noise floor measured the machine adding as
    # much meanwhile, and the verdict is "exact" or "inconclusive" with the machine's measured
    # noise; the median is the gross check (a hop too many or too few moves it out). Beside a
    # CPU hog the JVMs once delayed the COMMIT to US-W by 76 ms beyond the links' delays: the
    # noise floor is what tells that from a wrong path now, not a second and third probe.
    r, run_dir = _probe(c.url, "eventual", tmp_path, c.name, root)
    assert r["fresh_by_range"][0]["p"] < 0.05  # stale right after a write
    h, _ = load_history(run_dir)
    vis = visibility.of_element(*element_ops(h, KEY))
    floor = NoiseFloor.from_json(r["noise"])
    links = [asdict(x) for x in c.links if x.kind == "replication"]
    lo, hi = windows.window_ms("zookeeper", links, "US-E", "US-W", c.nodes[leader].region)
    got = visibility.judge_window(
        vis, lo, hi, floor, windows.SLACK_MS["zookeeper"],
        windows.write_path_ms("zookeeper", links, "US-E", c.nodes[leader].region))
    print(f"ZooKeeper US-W server, leader n{leader}: {got.line()}; {floor.line()}")
    if hi > 0:  # the COMMIT reaches US-W after the writer has its ack
        assert got.median_inside, got.line()
        assert got.verdict in ("exact", "inconclusive"), got.line()
    fresh, total = fresh_after_ack(run_dir)
    if reader != leader and visible_ms > acked_ms + 10:
        # the commit reaches US-W after the writer has its ack: stale even after the ack
        assert fresh < total

    # sync + read: never older than the last write acknowledged before the read started
    r, run_dir = _probe(c.url, "consistent", tmp_path)
    assert r["ops"]["reads"] > 20
    fresh, total = fresh_after_ack(run_dir)
    assert total > 20 and fresh == total  # (a read begun before the ack may see either)

    # no lost acknowledged write: a consistent read returns the last acknowledged value
    h, _ = load_history(run_dir)
    writes, _ = element_ops(h, KEY)
    last = writes.value[int(writes.complete_ns.argmax())]
    (got,) = asyncio.run(_ops(c.url, lambda cl: cl.read([PREFIX + KEY], consistent=True)))
    assert got.values == (last,)


def test_store_operations(zookeeper_dc3):
    c, _ = zookeeper_dc3

    async def fail_cas(cl, values, expect):
        with pytest.raises(ConditionFailed):
            await cl.write(values, expect=expect)

    steps = [
        lambda cl: cl.delete(["t/i/a", "t/i/b", "t/j/c", "t/k/new"]),
        lambda cl: cl.write({"t/i/a": "1", "t/i/b": "2", "t/j/c": "3"}),
        lambda cl: cl.write({"t/i/a": "4"}, expect={"t/i/a": "1"}),
        lambda cl: fail_cas(cl, {"t/i/a": "5"}, {"t/i/a": "1"}),
        lambda cl: fail_cas(cl, {"t/i/b": "5"}, {"t/j/c": ABSENT}),
        lambda cl: cl.write({"t/k/new": "6"}, expect={"t/k/new": ABSENT, "t/k/none": ABSENT}),
        lambda cl: cl.delete(["t/j/c", "t/j/never"]),
        lambda cl: cl.read(["t/i/a", "t/i/b", "t/j/c", "t/k/new"], consistent=True),
    ]
    got = asyncio.run(_ops(c.url, *steps))[-1]
    assert got.values == ("4", "2", None, "6")
    assert got.node == "n1"  # the US-W client's session is on the US-W server
    with pytest.raises(ValueError, match=r"cannot reach ZooKeeper at 127\.0\.0\.1:1 ") as err:
        asyncio.run(_ops("zk://127.0.0.1:1?timeout_ms=500", region=None))
    assert "\n" not in str(err.value)


def _group(pgid: int) -> list[int]:
    """Return the pids of process group ``pgid`` (the wrapper and its JVM)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def test_missing_installation_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(zookeeper, "ZOOKEEPER_JAR", tmp_path / "nowhere" / "zookeeper.jar")
    with pytest.raises(ValueError, match=r"scripts/install-servers\.sh") as err:
        base.up("zookeeper", 3, "dc3", name="missing", root=tmp_path)
    assert "zookeeper.jar" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "clusters" / "missing").exists()
    monkeypatch.setattr(zookeeper, "JAVA", "no-such-java-binary")
    with pytest.raises(ValueError, match="no-such-java-binary"):
        base.up("zookeeper", 3, "dc3", name="missing", root=tmp_path)


def _status_one_leader_all_links_proxied(c: Cluster, root: Path) -> None:
    _, rows = base.status(c.name, root)
    assert [r["role"] for r in rows] == ["follower", "follower", "leader"]  # the last node
    assert all(r["alive"] == "yes" and r["zxid"].startswith("0x") for r in rows)
    assert all(r["behind"] == "0" for r in rows)
    assert zookeeper.direct_connections(c) == []
    peers = [x for x in c.links if x.kind != "client"]
    assert {x.name.split("-")[0] for x in peers} == {"quorum", "election"}
    assert len(peers) == 2 * 3 * 2
    assert sum(x.kind == "client" for x in c.links) == 3 * 2  # per client region and node
    assert len([p for n in c.nodes for p in _group(n.pid)]) == 6  # a wrapper and a JVM each


def _down_leaves_nothing(c: Cluster, root: Path) -> None:
    c = state.load(c.name, root)  # the restarted node's new pid
    groups = [p for n in c.nodes for p in _group(n.pid)]
    pids = base.down(c.name, root)
    assert len(pids) == 4
    assert not any(process.alive(p) for p in pids + groups)
    ports = [p for n in c.nodes for p in n.extra["ports"]] + [x.listen_port for x in c.links]
    assert all(is_free(p) for p in [*ports, c.toxiproxy_port])


def test_status_then_a_crash_of_the_readers_node_then_down_leaves_nothing(tmp_path):
    """Its own ensemble, which it brings down: status as started (one leader, the last
    node; every link proxied), then the crash of the reader's node (availability drops and
    returns), then ``down`` leaves no process and no port. (A restarted server gets
    unproxied election connections from higher ids, see docs/stores/zookeeper.md, which the
    shared cluster's checks exclude; and one start serves all three.)"""
    root = tmp_path / "root"
    c = base.up("zookeeper", 3, "dc3", name="it-zk-crash", root=root)
    try:
        _status_one_leader_all_links_proxied(c, root)
        # a restarted ZooKeeper is a JVM that must win its way back into the ensemble
        # through an election; in 2 of 3 CI runs on a busy 2-core machine n1 had not
        # rejoined 14 s after its restart (the reader, pinned to n1, failed throughout),
        # while alone it rejoins in a second or two. So: the drop is checked in the run,
        # and the return once n1 has rejoined (within 60 s), by a short clean run
        r = crash_reader_node(c, root, tmp_path / "runs", recovered_in_run=False)
        assert r["lost_writes"]["lost"] == 0
        deadline = time.monotonic() + 60.0
        while True:
            _, rows = base.status(c.name, root)
            if rows[1].get("alive") == "yes" and rows[1].get("role") in ("follower",
                                                                          "leader"):
                break
            assert time.monotonic() < deadline, f"n1 did not rejoin in 60 s: {rows}"
            time.sleep(0.5)
        after = _probe(c.url, "eventual", tmp_path / "after")[0]
        assert min(after["availability"]["ok_fraction"]) >= 0.9, after["availability"]
        _down_leaves_nothing(c, root)
    finally:
        if (root / "clusters" / c.name).exists():
            base.down(c.name, root)

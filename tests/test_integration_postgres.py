"""Real PostgreSQL on emulated dc3 links: a hot standby is stale for the injected delay,
remote_apply makes it fresh at the ack, status, clean shutdown, bad input."""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import pytest

import wan
from faultcheck import crash_reader_node
from replicalab.checkers import visibility
from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import since_ack
from replicalab.cluster import base, process
from replicalab.cluster.ports import is_free
from replicalab.experiments import windows
from replicalab.history import load_history
from replicalab.history.rundir import Run
from replicalab.runtime.noise import NoiseFloor
from replicalab.stores import ABSENT, ConditionFailed, Feature, open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.latency import LatencyConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg_dc3():
    # The servers run as the unprivileged user `postgres`, which must reach the data
    # directories; pytest's own temporary directories are mode 0700, so use our own.
    root = Path(tempfile.mkdtemp(prefix="replicalab-it-pg-"))
    root.chmod(0o755)
    try:
        c = base.up("postgres", 3, "dc3", name="it-pg", root=root)
        yield c, root
        if (root / "clusters" / "it-pg").exists():
            base.down("it-pg", root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _probe(url: str, consistency: str, out: Path, duration_s: float = 10,
           keep: bool = False, cluster: tuple | None = None, read_rate: float = 100) -> Run:
    """Return the staleness probe's run; ``cluster`` (the fixture's (Cluster, root)) lets its
    noise floor's echo go through the cluster's Toxiproxy, as the WAL does."""
    c, root = cluster or (None, None)
    spec = ProbeSpec(store=url, workload="staleness", keep_keys=keep,
                     cluster=c.name if c else None, cluster_root=str(root) if root else None,
                     options=ProbeOptions(consistency=consistency, duration_s=duration_s,
                                          write_interval_s=1.0, read_rate=read_rate),
                     config=StalenessConfig(placement="separate-clients",
                                               writer_region="US-E", reader_region="US-W",
                                               ranges="0-25,60-1000"))
    run = run_probe(spec, out)
    assert not run.error, run.error
    return run


def _fresh_after_ack(run: Run) -> tuple[int, int]:
    """Return (fresh, total) of the reads that started after some write was acknowledged,
    judged against the latest acknowledged write."""
    h, _ = load_history(run.run_dir)
    after = since_ack(*element_ops(h, KEY))
    return sum(after["fresh"]), sum(after["total"])


def test_standby_stale_for_the_injected_delay(pg_dc3, tmp_path):
    """Every write becomes visible at the US-W standby one US-E -> US-W delay after the
    primary acknowledged it, inside the window the link allows (``experiments/windows.py``:
    [d - jitter - 1, d + jitter + 5] ms), as the Redis test judges its replica: a write
    outside counts only where the run's noise floor measured the machine adding as much, and
    "inconclusive" is named when the machine added more than the slack at p99. The median is
    the gross check (a hop too many or too few moves it out). Judged by each read's start
    from the write's start instead, beside a CPU hog with six workers 2 of 17 reads begun
    within 25 ms of a write's start were fresh: answered late, after the WAL had arrived."""
    c, _ = pg_dc3
    # reads 5 ms apart, as benchmarks/staleness_windows.py reads: the median is taken
    # between each write's last stale and first fresh read, 10 ms apart at 100 reads/s
    run = _probe(c.url, "eventual", tmp_path, cluster=pg_dc3, read_rate=200)
    r = run.results
    assert {n for n in r["latency"]} >= {"read/eventual", "write/none"}
    floor = NoiseFloor.from_json(r["noise"])
    assert floor.echo_via.startswith("toxiproxy"), floor
    h, _ = load_history(run.run_dir)
    vis = visibility.of_element(*element_ops(h, KEY))
    links = [asdict(x) for x in c.links if x.kind == "replication"]
    lo, hi = windows.window_ms("postgres", links, "US-E", "US-W")
    got = visibility.judge_window(vis, lo, hi, floor, windows.SLACK_MS["postgres"],
                                  windows.write_path_ms("postgres", links, "US-E"))
    print(f"PostgreSQL US-W standby: {got.line()}; {floor.line()}")
    assert got.verdict in ("exact", "inconclusive"), got.line()
    # the gross check, to the midpoints' resolution: a write's midpoint lies between its last
    # stale and first fresh read, one gap between reads (5 ms) apart, and reads and writes
    # keep one phase for the run (38.5 ms against a window from 38 ms, quiet)
    gap_ms = 1000 / 200
    assert vis.writes >= 8, got.line()
    assert got.median_late_ack_ms >= lo - gap_ms and got.median_ms <= hi + gap_ms, got.line()
    # the primary never serves a value older than the last acknowledged write; the reader
    # in US-W reaches the US-E primary over its client link, one ~82 ms round trip a read
    fresh, total = _fresh_after_ack(_probe(c.url, "consistent", tmp_path, duration_s=5))
    assert total > 30 and fresh == total


def test_remote_apply_is_fresh_at_the_ack_and_loses_nothing(pg_dc3, tmp_path):
    c, _ = pg_dc3
    url = c.url + "&synchronous_commit=remote_apply"
    run = _probe(url, "eventual", tmp_path, duration_s=6, keep=True)
    assert run.results["ops"]["failed"] == 0 and run.results["ops"]["info"] == 0
    fresh, total = _fresh_after_ack(run)
    assert total > 300 and fresh == total  # every read started after an ack sees it
    h, _ = load_history(run.run_dir)
    writes, _ = element_ops(h, KEY)
    # the ack waited for the farthest standby (EU, ~95 ms round trip), not just the primary
    write_ms = (writes.complete_ns - writes.invoke_ns) / 1e6
    assert float(min(write_ms)) > 0.8 * 94.5

    async def last_values() -> tuple[str | None, str | None]:
        store = open_store(url, 1)
        try:
            client = await store.connect("US-W")
            key = run.keys.prefix + KEY  # the run kept its keys under its prefix
            primary = (await client.read([key], consistent=True)).values[0]
            standby = (await client.read([key], consistent=False)).values[0]
            await client.delete([key])
            return primary, standby
        finally:
            await store.close()

    assert asyncio.run(last_values()) == (writes.value[-1], writes.value[-1])


def test_operations_map_onto_one_table(pg_dc3):
    c, _ = pg_dc3

    async def scenario() -> None:
        store = open_store(c.url, 1)
        try:
            assert store.info.features == frozenset(Feature)
            client = await store.connect("US-E")
            await client.write({"d/i/x": "1", "d/i/y": "1"})  # one upsert: both or neither
            assert (await client.read(["d/i/x", "d/i/y", "d/i/z"], consistent=True)).values \
                == ("1", "1", None)
            with pytest.raises(ConditionFailed):
                await client.write({"d/i/x": "2", "d/i/y": "2"}, expect={"d/i/x": "0"})
            with pytest.raises(ConditionFailed):  # one failed expectation undoes the others
                await client.write({"d/i/x": "2"}, expect={"d/i/x": "1", "d/i/y": ABSENT})
            await client.write({"d/i/x": "2", "d/i/z": "new"},
                               expect={"d/i/x": "1", "d/i/z": ABSENT})
            await client.delete(["d/i/y"])
            res = await client.read(["d/i/x", "d/i/y", "d/i/z"], consistent=True)
            assert res.values == ("2", None, "new") and res.node == "n0"
            # an eventual read is served where the client stands: in US-E, which has no
            # standby, by the primary there (fresh), not by a standby an ocean away
            res = await client.read(["d/i/x", "d/i/z"], consistent=False)
            assert res.values == ("2", "new") and res.node == "n0"
            for region, node in (("US-W", "n1"), ("EU", "n2")):
                there = await store.connect(region)
                assert (await there.read(["d/i/x"], consistent=False)).node == node
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_client_pays_one_round_trip_to_a_remote_primary_and_reads_where_it_stands(
        pg_dc3, tmp_path):
    """`probe --workload latency --client-region R` on dc3 (primary in US-E): from US-W a
    put pays the US-W <-> US-E round trip of the client links' configured toxics, once, and
    an eventual read stays at the US-W standby; from US-E, the primary's region, an eventual
    read is served by the primary (local), not by a standby a WAN round trip away."""
    c, root = pg_dc3

    def latency(region: str) -> dict:
        run = run_probe(ProbeSpec(store=c.url, workload="latency", cluster=c.name,
                                  cluster_root=str(root), config=LatencyConfig(ops=30,
                                                                               region=region),
                                  options=ProbeOptions(duration_s=60)), tmp_path / "runs")
        assert not run.error, run.error
        return run.results

    west = latency("US-W")
    noise = west["noise"]
    assert noise is not None and noise["echo_via"].startswith("toxiproxy"), noise
    rtt = wan.client_round_trip_ms(c, "US-W", "US-E")
    for variant in ("put", "consistent read"):
        p50 = west["variants"][variant]["p50_ms"]
        print(f"US-W {variant}: p50 {p50} ms in {rtt}: {wan.judge_round_trip(p50, rtt, noise)}")
    wan.judge_local(west["variants"]["eventual read"]["p50_ms"], c, "US-W")
    east = latency("US-E")["variants"]
    for variant in ("put", "consistent read", "eventual read"):
        wan.judge_local(east[variant]["p50_ms"], c, "US-E")


def test_crashed_standby_restarts_from_its_data(pg_dc3):
    c, root = pg_dc3
    node = c.nodes[2]
    old = node.pid
    process.kill9(old)
    assert not process.alive(old)
    base.driver("postgres").start_node(c, node, root)
    c.save(root)  # as the fault injector does, so `down` stops the new process
    assert node.pid != old and process.alive(node.pid)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        _, rows = base.status(c.name, root)
        primary_sees_it = "n2 streaming" in rows[0]["state"]
        if primary_sees_it and rows[2]["state"].startswith("standby, streaming"):
            break
        time.sleep(0.2)
    assert "n2 streaming" in rows[0]["state"], rows[0]
    assert rows[2]["state"].startswith("standby, streaming"), rows[2]


def test_crash_of_the_readers_node_availability_drops_and_returns(pg_dc3, tmp_path):
    c, root = pg_dc3
    r = crash_reader_node(c, root, tmp_path)
    assert r["lost_writes"]["lost"] == 0

def test_status_and_down_leave_nothing(pg_dc3):
    c, root = pg_dc3
    _, rows = base.status(c.name, root)
    assert [r["role"] for r in rows] == ["primary", "standby", "standby"]
    assert all(r["alive"] == "yes" for r in rows)
    assert "n1 streaming" in rows[0]["state"] and "n2 streaming" in rows[0]["state"]
    assert all(r["state"].startswith("standby, streaming") for r in rows[1:])
    pids = base.down(c.name, root)
    assert len(pids) == 4
    assert not any(process.alive(p) for p in pids)
    ports = [n.port for n in c.nodes] + [x.listen_port for x in c.links] + [c.toxiproxy_port]
    assert all(is_free(p) for p in ports)


def test_bad_postgres_input(tmp_path, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]

    async def connect() -> None:
        store = open_store(f"postgresql://postgres@127.0.0.1:{free}/postgres", 1)
        try:
            await store.connect()
        finally:
            await store.close()

    # not a URL replicalab's clusters printed: the URL and the server's answer, no hint
    # about `cluster status`
    with pytest.raises(ValueError, match=rf"cannot reach PostgreSQL at 127.0.0.1:{free} \(node "
                                         rf"n0 of postgresql://postgres@127.0.0.1:{free}/"
                                         r"postgres\): connection failed: .*refused$"):
        asyncio.run(connect())
    with pytest.raises(ValueError, match="unknown parameter 'replicas' for postgresql://"):
        open_store("postgresql://127.0.0.1:5432/postgres?replicas=127.0.0.1:1", 1)
    with pytest.raises(ValueError, match="synchronous_commit='sometimes'"):
        open_store("postgresql://127.0.0.1:5432/postgres?synchronous_commit=sometimes", 1)
    store = open_store("postgresql://u:s3cret@127.0.0.1:5432/postgres", 1)
    assert "s3cret" not in str(store.info.to_json())
    monkeypatch.setenv("REPLICALAB_PG_BIN", str(tmp_path))
    with pytest.raises(ValueError) as err:
        base.up("postgres", 1, "lan", name="nobin", root=tmp_path)
    msg = str(err.value)
    assert "\n" not in msg
    assert "'initdb' not found" in msg and "scripts/install-servers.sh" in msg
    assert not (tmp_path / "clusters" / "nobin").exists()


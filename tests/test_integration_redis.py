"""Real Redis on emulated dc3 links: staleness at a remote replica, and clean shutdown."""

from __future__ import annotations

import socket
import threading
from dataclasses import asdict
from pathlib import Path

import pytest
from tests.freshcheck import fresh_after_ack

import wan
from replicalab.checkers import visibility
from replicalab.checkers.extract import element_ops
from replicalab.cluster import base, process
from replicalab.cluster.ports import is_free
from replicalab.experiments import windows
from replicalab.faults.schedule import parse_fault
from replicalab.history import load_history
from replicalab.runtime.noise import NoiseFloor
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.latency import LatencyConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def redis_dc3(tmp_path_factory):
    root = tmp_path_factory.mktemp("replicalab")
    c = base.up("redis", 3, "dc3", name="it-redis", root=root)
    yield c, root
    if (root / "clusters" / "it-redis").exists():
        base.down("it-redis", root)


def _probe(c, root: Path, consistency: str, out: Path) -> tuple[dict, Path]:
    spec = ProbeSpec(store=c.url, workload="staleness", cluster=c.name, cluster_root=str(root),
                     options=ProbeOptions(consistency=consistency, duration_s=12,
                                          write_interval_s=0.5, read_rate=200),
                     config=StalenessConfig(placement="separate-clients",
                                               writer_region="US-E", reader_region="US-W",
                                               ranges="0-25,60-1000"))
    run = run_probe(spec, out)
    assert not run.error, run.error
    return run.results, Path(run.run_dir)


def test_remote_replica_stale_for_exactly_the_injected_delay(redis_dc3, tmp_path):
    """Every write becomes visible at the US-W replica one US-E -> US-W delay after the
    primary acknowledged it, inside the window the link allows (``experiments/windows.py``:
    [d - jitter - 1, d + jitter + 2] ms), each write bracketed by its last stale and first
    fresh read; a write outside the window counts only where the run's noise floor measured
    the machine adding as much while it ran, and when the machine added more than the
    window's slack at p99 the verdict is "inconclusive", named. The median window is the
    gross check (a hop too many or too few moves it out). Consistent reads at the primary are
    never stale."""
    c, root = redis_dc3
    r, run_dir = _probe(c, root, "eventual", tmp_path)
    floor = NoiseFloor.from_json(r["noise"])
    assert floor.echo_via.startswith("toxiproxy"), floor
    h, _ = load_history(run_dir)
    vis = visibility.of_element(*element_ops(h, KEY))
    lo, hi = windows.window_ms("redis", [asdict(x) for x in c.links if x.kind == "replication"],
                               "US-E", "US-W")
    got = visibility.judge_window(vis, lo, hi, floor, windows.SLACK_MS["redis"])
    print(f"Redis US-W replica: {got.line()}; {floor.line()}")
    assert vis.writes >= 20 and got.median_inside, got.line()
    assert got.verdict in ("exact", "inconclusive"), got.line()
    # read at the primary: never older than a write acknowledged before the read began (one
    # begun while the write was in flight may see either)
    _, co_dir = _probe(c, root, "consistent", tmp_path)
    fresh, total = fresh_after_ack(co_dir)
    assert total > 100 and fresh == total, (fresh, total)


def test_crash_and_partition_availability_drops_and_returns(redis_dc3, tmp_path):
    c, root = redis_dc3
    faults = (parse_fault("at=3s crash node=1 for=3s"),
              parse_fault("at=8s partition node=1 for=2s"))
    spec = ProbeSpec(store=c.url, workload="staleness",
                     options=ProbeOptions(duration_s=12, write_interval_s=0.5, read_rate=50),
                     config=StalenessConfig(placement="separate-clients",
                                               writer_region="US-E", reader_region="US-W"),
                     cluster=c.name, cluster_root=str(root), faults=faults)
    r = run_probe(spec, tmp_path).results
    reads = r["availability"]["by_f"]["read"]  # by time; the writer at the primary is fine
    a = dict(zip(reads["t_s"], reads["ok_fraction"], strict=True))
    assert a[4.0] < 0.2 and a[5.0] < 0.2          # the reader's replica is down
    assert a[1.0] == 1.0 and a[11.0] == 1.0       # ... and back after the restart
    assert [f["label"] for f in r["faults"]] == ["crash n1", "partition n1"]
    assert r["lost_writes"]["checked"] and r["lost_writes"]["lost"] == 0
    # cut off from the primary, the replica serves ever older data: reads go stale
    assert max(r["k_staleness"]["k"]) >= 2


def test_status_and_down_leave_nothing(redis_dc3):
    c, root = redis_dc3
    _, rows = base.status(c.name, root)
    assert [r["role"] for r in rows] == ["primary", "replica", "replica"]
    assert all(r["alive"] == "yes" for r in rows)
    assert all("link up" in r["state"] for r in rows[1:])
    pids = base.down(c.name, root)
    assert len(pids) == 4
    assert not any(process.alive(p) for p in pids)
    ports = [n.port for n in c.nodes] + [x.listen_port for x in c.links] + [c.toxiproxy_port]
    assert all(is_free(p) for p in ports)


def test_bad_cluster_input(tmp_path):
    with pytest.raises(ValueError, match="unknown cluster kind 'mongo'"):
        base.up("mongo", 3, "dc3", root=tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(ValueError, match=f"port {busy} on 127.0.0.1 is already in use"):
            base.up("redis", 3, "dc3", name="busy", base_port=busy, root=tmp_path)
    c = base.up("redis", 1, "lan", name="dup", root=tmp_path)
    try:
        with pytest.raises(ValueError, match="a cluster named 'dup' exists"):
            base.up("redis", 1, "lan", name="dup", root=tmp_path)
    finally:
        base.down(c.name, tmp_path)


def test_store_unreachable_mid_run_is_an_error_and_history_is_kept(tmp_path):
    c = base.up("redis", 1, "lan", name="gone", root=tmp_path / "root")
    threading.Timer(3.0, base.down, args=("gone", tmp_path / "root")).start()
    spec = ProbeSpec(store=c.url, workload="staleness",
                     options=ProbeOptions(duration_s=8, write_interval_s=0.5, read_rate=50))
    run = run_probe(spec, tmp_path / "runs")
    assert "became unreachable" in run.error and "3." in run.error
    h, _ = load_history(run.run_dir)
    assert len(h) > 100 and (run.run_dir / "results.json").exists()
    assert run.results["availability"]["ok_fraction"][-1] == 0.0


def test_client_region_routes_client_links_through_proxies(tmp_path):
    c = base.up("redis", 3, "dc3", name="client-eu", client_region="EU", root=tmp_path)
    try:
        assert {x.kind for x in c.links} == {"replication", "client"}
        spec = ProbeSpec(store=c.url, workload="latency", config=LatencyConfig(ops=20),
                         options=ProbeOptions(duration_s=30))
        v = run_probe(spec, tmp_path / "runs").results["variants"]
        # a consistent read goes to the primary in US-E: EU->US-E 93/2 + US-E->EU 96/2 ms
        assert abs(v["consistent read"]["p50_ms"] - 94.5) < 0.3 * 94.5
        wan.judge_local(v["eventual read"]["p50_ms"], c, "EU")  # the EU replica, local
    finally:
        base.down(c.name, tmp_path)


def test_a_client_pays_one_round_trip_to_a_remote_primary_and_reads_where_it_stands(
        tmp_path, monkeypatch):
    """`probe --workload latency --client-region US-W` on the dc3 cluster (primary in US-E):
    every cluster has a client link per client region and node, so a put from US-W pays the
    US-W <-> US-E round trip of the links' configured delays, once (not zero times, not
    twice), and an eventual read of the US-W replica stays local; from US-E, the primary's
    own region, an eventual read is served by the primary, not by a remote replica."""
    # a cluster of its own: the module's cluster has its primary crashed by the tests above
    c = base.up("redis", 3, "dc3", name="client-west", root=tmp_path / "root")
    # where `probe --store URL` finds the cluster behind the URL (its noise floor's echo
    # goes through the cluster's Toxiproxy)
    monkeypatch.setenv("REPLICALAB_STATE_DIR", str(tmp_path / "root"))
    try:
        _one_round_trip_and_local_reads(c, tmp_path)
    finally:
        base.down(c.name, tmp_path / "root")


def _one_round_trip_and_local_reads(c, tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from replicalab.cli.main import app

    assert {x.kind for x in c.links} == {"replication", "client"}
    assert "client_links=" in c.url

    def latency(*flags: str) -> dict:
        got = CliRunner().invoke(app, ["probe", "--store", c.url, "--workload", "latency",
                                       "--ops", "30", "--duration", "60s", "--out",
                                       str(tmp_path), "--json", *flags])
        assert got.exit_code == 0, got.output
        return json.loads(got.stdout.strip().splitlines()[-1])

    doc = latency("--client-region", "US-W")
    west, noise = doc["variants"], doc["noise"]
    assert noise is not None and noise["echo_via"].startswith("toxiproxy"), noise
    assert noise["stall_samples"] > 100 and noise["echo_samples"] > 10, noise
    # the noise floor is in results.json and in the report
    assert "noise floor: the machine added" in Path(doc["report"]).read_text()
    rtt = wan.client_round_trip_ms(c, "US-W", "US-E")
    for variant in ("put", "consistent read"):  # the primary's copy, one round trip away
        verdict = wan.judge_round_trip(west[variant]["p50_ms"], rtt, noise)
        print(f"US-W {variant}: p50 {west[variant]['p50_ms']} ms in {rtt}: {verdict}")
    wan.judge_local(west["eventual read"]["p50_ms"], c, "US-W")  # the US-W replica, local
    east = latency("--client-region", "US-E")["variants"]
    for variant in ("put", "consistent read", "eventual read"):  # all at the local primary
        wan.judge_local(east[variant]["p50_ms"], c, "US-E")
    nowhere = latency()["variants"]
    assert nowhere["put"]["p50_ms"] < 20, nowhere

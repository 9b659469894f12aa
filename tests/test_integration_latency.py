"""Real etcd 3.4 on dc3: the latency workload finds that a linearizable (consistent) read pays
one extra quorum round trip over a serializable (eventual) read, and the latency comparison
row of ``replicalab compare --workload latency`` reports it.

The client talks to member n0 (US-E; a client with no region uses the first member) and the
test makes n0 the leader, so nothing else is in the way: a serializable read is answered
from n0's local state (sub-millisecond on 127.0.0.1), a linearizable read first needs the
leader to confirm its leadership with a heartbeat round to a majority (ReadIndex). With
three members a majority is the leader and its nearest peer, so the expected extra cost is
the round trip from US-E to its nearest peer over the emulated links:

    US-E -> US-W -> US-E = 40 + 41.5 = 81.5 ms   (dc3: US-E->US-W 80 ms RTT, US-W->US-E 83 ms)
    (US-E -> EU -> US-E = 48 + 46.5 = 94.5 ms is the farther peer)

Tolerance: the p50 difference within [0.8, 1.25] x 81.5 ms + 5 ms for scheduling on a busy
machine, and the bootstrap 95 % interval of the mean difference above 0.6 x 81.5 ms.

The sweep workload runs on the same cluster in real time: each consistent read pays the round
trip, so one client needs at least 0.8 x 81.5 ms per request and four clients overlap them.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from replicalab.cli.compare import latency_row
from replicalab.cluster import base
from replicalab.cluster.state import Cluster
from replicalab.regions import region_set
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.sweep import SweepConfig

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def etcd_dc3(tmp_path_factory):
    root = tmp_path_factory.mktemp("replicalab")
    c = base.up("etcd", 3, "dc3", name="it-latency-etcd", root=root)
    try:
        yield c, root
    finally:
        if (root / "clusters" / "it-latency-etcd").exists():
            base.down("it-latency-etcd", root)


def _leader(c: Cluster, root: Path) -> int:
    _, rows = base.status(c.name, root)
    leaders = [i for i, r in enumerate(rows) if r["role"] == "leader"]
    assert len(leaders) == 1, rows
    return leaders[0]


def _make_leader(c: Cluster, root: Path, target: int) -> None:
    """Hand leadership to member ``target`` (asked of the current leader), within 10 s."""
    leader = _leader(c, root)
    if leader == target:
        return
    _, rows = base.status(c.name, root)
    httpx.post(f"http://127.0.0.1:{c.nodes[leader].port}/v3/maintenance/transfer-leadership",
               json={"targetID": str(int(rows[target]["member_id"], 16))},
               timeout=10).raise_for_status()
    deadline = time.monotonic() + 10
    while _leader(c, root) != target:
        assert time.monotonic() < deadline, "leadership did not move"
        time.sleep(0.1)


def nearest_majority_rtt_ms(regions: str, leader_region: str, peer_regions: list[str]) -> float:
    """Return the round trip (ms) from the leader's region to its nearest peer's region."""
    rs = region_set(regions)
    return min(rs.one_way_ms(leader_region, p)[0] + rs.one_way_ms(p, leader_region)[0]
               for p in peer_regions)


def test_linearizable_read_pays_one_quorum_round_trip(etcd_dc3, tmp_path):
    c, root = etcd_dc3
    _make_leader(c, root, 0)
    expected_ms = nearest_majority_rtt_ms(c.regions, c.nodes[0].region,
                                          [n.region for n in c.nodes[1:]])
    assert expected_ms == pytest.approx(81.5)
    run = run_probe(ProbeSpec(store=c.url, workload="latency", ops=60,
                              options=ProbeOptions(duration_s=60)), tmp_path / "runs")
    assert not run.error, run.error
    assert _leader(c, root) == 0, "leadership moved during the run"
    v = run.results["variants"]
    extra_p50 = v["consistent read"]["p50_ms"] - v["eventual read"]["p50_ms"]
    row = latency_row("etcd", run.results, c.nodes[0].region)
    print(f"etcd dc3, leader US-E: serializable p50 {v['eventual read']['p50_ms']} ms, "
          f"linearizable p50 {v['consistent read']['p50_ms']} ms, extra {extra_p50:.1f} ms "
          f"(expected {expected_ms} ms); mean diff {row['consistent_minus_eventual_ms']} "
          f"[{row['ci_lo_ms']}, {row['ci_hi_ms']}] {row['verdict']}")
    assert 0.8 * expected_ms <= extra_p50 <= 1.25 * expected_ms + 5, extra_p50
    assert v["eventual read"]["p50_ms"] < 0.2 * expected_ms  # served locally, no round trip
    assert row["verdict"] == "significant"
    assert row["ci_lo_ms"] > 0.6 * expected_ms
    assert row["ci_lo_ms"] <= row["consistent_minus_eventual_ms"] <= row["ci_hi_ms"]


def test_sweep_runs_in_real_time_on_etcd(etcd_dc3, tmp_path):
    c, root = etcd_dc3
    _make_leader(c, root, 0)
    cfg = SweepConfig(clients=(1, 4), total=24, items=(1, 100),
                      variants=("eventual read", "consistent read"), writers=2)
    run = run_probe(ProbeSpec(store=c.url, workload="sweep", sweep=cfg), tmp_path / "runs")
    assert not run.error, run.error
    pts = {(p["variant"], p["items"], p["clients"]): p for p in run.results["points"]}
    assert len(pts) == 8 and all(p["ok"] == 24 for p in pts.values())
    assert all(p["background_writes"] > 0 for p in pts.values())
    for items in (1, 100):
        one = pts[("consistent read", items, 1)]["total_s"]
        assert one >= 24 * 0.8 * 0.0815, one                 # a quorum round trip each
        assert pts[("consistent read", items, 4)]["total_s"] < one / 2  # clients overlap
        assert pts[("eventual read", items, 1)]["total_s"] < one / 3    # served locally

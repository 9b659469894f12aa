"""The staleness probe on the quorum and primary schemes, and reproducibility by seed."""

from __future__ import annotations

import numpy as np

from replicalab.history import load_history
from replicalab.workloads.staleness import StalenessConfig


def test_quorum_r1_w1_stale_and_r2_w2_fresh(probe):
    weak = probe("sim://quorum?n=3&r=1&w=1", duration_s=600).results
    strong = probe("sim://quorum?n=3&r=2&w=2", duration_s=600).results
    assert weak["fresh_by_range"][0]["p"] < 0.99
    assert sum(weak["k_staleness"]["count"][1:]) > 0
    assert all(r["p"] == 1.0 for r in strong["fresh_by_range"])
    assert strong["k_staleness"]["k"] == [0]


def test_primary_async_remote_replica_stale_for_one_replication_delay(probe):
    cfg = StalenessConfig(placement="separate-clients", writer_region="US-E",
                          reader_region="US-W", ranges="0-35,45-3000")
    url = "sim://primary?replication=async&regions=dc3"
    remote = probe(url, duration_s=900, config=cfg).results
    early, late = remote["fresh_by_range"]
    assert early["p"] < 0.05 and early["total"] > 100   # US-E -> US-W one way is ~40 ms
    assert late["p"] == 1.0
    assert 30 <= remote["periods"]["last_lt_100_median_ms"] <= 50
    at_primary = probe(url, duration_s=900, consistency="consistent", config=cfg).results
    assert all(r["p"] == 1.0 for r in at_primary["fresh_by_range"])


def test_separate_readers_start_once_the_first_write_is_acknowledged(probe):
    # the first write creates the key; a read of it still missing while that write is in
    # flight would count as stale against the write's start (ZooKeeper's 1.4 s first write)
    cfg = StalenessConfig(placement="separate-clients", writer_region="US-E",
                          reader_region="US-W", readers=2)
    run = probe("sim://primary?replication=async&regions=dc3", duration_s=30,
                consistency="consistent", config=cfg)
    h, _ = load_history(run.run_dir)
    f, proc = h.column("f"), h.column("process")
    first_write = int(np.flatnonzero(f == h.f_code("write"))[0])
    reads = np.flatnonzero((f == h.f_code("read")) & (proc > 0))
    assert len(reads) > 100
    assert h.column("invoke_ns")[reads].min() >= h.complete_ns[first_write] > 0
    assert run.results["fresh_by_range"][0]["p"] == 1.0


def test_same_seed_byte_identical_results(probe):
    a = probe(duration_s=600, seed=11)
    b = probe(duration_s=600, seed=11)
    c = probe(duration_s=600, seed=12)
    text = (a.run_dir / "results.json").read_bytes()
    assert text == (b.run_dir / "results.json").read_bytes()
    assert text != (c.run_dir / "results.json").read_bytes()


def test_reads_stay_inside_their_write_interval(probe):
    r = probe(duration_s=900).results
    # reads are slower (22 ms) than the read gap (20 ms): the loop must still stop on time
    assert max(r["freshness"]["t_ms"]) < 3000
    assert 40 <= r["ops"]["reads"] / 900 <= 50

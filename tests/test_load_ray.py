"""Distributed load on a local Ray instance: two actors, merged exactly."""

from __future__ import annotations

import numpy as np

from replicalab.checkers.load import (
    decode_histograms,
    histogram_counts,
    histogram_of,
    merge_counts,
    merge_histograms,
)
from replicalab.workloads.distributed import Pool
from replicalab.workloads.load import LoadSpec


def test_two_ray_workers_merge_to_the_sum_of_their_parts(ray_local):
    spec = LoadSpec(store="sim://simpledb", rate_per_s=300, duration_s=3, max_in_flight=4,
                    read_ratio=0.75)
    with Pool(workers=2, ray_address="local") as pool:
        assert pool.kind == "ray" and pool.workers == 2
        parts = pool.run_step(spec)
    assert ray_local.is_initialized()  # the pool left the Ray it found running
    assert [p.worker for p in parts] == [0, 1]
    assert all(p.error == "" and p.counts.ok > 0 for p in parts)
    total = merge_counts(p.counts for p in parts)
    assert total.ok == parts[0].counts.ok + parts[1].counts.ok
    assert total.offered == parts[0].counts.offered + parts[1].counts.offered
    assert total.ok_writes == parts[0].counts.ok_writes + parts[1].counts.ok_writes
    merged = merge_histograms(decode_histograms(p.histograms) for p in parts)
    # The histogram of all samples, rebuilt from both workers' histories.
    samples = []
    for p in parts:
        h = p.history
        ok = (h.types() == 1) & (h.column("process") >= 0)
        intended = np.asarray(p.intended_ns, np.int64)
        samples.append((h.column("complete_ns")[ok] - intended[ok]) // 1000)
    whole = histogram_of(np.concatenate(samples))
    assert histogram_counts(merged["response/all"]) == histogram_counts(whole)
    assert merged["response/all"].get_total_count() == total.ok
    for p in parts:  # each worker recorded its machine's clocks
        assert p.clock.hostname and p.clock.wall_end_ns >= p.clock.wall_start_ns > 0
        assert p.clock.mono_end_ns >= p.clock.mono_start_ns > 0


def test_paced_groups_are_dealt_out_to_ray_actors(ray_local):
    # three groups on two actors: two on the first, one on the second, whole
    spec = LoadSpec.paced("sim://simpledb", groups=3, clients_per_group=4,
                          client_rate_per_s=5.0, duration_s=2.0, read_ratio=1.0)
    with Pool(workers=2, ray_address="local") as pool:
        parts = pool.run_step(spec)
    assert [p.error for p in parts] == ["", ""]
    clients = [len({op.process for op in p.history if op.process >= 0}) for p in parts]
    assert clients == [8, 4]
    # each client's 10 slots in 2 s, all offered
    assert [p.counts.offered for p in parts] == [80, 40]

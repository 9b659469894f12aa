"""The compiled fast path gives exactly what feeding the reference policies one access at a
time gives: same latencies, same migrations (when, from, to, ping-pong), same final owners."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.placement import simulate as sim
from replicalab.placement.matrix import RegionMatrix, region_matrix
from replicalab.placement.policies import Requests
from replicalab.placement.workloads import generate, initial_owners

SPECS = [
    "static", "consecutive", "consecutive:n=1", "consecutive:n=4", "majority:window_ms=50",
    "majority:window_ms=7.5", "ema", "ema:alpha=0.6", "cog:window_ms=40",
    "cog:mode=continuous:alpha=0.3", "cog:mode=continuous:alpha=1", "oracle:window_ms=30",
]


def assert_same(a, b):
    assert np.array_equal(a.latency_ms, b.latency_ms)
    assert np.array_equal(a.mig_index, b.mig_index)
    assert np.array_equal(a.mig_from, b.mig_from)
    assert np.array_equal(a.mig_to, b.mig_to)
    assert np.array_equal(a.mig_pingpong, b.mig_pingpong)
    assert np.array_equal(a.final_owner, b.final_owner)


def both(spec_text, regions, reqs, owner0, pingpong_ms=25.0):
    [spec] = sim.policy_specs(spec_text)
    ref = sim.run_reference(sim.build(spec, regions, owner0, reqs), regions, reqs, owner0,
                            pingpong_ms)
    fast = sim.run_policy(sim.build(spec, regions, owner0, reqs), regions, reqs, owner0,
                          pingpong_ms)
    return ref, fast


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_fast_path_equals_reference_on_random_streams(data):
    n_regions = data.draw(st.integers(1, 5))
    n_objects = data.draw(st.integers(1, 6))
    # non-integral RTTs so that the L-score and EMA arithmetic is really compared bit for bit
    rtt = data.draw(st.lists(st.lists(st.floats(0.1, 300.0, allow_nan=False),
                                      min_size=n_regions, max_size=n_regions),
                             min_size=n_regions, max_size=n_regions))
    regions = RegionMatrix.of(rtt)
    m = data.draw(st.integers(0, 120))
    obj = np.array(data.draw(st.lists(st.integers(0, n_objects - 1), min_size=m, max_size=m)),
                   np.int64)
    region = np.array(data.draw(st.lists(st.integers(0, n_regions - 1), min_size=m,
                                         max_size=m)), np.int64)
    gaps = data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.3, 17.0]), min_size=m,
                              max_size=m))
    reqs = Requests(obj, region, np.cumsum(np.array(gaps, np.float64)))
    owner0 = np.array(data.draw(st.lists(st.integers(0, n_regions - 1), min_size=n_objects,
                                         max_size=n_objects)), np.int64)
    spec = data.draw(st.sampled_from(SPECS))
    if data.draw(st.booleans()):
        # a capacity the start respects, so the filter has room to work with
        need = max(np.bincount(owner0, minlength=n_regions).max(), -(-n_objects // n_regions))
        share = data.draw(st.integers(int(need), n_objects)) / n_objects
        spec += f":balance={share!r}"
    ref, fast = both(spec, regions, reqs, owner0, data.draw(st.sampled_from([0.0, 5.0, 40.0])))
    assert_same(ref, fast)
    if "balance" in spec:
        # the fast path's filter never fills a region past its capacity either
        cap = sim.build(sim.policy_specs(spec)[0], regions, owner0, reqs).capacity
        loads = np.bincount(owner0, minlength=n_regions)
        for f, t in zip(fast.mig_from, fast.mig_to, strict=True):
            loads[f] -= 1
            loads[t] += 1
            assert loads[t] <= cap


def test_fast_path_equals_reference_on_the_seed_workloads():
    regions = region_matrix("aws15")
    for workload in ("locality", "shared", "drift"):
        reqs = generate(workload, regions, 300, 20_000, 30.0, 7).requests
        owner0 = initial_owners(regions.size, 300, 7)
        for spec in ("consecutive", "majority:window_ms=3000", "ema", "cog:window_ms=3000",
                     "cog:mode=continuous", "oracle:window_ms=3000",
                     "cog:window_ms=3000:balance=0.1", "consecutive:balance=0.08"):
            ref, fast = both(spec, regions, reqs, owner0, 3000.0)
            assert_same(ref, fast)
            if spec.startswith("cog:window"):
                assert ref.mig_index.size > 0  # the comparison covered real migrations

"""Golden tests: seed 002's findings on data-migration policies, reproduced by the simulator.

Each workload runs once at the seed's size (3,000 objects on the 15 aws15 regions; skew:
1,000 objects on 5) with 1,000,000 accesses over 300 s, seed 1, default parameters (3
consecutive, 30 s windows, EMA alpha 0.1). "Steady" is the mean latency of the last 20 % of
the run, after the once-per-window policies have made their first decisions. The tolerances
are stated on each assertion; the runs are deterministic, the margins say how far the
finding is from flipping.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from replicalab.placement import simulate as sim

pytestmark = pytest.mark.golden


def _run(workload: str, policies: str | None = None) -> dict[str, dict[str, Any]]:
    results = sim.run_experiment(sim.experiment(workload, policies=policies))
    return {e["policy"]: e for e in results["policies"]}


@pytest.fixture(scope="module")
def locality() -> dict[str, dict[str, Any]]:
    return _run("locality")


@pytest.fixture(scope="module")
def shared() -> dict[str, dict[str, Any]]:
    return _run("shared")


@pytest.fixture(scope="module")
def drift() -> dict[str, dict[str, Any]]:
    return _run("drift")


@pytest.fixture(scope="module")
def skew() -> dict[str, dict[str, Any]]:
    return _run("skew")


MOVERS = ("consecutive", "majority", "ema", "cog")


def test_locality_every_policy_beats_static_random_placement(locality):
    static = locality["static"]["mean_latency_ms"]  # ~132 ms
    for p in (*MOVERS, "oracle"):
        # seed: "even the most basic policies showed good improvement": here each policy's
        # mean over the whole run (first window included) is below 35 % of static's
        assert locality[p]["mean_latency_ms"] < 0.35 * static, p


def test_locality_cog_and_majority_lowest_latency_fewest_migrations(locality):
    for best in ("cog", "majority"):
        for other in ("consecutive", "ema"):
            # steady latency no higher than the other policies' (margin ~0.2 ms to EMA,
            # ~1.3 ms to consecutive)
            assert locality[best]["steady_latency_ms"] <= locality[other]["steady_latency_ms"]
            # fewest migrations: at most a third of the others' (measured ~1/6 and ~1/11)
            assert locality[best]["migrations_per_1k"] < locality[other]["migrations_per_1k"] / 3


def test_locality_consecutive_ping_pongs_on_shared_objects(locality):
    c = locality["consecutive"]
    # "3-consecutive ... generates a lot of jitter constantly moving shared objects between
    # neighboring regions": over 4x the migrations of CoG/majority (~6x measured), and most of
    # them ping-pong (back to a region left within 30 s), 10x CoG's ping-pong rate or more
    assert c["migrations_per_1k"] > 4 * locality["cog"]["migrations_per_1k"]
    assert c["pingpong_migrations"] > 0.5 * c["migrations"]
    assert c["pingpong_per_1k"] > 10 * locality["cog"]["pingpong_per_1k"]


def test_shared_cog_lowest_latency_single_region_policies_lock_into_one_sharer(shared):
    cog = shared["cog"]
    for other in ("consecutive", "majority", "ema"):
        # CoG lowest steady latency, by 3 ms or more (measured ~6 ms)
        assert cog["steady_latency_ms"] < shared[other]["steady_latency_ms"] - 3.0, other
    for single in ("consecutive", "majority"):
        # lock into one of the sharing regions: >= 99 % of multi-sharer objects end there
        assert shared[single]["on_sharers"] >= 0.99
    # CoG places some objects outside the sharers ("not even necessarily in one of the sharing
    # regions"): under 95 % end on a sharer (measured ~88 %)
    assert cog["on_sharers"] < 0.95
    # EMA, relying on region ids, is worst: 10 ms or more above every other policy
    for other in ("consecutive", "majority", "cog"):
        assert shared["ema"]["steady_latency_ms"] > shared[other]["steady_latency_ms"] + 10


def _window_mean(entry: dict[str, Any], lo_s: float, hi_s: float) -> float:
    s = entry["series"]
    t = np.array(s["t_s"])
    y = np.array(s["mean_latency_ms"], dtype=float)
    return float(y[(t > lo_s) & (t <= hi_s)].mean())


def test_drift_policies_keep_latency_low_as_locality_moves(drift):
    # each region's band moves to its nearest region's from 20 % to 80 % of the 300 s run;
    # "during": 60-240 s, "steady": the last 20 %. Kept low means close to the oracle, which
    # itself rises from ~21 to ~28 ms because some bands end up shared by two regions.
    static = drift["static"]["mean_latency_ms"]
    oracle = drift["oracle"]
    for p in ("consecutive", "majority", "cog"):
        # within 30 % of the oracle during and after the move (seeds 1-3: at most 22 %)
        assert _window_mean(drift[p], 60, 240) < 1.3 * _window_mean(oracle, 60, 240), p
        assert drift[p]["steady_latency_ms"] < 1.3 * oracle["steady_latency_ms"], p
        assert drift[p]["steady_latency_ms"] < 0.3 * static, p


def test_drift_ema_first_improves_then_degrades_to_a_steady_state(drift):
    # seed: "EMA ... first gets better latency and then gradually degrades until reaching a
    # steady state" (~59 ms there). Here: ~23 ms before the move, ~46 ms steady.
    ema, oracle = drift["ema"], drift["oracle"]
    before = _window_mean(ema, 45, 60)
    assert before < 1.15 * _window_mean(oracle, 45, 60)  # first better: near the oracle (1.11x)
    steady = ema["steady_latency_ms"]
    assert steady > 1.5 * before  # then degrades (2.0x its own early level)
    assert steady > 1.4 * oracle["steady_latency_ms"]  # 1.66x the oracle
    for p in ("consecutive", "majority", "cog"):
        assert steady > 1.2 * drift[p]["steady_latency_ms"], p  # worst of all movers (1.35x)
    # to a steady state: the last 20 % of buckets stay within 10 % of their mean (2 %)
    s = np.array(ema["series"]["mean_latency_ms"][-10:], dtype=float)
    assert np.all(np.abs(s - s.mean()) < 0.10 * s.mean())
    # and it pays for it in migrations: over 5x CoG's (11x)
    assert ema["migrations_per_1k"] > 5 * drift["cog"]["migrations_per_1k"]


def test_skew_filter_caps_regions_at_a_latency_between_static_and_unfiltered(skew):
    cog, capped, static = skew["cog"], skew["cog:balance=0.25"], skew["static"]
    # without the filter CoG moves nearly all objects into the hot region: >= 95 % (100 %)
    assert cog["max_share"] >= 0.95
    # with the filter no region ever holds more than 25 %, at any time of the run
    assert max(capped["series"]["max_share"]) <= 0.25
    assert capped["max_share"] <= 0.25
    # "latency improvement becomes more modest": between static and unfiltered CoG, by 5 ms
    # or more on each side (measured 73.5 / 57.9 / 25.6 ms)
    assert cog["mean_latency_ms"] + 5 < capped["mean_latency_ms"] < \
        static["mean_latency_ms"] - 5
    # the disbalance graph: unfiltered imbalance ends at all objects, filtered at most 250
    assert cog["imbalance_objects"] >= 950
    assert capped["imbalance_objects"] <= 250


@pytest.mark.parametrize("name", ["locality", "shared", "drift", "skew"])
def test_oracle_at_least_as_good_as_every_policy(name, request):
    runs = request.getfixturevalue(name)
    oracle = runs["oracle"]
    for label, e in runs.items():
        assert oracle["mean_latency_ms"] <= e["mean_latency_ms"], label
        assert oracle["steady_latency_ms"] <= e["steady_latency_ms"], label

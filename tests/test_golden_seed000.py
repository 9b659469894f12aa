"""Golden: seed 000 ("The cost of eventual consistency", SimpleDB) on sim://simpledb with its
defaults. The seed's figures are in each comment; tolerances are stated next to them.

Single thread: means 22 / 23 / 110 / 118 ms for eventual read / consistent read / put /
conditional put, and no difference the seed could perceive. Multiple threads: one item is
slower than 1,000 items at low concurrency; by 100 threads the two are almost identical.
"""

from __future__ import annotations

import statistics

import pytest

from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.latency import LatencyConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.sweep import SweepConfig

pytestmark = pytest.mark.golden
PAIRS = {("eventual read", "consistent read"), ("put", "conditional put")}


def _latency(tmp_path, seed: int) -> dict:
    return run_probe(ProbeSpec(store="sim://simpledb", workload="latency",
                               config=LatencyConfig(ops=1000),
                               options=ProbeOptions(seed=seed)), tmp_path / "runs").results


def test_single_thread_means_and_no_significant_difference(tmp_path):
    r = _latency(tmp_path, seed=1)
    means = {v: x["mean_ms"] for v, x in r["variants"].items()}
    # seed: 22 / 23 / 110 / 118 ms. The model's means are 22 / 22.5 / 110 / 116; one run of
    # 1,000 calls lands within about 2 standard errors (reads +-1.5 ms, puts +-15 ms)
    assert abs(means["eventual read"] - 22) <= 1.5, means
    assert abs(means["consistent read"] - 22.5) <= 1.5, means
    assert abs(means["put"] - 110) <= 15, means
    assert abs(means["conditional put"] - 116) <= 15, means
    verdicts = {(d["a"], d["b"]): d["verdict"] for d in r["differences"]}
    for pair in PAIRS:  # seed: "essentially the same"
        assert verdicts[pair] == "not significant", (pair, r["differences"])
    # the reads and the puts themselves do differ: the test can tell when there is a difference
    assert verdicts[("eventual read", "put")] == "significant"


def test_not_significant_in_most_runs_not_just_one(tmp_path):
    """The model's true differences (0.5 ms, 6 ms) are below SimpleDB's normal variation: in
    ten runs each pair comes out not significant at least eight times (about 9 in 10
    expected at this spread)."""
    counts = dict.fromkeys(PAIRS, 0)
    for seed in range(1, 11):
        r = _latency(tmp_path / str(seed), seed)
        for d in r["differences"]:
            if (d["a"], d["b"]) in PAIRS and d["verdict"] == "not significant":
                counts[(d["a"], d["b"])] += 1
    assert all(n >= 8 for n in counts.values()), counts


def test_one_item_slower_at_low_concurrency_converges_by_100_clients(tmp_path):
    """Fewer requests than the seed's 10,000 (4,000 per point) and three seeds: the total time
    of 100 clients ends with the slowest of their last calls, so one run's ratio at 100
    clients wanders by about +-10 %; the mean of three is what is asserted."""
    cfg = SweepConfig(clients=(2, 5, 10, 100), total=4000, items=(1, 1000),
                      variants=("put", "eventual read"))
    ratios: dict[tuple[str, int], list[float]] = {}
    for seed in (1, 2, 3):
        r = run_probe(ProbeSpec(store="sim://simpledb", workload="sweep", config=cfg,
                                options=ProbeOptions(seed=seed)), tmp_path / "runs").results
        assert all(p["ok"] == 4000 for p in r["points"])
        for s in r["shapes"]:
            ratios.setdefault((s["variant"], s["clients"]), []).append(s["time_ratio"])
    mean = {k: statistics.fmean(v) for k, v in ratios.items()}
    for variant, low in (("put", 1.08), ("eventual read", 1.5)):
        for clients in (2, 5, 10):  # seed: the single item takes longer
            assert mean[(variant, clients)] >= low, (variant, clients, mean)
        # seed: "At 100 threads, the Single item and 1000 items results are almost identical"
        assert abs(mean[(variant, 100)] - 1) <= 0.10, (variant, mean)

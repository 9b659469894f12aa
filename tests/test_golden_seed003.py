"""Golden: seed 003 (Wada et al., CIDR 2011) §2-3 reproduced on sim://simpledb with defaults.

Tolerances are the ones the Foundation issue states; the paper's figure is in each comment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicalab.workloads.monotonic_writes import MonotonicWritesConfig
from replicalab.workloads.staleness import StalenessConfig

pytestmark = pytest.mark.golden
RANGES = "0-450,510-1000"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_eventual_reads_single_thread(probe, seed):
    run = probe(duration_s=2 * 3600, seed=seed, config=StalenessConfig(ranges=RANGES))
    r = run.results
    early, late = r["fresh_by_range"]
    assert abs(early["p"] - 0.33) <= 0.03      # paper: 33.40% in [0, 450)
    assert late["p"] >= 0.98                   # paper: 98% reached at 507 ms
    med = r["periods"]["first_ge_99_median_ms"]
    assert 500 <= med <= 530                   # paper: median 516.17 ms
    s = r["successive_reads"]
    assert abs(s["fresh_stale"] - 0.22) <= 0.03  # paper: 23.36% of pairs
    assert abs(s["pearson"]) < 0.05             # paper: 0.0281
    assert r["read_your_writes"]["violations"] > 0  # eventual reads break RYW


def test_consistent_reads_always_fresh(probe):
    r = probe(duration_s=3600, consistency="consistent",
              config=StalenessConfig(ranges=RANGES)).results
    assert [x["p"] for x in r["fresh_by_range"]] == [1.0, 1.0]   # paper: 100.00%
    assert r["read_your_writes"]["violations"] == 0
    assert r["k_staleness"]["k"] == [0]


def _fractions(probe, variant):
    return probe(workload="monotonic-writes", config=MonotonicWritesConfig(variant), duration_s=3600
                 ).results["version_fraction"]


def test_two_different_writes_flush_the_first(probe):
    a1 = _fractions(probe, "different")["A1"]
    assert a1["v0"] < 0.01                       # paper: 0.097%
    assert abs(a1["v1"] - 0.66) <= 0.04          # paper: 66.339%
    assert abs(a1["v2"] - 0.33) <= 0.04          # paper: 33.564%


def test_three_writes_leave_replicas_one_behind(probe):
    a1 = _fractions(probe, "three")["A1"]
    assert a1["v0"] < 0.01 and a1["v1"] < 0.01   # paper: 0.051%, 0.028%
    assert abs(a1["v2"] - 0.66) <= 0.04          # paper: 66.650%
    assert abs(a1["v3"] - 0.33) <= 0.04          # paper: 33.272%


def test_same_value_twice_is_suppressed(probe):
    a1 = _fractions(probe, "same")["A1"]
    assert abs(a1["v0"] - 0.66) <= 0.04          # paper: 66.526%
    assert abs(a1["v1"] - 0.33) <= 0.04          # paper: 33.474%


def test_two_attributes_then_one(probe):
    diff = _fractions(probe, "two-then-one")
    assert abs(diff["A1"]["v1"] - 0.66) <= 0.04 and abs(diff["A1"]["v2"] - 0.33) <= 0.04
    assert diff["A2"]["v1"] > 0.99              # paper Fig. 6: A2 reads v1 ~100%
    same = _fractions(probe, "two-then-one-same")
    for attr in ("A1", "A2"):                    # paper: like Fig. 5 for both
        assert abs(same[attr]["v0"] - 0.66) <= 0.04 and abs(same[attr]["v1"] - 0.33) <= 0.04


PATTERNS = {
    "independent": {"A": 0.12, "B": 0.22, "C": 0.22, "D": 0.44},
    "together": {"A": 0.34, "B": 0.0, "C": 0.0, "D": 0.66},
    "first-flushed": {"A": 0.34, "B": 0.66, "C": 0.0, "D": 0.0},
}
# Table 3 of seed 003: which pattern each write/read combination shows (N/A cells absent).
TABLE3 = {
    ("same-item", "two-calls", "two-single"): "first-flushed",
    ("same-item", "two-calls", "one-multi"): "first-flushed",
    ("same-item", "one-call", "two-single"): "independent",
    ("same-item", "one-call", "one-multi"): "together",
    ("same-domain", "two-calls", "two-single"): "first-flushed",
    ("same-domain", "two-calls", "one-multi"): "first-flushed",
    ("same-domain", "one-call", "two-single"): "independent",
    ("same-domain", "one-call", "one-multi"): "together",
    ("diff-domains", "two-calls", "two-single"): "independent",
}


# Recorded by `python benchmarks/simpledb_table3.py` (one simulated hour, seed 1): judged
# here from the file, and tied to this code by a short probe with the same seed.
RECORDED = Path(__file__).resolve().parent.parent / "docs" / "data" / \
    "simpledb-table3-2026-11-29.json"


def _combo(e: dict) -> tuple[str, str, str]:
    return e["placement"], e["write"], e["read"]


def _abcd(counts: dict[str, int] | None) -> dict[str, float] | None:
    """A/B/C/D fractions recomputed from a recorded row's counts (not its own fractions)."""
    if counts is None:
        return None
    n = sum(counts.values())
    return {k: v / n for k, v in counts.items()}


def test_table3_patterns():
    r = json.loads(RECORDED.read_text())
    assert r["duration_s"] == 3600 and r["seed"] == 1
    counts = {_combo(e): e["counts"] for e in r["table3"]}
    got = {c: _abcd(n) for c, n in counts.items()}
    for combo, pattern in TABLE3.items():
        assert sum(counts[combo].values()) > 5_000, combo  # an hour of reads in the window
        for cell, want in PATTERNS[pattern].items():
            assert abs(got[combo][cell] - want) <= 0.04, (combo, cell, got[combo])
    na = {c for c, v in got.items() if v is None}
    assert na == {("diff-domains", "two-calls", "one-multi"),
                  ("diff-domains", "one-call", "two-single"),
                  ("diff-domains", "one-call", "one-multi")}


def test_the_recorded_table3_comes_from_this_code(probe):
    """The simulation is deterministic and a shorter run is the start of a longer one: a
    probe of the recording's first seconds classifies exactly as the recording's history cut
    at that time (a change to the store, the workload or the classification shows here)."""
    r = json.loads(RECORDED.read_text())
    short = probe(workload="inter-element", duration_s=r["slice_s"], seed=r["seed"]).results
    want = {_combo(e): e["counts"] for e in r["slice_table3"]}
    got = {_combo(e): e["counts"] for e in short["table3"]}
    assert got == want
    assert sum(sum(c.values()) for c in got.values() if c) > 1000  # the slice has reads

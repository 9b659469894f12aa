"""CLT analysis: censored percentiles, quorum latency, FD timeouts, spikes, records I/O."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.clt import analysis, quorum, records, stats
from replicalab.clt.records import TIMEOUT

INF = math.inf
samples = st.lists(st.one_of(st.floats(1.0, 1e6, allow_nan=False), st.just(INF)),
                   min_size=1, max_size=300)


def _rows(rtts: dict[tuple[str, str], list[float | None]], rate_hz: float = 100.0,
          lag_us: int = 0) -> records.Records:
    """Rows from per-pair RTT lists in ms (None = timeout), round i at i / rate."""
    cols: dict[str, list] = {k: [] for k in ("node", "round", "remote", "start", "end", "lag")}
    for (node, remote), xs in rtts.items():
        for r, x in enumerate(xs):
            start = 1_000_000 + int(r * 1e6 / rate_hz)
            cols["node"].append(node)
            cols["round"].append(r)
            cols["remote"].append(remote)
            cols["start"].append(start)
            cols["end"].append(TIMEOUT if x is None else start + round(x * 1000))
            cols["lag"].append(lag_us)
    return records.make(cols["node"], cols["round"], cols["remote"], cols["start"],
                        cols["end"], cols["lag"])


# --- censored percentiles -------------------------------------------------------------

def test_percentiles_with_censoring_nearest_rank():
    x = np.array([float(v) for v in range(1, 11)] + [INF, INF]) * 1000  # 10 values, 2 timeouts
    q = stats.quantiles(x, [50, 80, 90, 99.999])
    assert q[0] == 6000  # rank ceil(0.5 * 12) = 6
    assert q[1] == 10000  # rank ceil(9.6) = 10: the largest observed value
    assert math.isinf(q[2]) and math.isinf(q[3])  # ranks 11, 12 fall among the timeouts
    s = stats.summary(x)
    assert s["n"] == 12 and s["timeouts"] == 2
    assert s["p"]["p50"] == 6.0 and s["p"]["p90"] is None  # None = above the timeout
    assert s["mean_ms"] == 5.5  # the mean of the observed values only


def test_timeouts_are_never_dropped_from_the_total():
    observed = np.arange(1, 101, dtype=float)
    with_timeouts = np.r_[observed, [INF] * 100]
    # dropping timeouts would give p50 = 50; counting them moves p50 up to the last observed
    assert stats.quantiles(observed, [50])[0] == 50
    assert stats.quantiles(with_timeouts, [50])[0] == 100
    _, f = stats.cdf_points(with_timeouts)
    assert f[-1] == pytest.approx(0.5)


@settings(max_examples=200, deadline=None)
@given(samples, st.lists(st.floats(0.001, 100.0), min_size=2, max_size=6))
def test_quantiles_are_monotone_and_censored_exactly_past_the_observed(xs, qs):
    x = np.array(xs)
    qs = sorted(qs)
    got = stats.quantiles(x, qs)
    assert all(a <= b for a, b in itertools.pairwise(got))
    n, observed = len(x), int(np.isfinite(x).sum())
    for q, v in zip(qs, got, strict=True):
        rank = max(1, math.ceil(q / 100 * n - 1e-9))
        assert math.isinf(v) == (rank > observed)


# --- failure-detector timeouts ---------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(samples, st.sampled_from(analysis.FD_P))
def test_fd_timeout_keeps_false_positives_below_p_and_is_the_shortest(xs, p):
    x = np.array(xs)
    t = stats.exceedance_timeout(x, p)
    if math.isinf(t):
        assert np.mean(np.isinf(x)) > p  # unreachable only when timeouts alone exceed p
        return
    assert np.mean(x > t) <= p + 1e-12
    shorter = x[x < t]
    if len(shorter):
        assert np.mean(x > shorter.max()) > p  # any shorter observed timeout is too short


def test_fd_table_known_sample():
    x = np.r_[np.full(990, 1000.0), np.full(9, 5000.0), [INF]]  # 1 timeout in 1000
    rows = analysis.fd_table(x, [1e-1, 1e-2, 1e-3, 1e-4])
    assert [r["timeout_ms"] for r in rows] == [1.0, 1.0, 5.0, None]  # 10 of 1000 above 1 ms
    assert [r["reliable"] for r in rows] == [True, True, False, False]


def test_fd_worst_pair_is_the_largest_timeout():
    rec = _rows({("a", "b"): [1.0] * 200, ("a", "c"): [1.0] * 190 + [9.0] * 10})
    fd = analysis.failure_detector(rec, [1e-2])
    assert fd["worst_pair"][0]["pair"] == "a->c"
    assert fd["worst_pair"][0]["timeout_ms"] == 9.0
    assert fd["pooled"][0]["timeout_ms"] == 9.0  # 10 of 400 above 1 ms > 1%


# --- quorum latency -------------------------------------------------------------------

def test_quorum_latency_counts_timeouts_and_the_free_own_vote():
    rec = _rows({("n1", "n2"): [5.0, 2.0], ("n1", "n3"): [None, 4.0]})
    nodes = ["n1", "n2", "n3"]
    assert quorum.quorum_latency(rec, "n1", nodes, 1, False).tolist() == [0.0, 0.0]
    assert quorum.quorum_latency(rec, "n1", nodes, 2, False).tolist() == [5000.0, 2000.0]
    q3 = quorum.quorum_latency(rec, "n1", nodes, 3, False)
    assert math.isinf(q3[0]) and q3[1] == 4000.0  # round 0 never reached all three


def test_quorum_latency_with_self_loop_counts_the_self_ping():
    rec = _rows({("n1", "n1"): [1.0], ("n1", "n2"): [5.0], ("n1", "n3"): [3.0]})
    nodes = ["n1", "n2", "n3"]
    got = [quorum.quorum_latency(rec, "n1", nodes, k, True)[0] for k in (1, 2, 3)]
    assert got == [1000.0, 3000.0, 5000.0]
    with pytest.raises(ValueError, match="between 1 and"):
        quorum.quorum_latency(rec, "n1", nodes, 4, True)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 6), st.booleans(), st.integers(1, 20), st.randoms(use_true_random=False))
def test_quorum_is_the_kth_order_statistic(n, self_loop, rounds, rnd):
    nodes = [f"n{i}" for i in range(n)]
    rtts = {}
    for b in nodes:
        if b == "n0" and not self_loop:
            continue
        rtts[("n0", b)] = [None if rnd.random() < 0.2 else rnd.uniform(0.1, 50)
                           for _ in range(rounds)]
    rec = _rows(rtts)
    for k in range(1, n + 1):
        got = quorum.quorum_latency(rec, "n0", nodes, k, self_loop)
        for r in range(rounds):
            votes = sorted(INF if xs[r] is None else round(xs[r] * 1000)
                           for xs in rtts.values())
            if not self_loop:
                votes = [0.0, *votes]
            assert got[r] == votes[k - 1]
        if k > 1:
            assert np.all(got >= quorum.quorum_latency(rec, "n0", nodes, k - 1, self_loop))


def test_majority_beats_single_pair_in_the_tail():
    # one slow peer per node: a single pair sees its spikes, a 2-of-3 quorum masks them
    rng = np.random.default_rng(7)
    rtts = {}
    for a in ("n1", "n2", "n3"):
        for b in ("n1", "n2", "n3"):
            if a != b:
                xs = rng.normal(1.0, 0.05, 2000).tolist()
                if (a, b) in (("n1", "n2"), ("n2", "n3"), ("n3", "n1")):
                    for i in rng.choice(2000, 40, replace=False):
                        xs[i] = 80.0
                rtts[(a, b)] = xs
    q = analysis.quorums(_rows(rtts), ["n1", "n2", "n3"], self_loop=False)
    assert q["majority_k"] == 2
    assert q["majority_beats_single_tail"]
    tail = {t["q"]: t for t in q["tail"]}
    assert tail["p99.999"]["single_ms"] == 80.0
    assert tail["p99.999"]["majority_ms"] < 2.0


# --- spikes, windows, lag, overhead, matrix --------------------------------------------

def test_spikes_above_a_multiple_of_the_median_include_timeouts():
    rec = _rows({("a", "b"): [1.0] * 95 + [2.9, 3.5, 10.0, None, 1.0]})
    sp = analysis.spikes(rec, factor=3.0, rate_hz=10.0)
    assert sp["pairs"]["a->b"]["median_ms"] == 1.0
    assert sp["pairs"]["a->b"]["count"] == 3  # 3.5, 10 and the timeout; 2.9 is not
    assert sp["top"][0]["rtt_ms"] is None  # the timeout ranks as the largest
    assert [t["round"] for t in sp["top"]] == [98, 97, 96]
    assert sp["top"][1]["t_s"] == 9.7


def test_window_averages_use_schedule_time():
    rec = _rows({("a", "b"): [1.0] * 10 + [3.0] * 9 + [None]}, rate_hz=10.0)
    w = analysis.windows(rec, rate_hz=10.0, window_s=1.0)
    assert w["t_s"] == [0.0, 1.0]
    assert w["pairs"]["a->b"]["mean_ms"] == [1.0, 3.0]
    assert w["pairs"]["a->b"]["timeouts"] == [0, 1]


def test_lag_flags_a_node_that_falls_behind():
    ok = _rows({("a", "b"): [1.0] * 100}, lag_us=200)
    late = _rows({("c", "d"): [1.0] * 100}, lag_us=25_000)
    lag = analysis.lag(records.concat([ok, late]), rate_hz=100.0, planned={"a": 100, "c": 100})
    assert lag["nodes"]["a"]["behind"] is False and lag["nodes"]["a"]["p50_ms"] == 0.2
    assert lag["nodes"]["c"]["behind"] is True and lag["behind"] is True
    short = analysis.lag(ok, rate_hz=100.0, planned={"a": 200})
    assert short["nodes"]["a"]["behind"] is True  # sent fewer rounds than planned


def test_proxy_overhead_and_matrix_check():
    rec = _rows({("n1", "n2/direct"): [0.2] * 50, ("n1", "n2/proxy0"): [0.5] * 50,
                 ("n1", "n2/proxy10"): [11.5] * 50,
                 ("n1", "n2"): [86.4] * 50, ("n2", "n1"): [88.0] * 50})
    po = analysis.proxy_overhead(rec)
    assert po["overhead_p50_ms"] == pytest.approx(0.3)
    assert po["floor_p50_ms"] == pytest.approx(1.5)  # a 10 ms link measured 11.5 ms
    s = analysis.Settings(nodes=["n1", "n2"], rate_hz=100.0, timeout_ms=1000.0,
                          self_loop=False, regions={"n1": "VA", "n2": "OR"},
                          injected_rtt_ms={"n1->n2": 86.0, "n2->n1": 86.0})
    r = analysis.analyse(rec, s)
    assert set(r["pairs"]) == {"n1->n2", "n2->n1"}  # calibration links left out
    m = {x["pair"]: x for x in r["matrix"]["rows"]}
    # a delayed link may be off by 1 ms + what the 10 ms calibration link added (1.5 ms)
    assert m["n1->n2"]["ok"] and m["n2->n1"]["ok"] and m["n1->n2"]["allowed_ms"] == 2.5
    far = analysis.matrix_check({"a->b": {"p": {"p50": 89.0}}}, {"a->b": 86.0}, 0.3, 1.5)
    assert not far["all_ok"] and far["rows"][0]["diff_ms"] == pytest.approx(3.0)
    # an un-delayed link carries no toxic: only the zero-latency proxy overhead is allowed
    zero = analysis.matrix_check({"a->b": {"p": {"p50": 1.4}}}, {"a->b": 0.0}, 0.3, 1.5)
    assert zero["rows"][0]["allowed_ms"] == pytest.approx(1.3) and not zero["all_ok"]
    assert r["groups"]["cross region"]["n"] == 100
    json.dumps(r, allow_nan=False)  # results are JSON-safe (no NaN / inf)


def test_groups_self_same_cross():
    regions = {"a": "VA", "b": "VA", "c": "OR"}
    assert analysis.group_of("a", "a", regions) == "self"
    assert analysis.group_of("a", "b", regions) == "same region"
    assert analysis.group_of("a", "c", regions) == "cross region"


# --- records --------------------------------------------------------------------------

def test_records_csv_parquet_and_wire_round_trip(tmp_path: Path):
    rec = _rows({("n1", "n2"): [1.5, None, 2.0], ("n1", "n1"): [0.1, 0.2, None]}, lag_us=7)
    records.write_csv(rec, tmp_path / "a.csv")
    lines = (tmp_path / "a.csv").read_text().splitlines()
    assert lines[0] == "node,round,remote,start_us,end_us"
    assert lines[2].endswith(",")  # a timeout leaves end_us empty
    back = records.read_csv(tmp_path / "a.csv")
    assert back.end_us.tolist() == rec.end_us.tolist()
    records.write_parquet(rec, tmp_path / "a.parquet")
    pq = records.read_parquet(tmp_path / "a.parquet")
    assert pq.end_us.tolist() == rec.end_us.tolist() and pq.lag_us.tolist() == [7] * 6
    names, data = records.to_bytes(rec)
    wire = records.from_bytes("n1", names, data)
    assert wire.remote.tolist() == rec.remote.tolist()
    assert wire.start_us.tolist() == rec.start_us.tolist()
    (tmp_path / "bad.csv").write_text("node,round,remote,start_us,end_us\nn1,x,n2,1,2\n")
    with pytest.raises(ValueError, match=r"bad\.csv:2"):
        records.read_csv(tmp_path / "bad.csv")


def test_report_renders_every_section(tmp_path: Path):
    from replicalab.report.clt import render_clt_report
    rng = np.random.default_rng(3)
    nodes = ["n1", "n2", "n3"]
    rtts = {(a, b): [None if rng.random() < 0.001 else float(x)
                     for x in rng.normal(2.0 if a != b else 0.1, 0.1, 500)]
            for a in nodes for b in nodes}
    rec = _rows(rtts)
    s = analysis.Settings(nodes=nodes, rate_hz=100.0, timeout_ms=1000.0, self_loop=True,
                          regions={"n1": "VA", "n2": "VA", "n3": "<OR>"}, window_s=1.0)
    r = analysis.analyse(rec, s)
    r.update(notes=["a <note>"], errors=[], wall_s=5.0,
             clock_offsets={"driver": "n1", "messages": 10, "nodes": [
                 {"node": "n2", "skew_ms": -20.0, "true_offset_ms": 20.0,
                  "recovered_offset_ms": 19.9, "error_ms": -0.1, "low_ms": 19.8,
                  "high_ms": 20.1}]})
    html = render_clt_report(r, rec, tmp_path).read_text()
    for needle in ("Round-trip latency per pair", "Quorum latency", "Failure-detector timeout",
                   "Spikes", "Schedule lag", "Clock offsets recovered", "p99.999", "Q2/3",
                   "&lt;OR&gt;", "a &lt;note&gt;"):
        assert needle in html, needle
    visible = html.split('id="results-data"')[0]  # the embedded JSON is a script, not markup
    assert "<note>" not in visible
    assert (tmp_path / "figures" / "clt-quorum.png").exists()

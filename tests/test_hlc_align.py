"""Trace logs, synthetic traces and HLC trace alignment (seed 002), the `hlc` CLI, and the
golden reproduction of the seed's two trace-sync figures."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from replicalab.hlc.align import AlignError, align, alignment_errors
from replicalab.hlc.bench import BenchConfig, run_bench, series
from replicalab.hlc.synth import SynthConfig, generate, spread_skews
from replicalab.hlc.trace import Event, LogError, read_log, write_log

EXE = [sys.executable, "-m", "replicalab.cli.main"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "160"})


# ---------------------------------------------------------------- trace logs

def _ev(node: str, seq: int, pt: int, l: int, c: int = 0, kind: str = "local",  # noqa: E741
        msg: str | None = None) -> Event:
    return Event(node, seq, pt, l, c, kind, msg, {"x": seq})


def test_log_round_trip(tmp_path: Path) -> None:
    events = [_ev("n1", 1, 10, 10), _ev("n1", 2, 11, 15, 1, "send", "n1->n2#1"),
              _ev("n1", 5, 12, 15, 2, "recv", "n2->n1#1")]
    write_log(tmp_path / "n1.jsonl", events)
    assert read_log(tmp_path / "n1.jsonl") == events


@pytest.mark.parametrize(("line", "problem"), [
    ('{"node": "n1", "seq": 3', "not valid JSON"),
    ('{"node": "n1", "seq": 3, "pt_us": 1, "l_us": 1, "c": 0}', "missing field(s) kind"),
    ('{"node": "n1", "seq": 3, "pt_us": -1, "l_us": 1, "c": 0, "kind": "local"}', "pt_us"),
    ('{"node": "n1", "seq": 3, "pt_us": 1, "l_us": 1, "c": 0, "kind": "poke"}', "kind"),
    ('{"node": "n1", "seq": 3, "pt_us": 1, "l_us": 1, "c": 0, "kind": "send"}', "msg id"),
    ('{"node": "n2", "seq": 3, "pt_us": 1, "l_us": 1, "c": 0, "kind": "local"}', "node 'n2'"),
    ('{"node": "n1", "seq": 2, "pt_us": 1, "l_us": 1, "c": 0, "kind": "local"}',
     "does not increase"),
    ('{"node": "n1", "seq": 3, "pt_us": 1, "l_us": 1, "c": 0, "kind": "local", "y": 1}',
     "unknown field"),
])
def test_malformed_line_names_file_line_and_keeps_partial(tmp_path: Path, line: str,
                                                          problem: str) -> None:
    path = tmp_path / "n1.jsonl"
    write_log(path, [_ev("n1", 1, 10, 10), _ev("n1", 2, 11, 11)])
    with path.open("a") as fh:
        fh.write("\n" + line + "\n")  # a blank line is skipped, so the bad one is line 4
    with pytest.raises(LogError) as info:
        read_log(path)
    assert str(info.value).startswith(f"{path}:4: ")
    assert problem in str(info.value)
    assert [e.seq for e in info.value.partial] == [1, 2]


# ---------------------------------------------------------------- alignment by hand

def test_seed_two_node_example() -> None:
    """Node a's clock is 5 ticks ahead of b's; a message a->b taking 2 ticks lets b learn a's
    time, so b's log must move by at least 3 ticks: the seed's re-sync of c2 against a1."""
    a = [_ev("a", 1, 100, 100), _ev("a", 2, 101, 101, 0, "send", "a->b#1"),
         _ev("a", 3, 104, 104)]
    # b reads 98 when the message (sent at a's 101) arrives: true offset 5, latency 2
    b = [_ev("b", 1, 95, 95), _ev("b", 2, 98, 101, 1, "recv", "a->b#1"),
         _ev("b", 3, 99, 101, 2)]
    result = align({"a": a, "b": b})
    assert result.driver == "a"
    assert result.offset_us("b") == 3
    assert result.nodes["b"].low_us == 3 and result.nodes["b"].high_us is None
    assert alignment_errors(result, {"a": 0, "b": 5}) == {"b": pytest.approx(0.4)}
    assert result.violations_pt == 1 and result.violations_aligned == 0
    # after alignment no event's HLC is ahead of its aligned physical time
    assert all(result.aligned_us(e) >= e.l_us for e in a + b)


def test_message_back_to_driver_bounds_from_above() -> None:
    a = [_ev("a", 1, 100, 100), _ev("a", 2, 110, 110, 0, "recv", "b->a#1")]
    b = [_ev("b", 1, 96, 96, 0, "send", "b->a#1")]
    result = align({"a": a, "b": b}, driver="a")
    assert result.nodes["b"].high_us == 14  # 110 - 96: b's send came before a's receive
    assert result.nodes["b"].low_us is None


def test_logs_breaking_hlc_order_are_rejected() -> None:
    a = [_ev("a", 1, 100, 100, 0, "send", "a->b#1")]
    b = [_ev("b", 1, 99, 99, 0, "recv", "a->b#1")]  # receive stamped before its send
    with pytest.raises(AlignError, match="not after the send"):
        align({"a": a, "b": b})
    with pytest.raises(AlignError, match="does not increase"):
        align({"a": [_ev("a", 1, 100, 100), _ev("a", 2, 100, 100)]})
    with pytest.raises(AlignError, match="twice"):
        align({"a": [_ev("a", 1, 1, 1, 0, "send", "m"), _ev("a", 2, 2, 2, 0, "send", "m")]})


# ---------------------------------------------------------------- properties over synthetic traces

configs = st.builds(
    lambda n, skew, lat_lo, lat_span, p_msg, length, seed: SynthConfig(
        spread_skews(n, skew, seed), (lat_lo, lat_lo + lat_span), 0.4, p_msg, length, seed),
    st.integers(2, 5), st.integers(0, 60), st.integers(1, 12), st.integers(0, 10),
    st.sampled_from([0.0, 0.01, 0.05, 0.2]), st.integers(1, 300), st.integers(0, 2**31))
SYNTH = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SYNTH
@given(configs)
def test_true_offset_lies_within_the_bounds(cfg: SynthConfig) -> None:
    trace = generate(cfg)
    assume(any(trace.logs.values()))  # an empty trace has nothing to align (AlignError)
    result = align(trace.logs)
    truth = trace.true_offsets_us(result.driver)
    for node, off in result.nodes.items():
        assert off.low_us is None or off.low_us <= truth[node]
        assert off.high_us is None or truth[node] <= off.high_us
    assert result.inconsistent() == []


@SYNTH
@given(configs)
def test_estimate_never_overshoots_when_the_driver_is_the_fastest_clock(cfg: SynthConfig) -> None:
    trace = generate(cfg)
    assume(any(trace.logs.values()))  # an empty trace has nothing to align (AlignError)
    result = align(trace.logs)
    if trace.skews_us[result.driver] != max(trace.skews_us.values()):
        return  # no causal link revealed the fastest clock yet: nothing to check
    truth = trace.true_offsets_us(result.driver)
    assert result.driver_excess_us == 0
    for node, off in result.nodes.items():
        assert off.low_us is None or off.low_us <= off.offset_us
        assert off.offset_us <= truth[node]
    errors = alignment_errors(result, truth)
    assert all(0.0 <= e <= 1.0 for e in errors.values())
    events = [e for evs in trace.logs.values() for e in evs]
    assert all(result.aligned_us(e) >= e.l_us for e in events)
    # messages to and from the driver keep their order after alignment
    sends = {e.msg: e for e in events if e.kind == "send"}
    for r in (e for e in events if e.kind == "recv"):
        s = sends[r.msg]
        if result.driver in (s.node, r.node):
            assert result.aligned_us(s) <= result.aligned_us(r)


def test_same_seed_same_trace_and_true_offsets() -> None:
    cfg = SynthConfig(spread_skews(4, 30, 9), (2, 6), 0.4, 0.1, 200, 9)
    one, two = generate(cfg), generate(cfg)
    assert one.logs == two.logs
    assert sorted(one.skews_us.values()) == sorted(spread_skews(4, 30, 9))
    assert one.true_offsets_us(one.fastest())[one.fastest()] == 0
    assert generate(SynthConfig(cfg.skews_ticks, (2, 6), 0.4, 0.1, 200, 10)).logs != one.logs


# ---------------------------------------------------------------- CLI

def test_cli_synth_then_align_with_truth(tmp_path: Path) -> None:
    p = run("hlc", "synth", "--out", "tr", "--nodes", "4", "--skew", "40", "--length", "600",
            "--seed", "5", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    logs = sorted(str(x) for x in (tmp_path / "tr").glob("n*.jsonl"))
    assert len(logs) == 4
    p = run("hlc", "align", *logs, "--truth", "tr/truth.json", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    skews = json.loads((tmp_path / "tr" / "truth.json").read_text())["skews_us"]
    assert out["driver"] == max(skews, key=skews.get)
    for node, n in out["nodes"].items():
        assert n["offset_us"] <= out["true_offsets_us"][node]
        assert n["high_us"] is None or out["true_offsets_us"][node] <= n["high_us"]
    # a node whose clock lags by more than the largest latency (10) must have been improved on
    assert all(e < 1.0 for node, e in out["errors"].items() if out["true_offsets_us"][node] > 10)
    assert sum(out["errors"].values()) / len(out["errors"]) < 0.6
    p = run("hlc", "align", *logs, "--truth", "tr/truth.json", cwd=tmp_path)
    assert p.returncode == 0 and "offsets against HLC driver" in p.stdout


def test_cli_malformed_log_line_is_one_line_exit_2(tmp_path: Path) -> None:
    write_log(tmp_path / "n1.jsonl", [_ev("n1", 1, 10, 10)])
    (tmp_path / "n2.jsonl").write_text(_ev("n2", 1, 9, 9).to_json() + '\n{"node": "n2",}\n')
    p = run("hlc", "align", "n1.jsonl", "n2.jsonl", cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("error: n2.jsonl:2: not valid JSON")
    assert "Traceback" not in p.stderr + p.stdout


def test_cli_help_has_examples(tmp_path: Path) -> None:
    for cmd in ("align", "synth", "bench"):
        p = run("hlc", cmd, "--help", cwd=tmp_path)
        assert p.returncode == 0 and "Example: replicalab hlc " + cmd in p.stdout


# ---------------------------------------------------------------- golden: the seed's figures

# Recorded by `python benchmarks/hlc_trace_sync.py` (100 seeds per point, the docs' figures);
# judged here from the file, and tied to this code by re-running a few repetitions.
RECORDED = Path(__file__).resolve().parent.parent / "docs" / "data" / \
    "hlc-trace-sync-2026-11-29.json"


def _recorded() -> dict:
    return json.loads(RECORDED.read_text())


def _medians(rows: list[dict]) -> list[float]:
    """Medians recomputed from each point's recorded errors (not the file's summary)."""
    return [statistics.median(x["errors"]) for x in rows]


@pytest.mark.golden
def test_seed_002_trace_sync_figures() -> None:
    """Tolerances: medians over 100 seeds may rise by at most 0.05 where the seed shows a
    fall (sampling noise), must fall overall by the stated margins, and are exactly 100% once
    the latency reaches the skew (a theorem, so no tolerance there)."""
    r = _recorded()
    assert r["config"]["reps"] == 100 and not r["interrupted"]
    for row in r["error_vs_length"] + r["error_vs_latency"]:
        assert len(row["errors"]) == row["reps"] == 100, row
    by_p = series(r["error_vs_length"], "p_message", "length_ticks")
    assert len(by_p) == 4 and all(len(rows) == 7 for rows in by_p.values())
    for rows in by_p.values():
        med = _medians(rows)
        assert all(b <= a + 0.05 for a, b in itertools.pairwise(med)), med
        assert med[-1] < med[0] - 0.3, med           # error falls with log length
        assert med[-1] < 0.3, med                     # towards min latency / skew, not zero
        assert all(x["truth_in_bounds"] == 1.0 for x in rows)
    by_len = series(r["error_vs_length"], "length_ticks", "p_message")
    for length, rows in by_len.items():
        med = _medians(rows)
        assert all(b <= a + 0.05 for a, b in itertools.pairwise(med)), (length, med)
        if length <= 400:                             # error falls with message probability
            assert med[-1] < med[0] - 0.1, (length, med)
    by_skew = series(r["error_vs_latency"], "skew_ticks", "latency_ticks")
    assert sorted(by_skew) == [10, 20, 50]
    for skew, rows in by_skew.items():
        below = [x for x in rows if x["latency_ticks"] < skew]
        at_or_above = [x for x in rows if x["latency_ticks"] >= skew]
        assert at_or_above and all(min(x["errors"]) == 1.0 for x in at_or_above), skew
        med = _medians(below)
        assert all(m < 1.0 for m in med), (skew, med)   # an improvement while latency < skew
        assert all(b >= a - 0.03 for a, b in itertools.pairwise(med)), (skew, med)
        assert med[0] < 0.35, (skew, med)


def test_the_recorded_figures_come_from_this_code() -> None:
    """Repetition r of a point uses the same seed whatever the number of repetitions: the
    first repetitions of a short run give the recording's first errors, exactly (a change
    to the synthetic traces, the alignment or the error measure shows here)."""
    r = _recorded()
    cfg = r["config"]
    slice_cfg = BenchConfig(reps=3, seed=cfg["seed"], nodes=cfg["nodes"],
                            p_event=cfg["p_event"], skew_ticks=cfg["skew_ticks"],
                            latency_ticks=tuple(cfg["latency_ticks"]),
                            p_messages=(0.01, 0.1), lengths_ticks=(25, 400),
                            skews_ticks=(20,), latencies_ticks=(3, 20),
                            latency_length_ticks=cfg["latency_length_ticks"],
                            latency_p_message=cfg["latency_p_message"])
    short = run_bench(slice_cfg, errors=True)
    recorded = {(x["p_message"], x["length_ticks"]): x for x in r["error_vs_length"]}
    recorded |= {(x["skew_ticks"], x["latency_ticks"]): x for x in r["error_vs_latency"]}
    rows = short["error_vs_length"] + short["error_vs_latency"]
    assert len(rows) == 6
    for x in rows:
        key = (x["p_message"], x["length_ticks"]) if "p_message" in x else (
            x["skew_ticks"], x["latency_ticks"])
        assert x["errors"] and x["errors"] == recorded[key]["errors"][:len(x["errors"])], key

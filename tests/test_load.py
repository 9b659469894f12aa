"""Open-loop load: arrivals, coordinated-omission correction, exact merging, SLA search,
error kinds, cost, the run directory and the CLI's bad-input lines."""

from __future__ import annotations

import json
import subprocess
import sys
from array import array
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.checkers.load import (
    SIMPLEDB_2011,
    Counts,
    classify_error,
    cost,
    count_outcomes,
    histogram_counts,
    histogram_of,
    load_histograms,
    merge_counts,
    merge_histograms,
    merge_histories,
    parse_prices,
    sla_search,
    summarize,
)
from replicalab.history import History, load_history
from replicalab.stores import open_store, resp
from replicalab.workloads.arrivals import arrival_offsets_ns
from replicalab.workloads.load import LoadSpec, default_loop, drive, run_worker
from replicalab.workloads.load_runner import RampPlan, run_load
from servers import need_module

NS = 1_000_000_000


# --- arrivals ------------------------------------------------------------------------------

def test_uniform_arrivals_are_evenly_spaced_at_the_rate():
    t = arrival_offsets_ns("uniform", 250.0, 4.0, seed=1)
    assert len(t) == 1000
    assert np.all(np.diff(t) >= 3_999_999) and np.all(np.diff(t) <= 4_000_001)
    assert t[0] == 0 and t[-1] < 4 * NS


def test_poisson_arrivals_have_the_rate_and_exponential_gaps():
    t = arrival_offsets_ns("poisson", 1000.0, 20.0, seed=3)
    assert abs(len(t) - 20_000) < 4 * np.sqrt(20_000)
    gaps = np.diff(t) / 1e6
    assert abs(gaps.mean() - 1.0) < 0.03
    assert abs(gaps.std() - 1.0) < 0.05  # exponential: sd = mean (uniform would be 0)
    assert abs((gaps > 1.0).mean() - np.exp(-1)) < 0.02
    assert np.all(np.diff(t) >= 0) and t[-1] < 20 * NS


def test_poisson_arrivals_are_seeded():
    a = arrival_offsets_ns("poisson", 300.0, 2.0, seed=9)
    assert np.array_equal(a, arrival_offsets_ns("poisson", 300.0, 2.0, seed=9))
    assert not np.array_equal(a, arrival_offsets_ns("poisson", 300.0, 2.0, seed=10))


def test_bad_arrival_options_name_the_parameter():
    with pytest.raises(ValueError, match=r"^arrivals 'bursty'"):
        arrival_offsets_ns("bursty", 10, 1, 1)
    with pytest.raises(ValueError, match=r"^rate 0 "):
        arrival_offsets_ns("uniform", 0, 1, 1)


# --- coordinated omission ------------------------------------------------------------------

def _stalled_run(stall: bool) -> dict[str, dict]:
    """80 req/s on 2 connections to sim://simpledb for 6 s; optionally every node of the
    store stops serving for 1 s at t = 2 s (its processing queues are held, like SIGSTOP)."""
    spec = LoadSpec(store="sim://simpledb", rate_per_s=80, duration_s=6, arrivals="uniform",
                    read_ratio=1.0, max_in_flight=2)
    store = open_store(spec.store, 1)
    rt = store.runtime
    h, intended = History(), array("q")

    def pause() -> None:
        net = store.scheme.net
        for node in net.nodes.values():
            net.pause(node, NS)

    async def main() -> None:
        if stall:
            rt.call_later(2 * NS, pause)
        await drive(store, spec, arrival_offsets_ns("uniform", 80, 6, 1), h, intended)

    rt.run(main())
    return {k: summarize(v) for k, v in load_histograms(h, intended).items()}


def test_a_1s_stall_shows_in_response_time_but_not_in_service_time():
    stalled = _stalled_run(True)
    assert stalled["response/all"]["p99_ms"] >= 1000.0
    assert stalled["service/all"]["p99_ms"] < 100.0
    calm = _stalled_run(False)
    assert calm["response/all"]["p99_ms"] < 500.0  # the 1 s comes from the stall


def test_response_time_counts_from_the_intended_start():
    h = History()
    i = h.invoke(0, "read", ("a/b/c",), (None,), "eventual", 5_000_000)
    h.ok(i, 6_000_000, ("x",))
    hists = load_histograms(h, [1_000_000])
    # 6 ms - 1 ms and 6 ms - 5 ms, in µs (bucket of that value, 3 significant figures)
    assert hists["response/read"].get_count_at_value(5000) == 1
    assert hists["service/read"].get_count_at_value(1000) == 1
    assert hists["response/read"].get_total_count() == 1


# --- exact merging -------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(1, 50_000_000), max_size=60), min_size=1, max_size=5))
def test_merged_histogram_equals_the_histogram_of_all_samples(parts):
    merged = merge_histograms({"x": histogram_of(np.array(p, np.int64))} for p in parts)
    whole = histogram_of(np.array([v for p in parts for v in p], np.int64))
    assert histogram_counts(merged["x"]) == histogram_counts(whole)
    assert merged["x"].get_total_count() == sum(len(p) for p in parts)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99),
                          st.integers(0, 9)), min_size=1, max_size=6))
def test_merged_counts_are_the_sum_of_the_parts(rows):
    parts = [Counts(o + s, s, r, w, {"timeout": t, "unsent": o}) for o, s, r, t in rows
             for w in [t]]
    total = merge_counts(parts)
    assert total.offered == sum(p.offered for p in parts)
    assert total.sent == sum(p.sent for p in parts)
    assert total.ok == sum(p.ok for p in parts)
    for kind in ("timeout", "unsent"):
        assert total.errors[kind] == sum(p.errors[kind] for p in parts)


def test_two_workers_merge_into_one_history_on_one_timeline():
    spec = LoadSpec(store="sim://simpledb", rate_per_s=100, duration_s=2, max_in_flight=4)
    a, b = run_worker(spec, 0, 2), run_worker(spec, 1, 2)
    h, intended = merge_histories([(a.history, a.intended_ns, 0, 0),
                                   (b.history, b.intended_ns, 0, 0)])
    assert len(h) == len(a.history) + len(b.history)
    assert np.all(np.diff(h.column("invoke_ns")) >= 0)
    assert set(h.column("process")) == set(a.history.column("process")) | set(
        b.history.column("process"))
    assert np.all(intended >= 0)
    both = merge_histograms([load_histograms(a.history, a.intended_ns),
                             load_histograms(b.history, b.intended_ns)])
    assert histogram_counts(both["response/all"]) == histogram_counts(
        load_histograms(h, intended)["response/all"])


# --- error kinds, SLA, cost ----------------------------------------------------------------

@pytest.mark.parametrize("message, kind", [
    ("timed out after 2000.000 ms", "timeout"),
    ("n0: Timeout reading from 127.0.0.1:6379", "timeout"),
    ("no reply from load/p within 5000 ms", "timeout"),
    ("n0: Error 111 connecting to 127.0.0.1:6399. Connection refused.", "refused"),
    ("cannot connect to Redis at 127.0.0.1:1: [Errno 111] Connect call failed", "refused"),
    ("connection lost: closed by server", "refused"),
    ("n0: BUSY Redis is busy running a script.", "busy"),
    ("n0: max number of clients reached", "busy"),
    ("503 Service AmazonSimpleDB is currently unavailable", "busy"),
    ("unsent", "unsent"),
    ("n0: WRONGTYPE Operation against a key holding the wrong kind of value", "other"),
])
def test_errors_are_classified_by_kind(message, kind):
    assert classify_error(message) == kind


def test_outcomes_count_errors_by_kind_and_unsent_requests():
    h = History()
    for err in ("timed out after 1 ms", "Connection refused", ""):
        i = h.invoke(0, "read", ("a/b/c",), (None,), "eventual", 0)
        if err:
            h.info(i, 1, err)
        else:
            h.ok(i, 1, ("v",))
    c = count_outcomes(h, offered=5)
    assert (c.ok, c.sent, c.errors["timeout"], c.errors["refused"], c.errors["unsent"]) == (
        1, 3, 1, 1, 2)


def _step(rate: float, p99: float, err: float = 0.0) -> dict:
    return {"rate_per_s": rate, "error_rate": err,
            "latency": {"response/all": {"count": 10, "p99_ms": p99}}}


def test_sla_search_finds_the_highest_rate_under_the_target():
    steps = [_step(r, p) for r, p in [(100, 20), (200, 30), (300, 45), (400, 80), (500, 300)]]
    got = sla_search(steps, 50.0, 0.01)
    assert got["best_rate_per_s"] == 300 and got["first_miss_rate_per_s"] == 400
    assert got["monotone"] and len(got["bisection_probes_per_s"]) <= 3


def test_sla_search_counts_errors_as_a_miss_and_says_when_none_meets():
    assert sla_search([_step(100, 10), _step(200, 10, err=0.5)], 50, 0.01)[
        "best_rate_per_s"] == 100
    none = sla_search([_step(100, 80), _step(200, 90)], 50.0, 0.01)
    assert none["best_rate_per_s"] is None and none["first_miss_rate_per_s"] == 100


def test_cost_uses_the_price_table_per_million_requests():
    c = cost(Counts(2_000_000, 2_000_000, 1_500_000, 500_000, {}), SIMPLEDB_2011, 3600.0)
    assert c["reads"] == pytest.approx(1.5 * 1.436)
    assert c["writes"] == pytest.approx(0.5 * 3.387)
    assert c["per_operation"] == pytest.approx((1.5 * 1.436 + 0.5 * 3.387) / 2e6)
    assert c["per_hour"] == pytest.approx(c["total"])


def test_price_tables_parse_and_bad_ones_say_what_is_missing():
    p = parse_prices('[prices]\nname = "x"\ncurrency = "EUR"\nread_per_million = 1\n'
                     'write_per_million = 2.5\n', "p.toml")
    assert (p.currency, p.read_per_million, p.write_per_million) == ("EUR", 1.0, 2.5)
    with pytest.raises(ValueError, match="write_per_million"):
        parse_prices("[prices]\nread_per_million = 1\n", "p.toml")
    with pytest.raises(ValueError, match="not valid TOML"):
        parse_prices("[prices", "p.toml")


# --- a whole run ---------------------------------------------------------------------------

def test_a_ramp_stops_when_the_store_fails_and_saves_everything(tmp_path: Path):
    # Two connections at 22 ms per request carry about 90 req/s: 150/s must fail.
    spec = LoadSpec(store="sim://simpledb", rate_per_s=50, duration_s=3, max_in_flight=2,
                    drain_s=1.0)
    plan = RampPlan(50, 250, 50, step_duration_s=3, fail_p99_ms=500)
    run = run_load(spec, tmp_path, "ramp", plan, prices=SIMPLEDB_2011)
    steps = run.results["steps"]
    assert steps[0]["failure"] == "" and steps[-1]["failure"]
    assert steps[-1]["rate_per_s"] <= 150 and "failed" in run.results["stopped"]
    assert steps[0]["throughput_pct"] > 95
    h, config = load_history(run.run_dir)
    assert len(h) == sum(s["counts"]["sent"] for s in steps)
    assert config["mode"] == "ramp"
    saved = json.loads((run.run_dir / "results.json").read_text())
    assert saved["cost"]["total"] > 0
    assert len(list((run.run_dir / "histograms").glob("*.hlog"))) == 6 * len(steps)


def test_same_seed_same_simulated_run(tmp_path: Path):
    spec = LoadSpec(store="sim://simpledb", rate_per_s=100, duration_s=2, seed=5)
    a = run_load(spec, tmp_path / "a").results["steps"][0]
    b = run_load(spec, tmp_path / "b").results["steps"][0]
    assert a["histograms"] == b["histograms"] and a["counts"] == b["counts"]


def test_local_worker_processes_merge_exactly(tmp_path: Path):
    spec = LoadSpec(store="sim://simpledb", rate_per_s=200, duration_s=2, max_in_flight=4)
    run = run_load(spec, tmp_path, workers=2)
    (step,) = run.results["steps"]
    parts = run.steps[0]
    assert [w["worker"] for w in step["workers"]] == [0, 1]
    assert step["counts"]["ok"] == sum(r.counts.ok for r in parts)
    assert step["counts"]["offered"] == sum(r.counts.offered for r in parts)
    assert all(w["clock"]["wall_end_ns"] >= w["clock"]["wall_start_ns"] > 0
               for w in step["workers"])
    assert run.results["config"]["workers"]["kind"] == "process"


# --- the CLI's bad input -------------------------------------------------------------------

def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replicalab.cli.main", "load", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("args, needle", [
    (("run", "--rate", "0"), "--rate"),
    (("run", "--read-ratio", "1.5"), "--read-ratio"),
    (("run", "--arrivals", "bursty"), "--arrivals"),
    (("run", "--store", "nosuch://x"), "scheme"),
    (("run", "--client", "fast"), "--client fast"),
    (("ramp", "--ramp", "100:50"), "--ramp"),
    (("ramp", "--ramp", "200:100:10"), "start <= stop"),
    (("run", "--prices", "/nonexistent.toml"), "--prices"),
    (("run", "--loop", "tokio"), "--loop"),
])
def test_cli_bad_input_is_one_line_and_exit_2(args, needle, tmp_path: Path):
    r = _cli(*args, "--out", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def test_cli_sla_no_rate_meets_exits_2_and_keeps_results(tmp_path: Path):
    r = _cli("sla", "--ramp", "50:100:50", "--sla-p99", "1ms", "--step-duration", "2s",
             "--out", str(tmp_path), "--json", cwd=tmp_path)
    assert r.returncode == 2
    assert "no offered rate meets p99 < 1 ms" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    out = json.loads(r.stdout)
    assert out["sla"]["best_rate_per_s"] is None
    assert (Path(out["run_dir"]) / "results.json").exists()
    assert (Path(out["run_dir"]) / "report.html").exists()


def test_cli_ray_without_an_importable_ray_is_one_line(tmp_path: Path):
    # Hide Ray from the child: a module of that name that raises ImportError.
    fake = tmp_path / "fake"
    (fake / "ray").mkdir(parents=True)
    (fake / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env_path = f"{fake}"
    r = subprocess.run([sys.executable, "-c",
                        f"import sys; sys.path.insert(0, {env_path!r}); "
                        "from replicalab.cli.main import main; sys.argv=['replicalab','load',"
                        "'run','--ray','local','--duration','1s','--out',"
                        f"{str(tmp_path / 'runs')!r}]; main()"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "--ray needs Ray" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


# --- the fast Redis path's pieces ----------------------------------------------------------

def test_commands_are_packed_as_resp_arrays_of_bulk_strings():
    assert resp.pack_command("GET", "load/k1/v") == b"*2\r\n$3\r\nGET\r\n$9\r\nload/k1/v\r\n"
    assert resp.pack_command("SET", "k", "1.2@3") == (
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\n1.2@3\r\n")


def test_the_reader_returns_values_nil_errors_and_waits_for_split_replies():
    r = resp.new_reader()
    r.feed(b"$3\r\nxy")
    assert r.gets() is resp._MORE  # half a reply is not a reply
    r.feed(b"z\r\n$-1\r\n-BUSY Redis is busy\r\n+OK\r\n")
    assert r.gets() == "xyz"
    assert r.gets() is None
    err = r.gets()
    assert isinstance(err, resp.RespError) and str(err) == "BUSY Redis is busy"
    assert classify_error(str(err)) == "busy"
    assert r.gets() == "OK"
    assert r.gets() is resp._MORE


def test_a_load_record_closes_only_the_open_requests_it_sent():
    rec = resp.LoadRecord.allocate(5)
    rec.taken = 3
    rec.outcome[0], rec.outcome[1] = resp.OK, resp.FAIL
    assert rec.close_open(42, "timeout: no reply by the drain limit") == 1
    assert list(rec.outcome) == [resp.OK, resp.FAIL, resp.INFO, resp.OPEN, resp.OPEN]
    assert rec.done_ns[2] == 42 and rec.errors == {2: "timeout: no reply by the drain limit"}


def test_the_event_loop_is_uvloop_when_installed_and_checked():
    need_module("uvloop")
    assert default_loop() == "uvloop"
    assert LoadSpec(store="sim://simpledb").loop == "uvloop"
    LoadSpec(store="sim://simpledb", loop="asyncio").check()
    with pytest.raises(ValueError, match=r"^loop 'tokio'"):
        LoadSpec(store="sim://simpledb", loop="tokio").check()


def test_a_simulated_run_records_its_loop_as_virtual(tmp_path: Path):
    run = run_load(LoadSpec(store="sim://simpledb", rate_per_s=50, duration_s=1), tmp_path)
    assert run.results["config"]["loop"] == default_loop()
    assert run.results["steps"][0]["workers"][0]["loop"] == "virtual"

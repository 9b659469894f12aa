"""The sweep workload (seed 000, multiple threads) and the seed-000 additions to
sim://simpledb: per-item commit batches, the client machine's CPU, slow calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicalab.history import load_history
from replicalab.stores import open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, recheck, run_probe
from replicalab.workloads.sweep import WRITER_BASE, SweepConfig, shapes

MS = 1_000_000


def _sweep(tmp_path: Path, store: str = "sim://simpledb", seed: int = 1, **cfg):
    spec = ProbeSpec(store=store, workload="sweep", config=SweepConfig(**cfg),
                     options=ProbeOptions(seed=seed))
    return run_probe(spec, tmp_path / "runs")


def _in_flight_max(inv: np.ndarray, comp: np.ndarray) -> int:
    """Return the most operations open at once among intervals [inv, comp)."""
    events = sorted([(t, 1) for t in inv.tolist()] + [(t, -1) for t in comp.tolist()],
                    key=lambda e: (e[0], e[1]))
    now = top = 0
    for _, d in events:
        now += d
        top = max(top, now)
    return top


def test_every_point_finishes_its_requests_and_reports_time_throughput_percentiles(tmp_path):
    run = _sweep(tmp_path, clients=(1, 4), total=40, items=(1, 50))
    r = run.results
    assert not run.error
    assert [(p["variant"], p["items"], p["clients"]) for p in r["points"]] == \
        SweepConfig(clients=(1, 4), items=(1, 50)).points()
    for p in r["points"]:
        assert p["requests"] == p["ok"] == 40 and p["failed"] == p["info"] == 0
        assert p["total_s"] > 0
        assert p["throughput_per_s"] == pytest.approx(40 / p["total_s"], rel=1e-3)
        assert p["p50_ms"] <= p["p99_ms"] <= p["p999_ms"]
        reads = p["variant"].endswith("read")
        assert (p["background_writes"] > 0) == reads  # writers only while reads run
    assert {s["variant"] for s in r["shapes"]} == {"put", "conditional put", "eventual read",
                                                   "consistent read"}


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(clients=st.integers(1, 12), total=st.integers(1, 40), items=st.integers(1, 30),
       seed=st.integers(0, 1000))
def test_closed_loop_law_exactly_total_requests_never_more_than_clients_in_flight(
        tmp_path, clients, total, items, seed):
    run = run_probe(ProbeSpec(store="sim://simpledb", workload="sweep",
                              config=SweepConfig(clients=(clients,), total=total,
                                                items=(items,), variants=("put",)),
                              options=ProbeOptions(seed=seed)), tmp_path / f"r{seed}")
    h, _ = load_history(run.run_dir)
    proc = h.column("process")
    sel = (proc >= 0) & (proc < WRITER_BASE)
    assert int(sel.sum()) == total
    inv, comp = h.column("invoke_ns")[sel], h.column("complete_ns")[sel]
    assert _in_flight_max(inv, comp) == min(clients, total)
    item_names = {h.keys[i][0].split("/")[1] for i in np.flatnonzero(sel)}
    assert len(item_names) <= items


def test_conditional_put_is_conditioned_on_a_fictitious_attribute_and_always_succeeds(tmp_path):
    run = _sweep(tmp_path, clients=(3,), total=30, items=(1,), variants=("conditional put",))
    h, _ = load_history(run.run_dir)
    cas = [h.op(i) for i in range(len(h)) if h.f[i] == h.f_code("cas")]
    assert len(cas) == 30 and all(op.type == "ok" for op in cas)
    assert run.results["points"][0]["ok"] == 30


def test_one_item_means_one_key_many_items_spread_out(tmp_path):
    run = _sweep(tmp_path, clients=(2,), total=200, items=(1, 1000), variants=("put",))
    h, _ = load_history(run.run_dir)
    by_point: dict[str, set[str]] = {}
    for i in range(len(h)):
        if 0 <= h.process[i] < WRITER_BASE and h.keys[i]:
            item = h.keys[i][0].split("/")[1]
            by_point.setdefault(item.split("-")[0], set()).add(item)
    assert len(by_point["p000"]) == 1
    assert len(by_point["p001"]) > 150  # 200 picks among 1,000 items


def test_recheck_reproduces_the_results(tmp_path):
    run = _sweep(tmp_path, clients=(2,), total=20, items=(1,), variants=("eventual read",))
    again = recheck(run.run_dir)
    assert again["points"] == run.results["points"]
    assert again["config"]["sweep"]["total"] == 20


def test_same_seed_same_sweep(tmp_path):
    a = _sweep(tmp_path / "a", clients=(3,), total=30, items=(10,), variants=("put",))
    b = _sweep(tmp_path / "b", clients=(3,), total=30, items=(10,), variants=("put",))
    assert a.results["points"] == b.results["points"]


@pytest.mark.parametrize("cfg, message", [
    ({"clients": (0,)}, "^clients 0"),  # --clients 0 on the command line
    ({"total": 0}, "^total 0"),
    ({"items": (0,)}, "^items 0"),
    ({"writers": -1}, "^writers -1"),
    ({"variants": ("get",)}, "^variants 'get'"),
])
def test_bad_sweep_options_name_the_option(tmp_path, cfg, message):
    with pytest.raises(ValueError, match=message):
        run_probe(ProbeSpec(store="sim://simpledb", workload="sweep",
                            config=SweepConfig(**cfg)), tmp_path)


def test_parse_rejects_non_numbers():
    with pytest.raises(ValueError, match="comma-separated whole numbers"):
        SweepConfig.parse("1,two", 10, "1", "put", 5)
    assert SweepConfig.parse("1, 5", 10, "1,1000", "put, eventual read", 2) == SweepConfig(
        clients=(1, 5), total=10, items=(1, 1000), variants=("put", "eventual read"),
        writers=2)


def test_shapes_divide_fewest_by_most_items():
    pts = [{"variant": "put", "items": n, "clients": c, "total_s": t}
           for n, c, t in ((1, 5, 30.0), (1000, 5, 20.0), (1, 100, 4.0), (1000, 100, 4.0))]
    assert shapes(pts) == [
        {"variant": "put", "clients": 5, "few_items": 1, "many_items": 1000, "time_ratio": 1.5},
        {"variant": "put", "clients": 100, "few_items": 1, "many_items": 1000,
         "time_ratio": 1.0}]


def test_cli_sweep_json_report_and_png(tmp_path):
    p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "probe", "--workload",
                        "sweep", "--clients", "1,3", "--total", "20", "--items", "1,10",
                        "--variants", "put,eventual read", "--json", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "120"})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["workload"] == "sweep" and len(out["points"]) == 8
    html = Path(out["report"]).read_text()
    assert 'id="fig-sweep"' in html and "Thread sweep" in html
    assert (Path(out["run_dir"]) / "figures" / "sweep.png").stat().st_size > 1000


def test_cli_bad_clients_is_one_line_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "probe", "--workload",
                        "sweep", "--clients", "1,x", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "error: --clients '1,x': give comma-separated whole numbers, e.g. 1,2,5,10"]


# -- sim://simpledb: what seed 000 added -------------------------------------------------------

def _timed(store, calls):
    """Run ``calls`` (coroutine factories taking a client) concurrently; return ms each."""
    rt = store.runtime

    async def one(fn):
        c = await store.connect()
        t = rt.now_ns()
        await fn(c)
        return (rt.now_ns() - t) / MS

    async def main():
        return await rt.gather(*(one(fn) for fn in calls))

    return rt.run(main())


QUIET = "sim://simpledb?read_hiccup_p=0&write_hiccup_p=0&commit_sd_ms=0&client_sd_ms=0"


def test_writes_to_one_item_wait_for_its_commit_batch_other_items_do_not():
    hold_ms = 0.75 * 79.0
    same = _timed(open_store(QUIET, 1), [lambda c: c.write({"d/i/a": "1"}),
                                          lambda c: c.write({"d/i/a": "2"}),
                                          lambda c: c.write({"d/i/a": "3"})])
    other = _timed(open_store(QUIET, 1), [lambda c: c.write({"d/i/a": "1"}),
                                           lambda c: c.write({"d/j/a": "2"}),
                                           lambda c: c.write({"d/k/a": "3"})])
    # the first holds the item; the two later ones go together in the next batch
    assert same[1] - same[0] == pytest.approx(hold_ms, abs=6)
    assert same[2] == pytest.approx(same[1], abs=3)
    assert max(other) - min(other) < 6  # only the client CPU queue (2.5 ms a call)


def test_a_read_waits_for_the_commit_in_progress_of_its_item():
    store = open_store(QUIET, 1)
    rt = store.runtime

    async def main():
        w, r = await store.connect(), await store.connect()
        write = rt.spawn(w.write({"d/i/a": "1"}))
        await rt.sleep_ns(15 * MS)  # the write reached the primary and holds the item
        t = rt.now_ns()
        await r.read(["d/i/a"], consistent=True)
        busy = (rt.now_ns() - t) / MS
        await write
        t = rt.now_ns()
        await r.read(["d/j/a"], consistent=True)
        return busy, (rt.now_ns() - t) / MS

    busy, idle = rt.run(main())
    assert idle == pytest.approx(22.0 - 1.0 + 0.5, abs=1.5)  # no slow calls in QUIET
    assert busy > idle + 30


def test_client_cpu_caps_throughput_of_many_clients():
    store = open_store(QUIET + "&client_cpu_ms=10", 1)
    took = _timed(store, [lambda c: c.read(["d/i/a"], consistent=False)] * 20)
    assert max(took) >= 20 * 10  # one core: the 20th call waits for 19 others


@pytest.mark.parametrize("url, message", [
    ("sim://simpledb?read_hiccup_p=2", "read_hiccup_p must be in"),
    ("sim://simpledb?item_hold_share=-0.1", "item_hold_share must be in"),
    ("sim://simpledb?client_cpu_ms=-1", "client_cpu_ms must not be negative"),
])
def test_new_parameters_are_validated(url, message):
    with pytest.raises(ValueError, match=message):
        open_store(url)


def test_new_parameters_are_overridable_and_described():
    store = open_store("sim://simpledb?item_hold_share=0&client_cpu_ms=0&write_hiccup_ms=5", 1)
    d = store.scheme.describe()
    assert (d["item_hold_share"], d["client_cpu_ms"], d["write_hiccup_ms"]) == (0.0, 0.0, 5.0)


# -- replicalab compare --workload latency -------------------------------------------------------

def test_latency_row_turns_eventual_minus_consistent_into_consistent_minus_eventual():
    from replicalab.experiments.compare import latency_row
    lat = {"variants": {v: {"count": 10, "mean_ms": m, "p50_ms": m, "p99_ms": m + 1}
                        for v, m in (("eventual read", 2.0), ("consistent read", 7.0))},
           "differences": [{"a": "eventual read", "b": "consistent read", "mean_diff_ms": -5.0,
                            "lo_ms": -6.0, "hi_ms": -4.0, "verdict": "significant"}]}
    row = latency_row("etcd", lat, "US-E")
    assert (row["consistent_minus_eventual_ms"], row["ci_lo_ms"], row["ci_hi_ms"]) == \
        (5.0, 4.0, 6.0)
    assert row["verdict"] == "significant" and row["consistent read p50_ms"] == 7.0


def test_compare_unknown_workload_is_one_line_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "compare", "--workload",
                        "nope", "--kinds", "etcd", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "error: --workload 'nope': use staleness, latency or register"]


def test_variants_a_store_cannot_express_are_skipped_and_said(tmp_path):
    run = _sweep(tmp_path, store="sim://quorum?n=3&r=1&w=1", clients=(2,), total=10,
                 items=(1,), variants=("put", "conditional put"))
    r = run.results
    assert [p["variant"] for p in r["points"]] == ["put"]
    assert r["skipped"] == {"conditional put": "the store does not declare conditional-write"}


def test_a_store_that_stops_answering_ends_the_sweep_after_100_failures_in_a_row():
    from replicalab.history import History
    from replicalab.stores import Unavailable
    from replicalab.workloads import sweep
    from replicalab.workloads.recorder import Recorder

    store = open_store("sim://simpledb?timeout_ms=50", 1)
    rt = store.runtime
    h = History()

    async def main():
        c = await store.connect()
        await c.write({sweep.key(0, 0): "x"})  # creates the domain's replicas
        for node in store.scheme.net.nodes.values():
            node.up = False  # every replica crashed
        await sweep.generate(store, h, ProbeOptions(),
                             SweepConfig(clients=(2,), total=10_000, items=(1,),
                                         variants=("put",)), Recorder(h, rt))

    with pytest.raises(Unavailable, match="100 requests in a row failed"):
        rt.run(main())
    assert 100 <= len(h) <= 102  # stopped at once, not after 10,000 timeouts
    assert set(h.types().tolist()) <= {0, 3}  # unknown outcome (or still open when stopped)


def test_progress_counts_measured_requests_not_background_writes(tmp_path):
    seen: list[float] = []
    spec = ProbeSpec(store="sim://simpledb", workload="sweep",
                     config=SweepConfig(clients=(1,), total=5000, items=(1,),
                                       variants=("eventual read",), writers=5))
    run_probe(spec, tmp_path, seen.append)
    # 5 writers on a hot item write about twice as often as the one reader reads: counting
    # every op would reach 1.0 at a third of the way
    assert seen[-1] == 1.0
    assert seen[-2] < 1.0 and seen[0] < 0.5

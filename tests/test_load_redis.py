"""Open-loop load on a real Redis in real time: both clients on both event loops, the fast
path's invariants (one request in flight per connection, every GET recorded and counted by
Redis itself), a paused server (timeouts) and a server that goes away."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
import redis

from replicalab.cluster import process
from replicalab.cluster.ports import allocate, wait_listening
from replicalab.history import History, load_history
from replicalab.workloads.load import LoadSpec, run_worker
from replicalab.workloads.load_runner import run_load

pytestmark = pytest.mark.integration


@pytest.fixture
def redis_port(tmp_path: Path):
    (port,) = allocate(1)
    pid = process.start(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                         "--save", "", "--appendonly", "no"], tmp_path / "redis.log")
    try:
        assert wait_listening(port)
        yield port, pid
    finally:
        process.stop(pid)  # continues a paused server first


def _overlaps(h: History) -> int:
    """Return how often a connection sent a request before its previous one completed."""
    inv, done, proc = h.column("invoke_ns"), h.column("complete_ns"), h.column("process")
    bad = 0
    for p in np.unique(proc):
        sel = np.flatnonzero(proc == p)
        order = np.argsort(inv[sel], kind="stable")
        bad += int(np.sum(inv[sel][order][1:] < done[sel][order][:-1]))
    return bad


@pytest.mark.parametrize("client, loop", [("store", "uvloop"), ("fast", "uvloop"),
                                          ("fast", "asyncio")])
def test_real_redis_load_in_real_time(redis_port, client, loop):
    port, _ = redis_port
    spec = LoadSpec(store=f"redis://127.0.0.1:{port}", rate_per_s=300, duration_s=2,
                    read_ratio=0.75, max_in_flight=4, client=client,
                    consistency="consistent", loop=loop)
    r = run_worker(spec)
    assert not r.virtual and r.error == ""
    assert r.loop.split()[0] == loop
    assert r.counts.ok == r.counts.offered > 450
    assert r.counts.ok_writes > 0
    assert 1.9 <= (r.end_ns - r.t0_ns) / 1e9 < 4
    intended = np.asarray(r.intended_ns, np.int64)
    assert np.all(r.history.column("invoke_ns") >= intended)  # never sent before its time
    # Only the load command's own loop was uvloop: the process's policy is untouched.
    assert type(asyncio.get_event_loop_policy()).__module__.startswith("asyncio")


def test_the_fast_path_records_every_get_with_one_request_in_flight(redis_port):
    port, _ = redis_port
    r0 = redis.Redis(port=port)
    r0.set("load/k0/v", "xyz")
    before = r0.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
    # 5 M/s is far beyond any single-threaded Redis answering one request per connection
    # at a time (a fast CI host did 200 k/s), so the schedule always outruns the server.
    spec = LoadSpec(store=f"redis://127.0.0.1:{port}", rate_per_s=5_000_000, duration_s=0.4,
                    arrivals="uniform", read_ratio=1.0, keyspace=1, max_in_flight=20,
                    consistency="consistent", drain_s=0.0, client="fast")
    r = run_worker(spec)
    gets = r0.info("commandstats")["cmdstat_get"]["calls"] - before
    r0.close()
    h = r.history
    assert r.error == "" and r.counts.ok > 1000
    assert gets == r.counts.ok == r.counts.sent == len(h)  # Redis counted exactly these
    assert set(h.values) == {("xyz",)} and set(h.node) == {"n0"}
    assert set(h.column("process")) == set(range(20))
    assert _overlaps(h) == 0  # no pipelining
    assert r.counts.errors["unsent"] == r.counts.offered - r.counts.sent > 0  # saturated


def test_a_paused_server_times_requests_out_and_keeps_one_in_flight(redis_port):
    port, pid = redis_port
    spec = LoadSpec(store=f"redis://127.0.0.1:{port}", rate_per_s=200, duration_s=2.5,
                    read_ratio=1.0, max_in_flight=2, client="fast", timeout_ms=400,
                    consistency="consistent", drain_s=1.0)
    pause = threading.Timer(0.7, process.signal_group, args=(pid, signal.SIGSTOP))
    resume = threading.Timer(1.7, process.signal_group, args=(pid, signal.SIGCONT))
    pause.start()
    resume.start()
    try:
        r = run_worker(spec)
    finally:
        pause.cancel()
        resume.cancel()
        process.signal_group(pid, signal.SIGCONT)
    errors = r.counts.errors
    assert errors["timeout"] == 2  # the one request in flight on each connection
    assert r.counts.ok > 300
    assert _overlaps(r.history) == 0  # the late reply was awaited before the next send
    assert r.counts.ok + sum(errors.values()) == r.counts.offered
    # The requests that queued during the pause waited about a second: response time.
    ok = r.history.types() == 1
    wait_ms = (r.history.column("complete_ns") - np.asarray(r.intended_ns, np.int64))[ok] / 1e6
    assert wait_ms.max() > 700


def test_a_server_that_goes_away_is_recorded_as_errors_by_kind(redis_port):
    port, pid = redis_port
    spec = LoadSpec(store=f"redis://127.0.0.1:{port}", rate_per_s=200, duration_s=3,
                    read_ratio=1.0, max_in_flight=2, client="fast", timeout_ms=500,
                    consistency="consistent")
    killer = threading.Timer(1.0, process.stop, args=(pid,))
    killer.start()
    try:
        r = run_worker(spec)
    finally:
        killer.cancel()
    errors = r.counts.errors
    assert r.counts.ok > 100  # the first second went through
    assert errors["refused"] > 0  # later requests found the connection gone
    assert r.counts.ok + sum(errors.values()) == r.counts.offered


def test_a_fast_run_saves_its_history_and_names_its_event_loop(redis_port, tmp_path: Path):
    port, _ = redis_port
    spec = LoadSpec(store=f"redis://127.0.0.1:{port}", rate_per_s=500, duration_s=1,
                    read_ratio=0.5, max_in_flight=4, client="fast", loop="uvloop")
    run = run_load(spec, tmp_path)
    assert run.error == ""
    (step,) = run.results["steps"]
    assert run.results["config"]["loop"] == "uvloop"
    assert step["workers"][0]["loop"].startswith("uvloop ")
    h, _ = load_history(run.run_dir)
    assert len(h) == step["counts"]["sent"] == step["counts"]["ok"] > 400
    writes = h.column("f") == h.f_code("write")
    assert writes.any() and all(v[0] for v, w in zip(h.values, writes, strict=True) if w)

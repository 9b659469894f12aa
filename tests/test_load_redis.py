"""Open-loop load on a real Redis in real time: both clients, and a server that goes away."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from replicalab.cluster import process
from replicalab.cluster.ports import allocate, wait_listening
from replicalab.workloads.load import LoadSpec, run_worker

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
        process.stop(pid)


@pytest.mark.parametrize("client", ["store", "fast"])
def test_real_redis_load_in_real_time(redis_port, client):
    port, _ = redis_port
    spec = LoadSpec(store=f"redis://127.0.0.1:{port}", rate_per_s=300, duration_s=2,
                    read_ratio=0.75, max_in_flight=4, client=client,
                    consistency="consistent")
    r = run_worker(spec)
    assert not r.virtual and r.error == ""
    assert r.counts.ok == r.counts.offered > 450
    assert r.counts.ok_writes > 0
    assert 1.9 <= (r.end_ns - r.t0_ns) / 1e9 < 4


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

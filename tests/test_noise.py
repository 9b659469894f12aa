"""The noise floor (``runtime/noise.py``): a stall the test makes in the event loop is measured
as long as it was, with its time; the loopback echo answers and measures its round trips; the
floor survives its JSON; a late measurement is matched with the noise that was there; a server
that shares its core waits for it, an fsync beside the data is timed, and both count in what
the machine added."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.runtime.noise import (
    EchoServer,
    NoiseFloor,
    NoiseMonitor,
    ServerNoise,
    ServerWatch,
)
from replicalab.runtime.serverwatch import process_tree, wait_per_run_ms


def _measure(block_s: float) -> tuple[NoiseFloor, int, int]:
    """Run the monitor for ~0.6 s with one blocking stall of ``block_s`` in the loop; return
    the floor and the monotonic ns around the stall."""
    echo = EchoServer()

    async def main() -> tuple[NoiseFloor, int, int]:
        mon = NoiseMonitor(echo.port, "loopback")
        mon.start()
        await asyncio.sleep(0.25)
        t0 = time.monotonic_ns()
        time.sleep(block_s)  # the loop cannot run: a stall of the client process
        t1 = time.monotonic_ns()
        await asyncio.sleep(0.25)
        return await mon.stop(), t0, t1

    try:
        return asyncio.run(main())
    finally:
        echo.close()


def test_a_stall_is_measured_as_long_as_it_was_and_when():
    floor, t0, t1 = _measure(0.08)
    assert floor.stall_max_ms >= 75, floor
    assert floor.stall_samples >= 40 and floor.echo_samples >= 10, floor
    assert floor.echo_via == "loopback" and 0 < floor.echo_min_ms < 20, floor
    assert floor.added_p99_ms >= floor.stall_p99_ms and floor.cores >= 1
    # the stall is an event at its time: a measurement spanning it is explained by it,
    # one before the monitor started is not
    assert floor.added_between_ms(t0, t1) >= 75
    assert floor.added_between_ms(t0 - 2 * 10**9, t0 - 10**9) == 0.0
    again = NoiseFloor.from_json(floor.to_json())
    assert again == floor and "the machine added" in again.line()


def test_stop_ends_the_instruments_whenever_it_comes():
    """Stopped at any moment, even while an echo's reply is arriving, the monitor returns at
    once: before Python 3.12, ``asyncio.wait_for`` could swallow the cancellation when its
    read completed at the same moment, and a run waited for ever on the echo's loop (a
    scorecard latency run hung 14 min after its last operation)."""
    echo = EchoServer()

    async def main() -> float:
        worst_s = 0.0
        for i in range(60):
            mon = NoiseMonitor(echo.port, "loopback", tick_ms=1.0, echo_every_ms=0.0)
            mon.start()
            await asyncio.sleep(0.002 * (i % 7))
            t0 = time.perf_counter()
            floor = await asyncio.wait_for(mon.stop(), 5.0)
            worst_s = max(worst_s, time.perf_counter() - t0)
            assert floor.stall_samples >= 0
            await asyncio.sleep(0.01)
            assert all(t.done() for t in mon._tasks), i  # nothing left running
        return worst_s

    got: list[float] = []
    # in a thread of its own: a monitor that cannot stop hangs that loop, not the suite
    runner = threading.Thread(target=lambda: got.append(asyncio.run(main())), daemon=True)
    runner.start()
    runner.join(timeout=60)
    echo.close()
    assert not runner.is_alive(), "stop() did not return: the monitor's loop went on"
    assert got and got[0] < 2.0, got


# -- the servers: run-queue wait and fsync (ServerWatch) ----------------------------------

_PINNED = """import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
if sys.argv[2] == "server":
    os.nice(10)
print("ready", flush=True)
while True:
    if sys.argv[2] == "hog":
        continue
    t = time.perf_counter()
    while time.perf_counter() - t < 0.001:  # 1 ms of work per wake-up
        pass
    time.sleep(0.001)
"""


def _pinned(cpu: int, what: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", _PINNED, str(cpu), what],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    return p


def _watched(pids: list[int], fsync_dir: Path | None = None, samples: int = 15
             ) -> ServerNoise:
    """Watch ``pids`` until ``samples`` waits were measured (30 s at most)."""
    w = ServerWatch(pids, fsync_dir)
    w.start()
    deadline = time.monotonic() + 30
    while len(w.sofar().waits_ms) < samples and time.monotonic() < deadline:
        time.sleep(0.05)
    return w.stop()


def _schedstat(pid: int) -> tuple[int, int, int]:
    """Return the kernel's (ns run, ns waited, runs) of ``pid``'s main thread."""
    with open(f"/proc/{pid}/schedstat") as f:
        ran, waited, runs = (int(x) for x in f.read().split()[:3])
    return ran, waited, runs


def test_a_server_that_shares_its_core_with_two_hogs_waits_for_it_at_each_wake_up():
    """A "server" (nice 10) that wakes every ms for 1 ms of work, pinned to one core with two
    busy loops: each time it runs it first waited for the core, 18 ms per wake-up measured
    here (6.18 kernel) where it then runs 1 ms. The watch reports what the kernel's own
    totals over the same time say it waited per run (within a factor of 2), and far more
    than it ran per run (what a watch that read the wrong schedstat field would report);
    a watch of a wrapper finds the server it started as its child."""
    cpu = max(os.sched_getaffinity(0))
    server = _pinned(cpu, "server")
    hogs = [_pinned(cpu, "hog") for _ in range(2)]
    wrapper = subprocess.Popen(["sh", "-c", f"exec {sys.executable} -c 'import time; "
                                "time.sleep(60)' & wait"])
    try:
        ran0, waited0, runs0 = _schedstat(server.pid)
        got = _watched([server.pid])
        ran1, waited1, runs1 = _schedstat(server.pid)
        assert len(got.waits_ms) >= 15 and got.threads == 1, got
        kernel_wait = (waited1 - waited0) / (runs1 - runs0) / 1e6
        kernel_run = (ran1 - ran0) / (runs1 - runs0) / 1e6
        median = float(np.median(got.waits_ms))
        assert kernel_wait / 2 <= median <= kernel_wait * 2, (median, kernel_wait)
        assert median >= 5 * kernel_run, (median, kernel_run)
        deadline = time.monotonic() + 10
        while len(tree := process_tree([wrapper.pid])) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert tree[0] == wrapper.pid and len(tree) == 2, tree
    finally:
        for p in [server, *hogs, wrapper]:
            p.kill()
            p.wait()
    assert process_tree([server.pid]) == []  # gone: nothing to read


def test_wait_per_run_counts_only_threads_seen_in_both_samples():
    before = {(1, 1): (1_000_000, 10), (1, 2): (5_000_000, 4)}
    after = {(1, 1): (4_000_000, 13), (1, 3): (90_000_000, 1)}  # 2 ended, 3 began
    assert wait_per_run_ms(before, after) == 1.0  # 3 ms over 3 runs
    assert wait_per_run_ms(before, before) is None  # nothing ran


def test_an_fsync_beside_the_data_is_timed_and_its_file_removed(tmp_path):
    """Each sample writes 4 KiB and fsyncs it: on this machine's disk the fsync takes 70 us
    at the fastest where the write alone takes 3 us, so a watch that skipped the fsync
    (timing only the write) is told apart."""
    got = _watched([os.getpid()], tmp_path, samples=5)
    assert len(got.fsyncs_ms) >= 5 and got.fsync_dir == str(tmp_path)
    assert all(0.02 <= x < 10_000 for x in got.fsyncs_ms), got.fsyncs_ms
    assert list(tmp_path.iterdir()) == []
    assert _watched([os.getpid()], None, samples=2).fsync_dir == ""


def _floor(**servers: Any) -> NoiseFloor:
    return NoiseFloor(0.1, 1.0, 3.0, 100, "toxiproxy (no toxic)", 0.2, 0.3, 1.5, 4.0, 50,
                      0.5, 0.5, 2, **servers)


def test_the_servers_count_in_what_the_machine_added_and_name_the_cause():
    """A floor whose fsync took 600 ms over its fastest at p99 (the etcd run whose writes took
    673 ms against a model of 175, its client stalling 28 ms at most) says so, and a late
    write during it is explained by it; a floor recorded before the servers were watched
    reads back unchanged."""
    quiet = _floor()
    assert quiet.added_p99_ms == 1.3 and quiet.cause == "the echo"
    disk = _floor(fsync_dir="/d", fsync_min_ms=2.0, fsync_p99_ms=602.0, fsync_samples=40,
                  server_events=((5_000_000_000, 590.0),))
    assert disk.added_p99_ms == 600.0 and disk.cause == "fsync"
    assert "an fsync beside their data 600.0 ms over its fastest" in disk.line()
    assert disk.added_between_ms(4_000_000_000, 4_500_000_000) == 590.0
    assert quiet.added_between_ms(4_000_000_000, 4_500_000_000) == 0.0
    cpu = _floor(server_wait_p99_ms=7.5, server_samples=30, server_threads=40)
    assert cpu.added_p99_ms == 7.5 and cpu.cause == "server run-queue wait"
    assert "waited 7.5 ms per wake-up" in cpu.line()
    assert NoiseFloor.from_json(disk.to_json()) == disk
    old = {k: v for k, v in quiet.to_json().items() if not k.startswith(("server", "fsync"))}
    assert NoiseFloor.from_json(old) == quiet


def test_the_fsync_is_watched_only_for_a_store_whose_writes_wait_for_one(tmp_path):
    from replicalab.cluster.state import Cluster, Node
    from replicalab.workloads.noise import fsync_dir

    def made(kind: str, **settings: str) -> Cluster:
        node = Node(0, "US-E", "leader", 1, str(tmp_path))
        return Cluster(kind, "c", "dc3", [node], extra={"settings": settings} if settings
                       else {})

    assert fsync_dir(made("etcd")) == tmp_path and fsync_dir(made("minio")) == tmp_path
    assert fsync_dir(made("etcd", **{"unsafe-no-fsync": "true"})) is None
    assert fsync_dir(made("postgres")) is None and fsync_dir(made("zookeeper")) is None
    assert fsync_dir(made("postgres", fsync="on")) == tmp_path
    assert fsync_dir(made("redis")) is None
    assert fsync_dir(made("redis", appendfsync="always")) == tmp_path
    assert fsync_dir(made("cassandra")) is None
    assert fsync_dir(made("cassandra", commitlog_sync="batch")) == tmp_path

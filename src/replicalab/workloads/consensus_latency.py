"""Write latency of a real consensus store per client region, with its leader placed on demand.

What ``replicalab model paxos-wan --against etcd`` measures (the model side is in
:mod:`replicalab.models.paxos_wan_fit`). One member per region of a named region set, the
members joined by Toxiproxy links carrying the region matrix's one-way delays
(:mod:`replicalab.cluster.etcd`). A client in region R talks to R's own member over loopback
(not proxied: the intra-region RTT, 0.4 ms, is below Toxiproxy's 1 ms resolution); a member
that is not the leader forwards the write to the leader over its WAN link and answers once it
has learned the commit and applied it, so the client pays the same WAN round trip RTT(R, L) as
a Paxos client talking to the leader, plus fixed costs the calibration measures.

Writes are issued open loop: each region's client draws exponential gaps at its share of the
offered rate (Poisson arrivals) and every write runs as its own task, so a slow write never
delays the next one. Latency is the wall time around the store call (``perf_counter_ns``).

The calibration runs the same writes with every peer link's delay removed (the same processes,
proxies and disks): what is left is the store's fixed per-write cost on this machine (gateway,
raft loop, WAL fsync, apply, the emulated links' userspace hops), which the model fit takes in.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from replicalab.cluster import base, process, toxiproxy
from replicalab.cluster.etcd import leader_index, transfer_leadership
from replicalab.cluster.state import Cluster
from replicalab.errors import ParameterError
from replicalab.regions import region_set
from replicalab.runtime.noise import NoiseFloor
from replicalab.stores import open_store
from replicalab.stores.base import StoreError
from replicalab.workloads import noise

__all__ = ["Point", "RealRun", "cpu_split_s", "measure_fsync_ms", "real_cluster", "run_writes",
           "store_kinds", "write_latencies", "zero_delays"]

MAX_IN_FLIGHT = 2000
"""Writes allowed in flight at once per region; past it an arrival is dropped and counted (the
store is saturated and the open loop would only grow its queue)."""

DRAIN_S = 10.0
"""How long the writes still in flight get after a point's duration (s)."""

_KINDS = {"etcd": "etcd"}


def store_kinds() -> list[str]:
    """Return the store kinds ``--against`` can start and place a leader in."""
    return sorted(_KINDS)


@dataclass(frozen=True)
class Point:
    """The writes of one (leader, offered rate) point: latencies per client region (ms)."""

    leader: str
    offered_rps: float
    duration_s: float
    latencies_ms: dict[str, list[float]]
    errors: dict[str, int]
    dropped: int
    leader_held: bool  # the leader was still the placed one when the point ended
    cpu_ms_per_write: dict[str, float] = field(default_factory=dict)  # see cpu_split_s
    noise: NoiseFloor | None = None  # what the machine added while the point ran

    def mean_ms(self, region: str) -> float | None:
        """Return the mean write latency (ms) of clients in ``region``; None without writes."""
        x = self.latencies_ms.get(region) or []
        return statistics.fmean(x) if x else None


@dataclass
class RealRun:
    """What one run on a real store measured: the calibration and every point."""

    kind: str
    regions: str
    calibration: Point
    fsync_ms: float
    points: list[Point] = field(default_factory=list)
    transfer_s: dict[str, float] = field(default_factory=dict)


# ----------------------------------------------------------------------------- the cluster


@contextlib.contextmanager
def real_cluster(kind: str, regions: str, name: str | None = None,
                 root: Path | None = None) -> Iterator[Cluster]:
    """Start a ``kind`` cluster with one member per region of ``regions`` and yield it; it is
    stopped on the way out, whatever ends the block (the process registry also stops it on
    SIGTERM and Ctrl-C). ValueError names what cannot start."""
    if kind not in _KINDS:
        raise ParameterError("against", f"{kind!r}: the stores that can be measured are "
                                        f"{', '.join(store_kinds())} (they let replicalab "
                                        "place the leader)")
    rs = region_set(regions)
    name = name or f"against-{kind}-{os.getpid()}"
    c = base.up(_KINDS[kind], len(rs.regions), regions, name=name, root=root)
    try:
        yield c
    finally:
        # Followers first: an etcd leader stopped with its followers tries to hand over
        # leadership to members that are going away and waits its request timeout (~9 s);
        # alone, it finds no peer to hand over to and stops at once.
        with contextlib.suppress(ValueError, OSError, httpx.HTTPError):
            lead = leader_index(c)
            process.stop_many([n.pid for n in c.nodes if n.index != lead and n.pid])
        with contextlib.suppress(ValueError, OSError):
            base.down(name, root)


def _cpu_s(pid: int) -> float:
    """Return the CPU seconds (user + system) process ``pid`` used so far (0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_split_s(c: Cluster) -> dict[str, float]:
    """Return the CPU seconds used so far by the cluster's ``store`` processes (the
    members), its ``links`` (Toxiproxy and each member's peer demultiplexer) and the
    ``client`` (this process): where an emulated write spends the machine's CPU."""
    members = [n.pid for n in c.nodes if n.pid]
    helpers = [d for pid in members for d in process.descendants(pid)]
    return {"store": sum(_cpu_s(p) for p in members),
            "links": sum(_cpu_s(p) for p in [*helpers, c.toxiproxy_pid] if p),
            "client": time.process_time()}


@contextlib.contextmanager
def zero_delays(c: Cluster) -> Iterator[None]:
    """Remove the delay of every replication link of ``c`` inside the block; the links'
    recorded delays are put back on the way out."""
    tp = toxiproxy.Toxiproxy(c.toxiproxy_port)
    links = [x for x in c.links if x.kind == "replication"]
    try:
        for link in links:
            tp.set_latency(link.name, 0.0, 0.0, 0.0)
        yield
    finally:
        for link in links:
            tp.set_latency(link.name, link.downstream_ms, link.upstream_ms, link.jitter_ms)
        tp.close()


def measure_fsync_ms(directory: Path, count: int = 50) -> float:
    """Return the median time (ms) to append 4 KiB to a file in ``directory`` and fdatasync
    it, as etcd's WAL does per batch of entries (the file is removed afterwards)."""
    path = directory / f".fsync-probe-{os.getpid()}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    took: list[float] = []
    try:
        for _ in range(count):
            os.write(fd, b"\0" * 4096)
            t0 = time.perf_counter_ns()
            os.fdatasync(fd)
            took.append((time.perf_counter_ns() - t0) / 1e6)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return statistics.median(took)


# ----------------------------------------------------------------------------- the writes


async def write_latencies(url: str, rates_rps: dict[str, float], duration_s: float,
                          seed: int, on_progress: Callable[[float], None] | None = None
                          ) -> tuple[dict[str, list[float]], dict[str, int], int]:
    """Issue open-loop writes for ``duration_s`` from a client per region at its rate
    (writes/s) and return (latencies ms per region, errors per region, dropped arrivals).

    Each region's client first makes one unrecorded write (opening its connection).
    """
    store = open_store(url, seed)
    rng = random.Random(seed)
    lat: dict[str, list[float]] = {r: [] for r in rates_rps}
    errors = dict.fromkeys(rates_rps, 0)
    dropped = 0
    tasks: dict[asyncio.Task[None], str] = {}  # in flight -> its client's region
    try:
        clients = {r: await store.connect(r) for r, rate in rates_rps.items() if rate > 0}
        for r, cl in clients.items():
            await cl.write({f"against/{r}": "warm-up"})

        async def one(region: str, i: int) -> None:
            t0 = time.perf_counter_ns()
            try:
                await clients[region].write({f"against/{region}": str(i)})
            except StoreError:
                errors[region] += 1
                return
            lat[region].append((time.perf_counter_ns() - t0) / 1e6)

        # one merged schedule of every region's Poisson arrivals, in time order
        arrivals: list[tuple[float, str]] = []
        for r in clients:
            t = rng.expovariate(rates_rps[r])
            while t < duration_s:
                arrivals.append((t, r))
                t += rng.expovariate(rates_rps[r])
        arrivals.sort()
        in_flight = dict.fromkeys(clients, 0)
        loop = asyncio.get_running_loop()
        start = loop.time()
        next_tick = 0.0
        for i, (at, r) in enumerate(arrivals):
            delay = start + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if on_progress is not None and at >= next_tick:
                on_progress(at / duration_s)
                next_tick = at + 0.5
            if in_flight[r] >= MAX_IN_FLIGHT:
                dropped += 1
                continue
            in_flight[r] += 1
            task = asyncio.create_task(one(r, i))
            tasks[task] = r

            def done(t: asyncio.Task[None]) -> None:
                in_flight[tasks.pop(t)] -= 1

            task.add_done_callback(done)
        rest = max(start + duration_s - loop.time(), 0.0)
        await asyncio.sleep(rest)
        if tasks:
            _, late = await asyncio.wait(set(tasks), timeout=DRAIN_S)
            for t in late:  # no answer within the drain time: an error of its region
                errors[tasks[t]] += 1
                t.cancel()
    finally:
        for t in list(tasks):
            t.cancel()
        await store.close()
    return lat, errors, dropped


def _rates(regions: Sequence[str], shares: Sequence[float], total_rps: float
           ) -> dict[str, float]:
    return {r: total_rps * s for r, s in zip(regions, shares, strict=True) if s > 0}


def _point(c: Cluster, leader: str, total_rps: float, shares: Sequence[float],
           duration_s: float, seed: int, on_progress: Callable[[float], None] | None
           ) -> Point:
    regions = [n.region for n in c.nodes]
    cpu0 = cpu_split_s(c)

    async def measured() -> tuple[tuple[dict[str, list[float]], dict[str, int], int],
                                  NoiseFloor]:
        with noise.monitor(c) as mon:
            mon.start()
            try:
                got = await write_latencies(c.url, _rates(regions, shares, total_rps),
                                            duration_s, seed, on_progress)
            finally:
                floor = await mon.stop()
        return got, floor

    (lat, errors, dropped), floor = asyncio.run(measured())
    cpu1 = cpu_split_s(c)
    writes = max(sum(len(x) for x in lat.values()), 1)
    now = leader_index(c)
    return Point(leader, total_rps, duration_s, lat, errors, dropped,
                 leader_held=now is not None and c.nodes[now].region == leader,
                 cpu_ms_per_write={k: 1000 * (cpu1[k] - cpu0[k]) / writes for k in cpu0},
                 noise=floor)


def run_writes(c: Cluster, leaders: Sequence[str], rates_rps: Sequence[float],
               duration_s: float, shares: Sequence[float] | None = None, seed: int = 1,
               calibration_s: float | None = None,
               on_phase: Callable[[str, float, str], None] | None = None) -> RealRun:
    """Measure write latency per client region on the running cluster ``c`` (one member per
    region) for each leader region in ``leaders`` and each total offered rate (writes/s),
    ``duration_s`` per point; first the calibration (every link's delay removed, the first
    leader, the lowest rate, ``calibration_s``, default ``duration_s``). ``shares`` splits the
    rate over the regions (default equal). The links' delays and the leader found at the start
    are put back at the end. ``on_phase(phase, fraction, detail)`` reports progress: phase
    ``calibration`` then ``leader <region>`` for each leader, with the fraction of that phase
    done (0..1) and what it is doing.
    """
    regions = [n.region for n in c.nodes]
    if len(set(regions)) != len(regions):
        raise ValueError(f"cluster {c.name}: one member per region is needed, it has "
                         f"{', '.join(regions)}")
    for r in leaders:
        if r not in regions:
            raise ValueError(f"leader {r!r}: the cluster's regions are {', '.join(regions)}")
    if not rates_rps or any(not (x > 0 and math.isfinite(x)) for x in rates_rps):
        raise ValueError("offered rates must be positive numbers of writes/s, e.g. 10,50")
    shares = list(shares) if shares is not None else [1.0 / len(regions)] * len(regions)
    say = on_phase or (lambda _phase, _f, _what: None)
    first = leader_index(c)
    cal_s = calibration_s or duration_s
    fsync = measure_fsync_ms(Path(c.nodes[0].data_dir))
    run = RealRun(c.kind, c.regions, calibration=Point(leaders[0], 0, 0, {}, {}, 0, True),
                  fsync_ms=fsync)
    try:
        say("calibration", 0.0, f"leader {leaders[0]}, links without delay")
        run.transfer_s[leaders[0]] = transfer_leadership(c, regions.index(leaders[0]))
        with zero_delays(c):
            run.calibration = _point(c, leaders[0], min(rates_rps), shares, cal_s, seed,
                                     lambda f: say("calibration", f, "writes"))
        for leader in leaders:
            phase = f"leader {leader}"
            say(phase, 0.0, "moving the leader")
            run.transfer_s[leader] = transfer_leadership(c, regions.index(leader))
            for i, rate in enumerate(rates_rps):
                what = f"{rate:g} writes/s"
                say(phase, i / len(rates_rps), what)
                run.points.append(_point(
                    c, leader, rate, shares, duration_s, seed + 1 + i,
                    lambda f, i=i, ph=phase, w=what: say(ph, (i + f) / len(rates_rps), w)))
    finally:
        if first is not None:
            with contextlib.suppress(ValueError):
                transfer_leadership(c, first)
    return run

"""Benchmark: the cost of replicalab's real-store path on Redis, against peers in one run.

1. Toxiproxy hop: p50 of a Redis GET direct vs through one proxy with no toxic (the latency
   one emulated link adds on this machine; target < 0.5 ms).
2. Probe client: p50 of a GET through the ``redis://`` adapter (the lean RESP client of
   ``stores/resp.py``) recorded in a History as a probe records it, at concurrency 1, vs
   redis-benchmark's p50 for GET at ``-c 1`` on the same server (target ratio <= 1.5); beside
   them the adapter before issue 14 (redis-py asyncio, timed by the recorder around each
   call) and a plain synchronous redis-py client. Runs are interleaved, one of each per
   repeat, and the ratio is the median of the per-repeat ratios.
3. LAN staleness window: a primary and a replica replicating over loopback (no proxy), a
   writer at the primary every 5 ms and a reader reading the replica back to back (the
   staleness probe with separate clients), once through the lean adapter and once through
   the old path: the fraction of reads stale against the time since the write was sent,
   and per write the last stale read's start (the stale window it saw).

Starts its own redis-servers and Toxiproxy on free 127.0.0.1 ports and stops them.
Run: .venv/bin/python benchmarks/bench_redis.py [--requests 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import redis
import redis.asyncio as aioredis

from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import judge
from replicalab.cluster import process, toxiproxy
from replicalab.cluster.ports import allocate, wait_listening
from replicalab.history import History
from replicalab.runtime import RealRuntime
from replicalab.stores import open_store
from replicalab.stores.base import ReadResult, WriteResult
from replicalab.workloads import staleness
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder

ROOT = Path(".replicalab")
BUCKETS_US = (0, 25, 50, 75, 100, 150, 250, 1000)


class OldRedisClient:
    """The probe's Redis client before issue 14: redis-py asyncio, one GET/SET per call."""

    def __init__(self, primary: aioredis.Redis, replica: aioredis.Redis) -> None:
        self.primary, self.replica = primary, replica

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        conn = self.primary if consistent else self.replica
        return ReadResult((await conn.get(keys[0]),), "primary" if consistent else "replica")

    async def write(self, values: Mapping[str, str], *, expect: Any = None) -> WriteResult:
        ((k, v),) = values.items()
        await self.primary.set(k, v)
        return WriteResult("primary")

    async def close(self) -> None:
        """Connections are closed by the store."""


class OldRedisStore:
    """Just enough of the old ``redis://`` adapter for the probe loops (no wire stamps: the
    recorder times each call around it)."""

    def __init__(self, primary_port: int, replica_port: int) -> None:
        self.runtime = RealRuntime()
        self.ports = (primary_port, replica_port)
        self.conns: list[aioredis.Redis] = []

    async def connect(self, region: str | None = None) -> OldRedisClient:
        p, r = (aioredis.Redis(port=port, decode_responses=True) for port in self.ports)
        self.conns += [p, r]
        return OldRedisClient(p, r)

    async def close(self) -> None:
        for c in self.conns:
            await c.aclose()


def p50_direct_ms(port: int, n: int) -> float:
    """Return the p50 in ms of n sequential GETs with a plain synchronous redis-py client."""
    r = redis.Redis(port=port)
    r.set("k", "v")
    lat = []
    for _ in range(n):
        t = time.perf_counter_ns()
        r.get("k")
        lat.append(time.perf_counter_ns() - t)
    r.close()
    return float(np.percentile(lat, 50)) / 1e6


def p50_probe_ms(store: Any, n: int) -> float:
    """Return the p50 in ms of n consistent GETs through ``store``, as a probe records them
    (Recorder into a History)."""
    h = History()

    async def main() -> None:
        client = await store.connect()
        rec = Recorder(h, store.runtime)
        try:
            for _ in range(n):
                await rec.read(client, 0, ("k",), True)
        finally:
            await store.close()

    store.runtime.run(main())
    lat = h.column("complete_ns") - h.column("invoke_ns")
    return float(np.percentile(lat, 50)) / 1e6


def p50_redis_benchmark_ms(port: int, n: int, prefix: Sequence[str] = ()) -> float:
    """Return redis-benchmark's p50 latency in ms for GET with one client (``prefix``: e.g.
    taskset to pin it)."""
    out = subprocess.run([*prefix, "redis-benchmark", "-p", str(port), "-c", "1", "-n", str(n),
                          "-t", "get", "--csv"], capture_output=True, text=True,
                         check=True).stdout
    # CSV header: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
    row = next(line for line in out.splitlines() if line.startswith('"GET"'))
    return float(re.findall(r'"([0-9.]+)"', row)[3])


def lan_staleness(store: Any, duration_s: float) -> dict[str, Any]:
    """Run the staleness probe (writer at the primary every 5 ms, a separate reader at the
    replica back to back) on ``store``; return the stale fraction per bucket of time since
    the write was sent (us) and per-write figures."""
    h = History()
    rec = Recorder(h, store.runtime)
    opts = ProbeOptions(duration_s=duration_s, write_interval_s=0.005, read_rate=1e6)
    cfg = staleness.StalenessConfig(placement="separate-clients")

    async def main() -> None:
        try:
            await staleness.generate(store, h, opts, cfg, rec)
        finally:
            await store.close()

    store.runtime.run(main())
    writes, reads = element_ops(h, staleness.KEY)
    j = judge(writes, reads)
    us = j.elapsed_ms * 1000
    buckets = {}
    for lo, hi in itertools.pairwise(BUCKETS_US):
        m = (us >= lo) & (us < hi)
        buckets[f"{lo}-{hi}"] = (float((~j.fresh[m]).mean()) if m.any() else None, int(m.sum()))
    windows, firsts = [], []
    for w in np.unique(j.write).tolist():
        m = j.write == w
        firsts.append(float(us[m].min()))
        stale = us[m][~j.fresh[m]]
        windows.append(float(stale.max()) if len(stale) else 0.0)
    read_lat = (h.column("complete_ns") - h.column("invoke_ns"))[
        (h.column("f") == h.f_code("read")) & (h.column("process") >= 0)]
    return {"buckets": buckets, "writes": len(windows),
            "with_stale": float(np.mean([w > 0 for w in windows])) if windows else 0.0,
            "window_us": float(np.median([w for w in windows if w > 0] or [0.0])),
            "first_read_us": float(np.median(firsts)) if firsts else float("nan"),
            "read_p50_us": float(np.median(read_lat)) / 1e3, "reads": len(j.fresh)}


def _print_staleness(rows: dict[str, list[dict[str, Any]]]) -> None:
    print("\nLAN staleness (primary -> replica over loopback, no proxy): reads stale by time "
          "since the write was sent, summed over the runs")
    names = list(rows)
    print(f"  {'since write (us)':<18}" + "".join(f"{n:>28}" for n in names))
    for b in rows[names[0]][0]["buckets"]:
        cells = []
        for n in names:
            stale = sum((r["buckets"][b][0] or 0) * r["buckets"][b][1] for r in rows[n])
            total = sum(r["buckets"][b][1] for r in rows[n])
            cells.append(f"{(100 * stale / total if total else 0):6.1f}% of {total:>7,} reads")
        print(f"  {b:<18}" + "".join(f"{c:>28}" for c in cells))
    for key, label in (("first_read_us", "first read after a write starts (us, median)"),
                       ("window_us", "stale window of writes with one (us, median)"),
                       ("with_stale", "writes with a stale read (fraction)"),
                       ("read_p50_us", "read p50 as recorded (us)")):
        print(f"  {label:<46}" + "".join(
            f"{statistics.median(r[key] for r in rows[n]):>14.2f}" for n in names))


def _pinned(cpu: int | None) -> list[str]:
    """Return the command prefix that runs a program on ``cpu`` (none when not pinning)."""
    return [] if cpu is None else ["taskset", "-c", str(cpu)]


def _on_cpu(cpu: int | None) -> set[int]:
    """Pin this process to ``cpu`` (if given); return the affinity to restore."""
    before = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    return before


def main() -> None:
    """Print the three comparisons (medians of --repeats) with their ratios."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--stale-s", type=float, default=3.0,
                    help="seconds of each LAN staleness run")
    args = ap.parse_args()
    # Where the client runs against the server changes a loopback round trip a lot (a
    # wake-up on another core costs tens of us): with two CPUs and taskset, the server is
    # pinned to CPU 0 and every client is measured on CPU 0 (same core) and on CPU 1
    # (separate cores), redis-benchmark and ours alike.
    pin = shutil.which("taskset") is not None and len(os.sched_getaffinity(0)) >= 2
    placements = {"same core": 0, "separate cores": 1} if pin else {"unpinned": None}
    server, replica, proxy, api = allocate(4)
    with tempfile.TemporaryDirectory() as tmp:
        common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp]
        pids = [process.start([*_pinned(0 if pin else None), "redis-server", "--port",
                               str(server), *common], Path(tmp) / "redis.log"),
                process.start(["redis-server", "--port", str(replica), *common,
                               "--replicaof", "127.0.0.1", str(server)],
                              Path(tmp) / "replica.log")]
        try:
            wait_listening(server)
            wait_listening(replica)
            pids.append(toxiproxy.start_server(ROOT, api, Path(tmp) / "toxiproxy.log"))
            tp = toxiproxy.Toxiproxy(api)
            tp.create("bench", proxy, server)
            tp.close()
            wait_listening(proxy)
            r = redis.Redis(port=replica)
            for _ in range(100):  # the replica must be in sync before it is read
                if r.info("replication").get("master_link_status") == "up":
                    break
                time.sleep(0.1)
            r.close()
            url = f"redis://127.0.0.1:{server}?replicas=127.0.0.1:{replica}"
            rows: dict[str, dict[str, list[float]]] = {}
            for _ in range(args.repeats):
                for where, cpu in placements.items():
                    row = rows.setdefault(where, {})
                    before = _on_cpu(cpu)
                    try:
                        row.setdefault("redis-benchmark", []).append(
                            p50_redis_benchmark_ms(server, args.requests, _pinned(cpu)))
                        row.setdefault("probe (lean adapter)", []).append(
                            p50_probe_ms(open_store(url, 1), args.requests))
                        row.setdefault("old adapter (redis-py asyncio)", []).append(
                            p50_probe_ms(OldRedisStore(server, replica), args.requests))
                        row.setdefault("sync redis-py, direct", []).append(
                            p50_direct_ms(server, args.requests))
                        row.setdefault("sync redis-py, via proxy", []).append(
                            p50_direct_ms(proxy, args.requests))
                    finally:
                        os.sched_setaffinity(0, before)
            stale: dict[str, list[dict[str, Any]]] = {"lean adapter": [], "old adapter": []}
            for _ in range(max(1, args.repeats // 2)):
                stale["lean adapter"].append(lan_staleness(open_store(url, 1), args.stale_s))
                stale["old adapter"].append(lan_staleness(OldRedisStore(server, replica),
                                                          args.stale_s))
        finally:
            process.stop_many(pids)
    print(f"GET p50 in ms, {args.requests:,} requests, concurrency 1, median of "
          f"{args.repeats} interleaved runs" + (" (server on CPU 0)" if pin else ""))
    for where, row in rows.items():
        med = {k: statistics.median(v) for k, v in row.items()}
        print(f" client on the {where}:" if pin else " unpinned:")
        for k, v in med.items():
            print(f"  {k:<32}{v:8.4f}   runs: {', '.join(f'{x:.4f}' for x in row[k])}")
        hop = med["sync redis-py, via proxy"] - med["sync redis-py, direct"]
        print(f"  Toxiproxy hop adds {hop:.4f} ms at p50 (target < 0.5 ms: "
              f"{'met' if hop < 0.5 else 'NOT met'})")
        ratios = [p / b for p, b in zip(row["probe (lean adapter)"], row["redis-benchmark"],
                                        strict=True)]
        old = [p / b for p, b in zip(row["old adapter (redis-py asyncio)"],
                                     row["redis-benchmark"], strict=True)]
        ratio = statistics.median(ratios)
        print(f"  probe client / redis-benchmark p50: {ratio:.2f}x, median of "
              f"{', '.join(f'{x:.2f}' for x in ratios)} (target <= 1.5: "
              f"{'met' if ratio <= 1.5 else 'NOT met'}); the old adapter: "
              f"{statistics.median(old):.2f}x")
    _print_staleness(stale)


if __name__ == "__main__":
    main()

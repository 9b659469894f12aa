"""Benchmark: the cost of replicalab's real-store path on Redis, against peers in one run.

1. Toxiproxy hop: p50 of a Redis GET direct vs through one proxy with no toxic (the latency
   one emulated link adds on this machine; target < 0.5 ms).
2. Probe client: p50 of a GET through replicalab's store adapter and History recording at
   concurrency 1, vs redis-benchmark's p50 for GET at -c 1 on the same server (target
   ratio <= 1.5).

Starts its own redis-server and Toxiproxy on free 127.0.0.1 ports and stops them.
Run: .venv/bin/python benchmarks/bench_redis.py [--requests 20000]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

from replicalab.cluster import process, toxiproxy
from replicalab.cluster.ports import allocate, wait_listening
from replicalab.history import History
from replicalab.stores import open_store
from replicalab.workloads.recorder import Recorder

ROOT = Path(".replicalab")


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


def p50_probe_ms(port: int, n: int) -> float:
    """Return the p50 in ms of n GETs through the redis:// adapter, recorded in a History."""
    store = open_store(f"redis://127.0.0.1:{port}", 1)
    h = History()

    async def main() -> None:
        client = await store.connect()
        rec = Recorder(h, store.runtime)
        for _ in range(n):
            await rec.read(client, 0, ("k",), True)
        await store.close()

    store.runtime.run(main())
    lat = h.column("complete_ns") - h.column("invoke_ns")
    return float(np.percentile(lat, 50)) / 1e6


def p50_redis_benchmark_ms(port: int, n: int) -> float:
    """Return redis-benchmark's p50 latency in ms for GET with one client."""
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "1", "-n", str(n), "-t",
                          "get", "--csv"], capture_output=True, text=True, check=True).stdout
    # CSV header: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
    row = next(line for line in out.splitlines() if line.startswith('"GET"'))
    return float(re.findall(r'"([0-9.]+)"', row)[3])


def main() -> None:
    """Print both comparisons (medians of --repeats) with their ratios."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    server, proxy, api = allocate(3)
    with tempfile.TemporaryDirectory() as tmp:
        pids = [process.start(["redis-server", "--port", str(server), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no"], Path(tmp) / "redis.log")]
        try:
            wait_listening(server)
            pids.append(toxiproxy.start_server(ROOT, api, Path(tmp) / "toxiproxy.log"))
            tp = toxiproxy.Toxiproxy(api)
            tp.create("bench", proxy, server)
            tp.close()
            wait_listening(proxy)
            rows = {"direct": [], "proxy": [], "probe": [], "redis-benchmark": []}
            for _ in range(args.repeats):
                rows["direct"].append(p50_direct_ms(server, args.requests))
                rows["proxy"].append(p50_direct_ms(proxy, args.requests))
                rows["probe"].append(p50_probe_ms(server, args.requests))
                rows["redis-benchmark"].append(p50_redis_benchmark_ms(server, args.requests))
        finally:
            for pid in pids:
                process.stop(pid)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"GET p50 in ms, {args.requests:,} requests, concurrency 1, median of "
          f"{args.repeats}")
    for k, v in med.items():
        print(f"  {k:<16}{v:8.4f}   runs: {', '.join(f'{x:.4f}' for x in rows[k])}")
    hop = med["proxy"] - med["direct"]
    print(f"Toxiproxy hop adds {hop:.4f} ms at p50 (target < 0.5 ms: "
          f"{'met' if hop < 0.5 else 'NOT met'})")
    ratio = med["probe"] / med["redis-benchmark"]
    print(f"probe client / redis-benchmark p50: {ratio:.2f}x (target <= 1.5: "
          f"{'met' if ratio <= 1.5 else 'NOT met'})")


if __name__ == "__main__":
    main()

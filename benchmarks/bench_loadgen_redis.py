"""Benchmark: GET throughput replicalab's load generator drives from one core, against
redis-benchmark at the same concurrency, side by side in one run (issue 7, "Throughput").

Both generators are pinned to CPU 0 (redis-server to CPU 1), use the same number of
connections with one request in flight on each (no pipelining: redis-benchmark -P 1), and GET
one small key. replicalab runs ``replicalab.workloads.load.run_worker`` as ``replicalab load
run`` does, at an offered rate far above what it can send, so it is saturated; its rate is the
successful GETs divided by the time from the schedule's start to the last reply (every one
recorded in its History with intended start, send and completion). Measured: ``fast`` (the
callback-driven RESP path of stores/resp.py) on uvloop, which is the issue's figure, the
same on the stock asyncio loop (uvloop's share), and ``store`` (the redis:// store adapter on
redis-py) on uvloop. Starts its own redis-server on a free 127.0.0.1 port and stops it.

Run: .venv/bin/python benchmarks/bench_loadgen_redis.py [--clients 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import redis

from replicalab.cluster import process
from replicalab.cluster.ports import allocate, wait_listening

GEN_CPU = 0
SERVER_CPU = 1


def _pin(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu)] if os.cpu_count() and os.cpu_count() > cpu else []


def replicalab_rps(port: int, clients: int, client: str, duration_s: float,
                   loop: str = "uvloop") -> float:
    """Return GETs per second replicalab's load generator completed, run in a child process
    pinned to one CPU (the child imports and starts the same code ``replicalab load`` runs)."""
    code = (
        "import json, sys\n"
        "from replicalab.workloads.load import LoadSpec, run_worker\n"
        f"spec = LoadSpec(store='redis://127.0.0.1:{port}', rate_per_s=400000.0, "
        f"duration_s={duration_s}, arrivals='uniform', read_ratio=1.0, keyspace=1, "
        f"max_in_flight={clients}, consistency='consistent', drain_s=0.0, client='{client}', "
        f"loop='{loop}')\n"
        "r = run_worker(spec)\n"
        "print(json.dumps({'ok': r.counts.ok, 'elapsed_s': (r.end_ns - r.t0_ns) / 1e9, "
        "'error': r.error}))\n")
    out = subprocess.run([*_pin(GEN_CPU), sys.executable, "-c", code], capture_output=True,
                         text=True, check=True, timeout=300).stdout
    r = json.loads(out.strip().splitlines()[-1])
    if r["error"]:
        raise RuntimeError(f"load generator failed: {r['error']}")
    return r["ok"] / r["elapsed_s"]


def redis_benchmark_rps(port: int, clients: int, requests: int) -> float:
    """Return redis-benchmark's GET requests per second (one thread, pinned to one CPU)."""
    out = subprocess.run([*_pin(GEN_CPU), "redis-benchmark", "-h", "127.0.0.1", "-p",
                          str(port), "-c", str(clients), "-n", str(requests), "-P", "1",
                          "-t", "get", "--threads", "1", "--csv"],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    row = next(line for line in out.splitlines() if line.startswith('"GET"'))
    return float(re.findall(r'"([0-9.]+)"', row)[0])


def main() -> None:
    """Print each generator's GET rate (median of --repeats) and the ratios."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    (port,) = allocate(1)
    # name -> (client, loop); None = redis-benchmark
    runs = {"redis-benchmark": None, "replicalab fast": ("fast", "uvloop"),
            "fast on asyncio": ("fast", "asyncio"), "replicalab store": ("store", "uvloop")}
    rows: dict[str, list[float]] = {k: [] for k in runs}
    with tempfile.TemporaryDirectory() as tmp:
        pid = process.start([*_pin(SERVER_CPU), "redis-server", "--port", str(port), "--bind",
                             "127.0.0.1", "--save", "", "--appendonly", "no"],
                            Path(tmp) / "redis.log")
        try:
            if not wait_listening(port):
                raise SystemExit("redis-server did not start")
            r = redis.Redis(port=port)
            r.set("load/k0/v", "xyz")  # the key replicalab GETs (keyspace 1)
            r.set("key:__rand_int__", "xyz")  # redis-benchmark's key without -r
            r.close()
            for _ in range(args.repeats):  # interleaved: machine noise hits all alike
                for name, how in runs.items():
                    if how is None:
                        rps = redis_benchmark_rps(port, args.clients, args.requests)
                    else:
                        client, loop = how
                        rps = replicalab_rps(port, args.clients, client, args.duration, loop)
                    rows[name].append(rps)
        finally:
            process.stop(pid)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"Redis GET throughput from one core (CPU {GEN_CPU}), {args.clients} connections, "
          f"one request in flight each, median of {args.repeats}")
    for k, v in med.items():
        print(f"  {k:<18}{v:>12,.0f} req/s   runs: "
              f"{', '.join(f'{x:,.0f}' for x in rows[k])}")
    for k in ("replicalab fast", "fast on asyncio", "replicalab store"):
        ratio = med[k] / med["redis-benchmark"]
        print(f"{k} / redis-benchmark: {100 * ratio:.1f}% (target >= 50%: "
              f"{'met' if ratio >= 0.5 else 'NOT met'})")


if __name__ == "__main__":
    main()

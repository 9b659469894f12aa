"""Benchmark: server-based middleware with batching vs Weak counters, same store, one run.

Seed 004 §V-C: "BCsrv has an even higher throughput [than Weak] ... due to the batching
mechanism". Three data centres (dc3), each its own real Redis, WAN links through Toxiproxy;
the same closed-loop clients (20 % increments, 80 % decrements on one counter, 100 ms think
time, spread evenly over the DCs) drive each configuration in turn on the same servers, the
order alternating over ``--rounds`` so drift of the shared machine hits both alike.

Prints each configuration's throughput (successful ops/s, median over rounds) and the ratio
server-based+batch / Weak (target: >= 1.0).
Run: .venv/bin/python benchmarks/bench_counters.py [--clients 300 --duration 10 --rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from replicalab.cluster import datacentres as topology
from replicalab.counters.bench import PointSpec, run_point
from replicalab.counters.bench_deploy import open_deployment

PEERS = ("weak", "server-based+batch")


async def measure(t: topology.DataCentres, clients: int, duration_s: float, think_ms: float,
                  rounds: int) -> dict[str, list[dict]]:
    """Return each configuration's point summaries, one per round (order alternating)."""
    out: dict[str, list[dict]] = {c: [] for c in PEERS}
    for r in range(rounds):
        for config in (PEERS if r % 2 == 0 else PEERS[::-1]):
            spec = PointSpec("throughput", config, clients, think_ms=think_ms,
                             duration_s=duration_s, seed=r + 1)
            dep = await open_deployment(config, t, seed=r + 1)
            try:
                res = await run_point(dep, t.dcs, spec, f"bench{os.getpid()}r{r}")
            finally:
                await dep.close()
            out[config].append(res.summary)
            s = res.summary
            print(f"  round {r + 1} {config:<20} {s['throughput_ops_s']:8.1f} ops/s  "
                  f"p50 {s['latency_ms']['all']['p50']:6.2f} ms  failed {s['failed']}",
                  flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="redis", choices=("redis", "postgresql", "sim"))
    ap.add_argument("--clients", type=int, default=300)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per point")
    ap.add_argument("--think-ms", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="replicalab-bench-counters-"))
    root.chmod(0o755)  # PostgreSQL runs as its own user and must reach its data directory
    try:
        with topology.start(args.store, root, f"bc{os.getpid()}") as t:
            print(f"{args.clients} clients over {', '.join(t.dcs)} on {args.store}, "
                  f"{args.duration:g} s per point, think {args.think_ms:g} ms (offered load "
                  f"at most {args.clients * 1000 / max(args.think_ms, 1e-3):,.0f} ops/s)",
                  flush=True)
            res = asyncio.run(measure(t, args.clients, args.duration, args.think_ms,
                                      args.rounds))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    tput = {c: statistics.median(s["throughput_ops_s"] for s in res[c]) for c in PEERS}
    p50 = {c: statistics.median(s["latency_ms"]["all"]["p50"] for s in res[c]) for c in PEERS}
    for c in PEERS:
        print(f"{c:<20} throughput {tput[c]:8.1f} ops/s   p50 {p50[c]:6.2f} ms")
    ratio = tput["server-based+batch"] / tput["weak"] if tput["weak"] else float("inf")
    print(f"ratio server-based+batch / weak throughput: {ratio:.2f}x (target >= 1.0)")


if __name__ == "__main__":
    main()

"""Benchmark: the placement simulator's compiled fast path against the plain per-request Python
loop over the same policy objects, side by side on the same stream in one run.

For each policy it feeds the same seeded stream (seed 002's locality workload on aws15 by
default) to ``simulate.run_reference`` (``policy.hit()`` per access in Python, the reference
semantics) and to ``simulate.run_policy`` (the numba kernel), checks both gave identical
traces, and prints requests per second of each and their ratio, medians over ``--repeats``.
Then it times the four seed experiments end to end at their defaults (1,000,000 accesses,
6 or 4 policies each, metrics included): the target is under a minute.

Run: .venv/bin/python benchmarks/bench_placement.py [--requests 200000] [--repeats 3]
     [--workload locality] [--cpu 0] [--no-experiments]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from replicalab.placement import simulate as sim
from replicalab.placement.matrix import region_matrix
from replicalab.placement.workloads import DEFAULTS, WORKLOADS, generate, initial_owners

FAST_INNER = 7
POLICIES = ("static", "consecutive", "majority", "ema", "cog", "cog:mode=continuous",
            "oracle", "cog:balance=0.25")


def _same(a: sim.Trace, b: sim.Trace) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in (
        "latency_ms", "mig_index", "mig_from", "mig_to", "mig_pingpong", "final_owner"))


def side_by_side(workload: str, n_requests: int, repeats: int) -> list[tuple[str, float, float]]:
    """Return (policy, reference req/s, fast req/s) medians over ``repeats``."""
    d = DEFAULTS[workload]
    regions = region_matrix(d.regions)
    # the stream keeps the default access density per object and window
    duration_s = d.duration_s * n_requests / d.requests
    reqs = generate(workload, regions, d.objects, n_requests, duration_s, d.seed).requests
    owner0 = initial_owners(regions.size, d.objects, d.seed)
    rows = []
    for label in POLICIES:
        [spec] = sim.policy_specs(label)
        ref_rates, fast_rates = [], []
        for _ in range(repeats):
            policy = sim.build(spec, regions, owner0, reqs)
            t = time.perf_counter()
            ref = sim.run_reference(policy, regions, reqs, owner0)
            ref_rates.append(n_requests / (time.perf_counter() - t))
            # a fast run takes milliseconds: the median of several, each on a fresh policy,
            # keeps the figure from being one scheduler hiccup on a shared machine
            inner = []
            for _ in range(FAST_INNER):
                policy = sim.build(spec, regions, owner0, reqs)
                t = time.perf_counter()
                fast = sim.run_policy(policy, regions, reqs, owner0)
                inner.append(n_requests / (time.perf_counter() - t))
            fast_rates.append(statistics.median(inner))
            if not _same(ref, fast):
                raise SystemExit(f"{label}: the fast path differs from the reference")
        rows.append((label, statistics.median(ref_rates), statistics.median(fast_rates)))
    return rows


def experiments() -> list[tuple[str, float, float]]:
    """Return (workload, wall s, slowest policy's fast-path req/s) for the four seed runs."""
    out = []
    for w in WORKLOADS:
        t = time.perf_counter()
        results = sim.run_experiment(sim.experiment(w))
        wall = time.perf_counter() - t
        slowest = min(e["requests_per_s"] for e in results["policies"])
        out.append((w, wall, slowest))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workload", default="locality", choices=WORKLOADS)
    ap.add_argument("--cpu", type=int, default=None, help="pin this process to one core")
    ap.add_argument("--no-experiments", action="store_true")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    t = time.perf_counter()
    warm = sim.experiment("skew", policies="cog", requests=1000, objects=10)
    sim.run_experiment(warm)  # loads the compiled kernel from the cache (or compiles it)
    print(f"kernel ready (cache load or compile) in {time.perf_counter() - t:.2f} s")
    print(f"\n{args.workload}: {args.requests:,} requests, median of {args.repeats}, "
          f"cores allowed {sorted(os.sched_getaffinity(0))}")
    print(f"{'policy':22s} {'python loop req/s':>18s} {'fast path req/s':>16s} {'ratio':>8s}")
    for label, ref, fast in side_by_side(args.workload, args.requests, args.repeats):
        print(f"{label:22s} {ref:18,.0f} {fast:16,.0f} {fast / ref:7.0f}x")
    if not args.no_experiments:
        print("\nthe four seed experiments at their defaults (1,000,000 accesses each):")
        total = 0.0
        for w, wall, slowest in experiments():
            total += wall
            print(f"  {w:9s} {wall:6.2f} s  (slowest policy {slowest:,.0f} req/s)")
        print(f"  total     {total:6.2f} s")


if __name__ == "__main__":
    main()

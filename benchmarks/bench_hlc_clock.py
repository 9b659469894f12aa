"""Benchmark: the cost of an HLC timestamp against reading the clock it wraps, in one run.

Peer: ``time.time_ns() // 1000`` (what a log line without HLC would record).  Ours:
``HLC.now()`` (local/send event) and ``HLC.update()`` (receive event), both thread-safe with
a lock.  Prints ns per call (median of repeats) and the ratio to the peer.  Also times
aligning a synthetic 5-node trace (events per second).

Run: .venv/bin/python benchmarks/bench_hlc_clock.py [--calls 200000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from replicalab.hlc.align import align
from replicalab.hlc.clock import HLC, Timestamp
from replicalab.hlc.synth import SynthConfig, generate, spread_skews


def _ns_per_call(fn: object, calls: int) -> float:
    f = fn  # local name: the loop below is the measured work
    t = time.perf_counter_ns()
    for _ in range(calls):
        f()  # type: ignore[operator]
    return (time.perf_counter_ns() - t) / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    clock = HLC()
    remote = Timestamp(time.time_ns() // 1000, 3)
    rows: dict[str, list[float]] = {"peer time_ns()//1000": [], "HLC.now()": [],
                                    "HLC.update()": []}
    for _ in range(args.repeats):
        rows["peer time_ns()//1000"].append(
            _ns_per_call(lambda: time.time_ns() // 1000, args.calls))
        rows["HLC.now()"].append(_ns_per_call(clock.now, args.calls))
        rows["HLC.update()"].append(_ns_per_call(lambda: clock.update(remote), args.calls))
    peer = statistics.median(rows["peer time_ns()//1000"])
    for name, values in rows.items():
        med = statistics.median(values)
        print(f"{name:22s} {med:8.1f} ns/call   ratio to peer {med / peer:5.2f}x")
    trace = generate(SynthConfig(spread_skews(5, 50, 1), (3, 10), 0.4, 0.05, 20_000, 1))
    events = sum(len(v) for v in trace.logs.values())
    walls = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        align(trace.logs)
        walls.append(time.perf_counter() - t)
    wall = statistics.median(walls)
    print(f"align 5 logs, {events} events: {wall * 1000:.1f} ms ({events / wall:,.0f} events/s)")


if __name__ == "__main__":
    main()

"""Benchmark: the LAN Multi-Paxos model (seed 002 part 2), each against a naive peer in the
same run.

1. The closed form over 20 loads x 5 cluster sizes (target < 1 s) against the seed's way of
   getting its quorum term: a plain-Python Monte Carlo of the (q-1)-th fastest reply
   (``random.gauss``, sort, 100,000 rounds per size) plugged into the same formula.
2. ``simulate_queue`` at 1,000,000 rounds (target < 10 s) against
   ``simulate_queue_reference``, the same simulation as a plain-Python event loop, on fewer
   rounds and scaled linearly; both first run the same 20,000 rounds to show they agree.

Run: .venv/bin/python benchmarks/bench_models_lan.py [--rounds 1000000] [--n 5] [--load 0.8]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from replicalab.models import paxos_lan as lan
from replicalab.models import paxos_lan_queue as lanq

SIZES = (3, 5, 7, 9, 11)


def closed_form(repeats: int) -> float:
    """Return the median wall time (s) of the seed's closed form over 20 loads x 5 sizes."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for n in SIZES:
            p = lan.PaxosLanParams(n=n)
            top = lan.max_throughput_rps(p)
            lan.curve(p, [top * (i + 1) / 21 for i in range(20)])
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def naive_closed_form(draws: int, seed: int) -> float:
    """Return the wall time (s) of the same curves with the quorum term by plain-Python
    Monte Carlo, as the seed computed it."""
    rnd = random.Random(seed)
    t = time.perf_counter()
    for n in SIZES:
        p = lan.PaxosLanParams(n=n)
        rd = lan.reply_rtt(p)
        total = 0.0
        for _ in range(draws):
            replies = sorted(rnd.gauss(rd.mean_ms, rd.sd_ms) for _ in range(p.contacted))
            total += replies[p.needed - 1]
        quorum_ms = total / draws + p.mu_md_ms + p.mu_ms_ms
        top = lan.max_throughput_rps(p)
        for i in range(20):
            x = top * (i + 1) / 21
            p.mu_md_ms + p.mu_ms_ms + quorum_ms + lan.queue_wait_ms(p, x) + p.client_ms
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1_000_000)
    ap.add_argument("--peer-rounds", type=int, default=50_000)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--load", type=float, default=0.8, help="fraction of max throughput")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    ours = closed_form(5)
    peer = naive_closed_form(100_000, a.seed)
    print(f"closed form, 20 loads x {len(SIZES)} sizes: {ours * 1e3:8.2f} ms   "
          f"naive Monte Carlo peer: {peer * 1e3:9.1f} ms   ratio {peer / ours:6.0f}x   "
          f"(target < 1 s: {'met' if ours < 1 else 'MISSED'})")

    p = lan.PaxosLanParams(n=a.n)
    load = a.load * lan.max_throughput_rps(p)
    check_fast = lanq.simulate_queue(p, load, 20_000, a.seed)
    check_slow = lanq.simulate_queue_reference(p, load, 20_000, a.seed)
    same = check_fast.latency_ms == check_slow.latency_ms and check_fast.p99_ms == \
        check_slow.p99_ms
    print(f"queue sim N={a.n} at {a.load:.0%} of max ({load:,.0f} rounds/s), 20,000 rounds: "
          f"vectorized mean {check_fast.latency_ms:.4f} ms, loop {check_slow.latency_ms:.4f} "
          f"ms ({'identical' if same else 'DIFFERENT'})")

    t = time.perf_counter()
    big = lanq.simulate_queue(p, load, a.rounds, a.seed)
    ours_s = time.perf_counter() - t
    t = time.perf_counter()
    lanq.simulate_queue_reference(p, load, a.peer_rounds, a.seed)
    peer_s = (time.perf_counter() - t) * a.rounds / a.peer_rounds
    print(f"queue sim, {a.rounds:,} rounds: {ours_s:6.2f} s ({big.extra['passes']:.0f} passes, "
          f"mean {big.latency_ms:.4f} ms, p99 {big.p99_ms:.4f} ms)   plain loop "
          f"(scaled from {a.peer_rounds:,}): {peer_s:6.1f} s   ratio {peer_s / ours_s:5.1f}x   "
          f"(target < 10 s: {'met' if ours_s < 10 else 'MISSED'})")


if __name__ == "__main__":
    main()

"""Benchmark: the staleness probe on sim://simpledb, against a SimPy peer in the same run.

Reports simulated client operations per wall-clock second and simulated seconds per wall
second for replicalab's virtual runtime, the same figures for a SimPy implementation of the
same model (SimPy is the standard Python discrete-event library), and their ratio. Then
times the full single-thread study of seed 003 §2.1.1 (26,500 writes, 3,975,000 reads
issued at 50/s) end to end: simulation, checkers, Parquet history, results.

Run: .venv/bin/python benchmarks/bench_sim_probe.py [--repeats 3] [--hours 2] [--no-full]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from replicalab.history import History, encode_value
from replicalab.stores import open_store
from replicalab.workloads import staleness
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.runner import ProbeSpec, run_probe

MS = 1_000_000
KEY = staleness.KEY


def ours(hours: float, seed: int) -> tuple[int, float, float]:
    """Return (ops, wall s, fresh fraction in [0,450) ms) for replicalab's probe."""
    store = open_store("sim://simpledb", seed)
    h = History()
    opts = ProbeOptions(duration_s=hours * 3600, seed=seed)
    cfg = staleness.StalenessConfig()
    t = time.perf_counter()
    store.runtime.run(staleness.generate(store, h, opts, cfg, Recorder(h, store.runtime)))
    wall = time.perf_counter() - t
    r = staleness.check(h, "sim://simpledb", opts, cfg)
    return len(h), wall, r["fresh_by_range"][0]["p"]


def simpy_peer(hours: float, seed: int) -> tuple[int, float, float]:
    """Return (ops, wall s, fresh fraction) for the same model written on SimPy."""
    import simpy

    env = simpy.Environment()
    rng = np.random.default_rng(seed)
    h = History()
    replicas: list[dict[str, str]] = [{}, {}, {}]
    pending: dict[int, tuple[str, object]] = {}
    free_at = [0.0, 0.0, 0.0]

    def link() -> float:
        return max(11.0 + rng.normal() * 1.0, 1.1)

    def flush(i: int, value: str, token: object):
        yield env.timeout(500.0)
        if pending.get(i, (None, None))[1] is token:
            replicas[i][KEY] = value
            del pending[i]

    def receive(i: int, value: str):
        yield env.timeout(max(0.2135 + rng.normal() * 0.0238, 0.02))
        if i in pending:
            replicas[i][KEY] = pending.pop(i)[0]
        token = object()
        pending[i] = (value, token)
        env.process(flush(i, value, token))

    def serve(i: int):
        start = max(env.now, free_at[i])
        free_at[i] = start + 0.05
        yield env.timeout(free_at[i] - env.now)

    def client():
        seq = 0
        stop = hours * 3600_000.0
        t = env.now
        while t < stop:
            seq += 1
            value = encode_value(0, seq, int(env.now * MS))
            op = h.invoke(0, "write", (KEY,), (value,), "none", int(env.now * MS))
            yield env.timeout(link())
            yield from serve(0)
            replicas[0][KEY] = value
            for i in (1, 2):
                env.process(receive(i, value))
            yield env.timeout(max(88.0 + rng.normal() * 8.0, 8.8) + link())
            h.ok(op, int(env.now * MS), node="p")
            nxt = env.now
            while nxt < t + 3000.0 and env.now < stop:
                if nxt > env.now:
                    yield env.timeout(nxt - env.now)
                op = h.invoke(0, "read", (KEY,), (None,), "eventual", int(env.now * MS))
                i = int(rng.integers(3))
                yield env.timeout(link())
                yield from serve(i)
                seen = replicas[i].get(KEY)
                yield env.timeout(link())
                h.ok(op, int(env.now * MS), (seen,), str(i))
                nxt += 20.0
            t += 3000.0
            if t > env.now:
                yield env.timeout(t - env.now)

    env.process(client())
    t0 = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t0
    opts = ProbeOptions(duration_s=hours * 3600, seed=seed)
    r = staleness.check(h, "simpy-peer", opts, staleness.StalenessConfig())
    return len(h), wall, r["fresh_by_range"][0]["p"]


def full_study() -> tuple[float, int]:
    """Return (wall s, ops) of the full seed 003 §2.1.1 study through run_probe."""
    spec = ProbeSpec(store="sim://simpledb", workload="staleness",
                     options=ProbeOptions(duration_s=26_500 * 3.0, seed=1))
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run = run_probe(spec, Path(tmp))
        wall = time.perf_counter() - t
    return wall, run.results["ops"]["reads"] + run.results["ops"]["writes"]


def main() -> None:
    """Print the benchmark table and the ratio to the peer (medians of the repeats)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--no-full", action="store_true")
    args = ap.parse_args()
    rows = {"replicalab": [], "simpy": []}
    for i in range(args.repeats):
        for name, fn in (("replicalab", ours), ("simpy", simpy_peer)):
            ops, wall, fresh = fn(args.hours, i + 1)
            rows[name].append((ops / wall, args.hours * 3600 / wall, fresh))
    print(f"staleness probe, sim://simpledb, {args.hours:g} simulated h, "
          f"median of {args.repeats} runs")
    print(f"{'engine':<12}{'ops/s':>12}{'sim s / wall s':>16}{'fresh [0,450)':>15}")
    med = {}
    for name, vals in rows.items():
        med[name] = statistics.median(v[0] for v in vals)
        speed = statistics.median(v[1] for v in vals)
        fresh = statistics.median(v[2] for v in vals)
        print(f"{name:<12}{med[name]:>12,.0f}{speed:>16,.0f}{100 * fresh:>14.2f}%")
    print(f"ratio replicalab / simpy ops/s: {med['replicalab'] / med['simpy']:.2f}x")
    print(f"target >= 100,000 ops/s: {'met' if med['replicalab'] >= 100_000 else 'NOT met'}")
    if not args.no_full:
        wall, ops = full_study()
        print(f"full seed 003 §2.1.1 study ({ops:,} ops) end to end: {wall:.1f} s "
              f"(target < 60 s: {'met' if wall < 60 else 'NOT met'})")


if __name__ == "__main__":
    main()

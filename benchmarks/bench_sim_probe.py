"""Benchmark: the staleness probe on sim://simpledb, against a SimPy peer in the same run.

Reports simulated client operations per wall-clock second and simulated seconds per wall
second for replicalab's virtual runtime, the same figures for a SimPy implementation of the
same model (SimPy is the standard Python discrete-event library), and their ratio. The peer
implements ``sim/simpledb.py`` as calibrated to seed 000 (client CPU, per-item commit
batches, slow calls) with the same wake-ups per call and the same buffered random stream
drawn in the same order, so with the same seed both compute the same history: equal op
counts and fresh fractions show they did the same work. Then
times the full single-thread study of seed 003 §2.1.1 (26,500 writes, 3,975,000 reads
issued at 50/s) end to end: simulation, checkers, Parquet history, results.

Run: .venv/bin/python benchmarks/bench_sim_probe.py [--repeats 3] [--hours 2] [--no-full]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from replicalab.history import History, encode_value
from replicalab.regions import region_set
from replicalab.sim.random import Stream
from replicalab.sim.simpledb import SimpleDBParams
from replicalab.stores import open_store
from replicalab.workloads import staleness
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.runner import ProbeSpec, run_probe

MS = 1_000_000
KEY = staleness.KEY


def ours(hours: float, seed: int) -> tuple[History, float, float]:
    """Return (history, wall s, fresh fraction in [0,450) ms) for replicalab's probe."""
    store = open_store("sim://simpledb", seed)
    h = History()
    opts = ProbeOptions(duration_s=hours * 3600, seed=seed)
    cfg = staleness.StalenessConfig()
    t = time.perf_counter()
    store.runtime.run(staleness.generate(store, h, opts, cfg, Recorder(h, store.runtime)))
    wall = time.perf_counter() - t
    r = staleness.check(h, "sim://simpledb", opts, cfg)
    return h, wall, r["fresh_by_range"][0]["p"]


def simpy_peer(hours: float, seed: int) -> tuple[History, float, float]:
    """Return (history, wall s, fresh fraction) for the same model written on SimPy.

    The model of ``sim/simpledb.py`` with its defaults, in integer ns like ours: the client
    machine's single core (FIFO reservation, its wait folded into the request's trip), the
    node's FIFO service queue, per-item commit batches at every replica (a read waits for
    the batch in progress), buffered secondaries flushed by the next write or after
    ``flush_ms``, and the 1 % slow calls. It draws from the same kind of buffered stream in
    the same order, so with the same seed both engines compute the same history.
    """
    import simpy

    p = SimpleDBParams()
    env = simpy.Environment()
    s = Stream(np.random.default_rng(seed))
    h = History()
    replicas: list[dict[str, str]] = [{}, {}, {}]
    names = ("probe/p", "probe/s1", "probe/s2")
    free_at = [0, 0, 0]  # each node's FIFO service queue
    batch: list[list[int] | None] = [None, None, None]  # [start, end] of the item's batch
    pending: dict[int, tuple[str, object]] = {}  # secondary -> (buffered value, its token)
    cpu_free = [0]  # the client machine's single core
    hold = int(p.item_hold_share * p.commit_ms * MS)
    cpu = int(p.client_cpu_ms * MS)
    svc = int(p.service_ms * MS)
    flush_ns = int(p.flush_ms * MS)
    c_mean, c_sd = int(p.client_rtt_ms / 2 * MS), int(p.client_sd_ms / math.sqrt(2) * MS)
    w_mean, w_sd = int(p.commit_ms * MS), int(p.commit_sd_ms * MS)
    lan_ms, lan_sd_ms = region_set("lan").one_way_ms("local", "local")
    l_mean, l_sd = int(lan_ms * MS), int(lan_sd_ms * MS)

    def draw(mean: int, sd: int) -> int:  # normal, floored at a tenth of the mean
        d = mean + int(sd * s.normal())
        return d if d > mean // 10 else mean // 10

    def hiccup(prob: float, mean_ms: float) -> int:
        return int(mean_ms * MS * s.exponential()) if s.uniform() < prob else 0

    def admit(i: int) -> int:  # queue one request's service at node i; ns until done
        now = env.now
        start = free_at[i] if free_at[i] > now else now
        free_at[i] = start + svc
        return free_at[i] - now

    def cpu_wait() -> int:
        now = env.now
        start = cpu_free[0] if cpu_free[0] > now else now
        cpu_free[0] = start + cpu
        return cpu_free[0] - now

    def commit(i: int) -> int:  # start committing the item at node i; ns until it starts
        now = env.now
        b = batch[i]
        if b is None:
            batch[i] = [now, now + hold]
        elif now >= b[1]:
            b[0], b[1] = now, now + hold
        elif now >= b[0]:
            b[0], b[1] = b[1], b[1] + hold
            return b[0] - now
        else:
            return b[0] - now
        return 0

    def busy(i: int) -> int:  # ns until the item's commit in progress at node i ends
        now = env.now
        b = batch[i]
        if b is None or now >= b[1]:
            return 0
        return (b[1] if now >= b[0] else b[0]) - now

    def apply_pending(i: int) -> None:
        value, _ = pending.pop(i)
        replicas[i][KEY] = value
        commit(i)

    def flush(i: int, token: object):
        yield env.timeout(flush_ns)
        if i in pending and pending[i][1] is token:
            apply_pending(i)

    def receive(i: int, value: str, delay: int):
        yield env.timeout(delay)
        yield env.timeout(admit(i))
        if i in pending:
            apply_pending(i)
        token = object()
        pending[i] = (value, token)
        env.process(flush(i, token))

    def write(value: str):
        yield env.timeout(cpu_wait() + draw(c_mean, c_sd))
        yield env.timeout(admit(0))
        wait = draw(w_mean, w_sd) + hiccup(p.write_hiccup_p, p.write_hiccup_ms)
        replicas[0][KEY] = value
        for i in (1, 2):
            env.process(receive(i, value, draw(l_mean, l_sd)))
        wait += commit(0)
        yield env.timeout(wait + draw(c_mean, c_sd))

    def read():
        i = int(s.uniform() * 3)
        yield env.timeout(cpu_wait() + draw(c_mean, c_sd))
        yield env.timeout(admit(i))
        b = busy(i)
        if b:
            yield env.timeout(b)
        seen = replicas[i].get(KEY)
        yield env.timeout(hiccup(p.read_hiccup_p, p.read_hiccup_ms) + draw(c_mean, c_sd))
        return seen, names[i]

    def next_slot(slot: int, period: int) -> int:
        # the probe's schedule (workloads/slots.py): a client that outlasts its slot
        # skips the slots it missed instead of catching them up
        nxt = slot + period
        if env.now > nxt:
            nxt += (env.now - nxt) // period * period
        return nxt

    def client():
        stop = int(hours * 3600 * 1e9)
        gap = int(1e9 / 50)
        interval = 3 * 10**9
        seq = 0
        t = env.now
        while t < stop:
            seq += 1
            value = encode_value(0, seq, env.now)
            op = h.invoke(0, "write", (KEY,), (value,), "none", env.now)
            yield from write(value)
            h.ok(op, env.now, node=names[0])
            until = t + interval
            nxt = env.now
            while not (nxt >= until or env.now >= until or env.now >= stop):
                if nxt > env.now:
                    yield env.timeout(nxt - env.now)
                op = h.invoke(0, "read", (KEY,), (None,), "eventual", env.now)
                seen, node = yield from read()
                h.ok(op, env.now, (seen,), node)
                nxt = next_slot(nxt, gap)
            t = next_slot(t, interval)
            if t > env.now:
                yield env.timeout(t - env.now)

    env.process(client())
    t0 = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t0
    opts = ProbeOptions(duration_s=hours * 3600, seed=seed)
    r = staleness.check(h, "simpy-peer", opts, staleness.StalenessConfig())
    return h, wall, r["fresh_by_range"][0]["p"]


def history_digest(h: History) -> str:
    """Return a digest of every row of ``h`` (times, values, serving nodes): equal digests
    mean both engines computed the same history."""
    d = hashlib.sha256()
    for col in (h.process, h.type, h.f, h.invoke_ns, h.complete_ns):
        d.update(bytes(col))
    d.update(repr((h.keys, h.values, h.node)).encode())
    return d.hexdigest()


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
        seed = i + 1
        (h_ours, wall_ours, fresh_ours), (h_peer, wall_peer, fresh_peer) = (
            ours(args.hours, seed), simpy_peer(args.hours, seed))
        if (len(h_ours), fresh_ours) != (len(h_peer), fresh_peer) or (
                history_digest(h_ours) != history_digest(h_peer)):
            sys.exit(f"seed {seed}: the engines computed different histories (replicalab "
                     f"{len(h_ours):,} ops, {100 * fresh_ours:.2f} % fresh; SimPy "
                     f"{len(h_peer):,} ops, {100 * fresh_peer:.2f} % fresh): no ratio, the "
                     "comparison is not like for like")
        rows["replicalab"].append((len(h_ours) / wall_ours, args.hours * 3600 / wall_ours,
                                   fresh_ours))
        rows["simpy"].append((len(h_peer) / wall_peer, args.hours * 3600 / wall_peer,
                              fresh_peer))
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

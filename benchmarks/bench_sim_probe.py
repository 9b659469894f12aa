"""Benchmark: the staleness probe on the simulated stores, against SimPy peers in the same run.

Reports simulated client operations per wall-clock second and simulated seconds per wall
second for replicalab's virtual runtime on ``sim://simpledb``, ``sim://quorum`` and
``sim://primary`` (their defaults), the same figures for a SimPy implementation of each
model (SimPy is the standard Python discrete-event library), and their ratio. Each peer
implements its scheme as ``sim/`` does (``simpledb`` as calibrated to seed 000: client CPU,
per-item commit batches, buffered secondaries, slow calls; ``quorum``: N/R/W with
last-writer-wins stamps and per-replica apply delays; ``primary``: asynchronous forwarding
over ordered links, every node's FIFO queue) with the same wake-ups, the same probe
schedule (``workloads/slots.py``) and the same random stream implementation drawn in the
same order (``sim.random.new_stream``: the native one when it is built, as replicalab's),
so with the same seed both compute the same history. The benchmark checks that they did
(equal op counts, equal fresh fractions, equal digests of every row) and refuses to
print a ratio otherwise. Then it times the full single-thread study of seed 003 §2.1.1
(26,500 writes, issued at 50 reads/s) end to end: simulation, checkers, Parquet history,
results.

With ``--scaling``, it also times a batch as a user runs it (the command, start-up
included): ``replicalab probe --duration 5m --repeats 20`` on 1 and 2 local workers and on
a local Ray instance (which includes starting it), and checks that all three give the same
batch.json.

Run: .venv/bin/python benchmarks/bench_sim_probe.py [--repeats 3] [--hours 2] [--no-full]
     [--schemes simpledb,quorum,primary] [--scaling] [--scaling-repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.history import History, encode_value
from replicalab.regions import LAN_RTT_MS, LAN_SD_MS, region_set
from replicalab.sim.primary import PrimaryParams
from replicalab.sim.quorum import QuorumParams
from replicalab.sim.random import new_stream
from replicalab.sim.simpledb import SimpleDBParams
from replicalab.stores import open_store
from replicalab.workloads import staleness
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.runner import ProbeSpec, run_probe

MS = 1_000_000
KEY = staleness.KEY
URLS = {"simpledb": "sim://simpledb", "quorum": "sim://quorum", "primary": "sim://primary"}


def ours(scheme: str, hours: float, seed: int) -> tuple[History, float]:
    """Return (history, wall s) of replicalab's staleness probe on ``scheme``."""
    store = open_store(URLS[scheme], seed)
    h = History()
    opts = ProbeOptions(duration_s=hours * 3600, seed=seed)
    cfg = staleness.StalenessConfig()
    t = time.perf_counter()
    store.runtime.run(staleness.generate(store, h, opts, cfg, Recorder(h, store.runtime)))
    return h, time.perf_counter() - t


class _Peer:
    """What every SimPy peer shares: the environment, the stream, delays drawn as
    ``sim.network.Delay.draw`` does, and FIFO queues as ``Network.process``."""

    def __init__(self, seed: int) -> None:
        import simpy

        self.env = simpy.Environment()
        # the stream replicalab's simulated stores draw from (``sim.native.stream_for``):
        # the native one when it is built, so neither side draws faster than the other
        self.s = new_stream(np.random.default_rng(seed))

    @staticmethod
    def delay_ms(mean_ms: float, sd_ms: float) -> tuple[int, int, int]:
        """Return (mean, sd, floor) in ns as ``Delay.ms`` computes them."""
        return int(mean_ms * MS), int(sd_ms * MS), int(mean_ms * MS / 10)

    def draw(self, d: tuple[int, int, int]) -> int:
        mean, sd, floor = d
        x = mean + int(sd * self.s.normal()) if sd else mean
        return x if x > floor else floor

    def admit(self, free_at: list[int], i: int, service_ns: int) -> int:
        """Queue ``service_ns`` at node ``i``; return ns until it is done."""
        now = self.env.now
        start = free_at[i] if free_at[i] > now else now
        free_at[i] = start + service_ns
        return free_at[i] - now

    def later(self, ns: int, fn: Callable[[], None]) -> None:
        """Call ``fn()`` in ``ns`` (a timeout event with a callback, SimPy's timer)."""
        self.env.timeout(ns).callbacks.append(lambda _event: fn())


Step = Generator[Any, Any, Any]


def _simpledb_model(peer: _Peer) -> tuple[Callable[[str], Step], Callable[[], Step]]:
    """``sim/simpledb.py`` with its defaults: the client machine's single core (FIFO
    reservation, its wait folded into the request's trip), the node's FIFO service queue,
    per-item commit batches at every replica (a read waits for the batch in progress),
    buffered secondaries flushed by the next write or after ``flush_ms``, 1 % slow calls."""
    env, s = peer.env, peer.s
    p = SimpleDBParams()
    replicas: list[dict[str, str]] = [{}, {}, {}]
    names = ("probe/p", "probe/s1", "probe/s2")
    free_at = [0, 0, 0]
    batch: list[list[int] | None] = [None, None, None]  # [start, end] of the item's batch
    pending: dict[int, tuple[str, object]] = {}  # secondary -> (buffered value, its token)
    cpu_free = [0]
    hold = int(p.item_hold_share * p.commit_ms * MS)
    cpu = int(p.client_cpu_ms * MS)
    svc = int(p.service_ms * MS)
    flush_ns = int(p.flush_ms * MS)
    client = peer.delay_ms(p.client_rtt_ms / 2, p.client_sd_ms / math.sqrt(2))
    commit_d = peer.delay_ms(p.commit_ms, p.commit_sd_ms)
    lan = peer.delay_ms(*region_set("lan").one_way_ms("local", "local"))

    def hiccup(prob: float, mean_ms: float) -> int:
        return int(mean_ms * MS * s.exponential()) if s.uniform() < prob else 0

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

    def flush(i: int, token: object) -> None:
        if i in pending and pending[i][1] is token:
            apply_pending(i)

    def receive(i: int, value: str) -> None:
        if i in pending:
            apply_pending(i)
        token = object()
        pending[i] = (value, token)
        peer.later(flush_ns, lambda: flush(i, token))

    def write(value: str) -> Step:
        yield env.timeout(cpu_wait() + peer.draw(client))
        yield env.timeout(peer.admit(free_at, 0, svc))
        wait = peer.draw(commit_d) + hiccup(p.write_hiccup_p, p.write_hiccup_ms)
        replicas[0][KEY] = value
        for i in (1, 2):
            peer.later(peer.draw(lan),
                       lambda i=i: peer.later(peer.admit(free_at, i, svc),
                                              lambda: receive(i, value)))
        wait += commit(0)
        yield env.timeout(wait + peer.draw(client))
        return names[0]

    def read() -> Step:
        i = int(s.uniform() * 3)
        yield env.timeout(cpu_wait() + peer.draw(client))
        yield env.timeout(peer.admit(free_at, i, svc))
        b = busy(i)
        if b:
            yield env.timeout(b)
        seen = replicas[i].get(KEY)
        yield env.timeout(hiccup(p.read_hiccup_p, p.read_hiccup_ms) + peer.draw(client))
        return seen, names[i]

    return write, read


def _quorum_model(peer: _Peer) -> tuple[Callable[[str], Step], Callable[[], Step]]:
    """``sim/quorum.py`` with its defaults (N=3, R=1, W=1, one region): the client sends a
    write to every replica, which applies it after an exponential delay, and returns after
    W acks; a read asks every replica and returns the newest of the first R replies."""
    env, s = peer.env, peer.s
    p = QuorumParams()
    replicas: list[dict[str, tuple[tuple[int, int], str]]] = [{} for _ in range(p.n)]
    names = [f"r{i}" for i in range(p.n)]
    client = peer.delay_ms(LAN_RTT_MS / 2, LAN_SD_MS / math.sqrt(2))
    apply_ns = int(p.apply_ms * MS)
    clock = [0]
    zero = ((-1, -1), None)

    def apply(i: int, stamp: tuple[int, int], value: str) -> None:
        cur = replicas[i].get(KEY)
        if cur is None or cur[0] < stamp:
            replicas[i][KEY] = (stamp, value)

    def write(value: str) -> Step:
        clock[0] += 1
        stamp = (env.now, clock[0])
        acks = []
        for i in range(p.n):
            arrive = peer.draw(client) + int(apply_ns * s.exponential())
            peer.later(arrive, lambda i=i: apply(i, stamp, value))
            acks.append((arrive + peer.draw(client), names[i]))
        acks.sort()
        yield env.timeout(acks[p.w - 1][0])
        return ",".join(name for _, name in acks[: p.w])

    def read() -> Step:
        seen: dict[int, Any] = {}
        replies = []
        for i in range(p.n):
            arrive = peer.draw(client)
            peer.later(arrive, lambda i=i: seen.__setitem__(i, replicas[i].get(KEY) or zero))
            replies.append((arrive + peer.draw(client), i))
        replies.sort(key=lambda r: r[0])
        yield env.timeout(replies[p.r - 1][0])
        chosen = [i for _, i in replies[: p.r]]
        newest = max((seen[i] for i in chosen), key=lambda c: c[0])
        return newest[1], ",".join(names[i] for i in chosen)

    return write, read


def _primary_model(peer: _Peer) -> tuple[Callable[[str], Step], Callable[[], Step]]:
    """``sim/primary.py`` with its defaults (asynchronous, three nodes in one region): the
    primary applies a write at once and forwards it over an ordered link per replica
    (through the replica's queue); an eventual read goes to one of the equally near
    nodes at random and through its queue."""
    env, s = peer.env, peer.s
    p = PrimaryParams()
    n = 3
    state: list[dict[str, str]] = [{} for _ in range(n)]
    names = [f"n{i}" for i in range(n)]
    free_at = [0] * n
    last_arrival = [0] * n  # the ordered link primary -> node i
    client = peer.delay_ms(p.client_rtt_ms / 2, p.client_sd_ms / math.sqrt(2))
    lan = peer.delay_ms(*region_set("lan").one_way_ms("local", "local"))
    commit_d = peer.delay_ms(p.commit_ms, p.commit_ms / 10)
    svc = int(0.05 * MS)

    def forward(i: int, value: str) -> None:
        now = env.now
        delay = peer.draw(lan)
        if now + delay < last_arrival[i]:
            delay = last_arrival[i] - now
        last_arrival[i] = now + delay
        peer.later(delay, lambda: peer.later(peer.admit(free_at, i, svc),
                                             lambda: state[i].__setitem__(KEY, value)))

    def write(value: str) -> Step:
        yield env.timeout(peer.draw(client))
        yield env.timeout(peer.admit(free_at, 0, svc))
        state[0][KEY] = value
        wait = peer.draw(commit_d)
        for i in range(1, n):
            forward(i, value)
        yield env.timeout(wait)
        yield env.timeout(peer.draw(client))
        return names[0]

    def read() -> Step:
        i = int(s.uniform() * n)
        yield env.timeout(peer.draw(client))
        yield env.timeout(peer.admit(free_at, i, svc))
        seen = state[i].get(KEY)
        yield env.timeout(peer.draw(client))
        return seen, names[i]

    return write, read


MODELS = {"simpledb": _simpledb_model, "quorum": _quorum_model, "primary": _primary_model}


def simpy_peer(scheme: str, hours: float, seed: int) -> tuple[History, float]:
    """Return (history, wall s) of the staleness probe on ``scheme``'s SimPy peer: one
    client writing every 3 s and reading at 50/s between writes, on the probe's slot grid
    (a client that outlasts its slot skips the slots it missed, as ``workloads/slots.py``)."""
    peer = _Peer(seed)
    env = peer.env
    write, read = MODELS[scheme](peer)
    h = History()

    def next_slot(slot: int, period: int) -> int:
        nxt = slot + period
        if env.now > nxt:
            nxt += (env.now - nxt) // period * period
        return nxt

    def client() -> Step:
        stop = int(hours * 3600 * 1e9)
        gap = int(1e9 / 50)
        interval = 3 * 10**9
        seq = 0
        t = env.now
        while t < stop:
            seq += 1
            value = encode_value(0, seq, env.now)
            op = h.invoke(0, "write", (KEY,), (value,), "none", env.now)
            node = yield from write(value)
            h.ok(op, env.now, node=node)
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
    return h, time.perf_counter() - t0


def fresh_fraction(h: History, seed: int, hours: float) -> float:
    """Return the fraction of eventual reads fresh in [0, 450) ms after their write."""
    opts = ProbeOptions(duration_s=hours * 3600, seed=seed)
    r = staleness.check(h, "bench", opts, staleness.StalenessConfig())
    return float(r["fresh_by_range"][0]["p"] or 0.0)


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


def batch_wall_s(where: list[str], out: Path) -> tuple[float, bytes]:
    """Return (wall s, batch.json) of ``replicalab probe --duration 5m --repeats 20`` run
    as a command with ``where`` (--workers N or --ray local) into ``out``."""
    cmd = [sys.executable, "-m", "replicalab.cli.main", "probe", "--store", "sim://simpledb",
           "--duration", "5m", "--repeats", "20", *where, "--out", str(out), "--json"]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    batch = Path(json.loads(done.stdout)["batch_dir"])
    return wall, (batch / "batch.json").read_bytes()


def scaling(repeats: int) -> None:
    """Print the batch's wall time on 1 and 2 workers and on local Ray (medians of
    ``repeats``, the configurations alternating) and the ratio to one worker."""
    configs = {"1 worker": ["--workers", "1"], "2 workers": ["--workers", "2"],
               "Ray (local, started by the command)": ["--ray", "local"]}
    walls: dict[str, list[float]] = {k: [] for k in configs}
    outputs: set[bytes] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for name, where in configs.items():
                wall, batch = batch_wall_s(where, Path(tmp) / f"{i}")
                walls[name].append(wall)
                outputs.add(batch)
    if len(outputs) != 1:
        sys.exit("the batch gave different batch.json on 1 worker, 2 workers and Ray")
    one = statistics.median(walls["1 worker"])
    print(f"probe --duration 5m --repeats 20 (sim://simpledb), wall s with start-up, median "
          f"of {repeats}; the same batch.json everywhere")
    for name, values in walls.items():
        med = statistics.median(values)
        print(f"  {name:<38}{med:>7.1f} s  ({med / one:.2f} of 1 worker; runs "
              + ", ".join(f"{v:.1f}" for v in values) + ")")


def compare(scheme: str, hours: float, repeats: int) -> dict[str, float]:
    """Run both engines ``repeats`` times (seeds 1..repeats, alternating which goes first)
    and return the medians; exit without a ratio if any pair of histories differs."""
    rows: dict[str, list[tuple[float, float]]] = {"replicalab": [], "simpy": []}
    fresh = []
    for i in range(repeats):
        seed = i + 1
        runs = {}
        order = ("replicalab", "simpy") if i % 2 == 0 else ("simpy", "replicalab")
        for name in order:
            runs[name] = (ours if name == "replicalab" else simpy_peer)(scheme, hours, seed)
        (h_ours, wall_ours), (h_peer, wall_peer) = runs["replicalab"], runs["simpy"]
        f_ours, f_peer = fresh_fraction(h_ours, seed, hours), fresh_fraction(h_peer, seed, hours)
        if (len(h_ours), f_ours) != (len(h_peer), f_peer) or (
                history_digest(h_ours) != history_digest(h_peer)):
            sys.exit(f"{URLS[scheme]}, seed {seed}: the engines computed different histories "
                     f"(replicalab {len(h_ours):,} ops, {100 * f_ours:.2f} % fresh; SimPy "
                     f"{len(h_peer):,} ops, {100 * f_peer:.2f} % fresh): no ratio, the "
                     "comparison is not like for like")
        fresh.append(f_ours)
        rows["replicalab"].append((len(h_ours) / wall_ours, hours * 3600 / wall_ours))
        rows["simpy"].append((len(h_peer) / wall_peer, hours * 3600 / wall_peer))
    ops_s = {k: statistics.median(v[0] for v in vals) for k, vals in rows.items()}
    sim_s = {k: statistics.median(v[1] for v in vals) for k, vals in rows.items()}
    return {"ours": ops_s["replicalab"], "peer": ops_s["simpy"], "ours_sim": sim_s["replicalab"],
            "peer_sim": sim_s["simpy"], "fresh": statistics.median(fresh),
            "ratio": ops_s["replicalab"] / ops_s["simpy"]}


def main() -> None:
    """Print the benchmark table and the ratio to the peer per scheme (medians of the
    repeats)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--schemes", default="simpledb,quorum,primary")
    ap.add_argument("--no-full", action="store_true")
    ap.add_argument("--scaling", action="store_true")
    ap.add_argument("--scaling-repeats", type=int, default=3)
    args = ap.parse_args()
    schemes = [x.strip() for x in args.schemes.split(",") if x.strip()]
    unknown = [x for x in schemes if x not in URLS]
    if unknown:
        sys.exit(f"--schemes {unknown[0]!r}: use {', '.join(URLS)}")
    print(f"staleness probe, {args.hours:g} simulated h, median of {args.repeats} runs "
          "(same histories checked)")
    print(f"{'store':<16}{'replicalab ops/s':>18}{'SimPy ops/s':>13}{'ratio':>8}"
          f"{'sim s / wall s':>18}{'fresh [0,450)':>15}")
    for scheme in schemes:
        r = compare(scheme, args.hours, args.repeats)
        print(f"{URLS[scheme]:<16}{r['ours']:>18,.0f}{r['peer']:>13,.0f}{r['ratio']:>7.2f}x"
              f"{r['ours_sim']:>9,.0f} / {r['peer_sim']:<6,.0f}{100 * r['fresh']:>13.2f}%")
    if not args.no_full:
        wall, ops = full_study()
        print(f"full seed 003 §2.1.1 study on sim://simpledb ({ops:,} ops) end to end: "
              f"{wall:.1f} s (target < 60 s: {'met' if wall < 60 else 'NOT met'})")
    if args.scaling:
        scaling(args.scaling_repeats)


if __name__ == "__main__":
    main()

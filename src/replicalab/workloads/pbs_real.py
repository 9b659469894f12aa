"""PBS against a real Cassandra cluster: its WARS legs measured from its own traffic, and its
t-visibility measured the way PBS defines it (``replicalab model pbs --against cassandra``).

Legs (``calibrate``). For each node i, a calibration keyspace ``pbs_<dc>`` has its only
replica on node i (NetworkTopologyStrategy, RF 1 in i's data centre). A write at ONE sent to
the writer's coordinator and a read at ONE sent to the reader's coordinator each make one
round trip coordinator -> node i -> coordinator over the cluster's real (delayed) links,
whatever configured delay those links have. The client's own share (to its coordinator and
back, and the coordinator's work) is the median of the same operation on the coordinator's
own node; it is subtracted, leaving per-replica round trips ``write_rt_ms[i]`` and
``read_rt_ms[i]`` (the local replica's is ~0).

Measurement (``measure``). The staleness probe with the writer pinned to the writer's
coordinator writing at CL W and a reader pinned to the reader's coordinator reading at CL R
(a new value every ``write_interval``); every read is judged against the latest write
acknowledged before it started (``checkers.freshness.since_ack``), so P(consistent) at t is
the fraction of fresh reads that started t ms after a commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import since_ack
from replicalab.cluster import base
from replicalab.cluster.state import ROOT, Cluster
from replicalab.history import load_history
from replicalab.stores import open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig

PAIRS = ((1, 1), (1, 2), (2, 1), (2, 2), (1, 3))
"""The (R, W) pairs of issue 24 for N = 3."""
T_MS = (0.0, 10.0, 50.0, 100.0)
"""Times after commit at which prediction and measurement are compared (ms)."""
WINDOW_MS = 5.0
"""A measured point at t is the fresh fraction of reads started in [t, t + window), the
window WINDOW_MS, widened by WINDOW_MS at a time (up to MAX_WINDOW_MS) until it holds
MIN_READS reads: readers waiting on a WAN round trip read in bursts."""
MAX_WINDOW_MS = 25.0
SCHEMA_TIMEOUT_S = 60.0
MIN_READS = 10


@contextlib.contextmanager
def cassandra_cluster(n: int, regions: str, root: Path = ROOT) -> Iterator[Cluster]:
    """Start an ``n``-node Cassandra cluster on ``regions`` and yield it; it is stopped on
    the way out whatever ends the block. ValueError names what cannot start."""
    name = f"pbs-cassandra-{os.getpid()}"
    c = base.up("cassandra", n, regions, name=name, root=root)
    try:
        yield c
    finally:
        with contextlib.suppress(ValueError, OSError):
            base.down(name, root)


def level(k: int, n: int) -> str:
    """Return the Cassandra consistency level that waits for ``k`` of ``n`` replicas."""
    if k == n:
        return "ALL"
    names = {1: "ONE", 2: "TWO", 3: "THREE"}
    if k not in names:
        raise ValueError(f"a quorum of {k} of {n} has no Cassandra consistency level (ONE, "
                         "TWO, THREE or ALL = N)")
    return names[k]


def _keyspace(dc: str) -> str:
    return "pbs_" + "".join(ch if ch.isalnum() else "_" for ch in dc.lower())


def _node_in(c: Cluster, region: str) -> str:
    for n in c.nodes:
        if n.region == region:
            return str(n.extra["address"])
    raise ValueError(f"region {region!r} has no node in cluster {c.name} "
                     f"({', '.join(n.region for n in c.nodes)})")


@dataclass(frozen=True)
class Calibration:
    """Per-replica round trips (ms, node order) and the client shares subtracted."""

    write_rt_ms: tuple[tuple[float, ...], ...]
    read_rt_ms: tuple[tuple[float, ...], ...]
    write_overhead_ms: float
    read_overhead_ms: float


async def _round_trips(url: str, op: str, samples: int) -> list[float]:
    store = open_store(url, 1)
    try:
        client = await store.connect()
        out = []
        for i in range(samples + 2):  # the first two warm the prepared statements up
            t0 = time.perf_counter_ns()
            if op == "write":
                await client.write({"pbs/calibrate/v": str(i)})
            else:
                await client.read(["pbs/calibrate/v"], consistent=False)
            if i >= 2:
                out.append((time.perf_counter_ns() - t0) / 1e6)
        return out
    finally:
        await store.close()


async def _calibrate(c: Cluster, writer: str, reader: str, samples: int) -> Calibration:
    w_addr, r_addr = _node_in(c, writer), _node_in(c, reader)
    setup = open_store(f"cassandra://{w_addr}:9042", 1)
    try:
        client = await setup.connect()
        for n in c.nodes:
            ks = _keyspace(n.region)
            # a schema change waits for every node to agree: not the URL's 2 s
            await client.cql(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = "
                             f"{{'class': 'NetworkTopologyStrategy', '{n.region}': 1}}",
                             timeout_s=SCHEMA_TIMEOUT_S)
            await client.cql(f"CREATE TABLE IF NOT EXISTS {ks}.elements (domain text, "
                             "item text, attribute text, value text, PRIMARY KEY "
                             "((domain, item), attribute))", timeout_s=SCHEMA_TIMEOUT_S)
    finally:
        await setup.close()
    jobs = []
    for n in c.nodes:
        ks = _keyspace(n.region)
        jobs.append(_round_trips(f"cassandra://{w_addr}:9042?keyspace={ks}&write_cl=ONE",
                                 "write", samples))
        jobs.append(_round_trips(f"cassandra://{r_addr}:9042?keyspace={ks}&eventual_cl=ONE",
                                 "read", samples))
    got = await asyncio.gather(*jobs)
    writes, reads = got[0::2], got[1::2]
    w_own = statistics.median(writes[[n.region for n in c.nodes].index(writer)])
    r_own = statistics.median(reads[[n.region for n in c.nodes].index(reader)])
    return Calibration(tuple(tuple(round(max(x - w_own, 0.0), 4) for x in s) for s in writes),
                       tuple(tuple(round(max(x - r_own, 0.0), 4) for x in s) for s in reads),
                       round(w_own, 4), round(r_own, 4))


def calibrate(c: Cluster, writer: str, reader: str, samples: int = 30) -> Calibration:
    """Return per-replica round trips measured on cluster ``c`` from the writer's and the
    reader's coordinators (see the module doc)."""
    return asyncio.run(_calibrate(c, writer, reader, samples))


@dataclass(frozen=True)
class Measured:
    """P(consistent) measured on the cluster for one (R, W)."""

    r: int
    w: int
    t_mean_ms: tuple[float, ...]  # per 1 ms bucket with reads
    p: tuple[float, ...]
    total: tuple[int, ...]
    run_dir: str
    reads: int
    writes: int

    def at(self, t_ms: float) -> tuple[float | None, float, int]:
        """Return (fresh fraction, mean t, reads) of reads started in [t, t + window) (see
        WINDOW_MS); (None, t, 0) when no read started there."""
        t = np.asarray(self.t_mean_ms)
        window = WINDOW_MS
        while True:
            sel = (t >= t_ms) & (t < t_ms + window)
            total = np.asarray(self.total)[sel]
            if total.sum() >= MIN_READS or window >= MAX_WINDOW_MS:
                break
            window += WINDOW_MS
        if total.sum() == 0:
            return None, t_ms, 0
        fresh = (np.asarray(self.p)[sel] * total).sum()
        return (float(fresh / total.sum()), float((t[sel] * total).sum() / total.sum()),
                int(total.sum()))


def measure(c: Cluster, r: int, w: int, writer: str, reader: str, duration_s: float,
            out: Path, seed: int = 1, tick: Callable[[float], None] | None = None
            ) -> Measured:
    """Return P(consistent) vs ms after commit measured on ``c`` at R = ``r``, W = ``w``.

    A read at R = 1 is answered by the reader's own node in about a millisecond: one reader
    at 400 reads/s samples every 5 ms window after each commit. A read at R >= 2 waits for
    a remote replica (a WAN round trip), so eight readers share the work, and writes come
    more often, for a similar number of reads per window."""
    n = len(c.nodes)
    url = f"{c.url}&write_cl={level(w, n)}&eventual_cl={level(r, n)}"
    readers, interval_s = (1, 0.25) if r == 1 else (8, 0.15)
    spec = ProbeSpec(store=url, workload="staleness",
                     options=ProbeOptions(duration_s=duration_s, write_interval_s=interval_s,
                                          read_rate=400.0, seed=seed),
                     config=StalenessConfig(placement="separate-clients", writer_region=writer,
                                            reader_region=reader, readers=readers))
    run = run_probe(spec, out, tick)
    if run.error:
        raise ValueError(f"measuring R={r} W={w} on {c.name} failed: {run.error}")
    h, _ = load_history(run.run_dir)
    writes, reads = element_ops(h, KEY)
    curve = since_ack(writes, reads, 1.0)
    return Measured(r, w, tuple(curve["t_mean_ms"]), tuple(curve["p"]),
                    tuple(int(x) for x in curve["total"]), str(run.run_dir),
                    int(run.results["ops"]["reads"]), int(run.results["ops"]["writes"]))


def compare_points(predicted: Callable[[Sequence[float]], np.ndarray], m: Measured,
                   t_ms: Sequence[float] = T_MS) -> list[dict[str, float | int | None]]:
    """Return, per t, the measured fraction (None without reads), the prediction at the
    reads' mean t, their difference and the reads behind it."""
    rows = []
    for t in t_ms:
        p, t_mean, reads = m.at(t)
        pred = float(predicted([t_mean])[0])
        rows.append({"t_ms": t, "t_mean_ms": round(t_mean, 3), "measured": p,
                     "predicted": round(pred, 6), "reads": reads,
                     "difference": None if p is None else round(abs(pred - p), 6)})
    return rows

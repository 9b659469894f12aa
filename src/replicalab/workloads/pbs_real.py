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

Latency that varies (``set_jitter``). On dc3's links as configured (sd 2 ms) the measured
curve of R = 1, W = 1 is a step 2 ms wide at the US-E -> US-W one-way delay: any model
with a step near 40 ms passes, and a 1 ms error fails it by 80 points. Toxiproxy jitter
``J`` makes every replication link's delay uniform in [d - J, d + J) per message (the
latency toxic draws one delay per chunk, chunks stay in order), so the write reaches a
remote replica over a 2J-wide spread, and the curve has a real shape to predict.

Judgement (``checkers/visibility.py``). Each write is one draw of when it became visible to
the reader, bracketed by its last stale and first fresh read (``visibility_of_run``); at
every sampled t the prediction must lie within the binomial band of the writes visible by
then. The probe's noise floor (``noise_of_run``) says how much the machine itself moved the
reads, so that a miss can be called inconclusive rather than the model's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replicalab.checkers import visibility
from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import since_ack
from replicalab.cluster import base, toxiproxy
from replicalab.cluster.state import ROOT, Cluster
from replicalab.errors import ParameterError
from replicalab.history import load_history
from replicalab.runtime.noise import NoiseFloor
from replicalab.stores import open_store
from replicalab.stores.base import StoreError
from replicalab.stores.cassandra import ReadPath, read_path
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig

PAIRS = ((1, 1), (1, 2), (2, 1), (2, 2), (1, 3))
"""The (R, W) pairs of issue 24 for N = 3."""
SCHEMA_TIMEOUT_S = 60.0
BUCKET_MS = 0.25
"""Resolution of the measured curve kept in ``Measured`` (ms)."""
CALIBRATION_SAMPLES = 400
"""Round trips per replica from each coordinator, as in every recording the shipped model was
chosen and held out on (``benchmarks/pbs_cassandra.py``): the legs' mean to about 1 ms on
links jittering +-20 ms, and their lower edge too. With 200 the fastest round trip of two
legs uniform over 40 ms sits ~4 ms above the legs' sum's floor, so the deconvolved leg
starts late: 200 of the recorded round trips predicted 1.3 to 10.5 % of writes visible 22
ms after the ack where 4.5 to 8.8 % were, all 400 4.7 to 9.6 %
(``benchmarks/pbs_calibration_size.py``), and one jittered test run predicted 0.6 % against
10 of 100 writes measured (2026-11-30)."""
DEFAULT_JITTER_MS = 20.0
"""Toxiproxy jitter on every replication link of ``model pbs --against`` (ms, uniform
+-J): a 40 ms-wide transition at dc3's 40 ms US-E -> US-W delay."""
WRITE_INTERVAL_R1_S = 0.1
"""Time between writes at R = 1: more writes, each one draw of the write's arrival, make
the measured curve an empirical CDF of many draws (150 in 15 s); 100 ms leaves a transition
up to 60 ms (d + J on dc3) before the next write."""


@contextlib.contextmanager
def cassandra_cluster(n: int, regions: str, root: Path = ROOT,
                      jitter_ms: float | None = None) -> Iterator[Cluster]:
    """Start an ``n``-node Cassandra cluster on ``regions`` and yield it; it is stopped on
    the way out whatever ends the block. ``jitter_ms`` (when given) replaces the region
    set's jitter on every replication link (``set_jitter``). ValueError names what cannot
    start."""
    name = f"pbs-cassandra-{os.getpid()}"
    c = base.up("cassandra", n, regions, name=name, root=root)
    try:
        if jitter_ms is not None:
            set_jitter(c, jitter_ms)
            c.save(root)
        yield c
    finally:
        with contextlib.suppress(ValueError, OSError):
            base.down(name, root)


def set_jitter(c: Cluster, jitter_ms: float) -> None:
    """Set Toxiproxy jitter ``jitter_ms`` (each message delayed uniformly in [d - J, d + J)
    ms) on every replication link of ``c``, keeping each link's delay d; ValueError when J
    exceeds the shortest delayed link's d (a delay cannot be negative) or is negative."""
    wan = [x for x in c.links if x.kind == "replication" and
           min(x.upstream_ms, x.downstream_ms) > 0]
    if jitter_ms < 0:
        raise ParameterError("jitter_ms", f"{jitter_ms:g} ms must not be negative")
    if wan and jitter_ms > min(min(x.upstream_ms, x.downstream_ms) for x in wan):
        shortest = min(min(x.upstream_ms, x.downstream_ms) for x in wan)
        raise ParameterError("jitter_ms", f"{jitter_ms:g} ms: at most the shortest one-way "
                                          f"delay of {c.regions} ({shortest:g} ms)")
    tp = toxiproxy.Toxiproxy(c.toxiproxy_port)
    try:
        for x in wan:
            tp.set_latency(x.name, x.downstream_ms, x.upstream_ms, jitter_ms)
            x.jitter_ms = jitter_ms
    finally:
        tp.close()


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

    @property
    def hop_ms(self) -> float:
        """Return the clients' own hops between the commit and the read reaching its
        replica (ms): the ack's way from the writer's coordinator back to the writer and
        the read's way from the reader to its coordinator, half of each client share.
        PBS's t starts at the coordinator's commit; the measured t starts when the writer
        saw the ack and ends when the reader sent the read, ``hop_ms`` earlier."""
        return (self.write_overhead_ms + self.read_overhead_ms) / 2


CALIBRATION_TIMEOUTS = 0.05
"""Share of a calibration's round trips that may time out (each taken again) before it gives
up: beside a CPU hog one write of 2,400 once outlasted the client's 2 s and ended the
command. A timed-out round trip measured the machine, not the link: it is not a sample."""


async def _round_trips(url: str, op: str, samples: int) -> list[float]:
    store = open_store(url, 1)
    try:
        client = await store.connect()
        out: list[float] = []
        failed, i = 0, 0
        while len(out) < samples:  # the first two warm the prepared statements up
            t0 = time.perf_counter_ns()
            try:
                if op == "write":
                    await client.write({"pbs/calibrate/v": str(i)})
                else:
                    await client.read(["pbs/calibrate/v"], consistent=False)
            except StoreError:
                failed += 1
                if failed > max(1, int(CALIBRATION_TIMEOUTS * samples)):
                    raise
                continue
            finally:
                i += 1
            if i > 2:
                out.append((time.perf_counter_ns() - t0) / 1e6)
        return out
    finally:
        await store.close()


async def _calibrate(c: Cluster, writer: str, reader: str, samples: int) -> Calibration:
    w_addr, r_addr = _node_in(c, writer), _node_in(c, reader)
    # the cluster's own URL (every node, with its region): the first client creates the
    # probe keyspace, from a ring it waits to see whole (a URL naming one node once made it
    # from a view without US-W: no replica there, its reads at ONE served from EU)
    setup = open_store(c.url, 1)
    try:
        client = await setup.connect(writer)
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


def calibrate(c: Cluster, writer: str, reader: str, samples: int = 60) -> Calibration:
    """Return per-replica round trips measured on cluster ``c`` from the writer's and the
    reader's coordinators (see the module doc)."""
    return asyncio.run(_calibrate(c, writer, reader, samples))


@dataclass(frozen=True)
class Measured:
    """P(consistent) measured on the cluster for one (R, W), in BUCKET_MS buckets."""

    r: int
    w: int
    t_mean_ms: tuple[float, ...]  # per bucket with reads
    p: tuple[float, ...]
    total: tuple[int, ...]
    run_dir: str
    reads: int
    writes: int

    def curve(self, width_ms: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (mean t, fraction, reads) per ``width_ms`` bucket with reads."""
        t, p, n = (np.asarray(self.t_mean_ms), np.asarray(self.p),
                   np.asarray(self.total, dtype=float))
        if len(t) == 0:
            return np.zeros(0), np.zeros(0), np.zeros(0, dtype=int)
        b = (t // width_ms).astype(np.int64)
        total = np.bincount(b, weights=n)
        keep = np.flatnonzero(total)
        fresh = np.bincount(b, weights=p * n)[keep]
        t_sum = np.bincount(b, weights=t * n)[keep]
        return t_sum / total[keep], fresh / total[keep], total[keep].astype(int)


def measure(c: Cluster, r: int, w: int, writer: str, reader: str, duration_s: float,
            out: Path, seed: int = 1, tick: Callable[[float], None] | None = None,
            readers: int | None = None, root: Path = ROOT) -> Measured:
    """Return P(consistent) vs ms after commit measured on ``c`` at R = ``r``, W = ``w``.

    A read at R = 1 is answered by the reader's own node in about a millisecond: one reader
    at 400 reads/s samples every millisecond after the writes (one every
    WRITE_INTERVAL_R1_S). A read at R >= 2 waits for a remote replica (a WAN round trip),
    so eight readers share the work, and writes come more often, for a similar number of
    reads per window. ``readers`` overrides the number of readers; ``root`` is where the
    cluster's state lives (its Toxiproxy carries the run's noise-floor echo)."""
    url = probe_url(c, r, w)
    default_readers, interval_s = (1, WRITE_INTERVAL_R1_S) if r == 1 else (8, 0.15)
    readers = readers or default_readers
    spec = ProbeSpec(store=url, workload="staleness", cluster=c.name, cluster_root=str(root),
                     options=ProbeOptions(duration_s=duration_s, write_interval_s=interval_s,
                                          read_rate=400.0, seed=seed),
                     config=StalenessConfig(placement="separate-clients", writer_region=writer,
                                            reader_region=reader, readers=readers))
    run = run_probe(spec, out, tick)
    if run.error:
        raise ValueError(f"measuring R={r} W={w} on {c.name} failed: {run.error}")
    return measured_from_run(Path(run.run_dir), r, w)


def probe_url(c: Cluster, r: int, w: int) -> str:
    """Return the store URL the probe of ``measure`` uses at R = ``r``, W = ``w``."""
    n = len(c.nodes)
    return f"{c.url}&write_cl={level(w, n)}&eventual_cl={level(r, n)}"


async def _read_path(url: str, region: str) -> ReadPath:
    store = open_store(url, 1)
    try:
        client = await store.connect(region)
        return await asyncio.to_thread(read_path, client, KEY)  # type: ignore[arg-type]
    finally:
        await store.close()


def read_path_of(c: Cluster, r: int, w: int, reader: str) -> ReadPath:
    """Return where a read of the probe's key from ``reader`` at R = ``r`` goes: the
    coordinator that answered and the replicas its trace shows it reading, with the
    keyspace's replication (one traced read through the probe's own URL). The probe's
    history names the coordinator a reader is pinned to, never the replica that served."""
    return asyncio.run(_read_path(probe_url(c, r, w), reader))


def measured_from_run(run_dir: Path, r: int, w: int) -> Measured:
    """Return the t-visibility a staleness probe's run directory measured (see
    :func:`measure`), e.g. to compare a model with a run again."""
    h, _ = load_history(run_dir)
    writes, reads = element_ops(h, KEY)
    curve = since_ack(writes, reads, BUCKET_MS)
    return Measured(r, w, tuple(curve["t_mean_ms"]), tuple(curve["p"]),
                    tuple(int(x) for x in curve["total"]), str(run_dir),
                    len(reads.invoke_ns), len(writes.invoke_ns))


def visibility_of_run(run_dir: Path) -> visibility.Visibility:
    """Return each write's visibility to the reader in a staleness probe's run directory
    (``checkers/visibility.py``)."""
    h, _ = load_history(run_dir)
    return visibility.of_element(*element_ops(h, KEY))


def read_p50_ms_of_run(run_dir: Path) -> float | None:
    """Return the median latency (ms) of the readers' completed reads in a staleness
    probe's run directory (None: no read completed)."""
    h, _ = load_history(run_dir)
    _, reads = element_ops(h, KEY)
    took = (h.column("complete_ns")[reads.index] - reads.invoke_ns) / 1e6
    return round(float(np.median(took)), 3) if len(took) else None


def noise_of_run(run_dir: Path) -> NoiseFloor | None:
    """Return the noise floor a probe recorded (None for a run without one)."""
    try:
        got = json.loads((run_dir / "results.json").read_text()).get("noise")
    except (OSError, ValueError):
        return None
    return None if not got else NoiseFloor.from_json(got)

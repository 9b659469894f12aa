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

Comparison (``compare_curve``). The whole measured curve is sampled: every ``COARSE_MS``
from 0 to the end of what was measured (5 ms windows), and every ``step`` ms across the
transition, where the measured fraction moves from 0 % to 100 % (about TRANSITION_SAMPLES
windows: 2 ms for a 40 ms transition, 0.5 ms for a 10 ms one). Each sampled t compares the
fresh fraction of the reads started in its window with the prediction at those reads' mean
t; the verdict is
the largest gap over every sampled t with at least ``MIN_POINT_READS`` reads, and it has
power only with at least ``MIN_TRANSITION_POINTS`` sampled t strictly between 2 % and 98 %.
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
from replicalab.cluster import base, toxiproxy
from replicalab.cluster.state import ROOT, Cluster
from replicalab.history import load_history
from replicalab.stores import open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig

PAIRS = ((1, 1), (1, 2), (2, 1), (2, 2), (1, 3))
"""The (R, W) pairs of issue 24 for N = 3."""
T_MS = (0.0, 10.0, 50.0, 100.0)
"""The four times of the first comparison (issue 24), kept for the table's first rows."""
WINDOW_MS = 5.0
"""``Measured.at``: the fresh fraction of reads started in [t, t + window), the window
WINDOW_MS, widened by WINDOW_MS at a time (up to MAX_WINDOW_MS) until it holds
MIN_READS reads: readers waiting on a WAN round trip read in bursts."""
MAX_WINDOW_MS = 25.0
SCHEMA_TIMEOUT_S = 60.0
MIN_READS = 10
BUCKET_MS = 0.25
"""Resolution of the measured curve kept in ``Measured`` (ms)."""
DEFAULT_JITTER_MS = 20.0
"""Toxiproxy jitter on every replication link of ``model pbs --against`` (ms, uniform
+-J): a 40 ms-wide transition at dc3's 40 ms US-E -> US-W delay."""
COARSE_MS = 10.0
"""Sampling step outside the transition (ms)."""
LOW, HIGH = 0.02, 0.98
"""The transition: where the measured fraction is strictly between these."""
MIN_TRANSITION_POINTS = 10
"""Sampled t strictly inside the transition a comparison needs to have power."""
TRANSITION_SAMPLES = 30
"""Sampled t across the transition (see ``sample_times``): about 20 where the curve rises
from 5 % to 95 %, twice MIN_TRANSITION_POINTS, each with as many reads as the span allows
(a 40 ms transition: every 2 ms)."""
MIN_POINT_READS = 20
"""Reads a sampled t needs to count in the verdict (fewer: shown, not judged)."""
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
        raise ValueError(f"--jitter {jitter_ms:g} ms must not be negative")
    if wan and jitter_ms > min(min(x.upstream_ms, x.downstream_ms) for x in wan):
        shortest = min(min(x.upstream_ms, x.downstream_ms) for x in wan)
        raise ValueError(f"--jitter {jitter_ms:g} ms: at most the shortest one-way delay "
                         f"of {c.regions} ({shortest:g} ms)")
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

    def window(self, t_ms: float, width_ms: float) -> tuple[float | None, float, int]:
        """Return (fresh fraction, mean t, reads) of reads started in [t, t + width);
        (None, t, 0) when no read started there."""
        t = np.asarray(self.t_mean_ms)
        sel = (t >= t_ms) & (t < t_ms + width_ms)
        total = np.asarray(self.total)[sel]
        if total.sum() == 0:
            return None, t_ms, 0
        fresh = (np.asarray(self.p)[sel] * total).sum()
        return (float(fresh / total.sum()), float((t[sel] * total).sum() / total.sum()),
                int(total.sum()))

    def at(self, t_ms: float) -> tuple[float | None, float, int]:
        """Return (fresh fraction, mean t, reads) of reads started in [t, t + window) (see
        WINDOW_MS); (None, t, 0) when no read started there."""
        width = WINDOW_MS
        while True:
            got = self.window(t_ms, width)
            if got[2] >= MIN_READS or width >= MAX_WINDOW_MS:
                return got
            width += WINDOW_MS

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
    n = len(c.nodes)
    url = f"{c.url}&write_cl={level(w, n)}&eventual_cl={level(r, n)}"
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


def measured_from_run(run_dir: Path, r: int, w: int) -> Measured:
    """Return the t-visibility a staleness probe's run directory measured (see
    :func:`measure`), e.g. to compare a model with a run again."""
    h, _ = load_history(run_dir)
    writes, reads = element_ops(h, KEY)
    curve = since_ack(writes, reads, BUCKET_MS)
    return Measured(r, w, tuple(curve["t_mean_ms"]), tuple(curve["p"]),
                    tuple(int(x) for x in curve["total"]), str(run_dir),
                    len(reads.invoke_ns), len(writes.invoke_ns))


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


def isotonic(p: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Return the non-decreasing fit of ``p`` closest in weighted least squares (pool
    adjacent violators): a t-visibility curve only rises, so a noisy bucket or a stalled
    client's read does not end the transition early or start it late."""
    blocks: list[list[float]] = []  # [value, weight, count]
    for x, w in zip(p.tolist(), np.maximum(weight, 1e-12).tolist(), strict=True):
        blocks.append([x, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            b = blocks.pop()
            a = blocks[-1]
            a[0] = (a[0] * a[1] + b[0] * b[1]) / (a[1] + b[1])
            a[1] += b[1]
            a[2] += b[2]
    return np.concatenate([np.full(int(c), v) for v, _, c in blocks]) if blocks \
        else np.zeros(0)


def sample_times(m: Measured, coarse_ms: float = COARSE_MS
                 ) -> tuple[list[tuple[float, float]], float]:
    """Return (the windows to sample, each (t, width) in ms: reads started in [t, t +
    width); the step across the transition in ms).

    Every ``coarse_ms`` from 0 to the last window holding MIN_POINT_READS reads, each
    ``coarse_ms / 2`` wide; and, across the transition, about TRANSITION_SAMPLES windows
    side by side: where the measured curve (its non-decreasing fit, :func:`isotonic`, on the
    finest of 1, 2 or 5 ms buckets most of which hold MIN_POINT_READS reads) goes from 5 %
    to 95 %, widened by a quarter of that span on each side, in steps that are a multiple
    of BUCKET_MS, at least that bucket width and at most half of ``coarse_ms`` (a coarse
    window inside that span gives way to them)."""
    half = coarse_ms / 2
    tc, _, nc = m.curve(half)
    if not (nc >= MIN_POINT_READS).any():
        return [], half
    end = float(np.floor(tc[nc >= MIN_POINT_READS].max()))
    coarse = [float(x) for x in np.round(np.arange(0.0, end + 1e-9, coarse_ms), 6)]
    for width in (1.0, 2.0, half):  # sparse readers (R >= 2 waits a WAN round trip)
        t, p, n = m.curve(width)
        dense = n >= MIN_POINT_READS
        if dense.sum() >= len(n) / 2:
            break
    t, p, n = t[dense], p[dense], n[dense]
    fit = isotonic(p, n.astype(float))
    rising = (fit >= 0.05) & (fit <= 0.95)
    if not rising.any():
        return [(x, half) for x in coarse], half
    lo, hi = float(np.floor(t[rising].min())), float(np.ceil(t[rising].max()))
    margin = max((hi - lo) / 4, 2.0)
    lo, hi = max(lo - margin, 0.0), min(hi + margin, end + half)
    step = float(np.floor((hi - lo) / TRANSITION_SAMPLES / BUCKET_MS) * BUCKET_MS)
    step = min(max(step, BUCKET_MS, width), half)
    inside = [float(x) for x in np.round(np.arange(lo, hi + 1e-9, step), 6)]
    out = [(x, half) for x in coarse if not lo <= x <= hi] + [(x, step) for x in inside]
    return sorted(out), step


@dataclass(frozen=True)
class CurveComparison:
    """Predicted beside measured P(consistent) over the whole measured curve of one pair.

    ``points``: per sampled t (ms) the measured fraction (None without reads), the
    prediction at the reads' mean t, |difference| (None below MIN_POINT_READS reads) and
    the reads; ``largest_gap`` (a fraction) and where (``largest_gap_t_ms``, the reads'
    mean t) over every judged point; ``transition_points``: judged points measured strictly
    between LOW and HIGH; ``sampling_band``: the DKW 95 % half-width of an empirical CDF
    of ``writes`` draws (each write is one draw of when it becomes visible)."""

    r: int
    w: int
    points: tuple[dict[str, float | int | None], ...]
    step_ms: float
    largest_gap: float | None
    largest_gap_t_ms: float | None
    transition_points: int
    sampling_band: float
    tolerance: float

    @property
    def has_power(self) -> bool:
        """Return True if enough judged points lie inside the transition."""
        return self.transition_points >= MIN_TRANSITION_POINTS

    @property
    def within_tolerance(self) -> bool:
        """Return True if every judged point is within ``tolerance`` of the prediction."""
        return self.largest_gap is not None and self.largest_gap <= self.tolerance

    def to_json(self) -> dict[str, object]:
        """Return the comparison as plain data (fractions, ms)."""
        return {"r": self.r, "w": self.w, "points": list(self.points),
                "step_ms": self.step_ms, "largest_gap": self.largest_gap,
                "largest_gap_t_ms": self.largest_gap_t_ms,
                "transition_points": self.transition_points, "has_power": self.has_power,
                "sampling_band": self.sampling_band, "tolerance": self.tolerance,
                "within_tolerance": self.within_tolerance}


def compare_curve(predicted: Callable[[Sequence[float]], np.ndarray], m: Measured,
                  tolerance: float) -> CurveComparison:
    """Return the comparison of ``predicted`` (P(consistent) at each t in ms after the ack)
    with the measured curve ``m`` in every window of :func:`sample_times`."""
    windows, step = sample_times(m)
    rows: list[dict[str, float | int | None]] = []
    for t, width in windows:
        p, t_mean, reads = m.window(t, width)
        pred = float(predicted([t_mean])[0])
        judged = p is not None and reads >= MIN_POINT_READS
        rows.append({"t_ms": t, "t_mean_ms": round(t_mean, 3),
                     "width_ms": width, "measured": None if p is None else round(p, 6),
                     "predicted": round(pred, 6), "reads": reads,
                     "difference": round(abs(pred - p), 6) if judged and p is not None
                     else None})
    judged_rows = [x for x in rows if x["difference"] is not None]
    worst = max(judged_rows, key=lambda x: float(x["difference"] or 0.0), default=None)
    inside = sum(1 for x in judged_rows if LOW < float(x["measured"] or 0.0) < HIGH)
    band = float(np.sqrt(np.log(2 / 0.05) / (2 * m.writes))) if m.writes else 1.0
    return CurveComparison(m.r, m.w, tuple(rows), step,
                           None if worst is None else float(worst["difference"] or 0.0),
                           None if worst is None else float(worst["t_mean_ms"] or 0.0),
                           inside, round(band, 4), tolerance)

"""The seed's message-level simulation of the Multi-Paxos leader's pipeline in a LAN (seed
002, "Modeling Paxos Performance" part 2), vectorized with numpy: ``simulate_queue`` (one
load), ``queue_curve`` (a list of loads) and ``simulate_queue_reference``, the same simulation
as a plain event loop. The formulas it checks are in ``paxos_lan.py``.

Times are ms (``_ms``) at the boundary, rates rounds per second (``_rps``); the simulation
works in integer ns internally so that queue arithmetic is exact.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replicalab.models.base import Curve, CurvePoint, point, require
from replicalab.models.paxos_lan import (
    WARMUP_FRACTION,
    PaxosLanParams,
    check_loads,
    label,
    max_throughput_rps,
    reply_rtt,
    round_gaps_ms,
    utilisation,
)
from replicalab.runtime.base import NS_PER_MS

_NEG = np.iinfo(np.int64).min // 4  # "server free since forever" in ns


def _clipped_ns(rng: np.random.Generator, mean_ms: float, sd_ms: float,
                size: int | tuple[int, ...]) -> np.ndarray:
    x = rng.normal(mean_ms, sd_ms, size) if sd_ms > 0 else np.full(size, mean_ms)
    return np.rint(np.maximum(x, 0.0) * NS_PER_MS).astype(np.int64)


# Each pipeline keeps its own clock: pipeline c's times are shifted by c * _LANE (2^52 ns, 52
# days), so one sorted array and one Lindley scan serve all pipelines, with no interaction.
_LANE = 1 << 52


@dataclass(frozen=True)
class _Draws:
    """All random inputs of a queue simulation, in ns, and the job layout.

    Jobs 0..R-1 are the rounds' requests (deserialize request + serialize broadcast), entering
    at arrival ``t``; then the replies, row-major (round i, j-th fastest), entering at the
    broadcast time ``b_i`` plus ``r[i, j]``; the reply completing the quorum also serializes
    the client reply. Job x enters at ``base[src[x]] + add[x]`` where ``base`` is
    ``concat(b, t)`` and ``add`` holds the RTT plus the job's pipeline offset.
    """

    t: np.ndarray
    client: np.ndarray
    r: np.ndarray
    svc: np.ndarray
    src: np.ndarray
    add: np.ndarray
    needed: int


def _pipelines(rounds: int, m: int, n_p: int) -> np.ndarray:
    """Return each job's pipeline: round i's request goes to pipeline i mod n_p and its j-th
    reply (arrival order) to (i + 1 + j) mod n_p, dealing messages out evenly."""
    i = np.arange(rounds)
    req = i % n_p
    rep = (i[:, None] + 1 + np.arange(m)) % n_p
    return np.concatenate([req, rep.ravel()])


def _draw(p: PaxosLanParams, load_rps: float, rounds: int, seed: int) -> _Draws:
    rng = np.random.default_rng(seed)
    t = np.rint(np.cumsum(round_gaps_ms(rng, load_rps, p.sigma_r_factor, rounds, p.arrivals))
                * NS_PER_MS).astype(np.int64)
    client = _clipped_ns(rng, p.client_ms, p.sigma_l_ms, rounds)
    rd = reply_rtt(p)
    m = p.contacted
    r = np.sort(_clipped_ns(rng, rd.mean_ms, rd.sd_ms, (rounds, m)), axis=1)
    s_a = (_clipped_ns(rng, p.mu_md_ms, p.sigma_md_ms, rounds)
           + _clipped_ns(rng, p.mu_ms_ms, p.sigma_ms_ms, rounds))
    s_r = _clipped_ns(rng, p.mu_md_ms, p.sigma_md_ms, (rounds, m))
    s_r[:, p.needed - 1] += _clipped_ns(rng, p.mu_ms_ms, p.sigma_ms_ms, rounds)
    i = np.arange(rounds)
    src = np.concatenate([rounds + i, np.repeat(i, m)])
    add = np.concatenate([np.zeros(rounds, dtype=np.int64), r.ravel()])
    if p.n_p > 1:
        add += _pipelines(rounds, m, p.n_p).astype(np.int64) * _LANE
    return _Draws(t, client, r, np.concatenate([s_a, s_r.ravel()]), src, add, p.needed)


def _lindley(at: np.ndarray, enter: np.ndarray, svc: np.ndarray,
             exits: np.ndarray) -> np.ndarray:
    """Return exit times (ns) of the jobs at sorted positions ``at`` (ascending: a union of
    runs of consecutive positions) through a FIFO queue; each run starts from the stored
    exit of the position before it.

    Lindley's recursion exit_i = max(enter_i, exit_(i-1)) + s_i in closed form:
    exit_i = C_i + max_(j<=i)(enter_j - C_(j-1)), C the cumulative service. One cumulative
    sum serves all runs: a run's starting exit dominates every earlier term (that work was
    done before it).
    """
    cum = np.cumsum(svc)
    before = cum - svc
    u = enter - before
    first = np.ones(at.size, dtype=bool)
    first[1:] = at[1:] != at[:-1] + 1
    st = np.flatnonzero(first)
    prev = at[st] - 1
    x0 = np.where(prev >= 0, exits[np.maximum(prev, 0)], _NEG)
    u[st] = np.maximum(u[st], x0 - before[st])
    return cum + np.maximum.accumulate(u)


def _merge(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge position intervals [lo, hi) that overlap or touch; return sorted (lo, hi)."""
    o = np.argsort(lo, kind="stable")
    lo, hi = lo[o], np.maximum.accumulate(hi[o])
    new = np.ones(lo.size, dtype=bool)
    new[1:] = lo[1:] > hi[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], lo.size) - 1
    return lo[starts], hi[ends]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Return the concatenation of arange(lo_i, hi_i)."""
    lengths = hi - lo
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(lo - offsets, lengths) + np.arange(int(lengths.sum()))


def _sort_by_time(jb: np.ndarray, e: np.ndarray, kind: str = "stable"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Return (jobs, entries) sorted by entry time, ties by job id (as the reference loop).

    ``stable`` (timsort) is fastest on the nearly sorted input of later passes and keeps
    tied jobs in their previous (already id-sorted) order; ``quicksort`` on the first.
    """
    o = np.argsort(e, kind=kind)  # type: ignore[call-overload]
    jb, e = jb[o], e[o]
    same = e[1:] == e[:-1]
    if np.any(same & (jb[1:] < jb[:-1])):  # rounds arriving together tie often
        tie = np.flatnonzero(same)
        at = np.concatenate([tie, tie + 1])
        at.sort()
        at = at[np.append(True, at[1:] != at[:-1])]
        jb[at] = jb[at[np.lexsort((jb[at], e[at]))]]
    return jb, e


def _lindley_all(enter: np.ndarray, svc: np.ndarray) -> np.ndarray:
    """Return the exits (ns) of all jobs, in entry order, through an initially idle FIFO."""
    cum = np.cumsum(svc)
    u = enter - cum
    u += svc
    np.maximum.accumulate(u, out=u)
    u += cum
    return u


_STEP = 16  # positions a run is first extended by when its last exit changed
_GROW = 3   # extensions per pass before the rest of a run is left to the next pass
_FULL = 8   # re-run everything while more than 1/_FULL of the jobs would move


class _Queue:
    """The leader's pipelines as one array of jobs sorted by (keyed) entry time: ``job`` the
    job id at each position, ``T`` its entry, ``E`` its exit, ``pos`` each job's position."""

    job: np.ndarray
    T: np.ndarray
    E: np.ndarray
    pos: np.ndarray

    def __init__(self, d: _Draws) -> None:
        self.d = d
        self.rounds = d.t.size
        self.jobs = d.svc.size
        # [b | t]: b starts as the requests queueing (each on its pipeline) behind each other
        # only, a lower bound: more work can only delay them
        key = d.t + d.add[:self.rounds]
        o = np.argsort(key, kind="stable")
        b = np.empty_like(key)
        b[o] = _lindley_all(key[o], d.svc[:self.rounds][o]) - d.add[:self.rounds][o]
        self.base = np.concatenate([b, d.t])
        self.job = np.arange(self.jobs)
        self.full_pass("quicksort")

    def broadcasts(self) -> np.ndarray:
        """Return each round's broadcast time b (ns): its request job's exit."""
        return self.E[self.pos[:self.rounds]] - self.d.add[:self.rounds]

    def entries(self, jb: np.ndarray) -> np.ndarray:
        """Return the (keyed) entry times in ns of jobs ``jb`` under the current b."""
        return self.base[self.d.src[jb]] + self.d.add[jb]

    def full_pass(self, kind: str = "stable") -> None:
        """Re-sort every job (from the previous order) and run the whole queue."""
        self.job, self.T = _sort_by_time(self.job, self.entries(self.job), kind)
        self.E = _lindley_all(self.T, self.d.svc[self.job])
        self.pos = np.empty(self.jobs, dtype=np.int64)
        self.pos[self.job] = np.arange(self.jobs)

    def rerun(self, moved: np.ndarray, dirty: np.ndarray) -> np.ndarray:
        """Move the replies of the ``moved`` rounds to their new entry times and re-run only
        the position ranges they cross, plus the ranges starting at the ``dirty`` positions;
        return the new dirty positions.

        A run whose last exit differs from the stored one pushes its successors, so it is
        extended (doubling) a few times; if it still differs, the position after it becomes
        dirty: the stored exits from there on wait for the next pass. Letting changes run
        ahead to the end of their busy period would redo the same stretch on every pass.
        """
        m = self.d.r.shape[1]
        jobs, T = self.jobs, self.T
        ids = (self.rounds + moved[:, None] * m + np.arange(m)).ravel()
        new = self.entries(ids)
        old_at = self.pos[ids]
        land = np.searchsorted(T, new, "left")
        # the range from the old position to every position the new entry can take; ties
        # are ordered by job id (as in the reference loop), so include equal entries
        top = land + 1
        more = np.flatnonzero(T[np.minimum(land, jobs - 1)] == new)
        top[more] = np.searchsorted(T, new[more], "right")
        lo = np.concatenate([np.minimum(old_at, land), dirty])
        hi = np.concatenate([np.maximum(old_at + 1, top), dirty + _STEP])
        lo, hi = _merge(lo, np.minimum(hi, jobs))
        for attempt in range(_GROW + 1):
            at = _ranges(lo, hi)
            jb = self.job[at]
            jb, e = _sort_by_time(jb, self.entries(jb))
            ex = _lindley(at, e, self.d.svc[jb], self.E)
            last = np.append(at[1:] != at[:-1] + 1, True)
            tail = np.flatnonzero(last)
            bad = tail[(ex[tail] != self.E[at[tail]]) & (at[tail] + 1 < jobs)]
            self.job[at], T[at], self.E[at] = jb, e, ex
            self.pos[jb] = at
            grow = np.searchsorted(lo, at[bad], "right") - 1
            lo, hi = lo[grow], hi[grow]
            if not lo.size or attempt == _GROW:
                break
            lo, hi = _merge(lo, np.minimum(jobs, hi + np.maximum(hi - lo, _STEP)))
        return hi


def _solve(d: _Draws) -> tuple[np.ndarray, int]:
    """Run the leader's pipeline(s); return (exit ns per job id, keyed by pipeline; passes).

    The broadcast leaves when the request's job exits and replies enter at that time plus
    their RTT, so arrivals depend on exits. We iterate to the fixed point: start from a lower
    bound (requests queueing behind requests only), run the queue, move the replies of rounds
    whose broadcast time changed, repeat. The true run is the unique fixed point (a reply enters
    strictly after its broadcast, so by induction over time every pass fixes one more
    generation). While many rounds move we re-run everything; later only the position
    ranges the moved replies cross, and the stretches just after them (``_Queue.rerun``).
    """
    q = _Queue(d)
    rounds, m = d.r.shape
    passes = 1
    dirty = np.zeros(0, dtype=np.int64)
    while True:
        b = q.broadcasts()
        moved = np.flatnonzero(b != q.base[:rounds])
        if moved.size == 0 and dirty.size == 0:
            return q.E[q.pos], passes
        q.base[:rounds] = b
        passes += 1
        if moved.size * m * _FULL > q.jobs:
            q.full_pass()
            dirty = dirty[:0]
        else:
            dirty = q.rerun(moved, dirty)


def _finish(p: PaxosLanParams, d: _Draws, exits: np.ndarray, load_rps: float,
            passes: int, wall_s: float) -> CurvePoint:
    rounds, m = d.r.shape
    exits = exits - (d.add - np.concatenate([np.zeros(rounds, np.int64), d.r.ravel()]))
    replies = exits[rounds:].reshape(rounds, m)[:, :d.needed]
    done = replies.max(axis=1)  # n_p > 1: an earlier vote may leave its pipeline last
    lat_ms = (done - d.t + d.client) / NS_PER_MS
    kept = lat_ms[int(rounds * WARMUP_FRACTION):]
    busy_ms = d.svc.sum() / NS_PER_MS
    span_ms = (exits.max() - d.t[0]) / NS_PER_MS
    nominal = utilisation(p, load_rps)
    return point(load_rps, float(kept.mean()), nominal, float(np.percentile(kept, 99)),
                 measured_utilisation=busy_ms / (p.n_p * span_ms), rounds=float(rounds),
                 passes=float(passes), wall_s=wall_s)


def _check_run(load_rps: float, rounds: int) -> None:
    require(math.isfinite(load_rps) and load_rps > 0,
            f"load_rps={load_rps} must be a positive, finite offered load in rounds/s")
    require(isinstance(rounds, int | np.integer) and not isinstance(rounds, bool)
            and rounds >= 100,
            f"rounds={rounds} must be a whole number of rounds >= 100")


def simulate_queue(p: PaxosLanParams, load_rps: float, rounds: int = 200_000,
                   seed: int = 1) -> CurvePoint:
    """Return the message-level pipeline simulation at ``load_rps`` rounds/s: mean and p99
    client latency (ms) over ``rounds`` rounds (first 5 % dropped as warm-up), nominal
    utilisation, and in ``extra`` the measured utilisation and fixed-point passes.

    The leader's pipeline is FIFO and shared by incoming and outgoing messages; rounds
    arrive with ``round_gaps_ms`` spacing; a round is: request deserialization and broadcast
    serialization (one job), replies entering at broadcast + RTT each needing
    deserialization, the quorum-completing one also serializing the client reply; latency =
    that exit - arrival + client RTT. With n_p > 1 each message is dealt to one pipeline
    (``_pipelines``), each a FIFO of its own. Saturated loads (utilisation >= 1) are not
    simulated: they return a saturated point.
    """
    _check_run(load_rps, rounds)
    if utilisation(p, load_rps) >= 1:
        return point(load_rps, math.inf, utilisation(p, load_rps))
    t0 = time.perf_counter()
    d = _draw(p, load_rps, rounds, seed)
    exits, passes = _solve(d)
    return _finish(p, d, exits, load_rps, passes, time.perf_counter() - t0)


def simulate_queue_reference(p: PaxosLanParams, load_rps: float, rounds: int = 2_000,
                             seed: int = 1) -> CurvePoint:
    """Return the same simulation as ``simulate_queue`` (same draws, same result) computed by
    a plain-Python event loop over messages: the slow, obviously correct peer used by tests
    and benchmarks."""
    _check_run(load_rps, rounds)
    if utilisation(p, load_rps) >= 1:
        return point(load_rps, math.inf, utilisation(p, load_rps))
    t0 = time.perf_counter()
    d = _draw(p, load_rps, rounds, seed)
    m = d.r.shape[1]
    t, r, svc = d.t.tolist(), d.r.tolist(), d.svc.tolist()
    lane = (d.add // _LANE).tolist()
    exits = [0] * len(svc)
    free = [_NEG] * p.n_p
    heap = [(t[i], i) for i in range(rounds)]  # (enter ns, job id): ties by job id
    heapq.heapify(heap)
    while heap:
        enter, jid = heapq.heappop(heap)
        c = lane[jid]
        free[c] = exits[jid] = max(enter, free[c]) + svc[jid]
        if jid < rounds:  # the broadcast leaves: its replies come back after their RTTs
            for j, rtt in enumerate(r[jid]):
                heapq.heappush(heap, (exits[jid] + rtt, rounds + jid * m + j))
    keyed = np.array(exits, dtype=np.int64) + (d.add // _LANE) * _LANE
    return _finish(p, d, keyed, load_rps, 0, time.perf_counter() - t0)


def queue_curve(p: PaxosLanParams, loads_rps: Sequence[float], rounds: int = 200_000,
                seed: int = 1) -> Curve:
    """Return ``simulate_queue`` over ``loads_rps`` (rounds/s) as a Curve (latency ms)."""
    pts = [simulate_queue(p, x, rounds, seed + i)
           for i, x in enumerate(check_loads(loads_rps))]
    return Curve(f"{label(p)} (queue sim)", pts, max_throughput_rps(p),
                 {"model": "message-level pipeline simulation (seed 002 part 2)",
                  "rounds": rounds, "seed": seed})

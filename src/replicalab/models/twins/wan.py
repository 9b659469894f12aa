"""Discrete-event twins of the WAN Paxos, EPaxos and WPaxos models (message-level).

Each twin runs the protocol's messages on the ``sim/`` network kernel in virtual time with the
same :class:`~replicalab.models.paxos_wan.WanParams`: one-way link delays from the region set,
and every message handled at its destination as one FIFO *job* on the node's ``pipelines``
workers — deserialise (``mu_md``) and, if the handler sends something, serialise (``mu_ms``),
normal draws floored at a tenth of the mean. Clients in each region issue requests open loop:
inter-arrival times are gamma distributed with mean ``1/rate`` and sd ``sigma_r_factor`` times
the mean (the seed draws a normal with sd = 2x mean, which would be negative half the time; a
gamma keeps the mean and the sd and stays positive).

All three share the engine :class:`_Engine` and return a :class:`~replicalab.models.base.Curve`
whose points hold, over the requests after a 10 % warm-up, the mean latency (per client region,
then weighted by the regions' shares, as the models do), the p99, ``lat_<region>_ms`` per
client region, and the busiest node's utilisation (offered load x its measured work per
request / workers). The curve's ``max_throughput_rps`` is the highest offered load the
twin's queues sustain, found by its own runs (:mod:`.capacity`); loads at or above it are
reported saturated. Service times go through an injectable ``service`` draw. Same params,
loads and seed give the same curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from replicalab.models.base import Curve, CurvePoint, point, require
from replicalab.models.epaxos import EPaxosParams
from replicalab.models.paxos_wan import WanParams
from replicalab.models.twins.capacity import (
    BacklogWatch,
    Capacity,
    ServiceDraw,
    Trial,
    default_draw,
    search,
    verdict,
)
from replicalab.models.wpaxos import WPaxosParams, nearest_zones
from replicalab.runtime.virtual import VirtualRuntime
from replicalab.sim.network import Delay, Network, Node
from replicalab.sim.random import new_stream

__all__ = ["simulate_epaxos", "simulate_paxos_wan", "simulate_wpaxos"]

_WARMUP = 0.1


class _Engine:
    """Nodes, links, jobs and open-loop clients of one simulated run."""

    def __init__(self, p: WanParams, seed: int, index: int,
                 nodes: Sequence[tuple[str, str]], draw: ServiceDraw = default_draw,
                 settle_ns: int = 0) -> None:
        self.p = p
        self.draw = draw
        self.settle_ns = settle_ns
        self.span_ns = 1
        self.watch: BacklogWatch | None = None
        self.rt = VirtualRuntime()
        self.s = new_stream(np.random.default_rng([seed, index, 0]))
        self.arrival_rng = np.random.default_rng([seed, index, 1])
        self.net = Network(self.rt, self.s, p.rs)
        # The node's own service Delay is unused: every job's cost is drawn in ``job``.
        self.nodes: list[Node] = [self.net.add_node(name, region, Delay.ms(p.mu_md_ms),
                                                    pipelines=p.pipelines)
                                  for name, region in nodes]
        self.work_ns = [[0] * p.n for _ in self.nodes]  # [node][client region]
        self.md = Delay.ms(p.mu_md_ms, p.sigma_md_ms)
        self.ms = Delay.ms(p.mu_ms_ms, p.sigma_ms_ms)
        self.lat_ns: list[int] = []
        self.lat_index: list[int] = []
        self.t0: list[int] = []
        self.region_of: list[int] = []
        self.expected = 0
        self.done = self.rt.future()

    # ---- jobs and messages
    def job(self, i: int, k: int, send: bool, fn: Callable[..., Any] | None = None,
            *args: Any) -> None:
        """Queue the handling of one message of request ``k`` at node ``i``; call ``fn(*args)``
        when it is done. ``send``: the handler also serialises a message."""
        s, d = self.s, self.draw
        svc = d(self.md, s) + (d(self.ms, s) if send else 0)
        self.work_ns[i][self.region_of[k]] += svc
        wait = self.net.process(self.nodes[i], svc)
        if fn is not None:
            self.rt.schedule(wait, fn, *args)

    def send(self, src_region: str, dst_region: str, fn: Callable[..., Any], *args: Any) -> None:
        """Deliver ``fn(*args)`` after one one-way link delay."""
        self.rt.schedule(self.net.link(src_region, dst_region).draw(self.s), fn, *args)

    # ---- clients
    def schedule_clients(self, load_rps: float, rounds: int,
                         start: Callable[[int], None], stratified: bool = False) -> None:
        """Schedule about ``rounds`` open-loop requests at ``load_rps`` over all regions.

        ``stratified`` (capacity trials): each region's requests before and after the
        capacity watch begins are drawn separately, each exactly their nominal count, so
        the watched part offers exactly the load (see ``capacity.stratify``).
        """
        p = self.p
        horizon_ms = rounds / load_rps * 1000.0
        span_ns = max(int(horizon_ms * 1_000_000), 1)
        watch_ms = min(max(span_ns // 2, self.settle_ns), span_ns) / 1e6
        times, regions = [], []
        for c, share in enumerate(p.shares):
            rate = load_rps * share / 1000.0  # per ms
            if rate <= 0:
                continue
            mean = 1.0 / rate
            if stratified:
                t = np.concatenate([self._segment(a, b, rate)
                                    for a, b in ((0.0, watch_ms), (watch_ms, horizon_ms))])
                times.append(t)
                regions.append(np.full(len(t), c))
                continue
            n = int(horizon_ms * rate * 1.3) + 64
            # A random phase, so deterministic or bursty streams of regions do not align.
            t = np.cumsum(self._gaps(mean, n)) - self.arrival_rng.random() * mean
            while t[-1] < horizon_ms:
                t = np.concatenate([t, t[-1] + np.cumsum(self._gaps(mean, n))])
            t = t[(t >= 0) & (t < horizon_ms)]
            times.append(t)
            regions.append(np.full(len(t), c))
        all_t = np.concatenate(times)
        order = np.argsort(all_t, kind="stable")
        all_t, all_r = all_t[order], np.concatenate(regions)[order]
        self.expected = len(all_t)
        self.t0 = [int(x * 1_000_000) for x in all_t]
        self.region_of = all_r.tolist()
        self.span_ns = span_ns
        self.watch = BacklogWatch(self.rt, self.nodes, self.span_ns, settle_ns=self.settle_ns)
        for k in range(self.expected):
            self.rt.schedule(self.t0[k], start, k)

    def _segment(self, a_ms: float, b_ms: float, rate_per_ms: float) -> np.ndarray:
        """Return exactly round(rate x (b - a)) arrival times (ms) in [a, b): the region's
        gaps, drawn as usual, scaled so that one more gap would end the segment."""
        m = round(rate_per_ms * (b_ms - a_ms))
        if m <= 0:
            return np.zeros(0)
        g = self._gaps(1.0 / rate_per_ms, m + 1)
        return a_ms + np.cumsum(g)[:m] * ((b_ms - a_ms) / g.sum())

    def _gaps(self, mean_ms: float, n: int) -> np.ndarray:
        """Return ``n`` inter-arrival times (ms): gamma with the given mean, sd = f x mean."""
        f = self.p.sigma_r_factor
        if f == 0:
            return np.full(n, mean_ms)
        return self.arrival_rng.gamma(1.0 / f ** 2, mean_ms * f ** 2, n)

    def finish(self, k: int) -> None:
        """Record request ``k`` as answered at its client now."""
        self.lat_ns.append(self.rt.now_ns() - self.t0[k])
        self.lat_index.append(k)
        if len(self.lat_ns) == self.expected:
            self.done.set_result(None)

    def run(self) -> None:
        """Run the virtual loop until every scheduled request is answered."""
        async def main() -> None:
            if self.expected:
                await self.done

        self.rt.run(main())

    def trial(self, load_rps: float) -> Trial:
        """Return this finished run's capacity verdict (see :mod:`.capacity`)."""
        assert self.watch is not None, "schedule_clients first"
        busy = {n.name: float(sum(w)) for n, w in zip(self.nodes, self.work_ns, strict=True)}
        work = _busiest_work_ms(self.p, np.asarray(self.work_ns, float), self.counts())
        return verdict(load_rps, self.watch, busy, self.span_ns, self.expected,
                       work / self.p.pipelines)

    def counts(self) -> np.ndarray:
        """Number of requests issued from each client region."""
        return np.bincount(np.asarray(self.region_of, dtype=int), minlength=self.p.n)

    def result(self, load_rps: float) -> CurvePoint:
        """Return the curve point: mean/p99 latency after warm-up, busiest node's utilisation."""
        p = self.p
        lat = np.asarray(self.lat_ns, dtype=float) / 1e6
        idx = np.asarray(self.lat_index)
        keep = idx >= int(self.expected * _WARMUP)
        lat, idx = lat[keep], idx[keep]
        reg = np.asarray(self.region_of)[idx]
        util = _busiest_work_ms(p, np.asarray(self.work_ns, float), self.counts()) \
            * load_rps / 1000.0 / p.pipelines
        extra, mean, weight = {}, 0.0, 0.0
        for c, r in enumerate(p.rs.regions):
            if np.any(reg == c):
                extra[f"lat_{r}_ms"] = v = float(lat[reg == c].mean())
                mean += p.shares[c] * v
                weight += p.shares[c]
        # The mean over client regions weighted by their nominal shares, as the models report
        # it: bursty arrivals make each region's request count stray from its share, and the
        # plain mean over requests would carry that noise (~1 % on WAN latencies).
        return point(load_rps, mean / weight, util, float(np.percentile(lat, 99)), **extra)


def _busiest_work_ms(p: WanParams, work_ns: np.ndarray, counts: np.ndarray) -> float:
    """Busiest node's measured work (ms) per request of the nominal client mix.

    Work is measured per node and per client region and normalised by that region's own
    request count: bursty arrivals make a region's count stray several % from its share,
    which would otherwise show up as (and bias the max towards) extra work.
    """
    per_request = np.divide(work_ns, counts, out=np.zeros_like(work_ns), where=counts > 0)
    return float((per_request @ np.asarray(p.shares)).max()) / 1e6


_CAPACITY_INDEX = 1 << 20  # the stream index of every capacity trial (same draws each)


def _settle_ns(p: WanParams, rtts: float) -> int:
    """Return how long (ns) until every message path of a twin carries traffic: its longest
    chain of WAN hops, ``rtts`` times the region set's largest mean RTT plus 3 sd."""
    worst = max(max(row) for row in p.rs.rtt_ms) + 3 * p.rs.sd_ms
    return int(rtts * worst * 1_000_000)


def measure_capacity(one: Callable[[float, int, int], _Engine], rounds: int,
                     settle_ns: int, method: str = "search") -> Capacity:
    """Return a twin's maximum throughput (req/s), measured: the highest offered load whose
    queues do not grow over ``rounds`` requests, ``one(load, index, rounds)`` building a run.

    A trial adds twice ``settle_ns`` (the twin's longest chain of WAN hops) of requests to
    ``rounds``, so that the watched second half sees every message flow and still holds
    half the rounds (WPaxos at 144 k req/s: about 80 000 requests more).
    """
    def run(load_rps: float, total: int) -> Trial:
        eng = one(load_rps, _CAPACITY_INDEX, total + math.ceil(load_rps * 2 * settle_ns / 1e9))
        eng.run()
        return eng.trial(load_rps)

    return search(run, rounds, method)


def _curve(label: str, p: WanParams, loads_rps: Sequence[float], rounds: int,
           one: Callable[[float, int, int], _Engine], capacity_rounds: int | None,
           settle_ns: int, method: str) -> Curve:
    for x in loads_rps:
        require(isinstance(x, int | float) and x > 0 and math.isfinite(x),
                f"load {x!r} req/s: twin loads must be finite numbers > 0")
    require(isinstance(rounds, int) and rounds >= 100,
            f"rounds={rounds!r}: simulate at least 100 requests per load")
    cap = measure_capacity(one, capacity_rounds or rounds, settle_ns, method)
    top = cap.max_throughput_rps
    pts: list[CurvePoint] = []
    for i, load in enumerate(loads_rps):
        if load >= top:
            pts.append(point(float(load), math.inf, load / top if top > 0 else math.inf))
            continue
        eng = one(load, i, rounds)
        eng.run()
        pts.append(eng.result(load))
    return Curve(label + " (twin)", pts, top, {"rounds": rounds, "capacity": cap.to_json()})


# ----------------------------------------------------------------------------- WAN Paxos

def simulate_paxos_wan(p: WanParams, loads_rps: Sequence[float], seed: int = 0,
                       rounds: int = 10_000, *, service: ServiceDraw | None = None,
                       capacity_rounds: int | None = None, capacity: str = "search") -> Curve:
    """Return the message-level twin's latency curve (ms vs req/s) of Multi-Paxos over WAN.

    One node per region; every client sends to the leader, which sends phase-2 to all other
    nodes and answers after ``floor(N/2)`` replies. A follower holds its reply ``persist_ms``
    after its job (a log write: a delay, not worker time); a client outside the leader's
    region gets its answer ``forward_ms`` later (it entered at its own region's member).
    """
    regions = p.rs.regions
    lead = p.leader_index
    n = len(regions)
    need = n // 2

    draw = service or default_draw
    settle = _settle_ns(p, 1.5)  # client -> leader, then phase 2's round trip

    def one(load: float, index: int, rounds: int) -> _Engine:
        eng = _Engine(p, seed, index, [(f"n{r}", r) for r in regions], draw, settle)
        lr = regions[lead]
        got: list[int] = []

        def start(k: int) -> None:
            eng.send(regions[eng.region_of[k]], lr, at_leader, k)

        def at_leader(k: int) -> None:
            eng.job(lead, k, True, broadcast, k)

        def broadcast(k: int) -> None:
            for j in range(n):
                if j != lead:
                    eng.send(lr, regions[j], at_follower, k, j)

        def at_follower(k: int, j: int) -> None:
            if p.persist_ms > 0:
                eng.job(j, k, True, eng.rt.schedule, round(p.persist_ms * 1e6), eng.send,
                        regions[j], lr, reply, k)
            else:
                eng.job(j, k, True, eng.send, regions[j], lr, reply, k)

        def answer(k: int) -> None:
            if p.forward_ms > 0 and eng.region_of[k] != lead:
                eng.rt.schedule(round(p.forward_ms * 1e6), eng.finish, k)
            else:
                eng.finish(k)

        def reply(k: int) -> None:
            got[k] += 1
            if got[k] == need:
                eng.job(lead, k, True, eng.send, lr, regions[eng.region_of[k]], answer, k)
            else:
                eng.job(lead, k, False)

        eng.schedule_clients(load, rounds, start, index == _CAPACITY_INDEX)
        got.extend([0] * eng.expected)
        return eng

    label = f"Paxos WAN, leader {regions[lead]} ({p.rs.name})"
    return _curve(label, p, loads_rps, rounds, one, capacity_rounds, settle, capacity)


# ----------------------------------------------------------------------------- EPaxos

def simulate_epaxos(p: EPaxosParams, loads_rps: Sequence[float], seed: int = 0,
                    rounds: int = 10_000, *, service: ServiceDraw | None = None,
                    capacity_rounds: int | None = None, capacity: str = "search") -> Curve:
    """Return the twin's latency curve (ms vs req/s) of EPaxos: each region's node leads its
    clients' commands; PreAccept to the peers, fast path after ``fast_quorum - 1`` replies,
    else (probability ``conflict``) an Accept round answered by ``floor(N/2)`` peers."""
    w = p.wan
    regions = w.rs.regions
    n = len(regions)
    fq_need, slow_need = p.fast_quorum_size - 1, n // 2
    pre_targets = [p.preaccept_targets(i) for i in range(n)]
    acc_targets = [p.accept_targets(i) for i in range(n)]

    draw = service or default_draw
    settle = _settle_ns(w, 2.0)  # PreAccept, then Accept: two round trips

    def one(load: float, index: int, rounds: int) -> _Engine:
        eng = _Engine(w, seed, index, [(f"n{r}", r) for r in regions], draw, settle)
        uni = eng.s.uniform
        got: list[int] = []
        slow: list[bool] = []
        phase: list[int] = []

        def start(k: int) -> None:
            c = eng.region_of[k]
            eng.send(regions[c], regions[c], at_leader, k)

        def at_leader(k: int) -> None:
            eng.job(eng.region_of[k], k, True, send_all, k, 0)

        def send_all(k: int, ph: int) -> None:
            i = eng.region_of[k]
            got[k] = 0
            phase[k] = ph
            for j in (pre_targets[i] if ph == 0 else acc_targets[i]):
                eng.send(regions[i], regions[j], at_follower, k, j, ph)

        def at_follower(k: int, j: int, ph: int) -> None:
            i = eng.region_of[k]
            eng.job(j, k, True, eng.send, regions[j], regions[i], reply, k, ph)

        def reply(k: int, ph: int) -> None:
            i = eng.region_of[k]
            if ph != phase[k]:
                eng.job(i, k, False)  # a late PreAcceptOK after the Accept round began
                return
            got[k] += 1
            if got[k] == (fq_need if ph == 0 else slow_need):
                if ph == 0 and slow[k]:
                    eng.job(i, k, True, send_all, k, 1)
                else:
                    eng.job(i, k, True, eng.send, regions[i], regions[i], eng.finish, k)
            else:
                eng.job(i, k, False)

        eng.schedule_clients(load, rounds, start, index == _CAPACITY_INDEX)
        got.extend([0] * eng.expected)
        phase.extend([0] * eng.expected)
        slow.extend(uni() < p.conflict for _ in range(eng.expected))
        return eng

    label = f"EPaxos, conflict {p.conflict:.0%} ({w.rs.name})"
    return _curve(label, w, loads_rps, rounds, one, capacity_rounds, settle, capacity)


# ----------------------------------------------------------------------------- WPaxos

class _WPaxosRun:
    """One load's WPaxos requests on an engine: each method is a step of a request's life
    (its arguments: request ``k`` and the nodes it involves), per-request state in lists."""

    def __init__(self, p: WPaxosParams, eng: _Engine) -> None:
        w = p.wan
        self.p, self.eng, self.s = p, eng, eng.s
        self.regions = w.rs.regions
        self.zones, self.per = len(self.regions), p.nodes_per_zone
        self.n = self.zones * self.per
        self.zone_of = [i // self.per for i in range(self.n)]
        self.far = [nearest_zones(w, z, p.fz) for z in range(self.zones)]
        self.p1_need = [self.per - p.fn_ - 1 if u == z else self.per - p.fn_
                        for z in range(self.zones) for u in range(self.zones)]  # [z * zones + u]
        self.p1_zones = self.zones - p.fz
        self.entry: list[int] = []
        self.got: list[int] = []
        self.zone_got: list[list[int]] = []
        self.zones_ok: list[int] = []

    def allocate(self, m: int) -> None:
        """Make room for the state of ``m`` requests."""
        self.entry.extend([0] * m)
        self.got.extend([0] * m)
        self.zone_got.extend([[]] * m)
        self.zones_ok.extend([0] * m)

    def pick(self, k: int, first: int) -> list[int]:
        """Return ``k`` distinct nodes of the zone whose first node is ``first``."""
        pool = list(range(first, first + self.per))
        out = []
        for m in range(k):
            j = m + self.s.index(len(pool) - m)
            pool[m], pool[j] = pool[j], pool[m]
            out.append(pool[m])
        return out

    def phase2_targets(self, x: int) -> list[int]:
        """Return leader ``x``'s thrifty phase-2 quorum: fn peers in its zone, fn + 1 nodes
        in each of its fz nearest zones."""
        z = self.zone_of[x]
        per = self.per
        peers = [y for y in range(z * per, z * per + per) if y != x]
        out = []
        for m in range(self.p.fn_):
            j = m + self.s.index(len(peers) - m)
            peers[m], peers[j] = peers[j], peers[m]
            out.append(peers[m])
        for u in self.far[z]:
            out.extend(self.pick(self.p.fn_ + 1, u * per))
        return out

    def start(self, k: int) -> None:
        """The client sends request ``k`` to a random leader of its zone."""
        c = self.eng.region_of[k]
        x = c * self.per + self.s.index(self.p.leaders)
        self.entry[k] = x
        self.eng.send(self.regions[c], self.regions[c], self.at_entry, k, x)

    def at_entry(self, k: int, x: int) -> None:
        """Leader ``x`` owns the object (phase 2), steals it (phase 1 first) or forwards the
        request to a leader of another zone."""
        u = self.s.uniform()
        if u < self.p.locality:
            self.eng.job(x, k, True, self.phase2, k, x, -1)
        elif u < self.p.locality + self.p.steal:
            self.eng.job(x, k, True, self.phase1, k, x)
        else:
            z = self.zone_of[x]
            oz = self.s.index(self.zones - 1)
            oz += oz >= z
            y = oz * self.per + self.s.index(self.p.leaders)
            self.eng.job(x, k, True, self.eng.send, self.regions[z], self.regions[oz],
                         self.at_owner, k, y)

    def at_owner(self, k: int, y: int) -> None:
        """The owning leader ``y`` commits a forwarded request."""
        self.eng.job(y, k, True, self.phase2, k, y, self.entry[k])

    def phase2(self, k: int, x: int, back: int) -> None:
        """Leader ``x`` sends phase 2 to its quorum (``back``: the forwarding node, or -1)."""
        targets = self.phase2_targets(x)
        self.got[k] = len(targets)
        for t in targets:
            self.eng.send(self.regions[self.zone_of[x]], self.regions[self.zone_of[t]],
                          self.p2_follower, k, x, t, back)

    def p2_follower(self, k: int, x: int, t: int, back: int) -> None:
        """Follower ``t`` accepts and answers leader ``x``."""
        self.eng.job(t, k, True, self.eng.send, self.regions[self.zone_of[t]],
                     self.regions[self.zone_of[x]], self.p2_reply, k, x, back)

    def p2_reply(self, k: int, x: int, back: int) -> None:
        """Leader ``x`` counts a phase-2 reply; the last one commits and answers."""
        self.got[k] -= 1
        if self.got[k]:
            self.eng.job(x, k, False)
            return
        zx = self.regions[self.zone_of[x]]
        if back < 0:  # answer the client in this zone
            self.eng.job(x, k, True, self.eng.send, zx, self.regions[self.eng.region_of[k]],
                         self.eng.finish, k)
        else:         # relay to the forwarding node, which answers its client
            self.eng.job(x, k, True, self.eng.send, zx, self.regions[self.zone_of[back]],
                         self.relay, k, back)

    def relay(self, k: int, x: int) -> None:
        """The forwarding node ``x`` answers its client."""
        self.eng.job(x, k, True, self.eng.send, self.regions[self.zone_of[x]],
                     self.regions[self.eng.region_of[k]], self.eng.finish, k)

    def phase1(self, k: int, x: int) -> None:
        """Leader ``x`` steals the object: phase 1 to every node."""
        zones = self.zones
        self.zone_got[k] = [0] * zones
        self.zones_ok[k] = 1 if self.p1_need[self.zone_of[x] * zones + self.zone_of[x]] == 0 \
            else 0
        if self.zones_ok[k] >= self.p1_zones:  # cannot happen with a valid grid, kept for safety
            self.eng.job(x, k, True, self.phase2, k, x, -1)
            return
        for t in range(self.n):
            if t != x:
                self.eng.send(self.regions[self.zone_of[x]], self.regions[self.zone_of[t]],
                              self.p1_follower, k, x, t)

    def p1_follower(self, k: int, x: int, t: int) -> None:
        """Node ``t`` promises and answers leader ``x``."""
        self.eng.job(t, k, True, self.eng.send, self.regions[self.zone_of[t]],
                     self.regions[self.zone_of[x]], self.p1_reply, k, x, self.zone_of[t])

    def p1_reply(self, k: int, x: int, u: int) -> None:
        """Leader ``x`` counts a promise from zone ``u``; a grid quorum starts phase 2."""
        zg = self.zone_got[k]
        zg[u] += 1
        if zg[u] == self.p1_need[self.zone_of[x] * self.zones + u]:
            self.zones_ok[k] += 1
            if self.zones_ok[k] == self.p1_zones:
                self.eng.job(x, k, True, self.phase2, k, x, -1)
                return
        self.eng.job(x, k, False)


def simulate_wpaxos(p: WPaxosParams, loads_rps: Sequence[float], seed: int = 0,
                    rounds: int = 10_000, *, service: ServiceDraw | None = None,
                    capacity_rounds: int | None = None, capacity: str = "search") -> Curve:
    """Return the twin's latency curve (ms vs req/s) of WPaxos: zones = regions with
    ``nodes_per_zone`` nodes, the first ``leaders_per_zone`` of them leading objects.

    A request goes to a random leader of its zone: with probability ``locality`` it owns the
    object and commits with a phase-2 to its thrifty grid quorum; with probability ``steal``
    it first runs phase-1 on all nodes (grid quorum: ``l - fn`` nodes in ``Z - fz`` zones);
    otherwise it forwards the request to a random leader of a random other zone and relays the
    answer back (the steps: :class:`_WPaxosRun`).
    """
    w = p.wan
    regions = w.rs.regions
    per = p.nodes_per_zone
    n = len(regions) * per
    draw = service or default_draw
    settle = _settle_ns(w, 1.25 + p.fz)  # forward and answer, plus phase 2 to fz zones

    def one(load: float, index: int, rounds: int) -> _Engine:
        eng = _Engine(w, seed, index,
                      [(f"{regions[i // per]}{i % per}", regions[i // per]) for i in range(n)],
                      draw, settle)
        run = _WPaxosRun(p, eng)
        eng.schedule_clients(load, rounds, run.start, index == _CAPACITY_INDEX)
        run.allocate(eng.expected)
        return eng

    label = (f"WPaxos {n} nodes, locality {p.locality:.0%}, steal {p.steal:.0%}, "
             f"fz={p.fz} ({w.rs.name})")
    return _curve(label, w, loads_rps, rounds, one, capacity_rounds, settle, capacity)

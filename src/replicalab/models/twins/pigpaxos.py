"""Discrete-event twin of the PigPaxos model: phase 2 message by message on the sim kernel.

Open-loop clients next to the leader issue requests with gamma inter-arrival gaps (mean
1/load, sd ``sigma_r_factor`` x mean; the seed draws normal gaps, but a gap cannot be
negative, so we keep its mean and sd with a gamma). Every message handled is one job in the
receiving node's FIFO pipeline: deserialization/processing, plus the serialization of the
message it sends in response, if any. Each round every relay group draws its relays at random.
Events are plain callbacks (``schedule``), not coroutines, for speed. Service times go
through an injectable ``service`` draw.

Everything the twin reports is measured on its own runs: the maximum throughput is the
highest offered load its queues sustain (:mod:`.capacity`), a point's utilisation is the
busiest node's busy time over the arrival span, and loads at or above the measured maximum
are reported saturated. From the model it takes the parameters, the label and the relay
layout (which followers form which group: part of the deployment, not a result).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from replicalab.models.base import Curve, CurvePoint, point, require
from replicalab.models.pigpaxos import LAN_REGION, PigPaxosParams, describe, layout
from replicalab.models.twins.capacity import (
    BacklogWatch,
    Capacity,
    ServiceDraw,
    Trial,
    default_draw,
    search,
    stratify,
    verdict,
)
from replicalab.models.twins.rounds import RoundsRun
from replicalab.regions import RegionSet
from replicalab.runtime.base import NS_PER_MS
from replicalab.runtime.virtual import VirtualRuntime
from replicalab.sim.network import Delay, Network, Node
from replicalab.sim.random import new_stream


def _regions(p: PigPaxosParams) -> RegionSet:
    """Return the kernel's region set: one LAN region, or ``p.regions`` with p's LAN figures."""
    if p.regions is None:
        return RegionSet.from_matrix("lan", [LAN_REGION], [[0.0]],
                                     intra_rtt_ms=p.mu_l_ms, intra_sd_ms=p.sigma_l_ms)
    assert isinstance(p.regions, RegionSet)
    return dataclasses.replace(p.regions, intra_rtt_ms=p.mu_l_ms, intra_sd_ms=p.sigma_l_ms)


def gaps_ns(rng: np.random.Generator, load_rps: float, cv: float, count: int) -> np.ndarray:
    """Return ``count`` inter-arrival gaps in ns with mean 1/load and coefficient of variation
    ``cv`` (gamma; constant gaps when cv = 0).

    The gaps are rescaled so their mean is exactly 1/load: with cv = 2 the realised load of
    10^4 gamma gaps is otherwise off by a few per cent, which near saturation moves latency
    far more than anything the model is checked on.
    """
    mean_ns = 1e9 / load_rps
    if cv <= 0:
        return np.full(count, mean_ns)
    shape = 1.0 / cv ** 2
    g = rng.gamma(shape, mean_ns / shape, count)
    return g * (mean_ns * count / g.sum())


class _Unit:
    """One relay's share of one round (mutable: counts the member replies received)."""

    __slots__ = ("count", "members", "need", "relay", "rid")

    def __init__(self, rid: int, relay: Node, members: list[Node], need: int) -> None:
        self.rid = rid
        self.relay = relay
        self.members = members
        self.need = need
        self.count = 0


class _Run(RoundsRun):
    """One offered load: builds the cluster, runs ``total`` rounds, keeps their latencies."""

    def __init__(self, p: PigPaxosParams, load_rps: float, rng: np.random.Generator,
                 total: int, draw: ServiceDraw = default_draw, stratified: bool = False
                 ) -> None:
        self.p = p
        self.draw = draw
        lay = layout(p)
        self.quorum_votes = lay.quorum - 1  # votes the aggregates must bring (leader votes too)
        gaps = gaps_ns(rng, load_rps, p.sigma_r_factor, total)
        if stratified:  # a capacity trial: the watched half offers exactly the load
            gaps = stratify(gaps, 1e9 / load_rps)
        self.gaps = gaps.astype(np.int64).tolist()
        self.rt = VirtualRuntime()
        self.s = new_stream(rng)
        self.net = Network(self.rt, self.s, _regions(p))
        svc = Delay.ms(p.mu_md_ms, p.sigma_md_ms)
        self.deser = svc
        self.ser = Delay.ms(p.mu_ms_ms, p.sigma_ms_ms)
        self.leader = self.net.add_node("leader", lay.leader_region, svc, p.pipelines)
        self.groups: list[list[Node]] = []
        for gi, (region, size) in enumerate(lay.groups):
            self.groups.append([self.net.add_node(f"g{gi}n{i}", region, svc, p.pipelines)
                                for i in range(size)])
        self.k = p.relays_per_group
        self.need = {u.members: u.wait for u in lay.units}
        self.busy_ns = {name: 0 for name in self.net.nodes}
        self.total = total
        self.sent = [0] * total
        self.votes = [0] * total
        self.done = [False] * total
        self.latency_ns = [0] * total
        self.finished = 0
        self.cross_out = 0  # leader-side cross-region messages (leader -> relay)
        self.cross_in = 0   # relay -> leader cross-region messages
        self.cross_all = 0
        self.leader_wait_ns = 0
        self.follower_wait_ns = 0
        self.follower_jobs = 0
        self.fut = self.rt.future()
        self.client = self.net.link(lay.leader_region, lay.leader_region)
        self.span_ns = max(sum(self.gaps[1:]), 1)
        self.watch = BacklogWatch(self.rt, list(self.net.nodes.values()), self.span_ns)

    # -- plumbing --------------------------------------------------------------------------

    def _work(self, node: Node, cost_ns: int) -> int:
        """Queue ``cost_ns`` at ``node``; return ns until it is done."""
        self.busy_ns[node.name] += cost_ns
        return self.net.process(node, cost_ns)

    def _hop(self, src: Node, dst: Node) -> int:
        """Return a one-way delay src -> dst in ns, counting cross-region messages."""
        if src.region != dst.region:
            self.cross_all += 1
        return self.net.link(src.region, dst.region).draw(self.s)

    # -- the protocol ----------------------------------------------------------------------

    def at_leader_request(self, rid: int) -> None:
        d, s = self.draw, self.s
        cost = d(self.deser, s) + d(self.ser, s)  # request in, broadcast out
        w = self._work(self.leader, cost)
        self.leader_wait_ns += w - cost
        self.rt.schedule(w, self.broadcast, rid)

    def broadcast(self, rid: int) -> None:
        s, k, leader = self.s, self.k, self.leader
        for group in self.groups:
            if k == 1:  # the common case, without a shuffle
                i = s.index(len(group))
                units = [(group[i], group[:i] + group[i + 1:])]
            else:
                order = list(group)
                for i in range(k):  # partial Fisher-Yates: the first k become relays
                    j = i + s.index(len(order) - i)
                    order[i], order[j] = order[j], order[i]
                rest = order[k:]
                units = [(order[i], rest[i::k]) for i in range(k)]
            for relay, members in units:
                u = _Unit(rid, relay, members, self.need[len(members)])
                d = self._hop(leader, relay)
                if relay.region != leader.region:
                    self.cross_out += 1
                self.rt.schedule(d, self.at_relay, u)

    def at_relay(self, u: _Unit) -> None:
        relay = u.relay
        cost = self.draw(self.deser, self.s)
        if u.members:
            cost += self.draw(self.ser, self.s)  # one forward, sent to every member
        if u.need == 0:
            cost += self.draw(self.ser, self.s)  # aggregate right away
        w = self._work(relay, cost)
        self.follower_wait_ns += w - cost
        self.follower_jobs += 1
        for m in u.members:
            self.rt.schedule(w + self._hop(relay, m), self.at_member, u, m)
        if u.need == 0:
            self._aggregate(u, w)

    def at_member(self, u: _Unit, m: Node) -> None:
        cost = self.draw(self.deser, self.s) + self.draw(self.ser, self.s)  # accept, reply
        w = self._work(m, cost)
        self.follower_wait_ns += w - cost
        self.follower_jobs += 1
        self.rt.schedule(w + self._hop(m, u.relay), self.at_relay_reply, u)

    def at_relay_reply(self, u: _Unit) -> None:
        u.count += 1
        if u.count == u.need:
            cost = self.draw(self.deser, self.s) + self.draw(self.ser, self.s)
            self._aggregate(u, self._work(u.relay, cost))
        else:  # before or after the relay's answer: deserialized all the same
            self._work(u.relay, self.draw(self.deser, self.s))

    def _aggregate(self, u: _Unit, after_ns: int) -> None:
        d = self._hop(u.relay, self.leader)
        if u.relay.region != self.leader.region:
            self.cross_in += 1
        self.rt.schedule(after_ns + d, self.at_leader_aggregate, u.rid, u.need + 1)

    def at_leader_aggregate(self, rid: int, votes: int) -> None:
        if self.done[rid]:  # late aggregate: dead weight
            self._work(self.leader, self.draw(self.deser, self.s))
            return
        self.votes[rid] += votes
        if self.votes[rid] < self.quorum_votes:
            self._work(self.leader, self.draw(self.deser, self.s))
            return
        self.done[rid] = True
        d, s = self.draw, self.s
        cost = d(self.deser, s) + d(self.ser, s)  # commit, reply to client
        w = self._work(self.leader, cost)
        self.rt.schedule(w + self.client.draw(self.s), self.finish, rid)


def _point(r: _Run, load_rps: float, warmup: int) -> CurvePoint:
    """Return the point of one run: latency over rounds after the warm-up, utilisation of
    the busiest node over the span of arrivals."""
    lat = np.asarray(r.latency_ns[warmup:], dtype=np.float64) / NS_PER_MS
    span_ns = r.span_ns
    util = max(r.busy_ns.values()) / (r.p.pipelines * span_ns)
    rounds = r.total
    return point(load_rps, float(lat.mean()), util, float(np.percentile(lat, 99)),
                 leader_utilisation=r.busy_ns["leader"] / (r.p.pipelines * span_ns),
                 leader_wait_ms=r.leader_wait_ns / rounds / NS_PER_MS,
                 follower_wait_ms=r.follower_wait_ns / max(r.follower_jobs, 1) / NS_PER_MS,
                 cross_region_out_per_round=r.cross_out / rounds,
                 cross_region_in_per_round=r.cross_in / rounds,
                 cross_region_msgs_per_round=r.cross_all / rounds,
                 rounds=float(rounds - warmup))


def measure_capacity(p: PigPaxosParams, seed: int = 0, rounds: int = 10_000,
                     service: ServiceDraw | None = None, method: str = "search") -> Capacity:
    """Return the twin's maximum throughput (requests/s), measured: the highest offered
    load whose queues do not grow over ``rounds`` rounds (every trial from ``seed``)."""
    require(rounds >= 10, f"rounds={rounds}: simulate at least 10 rounds per load")

    def run(load_rps: float, total: int) -> Trial:
        r = _Run(p, load_rps, np.random.default_rng([seed, 1 << 20]), total,
                 service or default_draw, stratified=True)
        r.run()
        return verdict(load_rps, r.watch, r.busy_ns, r.span_ns, total)

    return search(run, rounds, method)


def simulate(p: PigPaxosParams, loads_rps: Sequence[float], seed: int = 0,
             rounds: int = 10_000, warmup_fraction: float = 0.1, *,
             service: ServiceDraw | None = None, capacity_rounds: int | None = None,
             capacity: str = "search") -> Curve:
    """Return the twin's latency (ms) vs offered load (requests/s) for ``p``.

    Each load runs ``rounds`` rounds (the first ``warmup_fraction`` are not measured) from
    its own stream derived from ``seed``; the same seed gives the same curve.
    ``max_throughput_rps`` is measured by ``measure_capacity`` (``capacity_rounds`` per
    trial, default ``rounds``; ``capacity="estimate"``: the utilisation law on a pilot run
    only; details in ``extra["capacity"]``); loads at or above it are saturated points,
    not run. ``service`` replaces the per-message service-time draw.
    """
    require(rounds >= 10, f"rounds={rounds}: simulate at least 10 rounds per load")
    require(0 <= warmup_fraction < 1, f"warmup_fraction={warmup_fraction}: use 0 <= f < 1")
    for load in loads_rps:
        require(math.isfinite(load) and load > 0,
                f"load {load!r} requests/s: offered loads must be positive numbers")
    cap = measure_capacity(p, seed, capacity_rounds or rounds, service, capacity)
    top = cap.max_throughput_rps
    pts = []
    for i, load in enumerate(loads_rps):
        if load >= top:
            pts.append(point(float(load), math.inf, load / top if top > 0 else math.inf))
            continue
        rng = np.random.default_rng([seed, i])
        r = _Run(p, float(load), rng, rounds, service or default_draw)
        r.run()
        pts.append(_point(r, float(load), int(rounds * warmup_fraction)))
    return Curve(f"{describe(p)} (twin)", pts, top,
                 {"model": "pigpaxos-twin", "seed": seed, "rounds": rounds,
                  "capacity": cap.to_json()})

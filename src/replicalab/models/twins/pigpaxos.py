"""Discrete-event twin of the PigPaxos model: phase 2 message by message on the sim kernel.

Open-loop clients next to the leader issue requests with gamma inter-arrival gaps (mean
1/load, sd ``sigma_r_factor`` x mean; the seed draws normal gaps, but a gap cannot be
negative, so we keep its mean and sd with a gamma). Every message handled is one job in the
receiving node's FIFO pipeline: deserialization/processing, plus the serialization of the
message it sends in response, if any. Each round every relay group draws its relays at random.
Events are plain callbacks (``schedule``), not coroutines, for speed. Service times go
through an injectable ``service`` draw.

A failed relay group (``failed_group``, ``failed_nodes``) has that many of its nodes down:
a down node drops every message it gets. The leader keeps, per round, which groups
answered; ``relay_timeout_ms`` after sending to a group that has not answered in a round
that has not committed, it re-sends through a relay of that group not tried in this round
(one serialization at the leader). A relay arms a ``member_timeout_ms`` timer when it
forwards and, if its replies are not all in by then, answers with the votes it has; late
replies are deserialized as dead weight. :func:`timeline` runs the seed's experiment: the
group fails only inside a window of the run.

Everything the twin reports is measured on its own runs: the maximum throughput is the
highest offered load its queues sustain (:mod:`.capacity`), a point's utilisation is the
busiest node's busy time over the arrival span, and loads at or above the measured maximum
are reported saturated. From the model it takes the parameters, the label and the relay
layout (which followers form which group: part of the deployment, not a result).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

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

    __slots__ = ("count", "group", "members", "need", "relay", "rid", "sent")

    def __init__(self, rid: int, relay: Node, members: list[Node], need: int,
                 group: int = 0) -> None:
        self.rid = rid
        self.relay = relay
        self.members = members
        self.need = need
        self.group = group
        self.count = 0
        self.sent = False  # the aggregate has left (all replies in, or the time-out)


class _Run(RoundsRun):
    """One offered load: builds the cluster, runs ``total`` rounds, keeps their latencies."""

    def __init__(self, p: PigPaxosParams, load_rps: float, rng: np.random.Generator,
                 total: int, draw: ServiceDraw = default_draw, stratified: bool = False,
                 fail_window_ns: tuple[int, int] | None = None) -> None:
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
        # the failure: which nodes are down, and when (the whole run unless a window)
        self.failing = p.failed_group is not None
        self.down: set[str] = set()
        if self.failing:
            gi = p.failed_group
            assert gi is not None
            d = len(self.groups[gi]) if p.failed_nodes is None else p.failed_nodes
            self.down = {n.name for n in self.groups[gi][:d]}
        self.window = fail_window_ns or (0, 1 << 62)
        self.relay_timeout_ns = int(p.relay_timeout_ms * NS_PER_MS)
        self.member_timeout_ns = int(p.member_timeout_ms * NS_PER_MS)
        self.heard: dict[int, int] = {}  # round -> bit mask of the groups that answered
        self.tried: dict[tuple[int, int], list[Node]] = {}
        self.reroutes = 0
        self.lost_to_down = 0

    # -- plumbing --------------------------------------------------------------------------

    def _work(self, node: Node, cost_ns: int) -> int:
        """Queue ``cost_ns`` at ``node``; return ns until it is done."""
        self.busy_ns[node.name] += cost_ns
        return self.net.process(node, cost_ns)

    def _is_down(self, node: Node) -> bool:
        """Return True when ``node`` is down now (it drops whatever reaches it)."""
        if node.name not in self.down:
            return False
        now = self.rt.now_ns()
        return self.window[0] <= now < self.window[1]

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
        s, k = self.s, self.k
        for gi, group in enumerate(self.groups):
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
                self._send(rid, gi, relay, members, 0)
            if self.failing:  # one relay per group (the params check it)
                self.tried[(rid, gi)] = [units[0][0]]
                self.rt.schedule(self.relay_timeout_ns, self.leader_timeout, rid, gi)

    def _send(self, rid: int, gi: int, relay: Node, members: list[Node], after_ns: int) -> None:
        """Send round ``rid``'s message for group ``gi`` to ``relay`` ``after_ns`` from now."""
        u = _Unit(rid, relay, members, self.need[len(members)], gi)
        d = self._hop(self.leader, relay)
        if relay.region != self.leader.region:
            self.cross_out += 1
        self.rt.schedule(after_ns + d, self.at_relay, u)

    def leader_timeout(self, rid: int, gi: int) -> None:
        """The leader's relay time-out: re-route group ``gi``'s message of round ``rid``
        through a relay not tried yet, unless the round committed or the group answered."""
        if self.done[rid] or self.heard.get(rid, 0) >> gi & 1:
            self.tried.pop((rid, gi), None)
            return
        tried = self.tried[(rid, gi)]
        left = [n for n in self.groups[gi] if n not in tried]
        if not left:
            return
        relay = left[self.s.index(len(left))]
        tried.append(relay)
        self.reroutes += 1
        cost = self.draw(self.ser, self.s)  # the message again, to the new relay
        w = self._work(self.leader, cost)
        self.leader_wait_ns += w - cost
        members = [n for n in self.groups[gi] if n is not relay]
        self._send(rid, gi, relay, members, w)
        self.rt.schedule(self.relay_timeout_ns, self.leader_timeout, rid, gi)

    def at_relay(self, u: _Unit) -> None:
        relay = u.relay
        if self._is_down(relay):
            self.lost_to_down += 1
            return
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
        elif self.failing:
            self.rt.schedule(w + self.member_timeout_ns, self.member_timeout, u)

    def member_timeout(self, u: _Unit) -> None:
        """The relay's time-out: answer with the votes it has if it has not answered."""
        if u.sent or self._is_down(u.relay):
            return
        cost = self.draw(self.ser, self.s)
        self._aggregate(u, self._work(u.relay, cost))

    def at_member(self, u: _Unit, m: Node) -> None:
        if self._is_down(m):
            return
        cost = self.draw(self.deser, self.s) + self.draw(self.ser, self.s)  # accept, reply
        w = self._work(m, cost)
        self.follower_wait_ns += w - cost
        self.follower_jobs += 1
        self.rt.schedule(w + self._hop(m, u.relay), self.at_relay_reply, u)

    def at_relay_reply(self, u: _Unit) -> None:
        if self._is_down(u.relay):
            return
        if u.sent:  # after the relay's answer (its time-out): dead weight
            self._work(u.relay, self.draw(self.deser, self.s))
            return
        u.count += 1
        if u.count == u.need:
            cost = self.draw(self.deser, self.s) + self.draw(self.ser, self.s)
            self._aggregate(u, self._work(u.relay, cost))
        else:  # before the relay's answer: deserialized all the same
            self._work(u.relay, self.draw(self.deser, self.s))

    def _aggregate(self, u: _Unit, after_ns: int) -> None:
        u.sent = True
        d = self._hop(u.relay, self.leader)
        if u.relay.region != self.leader.region:
            self.cross_in += 1
        self.rt.schedule(after_ns + d, self.at_leader_aggregate, u.rid, u.count + 1, u.group)

    def at_leader_aggregate(self, rid: int, votes: int, group: int = 0) -> None:
        if self.failing:
            self.heard[rid] = self.heard.get(rid, 0) | 1 << group
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


@dataclass(frozen=True)
class Timeline:
    """A run of the twin with the failure inside a window: per bin of ``bin_s`` seconds (by
    when rounds were sent), the mean and p99 latency (ms, None for an empty bin) and the
    commits per second (by when rounds finished)."""

    load_rps: float
    bin_s: float
    fail_from_s: float
    fail_to_s: float
    t_s: list[float]
    mean_ms: list[float | None]
    p99_ms: list[float | None]
    commits_rps: list[float]
    reroutes: int
    lost_to_down: int

    def phase_mean_ms(self, inside: bool, margin_s: float = 0.5) -> float:
        """Return the mean latency (ms) of the bins inside the window (or outside it), the
        ``margin_s`` around each edge left out."""
        vals = [m for t, m in zip(self.t_s, self.mean_ms, strict=True) if m is not None
                and ((self.fail_from_s + margin_s <= t < self.fail_to_s - margin_s) if inside
                     else (t < self.fail_from_s - margin_s or t >= self.fail_to_s + margin_s))]
        return float(np.mean(vals)) if vals else math.nan


def timeline(p: PigPaxosParams, load_rps: float, duration_s: float, fail_from_s: float,
             fail_to_s: float, seed: int = 0, bin_s: float = 0.5,
             warmup_s: float = 0.5) -> Timeline:
    """Run the twin for ``duration_s`` at ``load_rps`` with ``p``'s failed relay group down
    only from ``fail_from_s`` to ``fail_to_s`` (the seed's experiment: "one relay group
    experiencing a failure on every operation for 10 seconds"); return it binned."""
    require(p.failed_group is not None, "timeline needs a failure: set failed_group")
    require(0 <= fail_from_s < fail_to_s <= duration_s and bin_s > 0 and load_rps > 0,
            f"failure window {fail_from_s}-{fail_to_s} s must lie in the run of {duration_s} "
            "s, and the bin and the load must be positive")
    total = max(10, int(load_rps * duration_s))
    r = _Run(p, float(load_rps), np.random.default_rng([seed, 7]), total,
             fail_window_ns=(int(fail_from_s * 1e9), int(fail_to_s * 1e9)))
    r.run()
    sent_s = np.asarray(r.sent, dtype=np.float64) / 1e9
    lat_ms = np.asarray(r.latency_ns, dtype=np.float64) / NS_PER_MS
    done_s = sent_s + lat_ms / 1000
    edges = np.arange(0.0, duration_s + bin_s / 2, bin_s)
    t, mean, p99, commits = [], [], [], []
    for lo, hi in itertools.pairwise(edges):
        if hi <= warmup_s:
            continue
        m = (sent_s >= lo) & (sent_s < hi)
        t.append(round(float((lo + hi) / 2), 6))
        mean.append(float(lat_ms[m].mean()) if m.any() else None)
        p99.append(float(np.percentile(lat_ms[m], 99)) if m.any() else None)
        commits.append(float(np.sum((done_s >= lo) & (done_s < hi)) / bin_s))
    return Timeline(float(load_rps), bin_s, fail_from_s, fail_to_s, t, mean, p99, commits,
                    r.reroutes, r.lost_to_down)

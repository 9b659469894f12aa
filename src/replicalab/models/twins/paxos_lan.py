"""Discrete-event twin of the LAN Multi-Paxos / FPaxos model: phase 2 message by message.

Runs on replicalab's network kernel in virtual time with the same
:class:`~replicalab.models.paxos_lan.PaxosLanParams`. Open-loop clients next to the leader
send requests with the model's inter-round gaps (``round_gaps_ms``) over the client link
(one-way mean ``client_rtt_ms``/2). Every message handled is one job in the receiving node's
FIFO queue (``pipelines=n_p`` workers at the leader, earliest-free worker first, one worker
at each follower):

* leader, client request: deserialize + serialize the broadcast, then send to the followers
  it talks to (all n-1, or q2-1 with ``talk_to="quorum"``);
* follower: deserialize the accept + serialize its reply, sent back over the LAN link
  (one-way mean ``mu_l_ms``/2, sd ``sigma_l_ms``/sqrt 2);
* leader, reply: deserialize; the one that completes the quorum also serializes the reply
  to the client; later replies are dead weight but still occupy the queue.

Where it is more faithful than the analytic model: followers queue too (the closed form folds
their processing into the reply RTT), replies of one round queue behind each other at the
leader, and a round meets the queue twice (request, then replies). Per-message times are
normal draws floored at a tenth of their mean (the kernel's ``Delay``), through an injectable
``service`` draw.

Everything the twin reports is measured on its own runs: the maximum throughput is the
highest offered load its queues sustain (:mod:`.capacity`), a point's utilisation is the
busiest node's busy time over the arrival span, and loads at or above the measured maximum
are reported saturated. From the model it takes only the parameters, the label and the
arrival process (``round_gaps_ms``, the workload both describe).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from replicalab.models.base import Curve, CurvePoint, point, require
from replicalab.models.paxos_lan import WARMUP_FRACTION, PaxosLanParams, label, round_gaps_ms

# an import list, the same as twins/pigpaxos.py's (both twins use the capacity search)
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


class _Run(RoundsRun):
    """One offered load: builds the cluster, runs ``total`` rounds, keeps their latencies."""

    def __init__(self, p: PaxosLanParams, load_rps: float, rng: np.random.Generator,
                 total: int, draw: ServiceDraw = default_draw, stratified: bool = False
                 ) -> None:
        self.p = p
        self.draw = draw
        self.total = total
        self.needed = p.needed
        gaps = round_gaps_ms(rng, load_rps, p.sigma_r_factor, total, p.arrivals)
        if stratified:  # a capacity trial: the watched half offers exactly the load
            gaps = stratify(gaps, 1000.0 / load_rps)
        self.gaps = np.rint(gaps * NS_PER_MS).astype(np.int64).tolist()
        self.rt = VirtualRuntime()
        self.s = new_stream(rng)
        regions = RegionSet.from_matrix("lan", ["local"], [[0.0]], intra_rtt_ms=p.mu_l_ms,
                                        intra_sd_ms=p.sigma_l_ms)
        self.net = Network.with_client_link(self.rt, self.s, regions, p.client_ms,
                                            p.sigma_l_ms, timeout_ms=1e9)
        self.md = Delay.ms(p.mu_md_ms, p.sigma_md_ms)
        self.ms = Delay.ms(p.mu_ms_ms, p.sigma_ms_ms)
        self.leader = self.net.add_node("leader", "local", self.md, pipelines=p.n_p)
        self.followers = [self.net.add_node(f"f{i}", "local", self.md)
                          for i in range(p.contacted)]
        self.link = self.net.link("local", "local")
        assert self.net.client_link is not None
        self.client = self.net.client_link
        self.sent = [0] * total
        self.votes = [0] * total
        self.quorum_at = [0] * total  # n_p > 1: when the votes counted so far are processed
        self.latency_ns = [0] * total
        self.busy_ns = dict.fromkeys(self.net.nodes, 0)
        self.span_ns = max(sum(self.gaps[1:]), 1)
        self.watch = BacklogWatch(self.rt, list(self.net.nodes.values()), self.span_ns)
        self.finished = 0
        self.fut = self.rt.future()

    def _lead(self, cost_ns: int) -> int:
        """Queue ``cost_ns`` at the leader; return ns until it is done."""
        self.busy_ns["leader"] += cost_ns
        return self.net.process(self.leader, cost_ns)

    def at_leader_request(self, rid: int) -> None:
        d, s = self.draw, self.s
        w = self._lead(d(self.md, s) + d(self.ms, s))  # request in, accept out
        self.rt.schedule(w, self.broadcast, rid)

    def broadcast(self, rid: int) -> None:
        link, s, later = self.link, self.s, self.rt.schedule
        for f in self.followers:
            later(link.draw(s), self.at_follower, f, rid)

    def at_follower(self, f: Node, rid: int) -> None:
        cost = self.draw(self.md, self.s) + self.draw(self.ms, self.s)  # accept, reply
        self.busy_ns[f.name] += cost
        w = self.net.process(f, cost)
        self.rt.schedule(w + self.link.draw(self.s), self.at_leader_reply, rid)

    def at_leader_reply(self, rid: int) -> None:
        self.votes[rid] += 1
        v = self.votes[rid]
        d, s = self.draw, self.s
        if v > self.needed:  # after the quorum: dead weight
            self._lead(d(self.md, s))
        elif v < self.needed:
            done = self.rt.now_ns() + self._lead(d(self.md, s))
            self.quorum_at[rid] = max(self.quorum_at[rid], done)
        else:  # completes the quorum: deserialize, serialize the client reply
            now = self.rt.now_ns()
            done = max(self.quorum_at[rid], now + self._lead(d(self.md, s) + d(self.ms, s)))
            self.rt.schedule(done - now + self.client.draw(self.s), self.finish, rid)

    def trial(self, load_rps: float) -> Trial:
        """Return this finished run's capacity verdict (see :mod:`.capacity`)."""
        return verdict(load_rps, self.watch, self.busy_ns, self.span_ns, self.total)


def measure_capacity(p: PaxosLanParams, seed: int = 1, rounds: int = 20_000,
                     service: ServiceDraw | None = None, method: str = "search") -> Capacity:
    """Return the twin's maximum throughput (rounds/s), measured: the highest offered load
    whose queues do not grow over ``rounds`` rounds (every trial from ``seed``)."""
    require(isinstance(rounds, int) and rounds >= 100,
            f"rounds={rounds} must be a whole number of rounds >= 100 per load")

    def run(load_rps: float, total: int) -> Trial:
        r = _Run(p, load_rps, np.random.default_rng([seed, 1 << 20]), total,
                 service or default_draw, stratified=True)
        r.run()
        return r.trial(load_rps)

    return search(run, rounds, method)


def simulate_point(p: PaxosLanParams, load_rps: float, rng: np.random.Generator,
                   rounds: int, capacity_rps: float,
                   service: ServiceDraw | None = None) -> CurvePoint:
    """Return one twin point at ``load_rps`` rounds/s: mean and p99 latency (ms) over the
    rounds after a 5 % warm-up and the busiest node's measured utilisation (busy time over
    the arrival span; the leader's in ``extra``). Loads at or above the twin's measured
    ``capacity_rps`` are not run: they are saturated (utilisation load / capacity)."""
    if load_rps >= capacity_rps:
        return point(load_rps, math.inf, load_rps / capacity_rps if capacity_rps > 0
                     else math.inf)
    r = _Run(p, load_rps, rng, rounds, service or default_draw)
    r.run()
    t = r.trial(load_rps)
    lat = np.asarray(r.latency_ns[int(rounds * WARMUP_FRACTION):], dtype=np.float64)
    lat /= NS_PER_MS
    return point(load_rps, float(lat.mean()), t.utilisation, float(np.percentile(lat, 99)),
                 leader_utilisation=r.busy_ns["leader"] / (p.n_p * r.span_ns),
                 rounds=float(rounds))


def simulate(p: PaxosLanParams, loads_rps: Sequence[float], seed: int = 1,
             rounds: int = 20_000, *, service: ServiceDraw | None = None,
             capacity_rounds: int | None = None, capacity: str = "search") -> Curve:
    """Return the twin's latency (ms) vs offered load (rounds/s) for ``p``; each load runs
    ``rounds`` rounds from its own stream derived from ``seed`` (same seed, same curve).

    ``max_throughput_rps`` is measured by ``measure_capacity`` (``capacity_rounds`` per
    trial, default ``rounds``; ``capacity="estimate"``: the utilisation law on a pilot run
    only), its details in ``extra["capacity"]``. ``service`` replaces the per-message
    service-time draw (default: the parameters' normal draws).
    """
    require(isinstance(rounds, int) and rounds >= 100,
            f"rounds={rounds} must be a whole number of rounds >= 100 per load")
    for load in loads_rps:
        require(math.isfinite(load) and load > 0,
                f"load {load!r} must be a positive, finite offered load in rounds/s")
    cap = measure_capacity(p, seed, capacity_rounds or rounds, service, capacity)
    pts = [simulate_point(p, float(load), np.random.default_rng([seed, i]), rounds,
                          cap.max_throughput_rps, service)
           for i, load in enumerate(loads_rps)]
    return Curve(f"{label(p)} (twin)", pts, cap.max_throughput_rps,
                 {"model": "paxos-lan twin (message level, sim kernel)", "seed": seed,
                  "rounds": rounds, "capacity": cap.to_json()})

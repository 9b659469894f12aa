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
normal draws floored at a tenth of their mean (the kernel's ``Delay``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from replicalab.models.base import Curve, CurvePoint, point, require
from replicalab.models.paxos_lan import (
    WARMUP_FRACTION,
    PaxosLanParams,
    label,
    max_throughput_rps,
    round_gaps_ms,
    utilisation,
)
from replicalab.regions import RegionSet
from replicalab.runtime.virtual import VirtualRuntime
from replicalab.sim.network import NS_PER_MS, Delay, Network, Node
from replicalab.sim.random import Stream


class _Run:
    """One offered load: builds the cluster, runs ``total`` rounds, keeps their latencies."""

    def __init__(self, p: PaxosLanParams, load_rps: float, rng: np.random.Generator,
                 total: int) -> None:
        self.p = p
        self.total = total
        self.needed = p.needed
        gaps = round_gaps_ms(rng, load_rps, p.sigma_r_factor, total, p.arrivals)
        self.gaps = np.rint(gaps * NS_PER_MS).astype(np.int64).tolist()
        self.rt = VirtualRuntime()
        self.s = Stream(rng)
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
        self.leader_busy_ns = 0
        self.finished = 0
        self.fut = self.rt.future()

    def _lead(self, cost_ns: int) -> int:
        """Queue ``cost_ns`` at the leader; return ns until it is done."""
        self.leader_busy_ns += cost_ns
        return self.net.process(self.leader, cost_ns)

    def arrival(self, rid: int) -> None:
        self.sent[rid] = self.rt.now_ns()
        self.rt.call_later(self.client.draw(self.s), self.at_leader_request, rid)
        if rid + 1 < self.total:
            self.rt.call_later(self.gaps[rid + 1], self.arrival, rid + 1)

    def at_leader_request(self, rid: int) -> None:
        w = self._lead(self.md.draw(self.s) + self.ms.draw(self.s))  # request in, accept out
        self.rt.call_later(w, self.broadcast, rid)

    def broadcast(self, rid: int) -> None:
        link, s, later = self.link, self.s, self.rt.call_later
        for f in self.followers:
            later(link.draw(s), self.at_follower, f, rid)

    def at_follower(self, f: Node, rid: int) -> None:
        w = self.net.process(f, self.md.draw(self.s) + self.ms.draw(self.s))  # accept, reply
        self.rt.call_later(w + self.link.draw(self.s), self.at_leader_reply, rid)

    def at_leader_reply(self, rid: int) -> None:
        self.votes[rid] += 1
        v = self.votes[rid]
        if v > self.needed:  # after the quorum: dead weight
            self._lead(self.md.draw(self.s))
        elif v < self.needed:
            done = self.rt.now_ns() + self._lead(self.md.draw(self.s))
            self.quorum_at[rid] = max(self.quorum_at[rid], done)
        else:  # completes the quorum: deserialize, serialize the client reply
            now = self.rt.now_ns()
            done = max(self.quorum_at[rid], now + self._lead(self.md.draw(self.s)
                                                             + self.ms.draw(self.s)))
            self.rt.call_later(done - now + self.client.draw(self.s), self.finish, rid)

    def finish(self, rid: int) -> None:
        self.latency_ns[rid] = self.rt.now_ns() - self.sent[rid]
        self.finished += 1
        if self.finished == self.total:
            self.fut.set_result(None)

    async def main(self) -> None:
        self.rt.call_later(0, self.arrival, 0)
        await self.fut

    def run(self) -> None:
        """Run every round to completion."""
        self.rt.run(self.main())


def simulate_point(p: PaxosLanParams, load_rps: float, rng: np.random.Generator,
                   rounds: int) -> CurvePoint:
    """Return one twin point at ``load_rps`` rounds/s: mean and p99 latency (ms) over the
    rounds after a 5 % warm-up; utilisation is the offered (nominal) one, the measured leader
    utilisation is in ``extra``. Saturated loads are not run."""
    nominal = utilisation(p, load_rps)
    if nominal >= 1:
        return point(load_rps, math.inf, nominal)
    r = _Run(p, load_rps, rng, rounds)
    r.run()
    lat = np.asarray(r.latency_ns[int(rounds * WARMUP_FRACTION):], dtype=np.float64)
    lat /= NS_PER_MS
    span_ns = max(float(sum(r.gaps[1:])), 1.0)
    return point(load_rps, float(lat.mean()), nominal, float(np.percentile(lat, 99)),
                 measured_utilisation=r.leader_busy_ns / (p.n_p * span_ns),
                 rounds=float(rounds))


def simulate(p: PaxosLanParams, loads_rps: Sequence[float], seed: int = 1,
             rounds: int = 20_000) -> Curve:
    """Return the twin's latency (ms) vs offered load (rounds/s) for ``p``; each load runs
    ``rounds`` rounds from its own stream derived from ``seed`` (same seed, same curve)."""
    require(isinstance(rounds, int) and rounds >= 100,
            f"rounds={rounds} must be a whole number of rounds >= 100 per load")
    pts = []
    for i, load in enumerate(loads_rps):
        require(math.isfinite(load) and load > 0,
                f"load {load!r} must be a positive, finite offered load in rounds/s")
        pts.append(simulate_point(p, float(load), np.random.default_rng([seed, i]), rounds))
    return Curve(f"{label(p)} (twin)", pts, max_throughput_rps(p),
                 {"model": "paxos-lan twin (message level, sim kernel)", "seed": seed,
                  "rounds": rounds})

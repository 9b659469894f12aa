"""The WAN Paxos model against a real store: the parameter fit, and model, twin and
measurement side by side (pure functions; the measuring is
:mod:`replicalab.workloads.consensus_latency`).

The fit. A real store spends fixed time on every write that the seed's model has no term for:
etcd's JSON gateway and gRPC, its raft loop, the WAL fsync before a follower acknowledges, the
apply, the emulated links' userspace proxy hops. The calibration measures the store with every
link's delay removed, where the model predicts almost nothing (sub-millisecond processing and
intra-region hops), so what is left is that fixed cost, in two parts the model has a place
for:

* ``persist_ms`` = (mean latency of a client at the leader's member) - (the model's latency
  for it at zero WAN delay): a delay every acceptor adds before its reply. Adding the same
  constant to every reply shifts the quorum's order statistic by exactly that constant, so
  every client region's latency moves by ``persist_ms``.
* ``forward_ms`` = (mean latency of clients at followers) - (the model's for them) -
  ``persist_ms``: what entering at a follower adds (it forwards the command to the leader and
  answers after the leader's commit reaches it and it applied the entry), beyond the WAN round
  trip a Paxos client pays anyway.

Two numbers for the whole run, measured on the same cluster before the WAN runs: not a
correction per row. A negative estimate (noise) is taken as 0, since both are delays.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from replicalab.models.base import require
from replicalab.models.paxos_wan import WanParams, latency_by_region_ms
from replicalab.models.twins.wan import simulate_paxos_wan
from replicalab.regions import RegionSet

__all__ = ["MeasuredPoint", "Ranking", "Row", "StoreFit", "fit", "fitted", "rankings",
           "side_by_side", "zero_delay"]


@dataclass(frozen=True)
class StoreFit:
    """The fitted fixed delays (ms) and the calibration they come from."""

    persist_ms: float
    forward_ms: float
    leader: str
    leader_client_ms: float  # measured, links without delay, client at the leader's member
    follower_client_ms: float | None  # the same for clients at the other members (pooled)
    model_leader_client_ms: float  # the model's prediction of those at zero WAN delay
    model_follower_client_ms: float | None
    samples: int


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured (leader, offered rate) point: write latencies (ms) per client region."""

    leader: str
    offered_rps: float
    latencies_ms: Mapping[str, Sequence[float]]


@dataclass(frozen=True)
class Row:
    """Model, twin and measured mean latency (ms) of one client region at one point."""

    leader: str
    offered_rps: float
    region: str
    model_ms: float | None  # None: the model saturates at this load
    twin_ms: float | None
    real_ms: float | None  # None: no write of this region was answered
    real_p50_ms: float | None
    real_p99_ms: float | None
    samples: int

    @property
    def deviation(self) -> float | None:
        """Return (measured - model) / model, or None when either is missing."""
        if self.model_ms is None or self.real_ms is None or self.model_ms <= 0:
            return None
        return self.real_ms / self.model_ms - 1.0


@dataclass(frozen=True)
class Ranking:
    """Leaders ranked by mean latency over client regions (weighted by share), at one rate."""

    offered_rps: float
    model_ms: dict[str, float]
    real_ms: dict[str, float]

    @property
    def model_best(self) -> str:
        """The leader with the lowest model latency."""
        return min(self.model_ms, key=self.model_ms.__getitem__)

    @property
    def real_best(self) -> str | None:
        """The leader with the lowest measured latency (None if none was measured)."""
        return min(self.real_ms, key=self.real_ms.__getitem__) if self.real_ms else None

    @property
    def agree(self) -> bool:
        """Whether the measured best leader is the model's best."""
        return self.real_best == self.model_best


def zero_delay(p: WanParams) -> WanParams:
    """Return ``p`` with every inter-region RTT 0 (intra-region kept) and no store delays:
    the model of the calibration's cluster, whose links carry no delay."""
    rs = p.rs
    n = len(rs.regions)
    zero = RegionSet.from_matrix(f"{rs.name} (no delay)", rs.regions,
                                 [[0.0] * n for _ in range(n)], 0.0, rs.source,
                                 rs.intra_rtt_ms, rs.intra_sd_ms)
    return replace(p, regions=zero, rtt_sd_ms=None, persist_ms=0.0, forward_ms=0.0)


def fit(p: WanParams, leader: str, latencies_ms: Mapping[str, Sequence[float]]) -> StoreFit:
    """Return the fitted ``persist_ms`` and ``forward_ms`` (see the module doc) from the
    calibration's write latencies (ms) per client region with ``leader`` leading."""
    p.rs.index(leader)
    lead = [float(x) for x in latencies_ms.get(leader, ())]
    require(len(lead) > 0, f"calibration: no write of a client at the leader ({leader}) "
                           "was answered; nothing to fit")
    model = latency_by_region_ms(zero_delay(p).with_leader(leader), 0.0)
    assert model is not None  # no load: never saturated
    persist = max(statistics.fmean(lead) - model[leader], 0.0)
    follower: list[float] = []
    predicted: list[float] = []
    for r, xs in latencies_ms.items():
        if r != leader:
            follower += [float(x) for x in xs]
            predicted += [model[r]] * len(xs)
    forward = 0.0
    follower_ms = model_follower_ms = None
    if follower:
        follower_ms, model_follower_ms = statistics.fmean(follower), statistics.fmean(predicted)
        forward = max(follower_ms - model_follower_ms - persist, 0.0)
    return StoreFit(persist, forward, leader, statistics.fmean(lead), follower_ms,
                    model[leader], model_follower_ms, len(lead) + len(follower))


def fitted(p: WanParams, f: StoreFit) -> WanParams:
    """Return ``p`` with the fitted store delays."""
    return replace(p, persist_ms=f.persist_ms, forward_ms=f.forward_ms)


def _pct(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def side_by_side(p: WanParams, measured: Sequence[MeasuredPoint], seed: int = 1,
                 rounds: int = 20_000, with_twin: bool = True) -> list[Row]:
    """Return one row per measured point and client region: the model's and the twin's mean
    latency with params ``p`` (its leader replaced by the point's) beside the measured one.
    The twin runs once per leader over all of that leader's rates (``with_twin=False``: not
    at all, its column is None)."""
    rows: list[Row] = []
    by_leader: dict[str, list[MeasuredPoint]] = {}
    for m in measured:
        by_leader.setdefault(m.leader, []).append(m)
    for leader, points in by_leader.items():
        q = p.with_leader(leader)
        rates = [m.offered_rps for m in points]
        twin = (simulate_paxos_wan(q, rates, seed, rounds).points if with_twin
                else [None] * len(points))
        for m, tp in zip(points, twin, strict=True):
            model = latency_by_region_ms(q, m.offered_rps)
            for c, r in enumerate(q.rs.regions):
                if q.shares[c] <= 0:
                    continue
                xs = [float(x) for x in m.latencies_ms.get(r, ())]
                rows.append(Row(leader, m.offered_rps, r,
                                None if model is None else model[r],
                                None if tp is None else tp.extra.get(f"lat_{r}_ms"),
                                statistics.fmean(xs) if xs else None, _pct(xs, 0.5),
                                _pct(xs, 0.99), len(xs)))
    return rows


def rankings(p: WanParams, rows: Sequence[Row]) -> list[Ranking]:
    """Return, per offered rate, the leaders measured ranked by the model's and by the
    measured mean latency over client regions (weighted by the regions' shares; a leader
    missing a region's measurement is left out of the measured ranking)."""
    share = dict(zip(p.rs.regions, p.shares, strict=True))

    def weighted(values: list[tuple[str, float | None]]) -> float | None:
        if not values or any(v is None for _, v in values):
            return None
        return sum(share[r] * v for r, v in values if v is not None) / sum(
            share[r] for r, _ in values)

    out = []
    for rate in sorted({r.offered_rps for r in rows}):
        model: dict[str, float] = {}
        real: dict[str, float] = {}
        for leader in dict.fromkeys(r.leader for r in rows if r.offered_rps == rate):
            mine = [r for r in rows if r.offered_rps == rate and r.leader == leader]
            if (m := weighted([(r.region, r.model_ms) for r in mine])) is not None:
                model[leader] = m
            if (x := weighted([(r.region, r.real_ms) for r in mine])) is not None:
                real[leader] = x
        if model:
            out.append(Ranking(rate, model, real))
    return out

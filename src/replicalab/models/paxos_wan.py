"""Multi-Paxos over a WAN: one node per region, a chosen leader, clients in every region.

Seed 002, "Modeling Paxos Performance in Wide Area – Part 3" (item 4 of the Paxos-family
models). A client in region ``c`` sends its command to the leader ``L``; the leader
broadcasts phase-2 to the other ``N-1`` nodes and answers once ``q-1`` of them replied
(``q = floor(N/2)+1``, the leader votes for itself). Per client region::

    L_c = RTT(c, L) + 2 (mu_md + mu_ms) + 2 W_L
          + E[(q-1)-th fastest of {RTT(L, j) + mu_md + mu_ms + W_j + persist : j != L}]
          + forward [c != L]

RTT pairs are normal with the matrix mean and the set's sd (non-identical distributions:
the order statistic is integrated numerically, no sampling). ``W`` is a node's mean queue
wait: Marchal's G/G/1 approximation, scaled to ``pipelines`` workers through Erlang C, applied
to the node's *jobs* (one job = one message handled: deserialise ``md`` and, when it sends
something, serialise ``ms``). The leader handles per command ``N`` deserialisations and 2
serialisations, hence the seed's ``R_max = n_p / (N mu_md + 2 mu_ms)``. ``persist`` and
``forward`` (0 in the seed's model) are fixed delays of a real store: an acceptor's log write
before it replies, and the extra path of a client that enters at its own region's member
rather than at the leader (Raft, etcd); see docs/models/paxos-wan.md "Against a real etcd".

This module also holds the parameters (:class:`WanParams`) and the small numeric helpers
(order statistics of non-identical normals, the queue) that :mod:`.epaxos` and
:mod:`.wpaxos` share. Times are ms, rates per second at the boundary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from replicalab.models.base import Curve, CurvePoint, from_dict, point, require
from replicalab.models.queueing import marchal_factor
from replicalab.regions import RegionSet, region_set

__all__ = [
    "NodeLoad",
    "WanParams",
    "best_leader",
    "curve",
    "grid_quorum_mean_ms",
    "kth_fastest_mean_ms",
    "latency_by_region_ms",
    "leader_table",
    "max_throughput_rps",
    "validation_grid",
]


# ----------------------------------------------------------------------------- parameters

def _region_set_from(value: Any, sd_override: float | None) -> RegionSet:
    """Resolve a region-set name, a RegionSet or a TOML-style table into a RegionSet."""
    if isinstance(value, RegionSet):
        rs = value
    elif isinstance(value, str):
        rs = region_set(value)
    elif isinstance(value, dict):
        unknown = set(value) - {"name", "regions", "rtt_ms", "sd_ms"}
        require(not unknown, f"regions: unknown key(s) {sorted(unknown)}; "
                             "use name, regions (list of names), rtt_ms (square matrix), sd_ms")
        require("regions" in value and "rtt_ms" in value,
                "regions: a custom table needs 'regions' (names) and 'rtt_ms' (square matrix, ms)")
        rs = RegionSet.from_matrix(str(value.get("name", "custom")), list(value["regions"]),
                                   [list(r) for r in value["rtt_ms"]],
                                   float(value.get("sd_ms", 0.0)))
    else:
        raise ValueError(f"regions={value!r}: give a region-set name (e.g. 'aws5'), a RegionSet "
                         "or a table with regions and rtt_ms")
    if sd_override is not None:
        rs = RegionSet.from_matrix(rs.name, rs.regions, rs.rtt_ms, sd_override, rs.source,
                                   rs.intra_rtt_ms, rs.intra_sd_ms)
    return rs


@dataclass(frozen=True)
class WanParams:
    """Deployment and processing parameters shared by the WAN Paxos, EPaxos and WPaxos models.

    Defaults: the seed's five AWS regions (sd 2 ms per pair); per-message deserialise +
    process ``mu_md_ms`` = 25 µs (sd 5 µs) and serialise ``mu_ms_ms`` = 2 µs (sd 0.5 µs), one
    pipeline. These put 5-node Paxos at 7.75 k req/s, EPaxos at 2 % conflict at 2.67x that,
    and 15-node WPaxos (70 % locality, 1 % stealing) at ~144 k req/s, the seed's
    orders (seed: 2.7x and 153 k req/s). ``sigma_r_factor`` = sigma_r / mu_r of the client
    inter-arrival times (seed: 2). ``leader`` = the Paxos leader region (None: first region).
    ``client_share`` = each region's share of the offered load (None: equal).
    ``persist_ms`` = a fixed delay each acceptor adds before its phase-2 reply (a real store's
    log write and fsync, and the rest of its fixed per-write path); ``forward_ms`` = a fixed
    extra for a client outside the leader's region that talks to its own region's member,
    which forwards the command and answers once it has learned the commit (Raft/etcd). Both
    are pure delays (not processing jobs: they take no worker time), 0 by default, and used by
    the Paxos WAN model and twin only.
    """

    regions: RegionSet | str | dict[str, Any] = "aws5"
    rtt_sd_ms: float | None = None
    mu_ms_ms: float = 0.002
    sigma_ms_ms: float = 0.0005
    mu_md_ms: float = 0.025
    sigma_md_ms: float = 0.005
    pipelines: int = 1
    sigma_r_factor: float = 2.0
    leader: str | None = None
    client_share: tuple[float, ...] | None = field(default=None)
    persist_ms: float = 0.0
    forward_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.rtt_sd_ms is not None:
            require(self.rtt_sd_ms >= 0, f"rtt_sd_ms={self.rtt_sd_ms}: the RTT standard "
                                         "deviation (ms) must be >= 0")
        object.__setattr__(self, "regions", _region_set_from(self.regions, self.rtt_sd_ms))
        rs = self.rs
        require(len(rs.regions) >= 2, f"regions: WAN models need at least 2 regions, "
                                      f"{rs.name!r} has {len(rs.regions)}")
        for name in ("mu_ms_ms", "mu_md_ms"):
            v = getattr(self, name)
            require(isinstance(v, int | float) and v > 0,
                    f"{name}={v!r}: a per-message processing time (ms) must be > 0, e.g. 0.025")
        for name in ("sigma_ms_ms", "sigma_md_ms", "sigma_r_factor", "persist_ms",
                     "forward_ms"):
            v = getattr(self, name)
            require(isinstance(v, int | float) and v >= 0 and math.isfinite(v),
                    f"{name}={v!r}: a standard deviation must be a finite number >= 0")
        require(isinstance(self.pipelines, int) and self.pipelines >= 1,
                f"pipelines={self.pipelines!r}: the number of processing pipelines must be an "
                "integer >= 1")
        if self.leader is not None:
            rs.index(self.leader)  # ValueError naming the valid regions
        if self.client_share is not None:
            share = tuple(float(x) for x in self.client_share)
            require(len(share) == len(rs.regions),
                    f"client_share: give one share per region ({len(rs.regions)}: "
                    f"{', '.join(rs.regions)}), got {len(share)}")
            require(all(x >= 0 and math.isfinite(x) for x in share) and sum(share) > 0,
                    "client_share: shares must be non-negative numbers with a positive sum")
            object.__setattr__(self, "client_share", tuple(x / sum(share) for x in share))

    @property
    def rs(self) -> RegionSet:
        """The resolved region set."""
        assert isinstance(self.regions, RegionSet)
        return self.regions

    @property
    def n(self) -> int:
        """Number of regions (= nodes for Paxos and EPaxos)."""
        return len(self.rs.regions)

    @property
    def leader_index(self) -> int:
        """Position of the Paxos leader's region (the first region when ``leader`` is None)."""
        return 0 if self.leader is None else self.rs.index(self.leader)

    @property
    def shares(self) -> tuple[float, ...]:
        """Each region's share of the offered load (sums to 1)."""
        return self.client_share or tuple(1.0 / self.n for _ in range(self.n))

    @property
    def ca2(self) -> float:
        """Squared coefficient of variation of client inter-arrival times (sigma_r/mu_r)^2."""
        return self.sigma_r_factor ** 2

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WanParams:
        """Return params from a TOML table (ValueError names an unknown key)."""
        return from_dict(cls, data, "WAN model parameters")

    def with_leader(self, region: str) -> WanParams:
        """Return a copy whose Paxos leader is ``region``."""
        return replace(self, leader=region)

    # ---- per-message costs (ms) used by every model: "A" job = md + ms, "D" job = md
    @property
    def a_mean(self) -> float:
        """Mean of a job that deserialises one message and serialises one (ms)."""
        return self.mu_md_ms + self.mu_ms_ms

    @property
    def a_var(self) -> float:
        """Variance of such a job (ms^2)."""
        return self.sigma_md_ms ** 2 + self.sigma_ms_ms ** 2

    def rtt(self, a: int, b: int) -> tuple[float, float]:
        """Return (mean, sd) in ms of a round trip a -> b -> a (two one-way delays)."""
        rs = self.rs
        m1, s1 = rs.one_way_ms(rs.regions[a], rs.regions[b])
        m2, s2 = rs.one_way_ms(rs.regions[b], rs.regions[a])
        return m1 + m2, math.hypot(s1, s2)


# ----------------------------------------------------------------------------- order statistics

_erf = np.frompyfunc(math.erf, 1, 1)
_SQRT2 = math.sqrt(2.0)


def _norm_cdf(x: np.ndarray, mu: float, sd: float) -> np.ndarray:
    return 0.5 * (1.0 + _erf((x - mu) / (sd * _SQRT2)).astype(float))


def _grid(means: Sequence[float], sds: Sequence[float]) -> np.ndarray:
    # Fine points only where some CDF moves; between those windows every CDF is 0 or 1,
    # so the integrand is flat and the trapezoid rule is exact there.
    pieces = [np.linspace(m - 9 * s, m + 9 * s, 301) for m, s in zip(means, sds, strict=True)]
    return np.unique(np.concatenate(pieces))


def _at_least(probs: Sequence[np.ndarray], k: int) -> np.ndarray:
    """P(at least k of independent events), per grid point (Poisson-binomial tail)."""
    if k <= 0:
        return np.ones_like(probs[0]) if probs else np.ones(1)
    dist = [np.ones_like(probs[0])] + [np.zeros_like(probs[0]) for _ in probs]
    for p in probs:
        for j in range(len(dist) - 1, 0, -1):
            dist[j] = dist[j] * (1 - p) + dist[j - 1] * p
        dist[0] = dist[0] * (1 - p)
    return np.sum(dist[k:], axis=0)


def grid_quorum_mean_ms(groups: Sequence[tuple[Sequence[float], Sequence[float], int]],
                        groups_needed: int) -> float:
    """Return E[time (ms) until ``groups_needed`` groups each have their ``need`` replies].

    ``groups`` = [(reply means ms, reply sds ms, need)]; replies are independent normals.
    A group needing 0 replies is satisfied at once. One group with ``groups_needed=1`` is the
    ``need``-th order statistic; WPaxos phase-1 grid quorums use several.
    """
    require(0 <= groups_needed <= len(groups), "groups_needed must be within the group count")
    live = [(list(m), [max(s, 1e-6) for s in sd], k) for m, sd, k in groups if k > 0]
    satisfied_at_once = len(groups) - len(live)
    needed = groups_needed - satisfied_at_once
    if needed <= 0:
        return 0.0
    for m, _, k in live:
        require(k <= len(m), "a group cannot need more replies than it has members")
    return _quorum_mean_cached(tuple((tuple(m), tuple(s), k) for m, s, k in live), needed)


@lru_cache(maxsize=4096)
def _quorum_mean_cached(live: tuple[tuple[tuple[float, ...], tuple[float, ...], int], ...],
                        needed: int) -> float:
    x = _grid([m for g in live for m in g[0]], [s for g in live for s in g[1]])
    per_group = [_at_least([_norm_cdf(x, m, s) for m, s in zip(ms, sds, strict=True)], k)
                 for ms, sds, k in live]
    h = _at_least(per_group, needed)
    # E[T] = x0 + integral of P(T > x) from x0, with P(T <= x0) ~ 0 at the grid start.
    return float(x[0] + np.trapezoid(1.0 - h, x))


def kth_fastest_mean_ms(means: Sequence[float], sds: Sequence[float], k: int) -> float:
    """Return E[k-th smallest] (ms) of independent normals N(means[i], sds[i]^2); k=0 -> 0."""
    require(0 <= k <= len(means), f"k={k}: must be between 0 and the number of replies")
    return grid_quorum_mean_ms([(means, sds, k)], 1)


# ----------------------------------------------------------------------------- the queue

@dataclass
class NodeLoad:
    """Jobs arriving at one node: rate (per ms), work and second moment, burstiness.

    Jobs are messages handled FIFO by ``pipelines`` workers. ``wait_ms`` is Marchal's G/G/1
    mean wait, generalised to c workers by scaling Erlang C's M/M/c wait by Marchal's
    variability factor (exact for c = 1). Arrival variability of the superposed streams is
    the rate-weighted mean of their Ca^2 (Whitt's QNA superposition).
    """

    rate: float = 0.0
    work: float = 0.0
    m2: float = 0.0
    ca2_rate: float = 0.0

    def add(self, rate_per_ms: float, mean_ms: float, var_ms2: float, ca2: float) -> None:
        """Add a stream of ``rate_per_ms`` jobs of the given service mean/variance and Ca^2."""
        if rate_per_ms <= 0:
            return
        self.rate += rate_per_ms
        self.work += rate_per_ms * mean_ms
        self.m2 += rate_per_ms * (var_ms2 + mean_ms ** 2)
        self.ca2_rate += rate_per_ms * ca2

    def utilisation(self, servers: int) -> float:
        """Fraction of the node's worker time that is busy (>= 1 means saturated)."""
        return self.work / servers

    def wait_ms(self, servers: int) -> float:
        """Mean queue wait (ms) of a job before service; inf when saturated."""
        if self.rate <= 0 or self.work <= 0:
            return 0.0
        rho = self.utilisation(servers)
        if rho >= 1.0:
            return math.inf
        s = self.work / self.rate
        if not s > 0:  # rates so small they underflow: no queue
            return 0.0
        cs2 = max((self.m2 / self.rate) / s ** 2 - 1.0, 0.0)
        ca2 = self.ca2_rate / self.rate
        return (_erlang_c(servers, self.work) * s / (servers * (1 - rho))
                * marchal_factor(rho, ca2=ca2, cs2=cs2))


def _erlang_c(c: int, a: float) -> float:
    """Probability an arrival waits in M/M/c with offered load ``a`` erlangs (a < c)."""
    term, total = 1.0, 1.0
    for k in range(1, c):
        term *= a / k
        total += term
    last = term * a / c / (1 - a / c)
    return last / (total + last)


# ----------------------------------------------------------------------------- WAN Paxos

def _loads(p: WanParams, load_rps: float) -> list[NodeLoad]:
    """Per-node job streams of Multi-Paxos at ``load_rps`` commands per second."""
    lam = load_rps / 1000.0
    n, lead = p.n, p.leader_index
    loads = [NodeLoad() for _ in range(n)]
    md_var = p.sigma_md_ms ** 2
    # Requests reach the leader straight from same-region clients (bursty, Ca^2 of the
    # clients) or across the WAN, whose jitter (sd >= 1.4 ms, >> gaps between requests)
    # shuffles them into a near-Poisson stream (Ca^2 = 1); replies likewise.
    local = lam * p.shares[lead]
    loads[lead].add(local, p.a_mean, p.a_var, p.ca2)
    loads[lead].add(lam - local, p.a_mean, p.a_var, 1.0)
    loads[lead].add(lam, p.a_mean, p.a_var, 1.0)               # the quorum reply + client reply
    loads[lead].add(lam * (n - 2), p.mu_md_ms, md_var, 1.0)    # the other replies
    for j in range(n):
        if j != lead:
            loads[j].add(lam, p.a_mean, p.a_var, 1.0)          # accept + its reply
    return loads


def node_waits_ms(loads_of: Callable[[float], list[NodeLoad]], load_rps: float,
                  pipelines: int) -> list[float] | None:
    """Return each node's mean queue wait in ms at ``load_rps`` requests/s (its job streams
    from ``loads_of(load_rps)``, ``pipelines`` workers a node), or None when a node is
    saturated; the WAN models (Paxos, EPaxos, WPaxos) all start their latency here."""
    require(load_rps >= 0 and math.isfinite(load_rps),
            f"load {load_rps!r} req/s: offered load must be a finite number >= 0")
    loads = loads_of(load_rps)
    if max(x.utilisation(pipelines) for x in loads) >= 1.0:
        return None
    return [x.wait_ms(pipelines) for x in loads]


def latency_by_region_ms(p: WanParams, load_rps: float) -> dict[str, float] | None:
    """Return mean client latency (ms) per client region at ``load_rps``; None if saturated."""
    waits = node_waits_ms(lambda x: _loads(p, x), load_rps, p.pipelines)
    if waits is None:
        return None
    lead, n, q = p.leader_index, p.n, p.n // 2 + 1
    means, sds = [], []
    for j in range(n):
        if j != lead:
            m, s = p.rtt(lead, j)
            means.append(m + p.a_mean + waits[j] + p.persist_ms)
            sds.append(math.sqrt(s ** 2 + p.a_var))
    quorum = kth_fastest_mean_ms(means, sds, q - 1)
    core = 2 * p.a_mean + 2 * waits[lead] + quorum
    return {r: p.rtt(c, lead)[0] + core + (p.forward_ms if c != lead else 0.0)
            for c, r in enumerate(p.rs.regions)}


def max_throughput_rps(p: WanParams) -> float:
    """Return the saturation throughput (req/s): n_p / (N mu_md + 2 mu_ms), as in the LAN model."""
    return 1000.0 * p.pipelines / (p.n * p.mu_md_ms + 2 * p.mu_ms_ms)


def curve(p: WanParams, loads_rps: Sequence[float]) -> Curve:
    """Return latency (mean over client regions, weighted by share) vs offered load (req/s).

    ``extra`` of each point holds ``lat_<region>_ms`` per client region.
    """
    _check_loads(loads_rps)
    pts: list[CurvePoint] = []
    for load in loads_rps:
        util = max(x.utilisation(p.pipelines) for x in _loads(p, load))
        per = latency_by_region_ms(p, load)
        if per is None:
            pts.append(point(load, math.inf, util))
            continue
        mean = sum(s * per[r] for s, r in zip(p.shares, p.rs.regions, strict=True))
        pts.append(point(load, mean, util, **{f"lat_{r}_ms": v for r, v in per.items()}))
    leader = p.rs.regions[p.leader_index]
    return Curve(f"Paxos WAN, leader {leader} ({p.rs.name})", pts, max_throughput_rps(p),
                 {"leader": leader, "regions": list(p.rs.regions)})


def leader_table(p: WanParams) -> dict[str, float]:
    """Return, per candidate leader region, the mean client latency (ms) at vanishing load."""
    out = {}
    for r in p.rs.regions:
        per = latency_by_region_ms(p.with_leader(r), 0.0)
        assert per is not None
        out[r] = sum(s * per[c] for s, c in zip(p.shares, p.rs.regions, strict=True))
    return out


def best_leader(p: WanParams) -> str:
    """Return the leader region with the lowest mean client latency at low load."""
    table = leader_table(p)
    return min(table, key=table.__getitem__)


def validation_grid() -> list[tuple[str, WanParams, list[float]]]:
    """Return (label, params, loads req/s) for ``replicalab model validate``: every aws5 leader."""
    base = WanParams()
    cap = max_throughput_rps(base)
    loads = [round(cap * f) for f in (0.1, 0.4, 0.6, 0.8)]
    return [(f"paxos-wan leader={r}", base.with_leader(r), loads) for r in base.rs.regions]


def _check_loads(loads_rps: Sequence[float]) -> None:
    for x in loads_rps:
        require(isinstance(x, int | float) and x >= 0 and math.isfinite(x),
                f"load {x!r} req/s: offered loads must be finite numbers >= 0")

"""PigPaxos (Charapko, Ailijiang, Demirbas, SIGMOD 2021): Multi-Paxos phase 2 through relays.

The leader sends one message per relay group to a relay picked at random each round; the
relay forwards it to the rest of its group, collects their replies and sends the leader one
aggregated reply. The leader commits when the aggregates it has processed cover a majority.

The model extends the LAN Paxos model of seed 002 ("Modeling Paxos Performance", parts 1-2):
every message costs a serialization ``m_s`` at its sender and a deserialization/processing
``m_d`` at its receiver, both in a FIFO pipeline per node; round quorum waits are order
statistics drawn by Monte Carlo; waits behind other rounds use Marchal's G/G/1 mean with an
exponential tail (P(wait > 0) = utilisation). Maximum throughput is set by the busiest node:
``R_max = n_p / max(per-round work of the leader, mean per-round work of a follower)``.

Times are ms, rates per second. See docs/models/pigpaxos.md for formulas and numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from replicalab.models.base import Curve, CurvePoint, point, require
from replicalab.models.queueing import marchal_wait_ms
from replicalab.regions import LAN_RTT_MS, LAN_SD_MS, RegionSet, region_set

# Message costs from seed 002 part 1 ("m_s = m_d = 0.01 ms", sd 0.002 ms in the improved model).
DEFAULT_MU_MS_MS = 0.01
DEFAULT_SIGMA_MS_MS = 0.002
DEFAULT_MU_MD_MS = 0.01
DEFAULT_SIGMA_MD_MS = 0.002
DEFAULT_RELAY_GROUPS = 3
LAN_REGION = "local"
# Followers' arrivals taken as Poisson: the leader's pipeline spaces its broadcasts at least
# one request job apart (a burst of clients reaches the followers smoothed), and random relay
# rotation plus network jitter mix the streams; checked against the twin (docs/models).
FOLLOWER_CA2 = 1.0


@dataclass(frozen=True)
class PigPaxosParams:
    """One PigPaxos deployment (phase 2 of Multi-Paxos with a stable leader).

    ``n`` nodes including the leader. LAN (``regions=None``): the ``n - 1`` followers form
    ``relay_groups`` groups (default 3) of near-equal size. WAN (``regions`` a RegionSet or
    a region-set name such as ``"aws5"``): nodes are placed round-robin over the regions, the
    leader in ``leader`` (default: the first), and each region's followers are one
    relay group. Each round a group's ``relays_per_group`` relays are drawn at random and
    split the rest of the group between them. A relay answers the leader after
    ``relay_wait`` replies from the members it serves (or ``relay_wait_fraction`` of them,
    rounded up; default all). ``mu_ms_ms``/``mu_md_ms`` (sds ``sigma_ms_ms``/``sigma_md_ms``)
    are the per-message serialization and deserialization+processing costs in ms (seed:
    mu_ms, mu_md), ``mu_l_ms``/``sigma_l_ms`` the LAN (and intra-region) RTT, ``pipelines``
    the workers per node (n_p), ``sigma_r_factor`` the inter-arrival sd in units of the mean
    (seed: sigma_r = 2 mu_r). Clients sit next to the leader (one LAN round trip).

    A failure (seed 002: "one relay group experiencing a failure on every operation"):
    ``failed_nodes`` (default: all) of relay group ``failed_group``'s followers are down and
    answer nothing. A down relay loses its group's round: the leader waits
    ``relay_timeout_ms`` from its broadcast and, if the round has not committed and the
    group has not answered, sends the group's message again through another relay drawn at
    random among the group's nodes not tried yet (re-routing), once per time-out, until one
    answers or every node was tried. A live relay whose members are down waits
    ``member_timeout_ms`` from its forward for the replies it waits for, then answers with the
    votes it has. Failures are modelled with one relay per group (``relays_per_group=1``).
    """

    n: int = 25
    relay_groups: int | None = None
    relays_per_group: int = 1
    relay_wait: int | None = None
    relay_wait_fraction: float | None = None
    regions: RegionSet | str | None = None
    leader: str | None = None
    mu_l_ms: float = LAN_RTT_MS
    sigma_l_ms: float = LAN_SD_MS
    mu_ms_ms: float = DEFAULT_MU_MS_MS
    sigma_ms_ms: float = DEFAULT_SIGMA_MS_MS
    mu_md_ms: float = DEFAULT_MU_MD_MS
    sigma_md_ms: float = DEFAULT_SIGMA_MD_MS
    pipelines: int = 1
    sigma_r_factor: float = 2.0
    failed_group: int | None = None
    failed_nodes: int | None = None
    relay_timeout_ms: float = 10.0
    member_timeout_ms: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.regions, str):
            object.__setattr__(self, "regions", region_set(self.regions))
        _check(self)

    @property
    def wan(self) -> bool:
        """Return True when nodes are spread over the regions of a RegionSet."""
        return self.regions is not None


def _is_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _check(p: PigPaxosParams) -> None:
    require(_is_int(p.n) and p.n >= 3,
            f"n={p.n!r}: PigPaxos needs at least 3 nodes (a leader and two followers); "
            "use an integer n >= 3")
    for name in ("mu_l_ms", "mu_ms_ms", "mu_md_ms"):
        v = getattr(p, name)
        require(isinstance(v, int | float) and math.isfinite(v) and v > 0,
                f"{name}={v!r}: must be a positive number of ms; use e.g. 0.01")
    for name in ("sigma_l_ms", "sigma_ms_ms", "sigma_md_ms", "sigma_r_factor"):
        v = getattr(p, name)
        require(isinstance(v, int | float) and math.isfinite(v) and v >= 0,
                f"{name}={v!r}: must be a non-negative number"
                f"{' (a multiple of the mean gap)' if name == 'sigma_r_factor' else ' of ms'}"
                "; use 0 for no variation")
    require(_is_int(p.pipelines) and p.pipelines >= 1,
            f"pipelines={p.pipelines!r}: each node needs at least one worker; use pipelines >= 1")
    require(_is_int(p.relays_per_group) and p.relays_per_group >= 1,
            f"relays_per_group={p.relays_per_group!r}: each group needs at least one relay per "
            "round; use relays_per_group >= 1")
    require(p.relay_wait is None or p.relay_wait_fraction is None,
            "relay_wait and relay_wait_fraction both set: give a count or a fraction, not both")
    require(p.relay_wait is None or (_is_int(p.relay_wait) and p.relay_wait >= 0),
            f"relay_wait={p.relay_wait!r}: must be a count of member replies >= 0; "
            "leave it unset to wait for all")
    f = p.relay_wait_fraction
    require(f is None or (isinstance(f, int | float) and 0 < f <= 1),
            f"relay_wait_fraction={f!r}: must be in (0, 1]; leave it unset to wait for all")
    if p.regions is None:
        require(p.leader is None,
                f"leader={p.leader!r} needs regions; set regions (e.g. 'aws5') "
                "or drop leader")
        r = DEFAULT_RELAY_GROUPS if p.relay_groups is None else p.relay_groups
        require(_is_int(r) and 1 <= r <= p.n - 1,
                f"relay_groups={r!r}: must be 1..{p.n - 1} (each group needs one of the "
                f"{p.n - 1} followers of n={p.n}); use fewer groups or more nodes")
    else:
        require(isinstance(p.regions, RegionSet),
                f"regions={p.regions!r}: must be a RegionSet or a region-set name like 'aws5'")
        k = len(p.regions.regions)
        require(p.n >= k,
                f"n={p.n}: a WAN deployment over {k} regions needs at least one node per "
                f"region; use n >= {k}")
        if p.leader is not None:
            p.regions.index(p.leader)
        groups = sum(1 for g in _wan_group_sizes(p) if g[1] > 0)
        require(p.relay_groups is None or p.relay_groups == groups,
                f"relay_groups={p.relay_groups!r}: in WAN mode there is one relay group per "
                f"region with followers ({groups} here); leave relay_groups unset")
    sizes = [g for _, g in _group_sizes(p)]
    small = min(sizes)
    require(p.relays_per_group <= small,
            f"relays_per_group={p.relays_per_group}: the smallest relay group has {small} "
            f"node(s); use relays_per_group <= {small}")
    members = [m for _, g in _group_sizes(p) for m in _split(g - p.relays_per_group,
                                                              p.relays_per_group)]
    if p.relay_wait is not None:
        require(p.relay_wait <= min(members),
                f"relay_wait={p.relay_wait}: a relay serves only {min(members)} member(s) in "
                f"the smallest group; use relay_wait <= {min(members)} or relay_wait_fraction")
    votes = 1 + sum(1 + _wait_for(p, m) for m in members)
    require(votes >= majority(p.n),
            f"relay waits too short: aggregates carry at most {votes} of the {majority(p.n)} "
            f"votes a majority of n={p.n} needs; raise relay_wait or relay_wait_fraction")
    _check_failure(p)


def _check_failure(p: PigPaxosParams) -> None:
    for name in ("relay_timeout_ms", "member_timeout_ms"):
        v = getattr(p, name)
        require(isinstance(v, int | float) and math.isfinite(v) and v > 0,
                f"{name}={v!r}: must be a positive number of ms; use e.g. 10")
    if p.failed_group is None:
        require(p.failed_nodes is None,
                f"failed_nodes={p.failed_nodes!r} needs failed_group (which relay group "
                "fails); set failed_group=0 or drop failed_nodes")
        return
    groups = _group_sizes(p)
    require(_is_int(p.failed_group) and 0 <= p.failed_group < len(groups),
            f"failed_group={p.failed_group!r}: use a relay group 0..{len(groups) - 1}")
    require(p.relays_per_group == 1,
            f"relays_per_group={p.relays_per_group}: failures are modelled with one relay "
            "per group; use relays_per_group=1 with failed_group")
    g = groups[p.failed_group][1]
    d = g if p.failed_nodes is None else p.failed_nodes
    require(_is_int(d) and 1 <= d <= g,
            f"failed_nodes={p.failed_nodes!r}: relay group {p.failed_group} has {g} "
            f"followers; use 1..{g} (default all)")
    best = 1 + sum(1 + u.wait for u in layout(p).units if u.group != p.failed_group)
    if d < g:  # a live relay answers with its own vote and the live members' it waits for
        best += 1 + min(_wait_for(p, g - 1), g - 1 - d)
    require(best >= majority(p.n),
            f"failed_nodes={d} of relay group {p.failed_group}: at most {best} of the "
            f"{majority(p.n)} votes a majority of n={p.n} needs can still be gathered; fail "
            "fewer nodes")


def failure(p: PigPaxosParams) -> tuple[int, int, int] | None:
    """Return (failed relay group, its followers, how many are down), or None."""
    if p.failed_group is None:
        return None
    g = _group_sizes(p)[p.failed_group][1]
    return p.failed_group, g, g if p.failed_nodes is None else p.failed_nodes


def majority(n: int) -> int:
    """Return the majority quorum size floor(n/2) + 1 (the leader's own vote included)."""
    return n // 2 + 1


def _split(total: int, parts: int) -> list[int]:
    """Return ``total`` split into ``parts`` near-equal non-negative integers, larger first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _wan_group_sizes(p: PigPaxosParams) -> list[tuple[str, int]]:
    """Return (region, followers) per region: nodes round-robin, the leader's region minus 1."""
    assert isinstance(p.regions, RegionSet)
    regions = p.regions.regions
    lead = p.leader or regions[0]
    counts = _split(p.n, len(regions))
    return [(r, c - (1 if r == lead else 0)) for r, c in zip(regions, counts, strict=True)]


def _group_sizes(p: PigPaxosParams) -> list[tuple[str, int]]:
    """Return (region, number of followers) of each non-empty relay group."""
    if p.regions is None:
        r = DEFAULT_RELAY_GROUPS if p.relay_groups is None else p.relay_groups
        return [(LAN_REGION, g) for g in _split(p.n - 1, r)]
    return [(r, g) for r, g in _wan_group_sizes(p) if g > 0]


def _wait_for(p: PigPaxosParams, members: int) -> int:
    """Return how many of its ``members``' replies a relay waits for."""
    if p.relay_wait is not None:
        return min(p.relay_wait, members)
    if p.relay_wait_fraction is not None:
        return min(members, math.ceil(p.relay_wait_fraction * members - 1e-9))
    return members


@dataclass(frozen=True)
class Unit:
    """One relay's share of a round: its group, region, members it forwards to, replies it
    waits for; its aggregate carries ``1 + wait`` votes (the relay's own included)."""

    group: int
    region: str
    members: int
    wait: int


@dataclass(frozen=True)
class Layout:
    """Where the leader and the relay groups are and how a round is split into relay units."""

    leader_region: str
    groups: tuple[tuple[str, int], ...]  # (region, followers) per relay group
    units: tuple[Unit, ...]
    quorum: int  # votes needed including the leader's own


def layout(p: PigPaxosParams) -> Layout:
    """Return the relay groups and per-round relay units of ``p``."""
    groups = tuple(_group_sizes(p))
    units = tuple(Unit(gi, region, m, _wait_for(p, m))
                  for gi, (region, g) in enumerate(groups)
                  for m in _split(g - p.relays_per_group, p.relays_per_group))
    lead = LAN_REGION if p.regions is None else (p.leader or p.regions.regions[0])
    return Layout(lead, groups, units, majority(p.n))


# --- per-node work and maximum throughput ---------------------------------------------------


def _leader_lumps(p: PigPaxosParams) -> list[tuple[float, float, float]]:
    """Return the leader's work per round as (count, mean ms, variance ms^2) lumps: the
    client request (deserialize, serialize the broadcast) and the relay aggregates
    (deserialize each, serialize the client reply)."""
    units = float(len(layout(p).units))
    d, s, vd, vs = p.mu_md_ms, p.mu_ms_ms, p.sigma_md_ms ** 2, p.sigma_ms_ms ** 2
    delivered, resent = failure_counts(p)
    units += delivered - 1  # a failed group delivers fewer (or more, re-routed) aggregates
    lumps = [(1.0, d + s, vd + vs), (1.0, units * d + s, units * vd + vs)]
    if resent > 0:  # each re-send: one more serialization of the leader's message
        lumps.append((resent, s, vs))
    return lumps


def _follower_lumps(p: PigPaxosParams) -> list[list[tuple[float, float, float]]]:
    """Return, per relay group, one follower's work per round as (expected count, mean ms,
    variance ms^2) lumps. Relays rotate at random, so a follower is the relay of a unit with
    probability 1/group size: then it handles the leader's message (and serializes the
    forward) and later its members' replies, late ones too (and serializes the aggregate);
    otherwise it deserializes one forward and serializes its vote."""
    lay = layout(p)
    d, s, vd, vs = p.mu_md_ms, p.mu_ms_ms, p.sigma_md_ms ** 2, p.sigma_ms_ms ** 2
    fail = failure(p)
    out: list[list[tuple[float, float, float]]] = []
    for gi, (_, g) in enumerate(lay.groups):
        if fail is not None and fail[0] == gi and fail[2] == g:
            out.append([])  # the whole group is down: it does nothing
            continue
        # a partly failed group: its live nodes taken as working as in a healthy one
        units = [u for u in lay.units if u.group == gi]
        lumps = [(1 - len(units) / g, d + s, vd + vs)] if len(units) < g else []
        for u in units:
            n_ser = (1 if u.members else 0) + (1 if u.wait == 0 else 0)
            lumps.append((1 / g, d + n_ser * s, vd + n_ser * vs))
            if u.wait:
                lumps.append((1 / g, u.members * d + s, u.members * vd + vs))
            elif u.members:  # replies nobody waits for still get deserialized
                lumps.append((1 / g, u.members * d, u.members * vd))
        out.append(lumps)
    return out


def _work(lumps: list[tuple[float, float, float]]) -> float:
    return sum(k * m for k, m, _ in lumps)


def leader_work_ms(p: PigPaxosParams) -> float:
    """Return the leader's mean work per round in ms: (1 + relays) m_d + 2 m_s (the client
    request and one aggregate per relay deserialized; broadcast and client reply serialized)."""
    return _work(_leader_lumps(p))


def follower_work_ms(p: PigPaxosParams) -> list[float]:
    """Return one follower's mean work per round in ms, per relay group (relay duty shared
    at random: probability relays/group size per round)."""
    return [_work(lumps) for lumps in _follower_lumps(p)]


def max_throughput_rps(p: PigPaxosParams) -> float:
    """Return the maximum throughput in requests/s: n_p / (busiest node's work per round)."""
    worst = max(leader_work_ms(p), *follower_work_ms(p))
    return 1000.0 * p.pipelines / worst


def bottleneck(p: PigPaxosParams) -> str:
    """Return ``"leader"`` or ``"followers"``: whose per-round work limits throughput."""
    lw = leader_work_ms(p)
    return "leader" if lw >= max(follower_work_ms(p)) else "followers"


# --- queueing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Queue:
    """A node's cross-round queue at one load: utilisation, Marchal's mean wait (ms), and
    per lump type (utilisation share, size in ms) for the shape of the wait."""

    rho: float
    wait_ms: float
    busy: tuple[tuple[float, float], ...] = ()

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Return waits in ms with mean ``wait_ms``: none with probability 1 - rho; else the
        rest of the lump in service (lump type j with probability rho_j, uniform on its size)
        plus the queued work, exponential with the remaining mean.

        Why this shape: an order statistic over many followers (the relay waits for all its
        members) sees the tail, and a follower busy with a relay burst holds a message up for
        up to the whole burst; an exponential alone under-weights that.
        """
        if self.rho <= 0 or self.wait_ms <= 0:
            return np.zeros(shape)
        u = rng.random(shape)
        residual = np.zeros(shape)
        edge = 0.0
        for rho_j, size in self.busy:
            pick = (u >= edge) & (u < edge + rho_j)
            residual = np.where(pick, rng.random(shape) * size, residual)
            edge += rho_j
        queued = max(self.wait_ms - sum(r * z / 2 for r, z in self.busy), 0.0) / self.rho
        extra = rng.exponential(queued, shape) if queued > 0 else 0.0
        return np.where(u < self.rho, residual + extra, 0.0)


def _queue(rate_per_ms: float, lumps: list[tuple[float, float, float]], pipelines: int,
           ca2: float) -> _Queue:
    """Return a node's queue fed by ``lumps``: (arrivals per round, mean ms, variance ms^2).

    A round's work reaches a node in separate lumps far apart in time (the leader: the client
    request, then about one two-hop round trip later the relay aggregates), so the queue is
    taken as fed by their superposition (QNA: the stream's C_a^2 stays ``ca2``) with the
    lump sizes as its service-time mix. ``pipelines`` workers act as one server n_p times
    faster.
    """
    per_round = sum(k for k, _, _ in lumps)
    mean = sum(k * m for k, m, _ in lumps) / per_round
    second = sum(k * (v + m * m) for k, m, v in lumps) / per_round
    cs2 = max(second - mean * mean, 0.0) / mean ** 2
    lam = rate_per_ms * per_round
    s = mean / pipelines
    busy = tuple((rate_per_ms * k * m / pipelines, m / pipelines) for k, m, _ in lumps)
    return _Queue(lam * s, marchal_wait_ms(rate_per_ms=lam, service_ms=s, ca2=ca2, cs2=cs2), busy)


# --- Monte Carlo round latency ------------------------------------------------------------


def _normal_floor(rng: np.random.Generator, mean: float, sd: float,
                  shape: tuple[int, ...]) -> np.ndarray:
    """Return normal draws floored at a tenth of the mean (as the network kernel does)."""
    x = rng.normal(mean, sd, shape) if sd > 0 else np.full(shape, float(mean))
    return np.maximum(x, mean / 10)


def _oneway(p: PigPaxosParams, rng: np.random.Generator, src: str, dst: str,
            shape: tuple[int, ...]) -> np.ndarray:
    """Return one-way delays src -> dst in ms (intra-region: the LAN figures of ``p``)."""
    if src == dst or p.regions is None:
        mean, sd = p.mu_l_ms / 2, p.sigma_l_ms / math.sqrt(2)
    else:
        assert isinstance(p.regions, RegionSet)
        mean, sd = p.regions.one_way_ms(src, dst)
    return _normal_floor(rng, mean, sd, shape)


def _fifo(arrivals: np.ndarray, service: np.ndarray, free: np.ndarray,
          background: float) -> np.ndarray:
    """Return FIFO completion times of sorted ``arrivals`` (samples x k) at one server that
    becomes free at ``free`` (Lindley's recursion, vectorised over samples).

    Other rounds keep sending the node work while a burst is served: as a fluid at rate
    ``background`` (the node's utilisation), work arriving between two of our messages while
    the node is still busy is ahead of the later one; once the node drains, it is served as
    it comes. So ``done_i = max(a_i, done_(i-1) + background * (a_i - a_(i-1))) + s_i``.
    """
    done = np.empty_like(arrivals)
    prev = free
    last = arrivals[:, 0]
    for i in range(arrivals.shape[1]):
        a = arrivals[:, i]
        prev = np.maximum(a, prev + background * (a - last)) + service[:, i]
        last = a
        done[:, i] = prev
    return done


@dataclass(frozen=True)
class _Queues:
    leader: _Queue
    groups: tuple[_Queue, ...]

    @property
    def utilisation(self) -> float:
        return max(self.leader.rho, *(q.rho for q in self.groups))


def _queues(p: PigPaxosParams, rate_per_ms: float) -> _Queues:
    """Return the leader's and each group's follower queue at ``rate_per_ms`` rounds/ms."""
    ca2 = p.sigma_r_factor ** 2
    lead = _queue(rate_per_ms, _leader_lumps(p), p.pipelines, ca2)
    groups = tuple(_queue(rate_per_ms, lumps, p.pipelines, FOLLOWER_CA2) if lumps
                   else _Queue(0.0, 0.0) for lumps in _follower_lumps(p))
    return _Queues(lead, groups)


NEVER_MS = 1e9
"""When an aggregate that never comes (its relay is down) "arrives": after any round."""


def _unit_path(p: PigPaxosParams, rng: np.random.Generator, gq: _Queue, u: Unit, lr: str,
               samples: int, down_members: int = 0) -> tuple[np.ndarray, np.ndarray | int]:
    """Return, for relay unit ``u`` whose relay is up and ``down_members`` of whose members
    are down: ms from the leader's send to the aggregate reaching the leader, and the votes
    it carries. A relay waiting for more replies than its live members can give answers
    ``member_timeout_ms`` after its forward with those processed by then."""
    shp = (samples,)

    def ser() -> np.ndarray:
        return _normal_floor(rng, p.mu_ms_ms, p.sigma_ms_ms, shp)

    def deser(k: int) -> np.ndarray:
        return _normal_floor(rng, p.mu_md_ms, p.sigma_md_ms, (samples, k))

    t = _oneway(p, rng, lr, u.region, shp) + gq.draw(rng, shp) + deser(1)[:, 0]
    if u.members:
        t = t + ser()
    alive = u.members - down_members
    votes: np.ndarray | int = u.wait + 1
    if u.wait == 0:
        sent = t + ser()
    else:
        m = max(alive, 0)
        back = (t[:, None] + _oneway(p, rng, u.region, u.region, (samples, m))
                + gq.draw(rng, (samples, m)) + deser(m)
                + _normal_floor(rng, p.mu_ms_ms, p.sigma_ms_ms, (samples, m))
                + _oneway(p, rng, u.region, u.region, (samples, m)))
        back.sort(axis=1)
        if u.wait <= alive:
            free = back[:, 0] + gq.draw(rng, shp)
            done = _fifo(back[:, :u.wait], deser(u.wait), free, gq.rho)
            sent = done[:, u.wait - 1] + ser()
        else:  # the member time-out: it answers with the replies processed by then
            deadline = t + p.member_timeout_ms
            if m:
                free = back[:, 0] + gq.draw(rng, shp)
                done = _fifo(back, deser(m), free, gq.rho)
                votes = 1 + np.sum(done <= deadline[:, None], axis=1)
            else:
                votes = np.ones(samples, dtype=np.int64)
            sent = deadline + ser()
    return sent + _oneway(p, rng, u.region, lr, shp), votes


def _commit_ms(arrs: list[np.ndarray], votes: list[np.ndarray | int], quorum: int,
               lead_wait: np.ndarray, lead_deser: np.ndarray, rho: float) -> np.ndarray:
    """Return when the leader has processed (FIFO, in arrival order) aggregates carrying
    ``quorum - 1`` votes, ms after its broadcast (``NEVER_MS`` or later if never)."""
    samples = lead_wait.shape[0]
    a = np.column_stack(arrs)
    v = np.column_stack([np.broadcast_to(x, (samples,)) for x in votes])
    order = np.argsort(a, axis=1)
    arr = np.take_along_axis(a, order, axis=1)
    cum = np.cumsum(np.take_along_axis(v, order, axis=1), axis=1)
    k = np.argmax(cum >= quorum - 1, axis=1)  # index of the aggregate completing it
    free = arr[:, 0] + lead_wait
    done = _fifo(arr, lead_deser[:, :a.shape[1]], free, rho)
    commit = done[np.arange(samples), k]
    return np.where(cum[:, -1] >= quorum - 1, commit, np.maximum(commit, NEVER_MS))


def round_latency_samples(p: PigPaxosParams, load_rps: float, rng: np.random.Generator,
                          samples: int = 20_000) -> np.ndarray | None:
    """Return ``samples`` client-observed round latencies in ms at ``load_rps`` requests/s
    (None when a node is saturated).

    Per round: client -> leader; the leader's request job (wait + m_d + m_s); per relay unit
    leader -> relay, the relay's job, the members' jobs and their replies queued FIFO at the
    relay, the aggregate back; the leader processes aggregates FIFO until they cover a
    majority, serializes the client reply; leader -> client. Waits behind other rounds are
    drawn per queue visit from each node's Marchal wait. With a failed relay group, its
    relay is down with the probability its draw hits a down node; each ``relay_timeout_ms``
    after the broadcast that finds the round uncommitted and the group silent, the leader
    re-sends (a queued m_s job) through a relay not tried yet.
    """
    qs = _queues(p, load_rps / 1000.0)
    if qs.utilisation >= 1:
        return None
    return _rounds(p, qs, rng, samples)[0]


def _rounds(p: PigPaxosParams, qs: _Queues, rng: np.random.Generator, samples: int
            ) -> tuple[np.ndarray, float, float]:
    """Return ``samples`` round latencies (ms) with the nodes' queues ``qs``, and per round
    the mean number of aggregates the failed group delivered and of the leader's re-sends
    (0, 0 without a failure)."""
    lay = layout(p)
    shp = (samples,)

    def deser(k: int) -> np.ndarray:
        return _normal_floor(rng, p.mu_md_ms, p.sigma_md_ms, (samples, k))

    def ser() -> np.ndarray:
        return _normal_floor(rng, p.mu_ms_ms, p.sigma_ms_ms, shp)

    lr = lay.leader_region
    fail = failure(p)
    delivered = resent = 0.0
    # Time 0 = the leader's broadcast is serialized and leaves.
    arrs: list[np.ndarray] = []
    votes: list[np.ndarray | int] = []
    for u in lay.units:
        if fail is None or u.group != fail[0]:
            a, v = _unit_path(p, rng, qs.groups[u.group], u, lr, samples)
            arrs.append(a)
            votes.append(v)
    lead_wait = qs.leader.draw(rng, shp)
    lead_deser = deser(len(lay.units) + (fail[1] if fail else 0))
    if fail is not None:
        gi, g, d = fail
        (u,) = [x for x in lay.units if x.group == gi]
        heard = np.full(samples, NEVER_MS)  # when the group's first aggregate arrives
        tried_down = np.zeros(samples)
        for attempt in range(g):  # every node of the group, at most once each
            at = attempt * p.relay_timeout_ms
            active = np.ones(samples, dtype=bool)
            if attempt:
                commit = _commit_ms(arrs, votes, lay.quorum, lead_wait, lead_deser, qs.leader.rho)
                active = (heard > at) & (commit > at)
                if not active.any():
                    break
                at = at + qs.leader.draw(rng, shp) + ser()  # the leader's re-send job
                resent += float(active.mean())
            down = rng.random(samples) < (d - tried_down) / (g - attempt)
            tried_down += down & active
            a, v = _unit_path(p, rng, qs.groups[gi], u, lr, samples, down_members=d)
            ok = active & ~down
            delivered += float(ok.mean())
            arrs.append(np.where(ok, at + a, NEVER_MS))
            votes.append(np.where(ok, v, 0))
            heard = np.minimum(heard, arrs[-1])
    commit = _commit_ms(arrs, votes, lay.quorum, lead_wait, lead_deser, qs.leader.rho) + ser()
    client = (_oneway(p, rng, lr, lr, shp) + _oneway(p, rng, lr, lr, shp))
    request = qs.leader.draw(rng, shp) + deser(1)[:, 0] + ser()
    return client + request + commit, delivered, resent


FAILURE_SAMPLES = 4000
"""Monte Carlo rounds (no queueing, a fixed seed) that count a failed group's aggregates
and the leader's re-sends per round for the nodes' work."""


def failure_counts(p: PigPaxosParams) -> tuple[float, float]:
    """Return, per round, the mean number of aggregates the failed relay group delivers to
    the leader and of the leader's re-sends ((1, 0) without a failure): counted on rounds
    without queueing, where they depend on the time-outs and the layout, not on the load."""
    if failure(p) is None:
        return 1.0, 0.0
    idle = _Queue(0.0, 0.0)
    groups = len(layout(p).groups)
    _, delivered, resent = _rounds(p, _Queues(idle, (idle,) * groups),
                                   np.random.default_rng(0), FAILURE_SAMPLES)
    return delivered, resent


def curve(p: PigPaxosParams, loads_rps: Sequence[float], seed: int = 0,
          samples: int = 20_000, label: str | None = None) -> Curve:
    """Return the model's latency (ms) vs offered load (requests/s) for ``p``.

    Points at or beyond the busiest node's capacity are flagged saturated (latency None).
    Monte Carlo draws come from ``seed``; the same seed gives the same curve.
    """
    require(samples >= 100, f"samples={samples}: use at least 100 Monte Carlo rounds per load")
    rng = np.random.default_rng(seed)
    pts: list[CurvePoint] = []
    for load in loads_rps:
        require(math.isfinite(load) and load > 0,
                f"load {load!r} requests/s: offered loads must be positive numbers")
        qs = _queues(p, load / 1000.0)
        lat = round_latency_samples(p, load, rng, samples)
        if lat is None:
            pts.append(point(load, math.inf, max(qs.utilisation, 1.0)))
            continue
        pts.append(point(load, float(lat.mean()), qs.utilisation,
                         float(np.percentile(lat, 99)),
                         leader_utilisation=qs.leader.rho,
                         follower_utilisation=max(q.rho for q in qs.groups)))
    return Curve(label or describe(p), pts, max_throughput_rps(p),
                 {"model": "pigpaxos", "bottleneck": bottleneck(p),
                  "params": _params_json(p)})


def describe(p: PigPaxosParams) -> str:
    """Return a short label such as ``PigPaxos n=25 r=3`` or ``PigPaxos n=15 aws5``."""
    fail = failure(p)
    down = "" if fail is None else f" group {fail[0]}: {fail[2]}/{fail[1]} down"
    if p.regions is None:
        return f"PigPaxos n={p.n} r={len(layout(p).groups)}{down}"
    assert isinstance(p.regions, RegionSet)
    return f"PigPaxos n={p.n} {p.regions.name}{down}"


def _params_json(p: PigPaxosParams) -> dict[str, Any]:
    d = {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}
    if isinstance(p.regions, RegionSet):
        d["regions"] = p.regions.name
    return d


# --- Paxos baseline (seed 002 part 2, LAN, single leader) ------------------------------------


def paxos_max_throughput_rps(n: int, mu_ms_ms: float = DEFAULT_MU_MS_MS,
                             mu_md_ms: float = DEFAULT_MU_MD_MS, pipelines: int = 1) -> float:
    """Return Multi-Paxos maximum throughput in requests/s: R_max = n_p / (N m_d + 2 m_s)."""
    require(_is_int(n) and n >= 1, f"n={n!r}: Paxos needs at least one node; use n >= 1")
    require(mu_ms_ms > 0 and mu_md_ms > 0,
            f"mu_ms_ms={mu_ms_ms!r}, mu_md_ms={mu_md_ms!r}: message costs must be positive ms")
    require(_is_int(pipelines) and pipelines >= 1,
            f"pipelines={pipelines!r}: each node needs at least one worker; use pipelines >= 1")
    return 1000.0 * pipelines / (n * mu_md_ms + 2 * mu_ms_ms)


def paxos_curve(n: int, loads_rps: Sequence[float], seed: int = 0, samples: int = 20_000,
                mu_ms_ms: float = DEFAULT_MU_MS_MS, sigma_ms_ms: float = DEFAULT_SIGMA_MS_MS,
                mu_md_ms: float = DEFAULT_MU_MD_MS, sigma_md_ms: float = DEFAULT_SIGMA_MD_MS,
                mu_l_ms: float = LAN_RTT_MS, sigma_l_ms: float = LAN_SD_MS,
                pipelines: int = 1, sigma_r_factor: float = 2.0) -> Curve:
    """Return the seed's LAN Multi-Paxos curve (the comparison baseline), latency in ms.

    L = 2 m_s + 2 m_d + r_(q-1) + w + mu_l, with r_(q-1) the mean (q-1)-th smallest of N - 1
    draws of N(mu_l + m_s + m_d, sd_l^2 + sd_s^2 + sd_d^2) and w Marchal's wait.
    """
    cap = paxos_max_throughput_rps(n, mu_ms_ms, mu_md_ms, pipelines)
    rng = np.random.default_rng(seed)
    q = majority(n)
    if n > 1:
        rtt = rng.normal(mu_l_ms + mu_ms_ms + mu_md_ms,
                         math.sqrt(sigma_l_ms ** 2 + sigma_ms_ms ** 2 + sigma_md_ms ** 2),
                         (samples, n - 1))
        r_q = float(np.sort(rtt, axis=1)[:, q - 2].mean()) if q >= 2 else 0.0
    else:
        r_q = 0.0
    work = n * mu_md_ms + 2 * mu_ms_ms
    # The seed's C_s^2 (sums the sds as if fully correlated).
    cs2 = ((n * sigma_md_ms) ** 2 + (2 * sigma_ms_ms) ** 2) / work ** 2
    pts = []
    for load in loads_rps:
        require(math.isfinite(load) and load > 0,
                f"load {load!r} requests/s: offered loads must be positive numbers")
        rate = load / 1000.0
        rho = rate * work / pipelines
        w = marchal_wait_ms(rate_per_ms=rate, service_ms=work / pipelines,
                            ca2=sigma_r_factor ** 2, cs2=cs2)
        pts.append(point(load, 2 * mu_ms_ms + 2 * mu_md_ms + r_q + w + mu_l_ms, rho))
    return Curve(f"Paxos n={n}", pts, cap, {"model": "paxos-lan-baseline"})


def scaling_table(sizes: Sequence[int] = (5, 9, 15, 25, 35, 49, 75, 99),
                  base: PigPaxosParams | None = None) -> list[dict[str, Any]]:
    """Return max throughput (requests/s) of PigPaxos vs Paxos per cluster size, LAN.

    Each row: n, pigpaxos_rps, paxos_rps, ratio, bottleneck. ``base`` supplies everything
    but ``n`` (default: 3 relay groups, seed message costs).
    """
    base = base or PigPaxosParams()
    rows = []
    for n in sizes:
        p = dataclasses.replace(base, n=n)
        pig = max_throughput_rps(p)
        pax = paxos_max_throughput_rps(n, p.mu_ms_ms, p.mu_md_ms, p.pipelines)
        rows.append({"n": n, "pigpaxos_rps": pig, "paxos_rps": pax, "ratio": pig / pax,
                     "bottleneck": bottleneck(p)})
    return rows


def validation_grid() -> list[tuple[str, PigPaxosParams, list[float]]]:
    """Return (label, params, loads in requests/s) cases for ``replicalab model validate``:
    LAN n = 9, 25, 49 with 3 relay groups, WAN aws5 with one relay group per region, and the
    seed's failure (n = 25, one of the 3 relay groups down)."""
    cases = []
    for p in (PigPaxosParams(n=9), PigPaxosParams(n=25), PigPaxosParams(n=49),
              PigPaxosParams(n=15, regions="aws5"), PigPaxosParams(n=25, failed_group=0)):
        cap = max_throughput_rps(p)
        loads = [round(cap * f) for f in (0.1, 0.2, 0.35, 0.5, 0.6, 0.7, 0.78, 0.9)]
        cases.append((describe(p), p, loads))
    return cases

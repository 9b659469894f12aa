"""WPaxos over a WAN: zones = regions, several nodes per zone, grid quorums, object stealing.

Seed 002, Part 3 (item 6). ``Z`` zones of ``l`` nodes; the first ``leaders_per_zone`` nodes
of a zone (default: all) each lead an equal share of the objects owned by the zone. Grid
quorums tolerating ``fn`` node failures per zone and ``fz`` zone failures:

* phase-2 quorum: ``fn + 1`` nodes in each of ``fz + 1`` zones — the leader's own zone and its
  ``fz`` nearest zones. Phase-2 is *thrifty*: the leader sends only to the ``fn`` peers
  (random in its zone) and ``fn + 1`` random nodes of each nearest zone, and needs them all.
  ``fz = 0`` is the seed's "no region fault tolerance": commits stay inside the zone.
* phase-1 quorum: ``l - fn`` nodes in each of ``Z - fz`` zones (intersects every phase-2
  quorum); a steal sends phase-1 to all other nodes and waits for that grid quorum.

A request goes to a random leader of its client's zone. With probability ``locality`` that
leader owns the object (local commit); with probability ``steal`` it steals the object first
(phase-1, then a local commit); otherwise it forwards the request to a random leader of a
random other zone, which commits it and answers through the forwarder. Per zone ``z`` (mean
over its leaders ``x``)::

    local  = RTT_lan + 2A + 2W_x + P2(x)
    fwd    = RTT_lan + 2A + 2W_x + mean over owners y [RTT(z, z_y) + 2A + 2W_y + P2(y)]
    steal  = RTT_lan + 3A + 3W_x + P1(x) + P2(x)
    L_z    = locality local + (1 - locality - steal) fwd + steal steal

``P2``/``P1`` are the mean times to the last needed reply (reply = RTT + A + W at the
replier), integrated exactly over independent normal RTTs. Loads and waits per node are as in
:mod:`.paxos_wan` (``A`` = one message handled and answered). Times ms, rates per s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from replicalab.models.base import Curve, CurvePoint, from_dict, point, require
from replicalab.models.paxos_wan import (
    NodeLoad,
    WanParams,
    grid_quorum_mean_ms,
    kth_fastest_mean_ms,
    node_waits_ms,
)

__all__ = [
    "WPaxosParams",
    "curve",
    "latency_by_region_ms",
    "max_throughput_rps",
    "nearest_zones",
    "validation_grid",
]


@dataclass(frozen=True)
class WPaxosParams:
    """WPaxos model parameters.

    ``nodes_per_zone`` l (default 3: 15 nodes on aws5); ``leaders_per_zone`` (None: all l);
    ``locality`` = fraction of requests whose object is led in the requester's zone (0..1,
    default 0.7); ``steal`` = fraction of all requests that steal their object into the
    requester's zone with a phase-1 (0..1, default 0.01; locality + steal <= 1); ``fz`` zone
    failures tolerated (0 = "no region fault tolerance"); ``fn`` node failures tolerated per
    zone (None: floor((l-1)/2)).
    """

    wan: WanParams = field(default_factory=WanParams)
    nodes_per_zone: int = 3
    leaders_per_zone: int | None = None
    locality: float = 0.7
    steal: float = 0.01
    fz: int = 0
    fn: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.wan, dict):
            object.__setattr__(self, "wan", WanParams.from_dict(self.wan))
        require(isinstance(self.wan, WanParams), "wan: give WanParams or a table of them")
        zones, per = self.wan.n, self.nodes_per_zone
        require(isinstance(per, int) and per >= 1,
                f"nodes_per_zone={per!r}: must be an integer >= 1")
        if self.leaders_per_zone is not None:
            require(isinstance(self.leaders_per_zone, int) and 1 <= self.leaders_per_zone <= per,
                    f"leaders_per_zone={self.leaders_per_zone!r}: must be an integer from 1 to "
                    f"nodes_per_zone ({per})")
        for name in ("locality", "steal"):
            v = getattr(self, name)
            require(isinstance(v, int | float) and 0.0 <= v <= 1.0,
                    f"{name}={v!r}: a fraction of requests, between 0 and 1")
        require(self.locality + self.steal <= 1.0 + 1e-12,
                f"locality + steal = {self.locality + self.steal:g}: these are shares of the "
                "same requests and must not exceed 1")
        require(isinstance(self.fz, int) and 0 <= self.fz <= zones - 1,
                f"fz={self.fz!r}: zone failures tolerated must be an integer from 0 to "
                f"{zones - 1} (zones - 1)")
        if self.fn is not None:
            require(isinstance(self.fn, int) and 0 <= self.fn <= per - 1,
                    f"fn={self.fn!r}: node failures per zone must be an integer from 0 to "
                    f"{per - 1} (nodes_per_zone - 1)")
        require(self.q2_replies >= 1,
                "fn=0 with fz=0 leaves no phase-2 acceptor besides the leader; "
                "set fn >= 1 or fz >= 1")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WPaxosParams:
        """Return params from a TOML table (``wan`` may be a nested table)."""
        return from_dict(cls, data, "WPaxos model parameters")

    @property
    def fn_(self) -> int:
        """Node failures tolerated per zone (default floor((l-1)/2))."""
        return (self.nodes_per_zone - 1) // 2 if self.fn is None else self.fn

    @property
    def leaders(self) -> int:
        """Leaders per zone."""
        return self.nodes_per_zone if self.leaders_per_zone is None else self.leaders_per_zone

    @property
    def q2_replies(self) -> int:
        """Phase-2 replies a leader waits for: fn in its zone + (fn+1) in each of fz zones."""
        return self.fn_ + self.fz * (self.fn_ + 1)

    @property
    def forward(self) -> float:
        """Fraction of requests forwarded to another zone's leader."""
        return max(0.0, 1.0 - self.locality - self.steal)

    @property
    def nodes(self) -> int:
        """Total number of nodes (zones x nodes per zone)."""
        return self.wan.n * self.nodes_per_zone


def nearest_zones(w: WanParams, z: int, k: int) -> list[int]:
    """Return the ``k`` zones nearest to zone ``z`` by mean RTT (ties: region order)."""
    return sorted((u for u in range(w.n) if u != z), key=lambda u: (w.rtt(z, u)[0], u))[:k]


def _rates(p: WPaxosParams, load_rps: float) -> tuple[list[float], list[float], list[float]]:
    """Per node: entry rate, locally originated commands, WAN-originated commands (per ms)."""
    w = p.wan
    zones, per, lz = w.n, p.nodes_per_zone, p.leaders
    lam = [load_rps / 1000.0 * s for s in w.shares]
    entry = [0.0] * p.nodes
    cmd_loc = [0.0] * p.nodes
    cmd_wan = [0.0] * p.nodes
    for z in range(zones):
        fwd_in = sum(p.forward * lam[u] / (zones - 1) for u in range(zones) if u != z) \
            if zones > 1 else 0.0
        for k in range(lz):
            x = z * per + k
            entry[x] = lam[z] / lz
            cmd_loc[x] = p.locality * entry[x]
            cmd_wan[x] = p.steal * entry[x] + fwd_in / lz
    return entry, cmd_loc, cmd_wan


def _loads(p: WPaxosParams, load_rps: float) -> list[NodeLoad]:
    """Per-node job streams at aggregate ``load_rps``."""
    w = p.wan
    zones, per, fn, n = w.n, p.nodes_per_zone, p.fn_, p.nodes
    entry, cmd_loc, cmd_wan = _rates(p, load_rps)
    loads = [NodeLoad() for _ in range(n)]
    a, av, d, dv = w.a_mean, w.a_var, w.mu_md_ms, w.sigma_md_ms ** 2
    # Arrival variability (QNA): a random split with probability q keeps q Ca^2 + 1 - q;
    # a LAN hop keeps it; a WAN hop makes the stream near-Poisson (Ca^2 = 1).
    c_entry = _thin(w.ca2, 1.0 / p.leaders)          # a zone's clients spread over leaders
    c_loc = _thin(c_entry, p.locality)                # of which the local commands
    c_peer = _thin(c_loc, fn / (per - 1)) if per > 1 else 1.0  # a peer's share of them
    far = [nearest_zones(w, z, p.fz) for z in range(zones)]
    remote = p.fz * (fn + 1)
    steals_total = sum(p.steal * e for e in entry)
    for x in range(n):
        z = x // per
        e = entry[x]
        ld = loads[x]
        # Entry: every client request (bursty: same-zone clients); a forward's relayed answer.
        ld.add(e, a, av, c_entry)
        ld.add(p.forward * e, a, av, 1.0)
        # Steal: phase-1 replies from all other nodes, the completing one sends phase-2.
        ld.add(p.steal * e * (n - 2), d, dv, 1.0)
        ld.add(p.steal * e, a, av, 1.0)
        # Leading: a forwarded request arrives over the WAN; phase-2 replies, last one answers.
        ld.add(cmd_wan[x] - p.steal * e, a, av, 1.0)
        cmds = cmd_loc[x] + cmd_wan[x]
        if remote:
            # The slowest (completing) reply comes from a remote zone.
            ld.add(cmd_loc[x] * fn, d, dv, c_loc)
            ld.add(cmd_wan[x] * fn, d, dv, 1.0)
            ld.add(cmds * (remote - 1), d, dv, 1.0)
            ld.add(cmds, a, av, 1.0)
        else:
            ld.add(cmd_loc[x] * (fn - 1), d, dv, c_loc)
            ld.add(cmd_wan[x] * (fn - 1), d, dv, 1.0)
            ld.add(cmd_loc[x], a, av, c_loc)
            ld.add(cmd_wan[x], a, av, 1.0)
        # Follower for the other leaders of this zone (random fn of the l-1 peers).
        if per > 1:
            for y in range(z * per, z * per + per):
                if y != x:
                    ld.add(cmd_loc[y] * fn / (per - 1), a, av, c_peer)
                    ld.add(cmd_wan[y] * fn / (per - 1), a, av, 1.0)
        # Follower for leaders of zones whose nearest fz zones include this one.
        for u in range(zones):
            if z in far[u]:
                for y in range(u * per, u * per + per):
                    ld.add((cmd_loc[y] + cmd_wan[y]) * (fn + 1) / per, a, av, 1.0)
        # Phase-1 of every steal by another node.
        ld.add(steals_total - p.steal * e, a, av, 1.0)
    return loads


def _thin(ca2: float, q: float) -> float:
    """Ca^2 of a stream after keeping each arrival with probability q (QNA splitting)."""
    return q * ca2 + 1.0 - q


def _reply(w: WanParams, za: int, zb: int, wait: float) -> tuple[float, float]:
    m, s = w.rtt(za, zb)
    return m + w.a_mean + wait, math.sqrt(s ** 2 + w.a_var)


def _zone_wait(waits: list[float], z: int, per: int, exclude: int = -1) -> float:
    ws = [waits[y] for y in range(z * per, z * per + per) if y != exclude]
    return sum(ws) / len(ws)


def _p2(p: WPaxosParams, x: int, waits: list[float]) -> float:
    """Mean time (ms) from leader ``x`` sending phase-2 to its last needed reply."""
    w, per, fn = p.wan, p.nodes_per_zone, p.fn_
    z = x // per
    means, sds = [], []
    if fn:
        m, s = _reply(w, z, z, _zone_wait(waits, z, per, exclude=x))
        means += [m] * fn
        sds += [s] * fn
    for u in nearest_zones(w, z, p.fz):
        m, s = _reply(w, z, u, _zone_wait(waits, u, per))
        means += [m] * (fn + 1)
        sds += [s] * (fn + 1)
    return kth_fastest_mean_ms(means, sds, len(means))


def _p1(p: WPaxosParams, x: int, waits: list[float]) -> float:
    """Mean time (ms) from ``x`` sending phase-1 to all nodes to completing its grid quorum."""
    w, per, fn = p.wan, p.nodes_per_zone, p.fn_
    z = x // per
    groups = []
    for u in range(w.n):
        members = [t for t in range(u * per, u * per + per) if t != x]
        replies = [_reply(w, z, u, waits[t]) for t in members]
        need = per - fn - (1 if u == z else 0)
        groups.append(([r[0] for r in replies], [r[1] for r in replies], need))
    return grid_quorum_mean_ms(groups, w.n - p.fz)


def latency_by_region_ms(p: WPaxosParams, load_rps: float) -> dict[str, float] | None:
    """Return mean client latency (ms) per zone at aggregate ``load_rps``; None if saturated."""
    w = p.wan
    waits = node_waits_ms(lambda x: _loads(p, x), load_rps, w.pipelines)
    if waits is None:
        return None
    per, lz, zones, a = p.nodes_per_zone, p.leaders, w.n, w.a_mean
    p2 = {x: _p2(p, x, waits) for z in range(zones) for x in range(z * per, z * per + lz)}
    # Owner side of a forwarded request, from the owner's arrival to its answer leaving.
    owner = [sum(2 * a + 2 * waits[y] + p2[y] for y in range(u * per, u * per + lz)) / lz
             for u in range(zones)]
    out = {}
    for z, r in enumerate(w.rs.regions):
        lan = w.rtt(z, z)[0]
        total = 0.0
        for x in range(z * per, z * per + lz):
            local = lan + 2 * a + 2 * waits[x] + p2[x]
            lat = p.locality * local
            if p.forward > 0:
                away = sum(w.rtt(z, u)[0] + owner[u] for u in range(zones) if u != z)
                lat += p.forward * (lan + 2 * a + 2 * waits[x] + away / (zones - 1))
            if p.steal > 0:
                lat += p.steal * (local + a + waits[x] + _p1(p, x, waits))
            total += lat
        out[r] = total / lz
    return out


def max_throughput_rps(p: WPaxosParams) -> float:
    """Return the aggregate saturation throughput (req/s): the first node to saturate."""
    return 1000.0 * p.wan.pipelines / max(x.work for x in _loads(p, 1000.0))


def curve(p: WPaxosParams, loads_rps: Sequence[float]) -> Curve:
    """Return latency (ms, mean over client zones weighted by share) vs aggregate load (req/s).

    Each point's ``extra`` holds ``lat_<region>_ms`` per client zone and ``util_<region>``,
    the busiest node's utilisation in that zone.
    """
    for x in loads_rps:
        require(isinstance(x, int | float) and x >= 0 and math.isfinite(x),
                f"load {x!r} req/s: offered loads must be finite numbers >= 0")
    w, per = p.wan, p.nodes_per_zone
    pts: list[CurvePoint] = []
    for load in loads_rps:
        utils = [x.utilisation(w.pipelines) for x in _loads(p, load)]
        extra = {f"util_{r}": max(utils[z * per:(z + 1) * per])
                 for z, r in enumerate(w.rs.regions)}
        per_region = latency_by_region_ms(p, load)
        if per_region is None:
            pts.append(point(load, math.inf, max(utils), **extra))
            continue
        mean = sum(s * per_region[r] for s, r in zip(w.shares, w.rs.regions, strict=True))
        extra.update({f"lat_{r}_ms": v for r, v in per_region.items()})
        pts.append(point(load, mean, max(utils), **extra))
    label = (f"WPaxos {p.nodes} nodes, locality {p.locality:.0%}, steal {p.steal:.0%}, "
             f"fz={p.fz} ({w.rs.name})")
    return Curve(label, pts, max_throughput_rps(p),
                 {"nodes": p.nodes, "q2_replies": p.q2_replies})


def validation_grid() -> list[tuple[str, WPaxosParams, list[float]]]:
    """Return (label, params, loads req/s) for ``replicalab model validate``: the default."""
    p = WPaxosParams()
    cap = max_throughput_rps(p)
    return [("wpaxos default (locality 0.7, steal 0.01, fz=0)", p,
             [round(cap * f) for f in (0.1, 0.4, 0.6, 0.8)])]


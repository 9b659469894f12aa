"""EPaxos over a WAN: every region's node leads its own clients' commands.

Seed 002, Part 3 (item 5). A command led by node ``i`` goes to its PreAccept peers (all
``N-1`` by default; the ``fast_quorum - 1`` nearest with ``thrifty``). Without a conflict
(probability ``1 - c``) it commits on the fast path once ``fast_quorum - 1`` peers replied;
with one (probability ``c``) an Accept round to a majority follows (``floor(N/2)`` replies).
Per client region ``i``::

    L_i = RTT_lan + 2 A + 2 W_i + Q_fast(i) + c (Q_slow(i) + W_i + A)

``A = mu_md + mu_ms`` (a message handled and answered), ``Q`` the mean order statistic of the
peers' reply times ``RTT(i, j) + A + W_j`` and ``W`` each node's queue wait (see
:class:`~replicalab.models.paxos_wan.NodeLoad`). Each node's load is its own commands as leader
(``N mu_md + 2 mu_ms`` each, plus ``(N-1) mu_md + mu_ms`` on the slow path) and every other
node's commands as follower (``A`` per PreAccept, and per Accept on the slow path). Commit
messages and dependency-graph work are not modelled (as in the seed). Times ms, rates per s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from replicalab.models.base import Curve, CurvePoint, from_dict, point, require
from replicalab.models.paxos_wan import (
    NodeLoad,
    WanParams,
    kth_fastest_mean_ms,
    node_waits_ms,
)
from replicalab.models.paxos_wan import (
    max_throughput_rps as paxos_max_throughput_rps,
)

__all__ = [
    "EPaxosParams",
    "curve",
    "latency_by_region_ms",
    "max_throughput_rps",
    "max_throughput_vs_conflict",
    "node_max_throughput_rps",
    "validation_grid",
]


@dataclass(frozen=True)
class EPaxosParams:
    """EPaxos model parameters.

    ``conflict`` = probability a command interferes and takes the slow path (0..1, default
    2 %). ``fast_quorum`` = fast-quorum size including the command leader; None = EPaxos's
    optimised ``F + floor((F+1)/2)`` for ``N = 2F+1`` (3 for N = 5: the seed's majority);
    basic EPaxos uses ``2F``. ``thrifty`` = send PreAccept/Accept only to the quorum's
    nearest peers instead of all ``N-1`` (default False, as the seed's 2.7x implies).
    """

    wan: WanParams = field(default_factory=WanParams)
    conflict: float = 0.02
    fast_quorum: int | None = None
    thrifty: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.wan, dict):
            object.__setattr__(self, "wan", WanParams.from_dict(self.wan))
        require(isinstance(self.wan, WanParams), "wan: give WanParams or a table of them")
        require(isinstance(self.conflict, int | float) and 0.0 <= self.conflict <= 1.0,
                f"conflict={self.conflict!r}: the conflict rate is a probability, "
                "between 0 and 1 (e.g. 0.02)")
        n = self.wan.n
        if self.fast_quorum is not None:
            require(isinstance(self.fast_quorum, int)
                    and n // 2 + 1 <= self.fast_quorum <= n,
                    f"fast_quorum={self.fast_quorum!r}: must be an integer from a majority "
                    f"({n // 2 + 1}) to N ({n})")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EPaxosParams:
        """Return params from a TOML table (``wan`` may be a nested table)."""
        return from_dict(cls, data, "EPaxos model parameters")

    @property
    def fast_quorum_size(self) -> int:
        """Fast-quorum size including the leader (default F + floor((F+1)/2))."""
        if self.fast_quorum is not None:
            return self.fast_quorum
        f = (self.wan.n - 1) // 2
        return max(f + (f + 1) // 2, self.wan.n // 2 + 1)

    def _nearest(self, i: int, k: int) -> list[int]:
        w = self.wan
        peers = [j for j in range(w.n) if j != i]
        return sorted(peers, key=lambda j: (w.rtt(i, j)[0], j))[:k]

    def preaccept_targets(self, i: int) -> list[int]:
        """Nodes leader ``i`` sends PreAccept to (all peers, or the nearest if thrifty)."""
        k = self.fast_quorum_size - 1 if self.thrifty else self.wan.n - 1
        return self._nearest(i, k)

    def accept_targets(self, i: int) -> list[int]:
        """Nodes leader ``i`` sends Accept to on the slow path."""
        k = self.wan.n // 2 if self.thrifty else self.wan.n - 1
        return self._nearest(i, k)


def _loads(p: EPaxosParams, load_rps: float) -> list[NodeLoad]:
    """Per-node job streams at aggregate ``load_rps`` (clients split by ``client_share``)."""
    w = p.wan
    c = p.conflict
    loads = [NodeLoad() for _ in range(w.n)]
    md_var = w.sigma_md_ms ** 2
    for i, share in enumerate(w.shares):
        lam = load_rps / 1000.0 * share
        pre, acc = p.preaccept_targets(i), p.accept_targets(i)
        # As leader: the request (bursty, straight from local clients), the replies (across
        # the WAN: near-Poisson); the completing reply also serialises (Accept or answer).
        loads[i].add(lam, w.a_mean, w.a_var, w.ca2)
        loads[i].add(lam, w.a_mean, w.a_var, 1.0)
        loads[i].add(lam * (len(pre) - 1), w.mu_md_ms, md_var, 1.0)
        loads[i].add(lam * c, w.a_mean, w.a_var, 1.0)
        loads[i].add(lam * c * (len(acc) - 1), w.mu_md_ms, md_var, 1.0)
        # As follower: every PreAccept, and every Accept on the slow path, is answered.
        for j in pre:
            loads[j].add(lam, w.a_mean, w.a_var, 1.0)
        for j in acc:
            loads[j].add(lam * c, w.a_mean, w.a_var, 1.0)
    return loads


def _quorum(p: EPaxosParams, i: int, targets: list[int], need: int,
            waits: list[float]) -> float:
    w = p.wan
    means, sds = [], []
    for j in targets:
        m, s = w.rtt(i, j)
        means.append(m + w.a_mean + waits[j])
        sds.append(math.sqrt(s ** 2 + w.a_var))
    return kth_fastest_mean_ms(means, sds, need)


def latency_by_region_ms(p: EPaxosParams, load_rps: float) -> dict[str, float] | None:
    """Return mean client latency (ms) per region at aggregate ``load_rps``; None if saturated."""
    w = p.wan
    waits = node_waits_ms(lambda x: _loads(p, x), load_rps, w.pipelines)
    if waits is None:
        return None
    out = {}
    for i, r in enumerate(w.rs.regions):
        fast = _quorum(p, i, p.preaccept_targets(i), p.fast_quorum_size - 1, waits)
        lat = w.rtt(i, i)[0] + 2 * w.a_mean + 2 * waits[i] + fast
        if p.conflict > 0:
            slow = _quorum(p, i, p.accept_targets(i), w.n // 2, waits)
            lat += p.conflict * (slow + waits[i] + w.a_mean)
        out[r] = lat
    return out


def _work_per_request(p: EPaxosParams) -> list[float]:
    """Busy time (ms) each node spends per request of aggregate load."""
    return [x.work for x in _loads(p, 1000.0)]


def max_throughput_rps(p: EPaxosParams) -> float:
    """Return the aggregate saturation throughput (req/s): the first node to saturate."""
    return 1000.0 * p.wan.pipelines / max(_work_per_request(p))


def node_max_throughput_rps(p: EPaxosParams) -> dict[str, float]:
    """Return each node's own-client throughput (req/s) when the cluster saturates."""
    cap = max_throughput_rps(p)
    return {r: cap * s for r, s in zip(p.wan.rs.regions, p.wan.shares, strict=True)}


def max_throughput_vs_conflict(p: EPaxosParams,
                               conflicts: Sequence[float]) -> list[tuple[float, float]]:
    """Return [(conflict rate, aggregate max throughput req/s)] for each conflict rate."""
    return [(c, max_throughput_rps(replace(p, conflict=c))) for c in conflicts]


def curve(p: EPaxosParams, loads_rps: Sequence[float]) -> Curve:
    """Return latency (ms, mean over client regions weighted by share) vs aggregate load (req/s).

    Each point's ``extra`` holds ``lat_<region>_ms`` (that node's clients) and
    ``util_<region>`` (that node's utilisation).
    """
    for x in loads_rps:
        require(isinstance(x, int | float) and x >= 0 and math.isfinite(x),
                f"load {x!r} req/s: offered loads must be finite numbers >= 0")
    w = p.wan
    pts: list[CurvePoint] = []
    for load in loads_rps:
        utils = [x.utilisation(w.pipelines) for x in _loads(p, load)]
        extra = {f"util_{r}": u for r, u in zip(w.rs.regions, utils, strict=True)}
        per = latency_by_region_ms(p, load)
        if per is None:
            pts.append(point(load, math.inf, max(utils), **extra))
            continue
        mean = sum(s * per[r] for s, r in zip(w.shares, w.rs.regions, strict=True))
        extra.update({f"lat_{r}_ms": v for r, v in per.items()})
        pts.append(point(load, mean, max(utils), **extra))
    return Curve(f"EPaxos, conflict {p.conflict:.0%} ({w.rs.name})", pts, max_throughput_rps(p),
                 {"node_max_rps": node_max_throughput_rps(p),
                  "paxos_max_rps": paxos_max_throughput_rps(w),
                  "fast_quorum": p.fast_quorum_size})


def validation_grid() -> list[tuple[str, EPaxosParams, list[float]]]:
    """Return (label, params, loads req/s) for ``replicalab model validate``: a few conflicts."""
    out = []
    for c in (0.02, 0.3, 1.0):
        p = EPaxosParams(conflict=c)
        cap = max_throughput_rps(p)
        out.append((f"epaxos conflict={c:g}", p, [round(cap * f) for f in (0.1, 0.4, 0.6, 0.8)]))
    return out

"""Dynamo-style N/R/W quorum replication with last-writer-wins timestamps.

The client coordinates: a write is sent to all N replicas and returns after W acks; a read
asks all N and returns the newest of the first R replies. Each replica applies a write after
an exponential delay of mean ``apply_ms`` (commit log, memtable, queueing: the "W" of PBS),
which is what makes R + W <= N stale. A consistent read uses R' = N - W + 1 so that read and
write quorums intersect. Optional read repair and anti-entropy (periodic pairwise merge).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from replicalab.regions import LAN_RTT_MS, LAN_SD_MS, RegionSet
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_MS
from replicalab.sim.errors import Lost
from replicalab.sim.network import Delay, Network, Node
from replicalab.sim.params import require
from replicalab.sim.random import Stream

_ZERO: tuple[int, int] = (-1, -1)


@dataclass(frozen=True)
class QuorumParams:
    """Parameters of ``sim://quorum`` (times in ms)."""

    n: int = 3
    r: int = 1
    w: int = 1
    regions: str = "lan"
    client_rtt_ms: float = LAN_RTT_MS
    client_sd_ms: float = LAN_SD_MS
    apply_ms: float = 10.0
    read_repair: bool = False
    anti_entropy_ms: float = 0.0
    timeout_ms: float = 5000.0

    def check(self, what: str) -> None:
        """Raise ValueError naming the first invalid parameter."""
        require(self.n >= 1, what, f"n={self.n} must be at least 1")
        require(1 <= self.r <= self.n, what, f"r={self.r} must be between 1 and n={self.n}")
        require(1 <= self.w <= self.n, what, f"w={self.w} must be between 1 and n={self.n}")
        require(self.client_rtt_ms > 0 and self.timeout_ms > 0, what,
                "client_rtt_ms and timeout_ms must be positive")
        require(self.apply_ms >= 0 and self.anti_entropy_ms >= 0 and self.client_sd_ms >= 0,
                what, "apply_ms, anti_entropy_ms and client_sd_ms must not be negative")


class Quorum:
    """N replicas placed round-robin over the regions; the client is the coordinator."""

    name: ClassVar[str] = "quorum"
    features: ClassVar[frozenset[str]] = frozenset(
        {"eventual-read", "consistent-read", "multi-read", "delete"})
    eventual_read_served_by: ClassVar[str] = (
        "all N replicas are asked; the newest of the first R replies is returned")

    def __init__(self, rt: Runtime, stream: Stream, regions: RegionSet,
                 p: QuorumParams) -> None:
        self.p = p
        self.rt = rt
        self.s = stream
        self.net = Network.with_client_link(rt, stream, regions, p.client_rtt_ms,
                                            p.client_sd_ms, p.timeout_ms)
        service = Delay.ms(0.05)
        self.replicas = [self.net.add_node(f"r{i}", regions.regions[i % len(regions.regions)],
                                           service) for i in range(p.n)]
        self.apply_tail_ns = int(p.apply_ms * NS_PER_MS)
        self.clock = 0
        if p.anti_entropy_ms > 0 and p.n > 1:
            rt.call_later(int(p.anti_entropy_ms * NS_PER_MS), self._anti_entropy)

    def describe(self) -> dict[str, Any]:
        """Return the effective parameters."""
        return {"scheme": self.name, **asdict(self.p)}

    def _usable(self, region: str) -> list[Node]:
        return [n for n in self.replicas if n.up and self.net.reachable(region, n.region)]

    async def _lost(self, t0: int, what: str) -> None:
        await self.rt.sleep_ns(self.net.timeout_ns - (self.rt.now_ns() - t0))
        raise Lost(f"{what}: too few replicas answered within {self.p.timeout_ms:.0f} ms")

    async def write(self, region: str, values: Mapping[str, str | None],
                    expect: Mapping[str, Any] | None, absent: Any = None) -> str:
        """Send the write to all replicas; return after W acks (node names joined)."""
        rt, net, s = self.rt, self.net, self.s
        self.clock += 1
        stamp = (rt.now_ns(), self.clock)
        acks: list[tuple[int, str]] = []
        now = rt.now_ns()
        for node in self._usable(region):
            link = net.client_delay(region, node)
            extra = net.extra_ns(node) if net.slow_ns else 0
            arrive = link.draw(s) + extra + int(self.apply_tail_ns * s.exponential())
            arrive += net.held_ns(node, now + arrive)  # a paused replica answers late
            rt.call_later(arrive, self._apply, node, stamp, values)
            acks.append((arrive + link.draw(s) + extra, node.name))
        if len(acks) < self.p.w:
            await self._lost(rt.now_ns(), "write")
        acks.sort()
        await rt.sleep_ns(acks[self.p.w - 1][0])
        return ",".join(name for _, name in acks[: self.p.w])

    @staticmethod
    def _apply(node: Node, stamp: tuple[int, int], values: Mapping[str, str | None]) -> None:
        if not node.up:
            return
        state = node.state
        for key, value in values.items():
            cur = state.get(key)
            if cur is None or cur[0] < stamp:
                state[key] = (stamp, value)

    async def read(self, region: str, keys: Sequence[str], consistent: bool
                   ) -> tuple[tuple[str | None, ...], str]:
        """Return the newest values among the first R (or N-W+1) replies."""
        rt, net, s = self.rt, self.net, self.s
        need = self.p.n - self.p.w + 1 if consistent else self.p.r
        seen: dict[str, tuple[Any, ...]] = {}
        replies: list[tuple[int, Node]] = []
        now = rt.now_ns()
        for node in self._usable(region):
            link = net.client_delay(region, node)
            extra = net.extra_ns(node) if net.slow_ns else 0
            arrive = link.draw(s) + extra
            arrive += net.held_ns(node, now + arrive)
            rt.call_later(arrive, self._snapshot, node, keys, seen)
            replies.append((arrive + link.draw(s) + extra, node))
        if len(replies) < need:
            await self._lost(rt.now_ns(), "read")
        replies.sort(key=lambda r: r[0])
        await rt.sleep_ns(replies[need - 1][0])
        chosen = [node for _, node in replies[:need]]
        newest = [max((seen[n.name][i] for n in chosen), key=lambda c: c[0])
                  for i in range(len(keys))]
        if self.p.read_repair:
            for node in chosen:
                for key, cell in zip(keys, newest, strict=True):
                    if seen[node.name][keys.index(key)][0] < cell[0] and cell[0] != _ZERO:
                        rt.call_later(net.link(region, node.region).draw(s), self._apply,
                                      node, cell[0], {key: cell[1]})
        return tuple(c[1] for c in newest), ",".join(n.name for n in chosen)

    @staticmethod
    def _snapshot(node: Node, keys: Sequence[str], seen: dict[str, tuple[Any, ...]]) -> None:
        state = node.state
        seen[node.name] = tuple(state.get(k) or (_ZERO, None) for k in keys)

    def _anti_entropy(self) -> None:
        a = self.replicas[self.s.index(len(self.replicas))]
        b = self.replicas[self.s.index(len(self.replicas))]
        if a is not b and a.up and b.up:
            for src, dst in ((a, b), (b, a)):
                snapshot = {k: v for k, v in src.state.items()}
                self.net.send(src, dst, self._merge, dst, snapshot)
        self.rt.call_later(int(self.p.anti_entropy_ms * NS_PER_MS), self._anti_entropy)

    @staticmethod
    def _merge(dst: Node, snapshot: dict[str, tuple[tuple[int, int], str | None]]) -> None:
        for key, (stamp, value) in snapshot.items():
            cur = dst.state.get(key)
            if cur is None or cur[0] < stamp:
                dst.state[key] = (stamp, value)

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
from replicalab.sim import native
from replicalab.sim.errors import Lost
from replicalab.sim.network import Delay, Network, Node
from replicalab.sim.params import require
from replicalab.sim.random import Stream
from replicalab.sim.scheme import settle

_ZERO: tuple[int, int] = (-1, -1)


class _Read:
    """A read in flight: the replicas whose answers count, in the order the request
    reaches them (arrival ns after the start), the snapshots taken so far, the reply time."""

    __slots__ = ("chosen", "done_ns", "fut", "keys", "region", "seen", "snaps", "taken")

    def __init__(self, fut: Any, region: str, keys: Sequence[str], chosen: list[Node],
                 snaps: list[tuple[int, Node]], done_ns: int) -> None:
        self.fut, self.region, self.keys, self.chosen = fut, region, keys, chosen
        self.snaps, self.done_ns = snaps, done_ns
        self.seen: dict[str, tuple[Any, ...]] = {}
        self.taken = 0


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
        fast = native.runs_natively(rt, stream) and not p.read_repair
        if fast:
            self.net.node_class = native.SimNode
        self.replicas = [self.net.add_node(f"r{i}", regions.regions[i % len(regions.regions)],
                                           service) for i in range(p.n)]
        self.apply_tail_ns = int(p.apply_ms * NS_PER_MS)
        self.clock = 0
        if p.anti_entropy_ms > 0 and p.n > 1:
            rt.call_later(int(p.anti_entropy_ms * NS_PER_MS), self._anti_entropy)
        if fast:
            # reads run in the native core (same steps, same draws; read repair stays
            # here); writes, anti-entropy and faults act on the same nodes from Python
            self.read = native.read_core(self).read  # type: ignore[method-assign]

    def describe(self) -> dict[str, Any]:
        """Return the effective parameters."""
        return {"scheme": self.name, **asdict(self.p)}

    def _usable(self, region: str) -> list[Node]:
        return [n for n in self.replicas if n.up and self.net.reachable(region, n.region)]

    def _lost(self, fut: Any, what: str) -> Any:
        self.rt.reject_later(self.net.timeout_ns, fut, Lost(
            f"{what}: too few replicas answered within {self.p.timeout_ms:.0f} ms"))
        return fut

    def write(self, region: str, values: Mapping[str, str | None],
              expect: Mapping[str, Any] | None, absent: Any = None) -> Any:
        """Send the write to all replicas; return a future of the names of the first W
        to acknowledge (joined)."""
        rt, net, s = self.rt, self.net, self.s
        fut = rt.future()
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
            return self._lost(fut, "write")
        acks.sort()
        rt.resolve_later(acks[self.p.w - 1][0], fut,
                         ",".join(name for _, name in acks[: self.p.w]))
        return fut

    @staticmethod
    def _apply(node: Node, stamp: tuple[int, int], values: Mapping[str, str | None]) -> None:
        if not node.up:
            return
        state = node.state
        for key, value in values.items():
            cur = state.get(key)
            if cur is None or cur[0] < stamp:
                state[key] = (stamp, value)

    def read(self, region: str, keys: Sequence[str], consistent: bool) -> Any:
        """Return a future of the newest values among the first R (or N-W+1) replies and
        the names of the replicas that gave them.

        Only those replicas' answers can matter, so only their snapshots are steps of the
        call (taken when the request reaches each, in that order), then the reply: a read
        that meets no other event finishes at once (see ``runtime/virtual.py``).
        """
        rt, net, s = self.rt, self.net, self.s
        fut = rt.future()
        need = self.p.n - self.p.w + 1 if consistent else self.p.r
        replies: list[tuple[int, int, int, Node]] = []  # (reply, arrive, order, node)
        now = rt.now_ns()
        for i, node in enumerate(self._usable(region)):
            link = net.client_delay(region, node)
            extra = net.extra_ns(node) if net.slow_ns else 0
            arrive = link.draw(s) + extra
            arrive += net.held_ns(node, now + arrive)
            replies.append((arrive + link.draw(s) + extra, arrive, i, node))
        if len(replies) < need:
            return self._lost(fut, "read")
        replies.sort(key=lambda r: r[0])
        chosen = [r[3] for r in replies[:need]]
        snaps = sorted((r[1], r[2], r[3]) for r in replies[:need])
        call = _Read(fut, region, keys, chosen, [(a, n) for a, _, n in snaps],
                     now + replies[need - 1][0])
        rt.continue_after(snaps[0][0], self._snap, call, now)
        return fut

    def _snap(self, call: _Read, start_ns: int) -> None:
        """Take the next chosen replica's snapshot (its request has reached it) and go on
        to the next one, or to the reply."""
        node = call.snaps[call.taken][1]
        state = node.state
        call.seen[node.name] = tuple(state.get(k) or (_ZERO, None) for k in call.keys)
        call.taken += 1
        if call.taken < len(call.snaps):
            self.rt.continue_after(start_ns + call.snaps[call.taken][0] - self.rt.now_ns(),
                                   self._snap, call, start_ns)
        else:
            self.rt.continue_after(call.done_ns - self.rt.now_ns(), self._answer, call)

    def _answer(self, call: _Read) -> None:
        """The client has the first replies: the newest values, read repair if on."""
        rt, net, s = self.rt, self.net, self.s
        keys, chosen, seen = call.keys, call.chosen, call.seen
        newest = [max((seen[n.name][i] for n in chosen), key=lambda c: c[0])
                  for i in range(len(keys))]
        if self.p.read_repair:
            for node in chosen:
                for key, cell in zip(keys, newest, strict=True):
                    if seen[node.name][keys.index(key)][0] < cell[0] and cell[0] != _ZERO:
                        rt.call_later(net.link(call.region, node.region).draw(s), self._apply,
                                      node, cell[0], {key: cell[1]})
        settle(call.fut, (tuple(c[1] for c in newest), ",".join(n.name for n in chosen)))

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

"""Primary/backup replication to replicas in regions, asynchronous or synchronous.

The primary (node 0, first region) applies a write at once and forwards it to every
replica over an ordered stream (a log: a write never overtakes an earlier one);
``async`` acknowledges after the local commit, ``sync`` after every replica has
acknowledged (a replica it cannot reach makes the write time out, outcome unknown, as a
synchronous standby that is gone blocks commits). An eventual read goes to the nearest
node (ties broken at random); a consistent read and a conditional write go to the primary.
A replica that rejoins after a crash or a partition gets a full copy of the primary's
state (a resync), then the stream of writes again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from replicalab.regions import LAN_RTT_MS, LAN_SD_MS, RegionSet
from replicalab.runtime import Runtime
from replicalab.sim import native
from replicalab.sim.errors import ConditionNotMet, Lost
from replicalab.sim.network import Delay, Network, Node
from replicalab.sim.params import require
from replicalab.sim.random import Stream
from replicalab.sim.scheme import expectation_holds


@dataclass(frozen=True)
class PrimaryParams:
    """Parameters of ``sim://primary`` (times in ms; replicas=0 means one per region, min 3)."""

    replication: str = "async"
    regions: str = "lan"
    replicas: int = 0
    client_rtt_ms: float = LAN_RTT_MS
    client_sd_ms: float = LAN_SD_MS
    commit_ms: float = 1.0
    timeout_ms: float = 5000.0

    def check(self, what: str) -> None:
        """Raise ValueError naming the first invalid parameter."""
        require(self.replication in ("async", "sync"), what,
                f"replication={self.replication!r} must be async or sync")
        require(self.replicas >= 0, what, "replicas must not be negative")
        require(self.client_rtt_ms > 0 and self.timeout_ms > 0 and self.commit_ms >= 0, what,
                "client_rtt_ms and timeout_ms must be positive, commit_ms not negative")


class Primary:
    """One primary and its replicas; nodes placed round-robin over the regions."""

    name: ClassVar[str] = "primary"
    features: ClassVar[frozenset[str]] = frozenset(
        {"eventual-read", "consistent-read", "conditional-write", "atomic-multi-write",
         "multi-read", "delete"})
    eventual_read_served_by: ClassVar[str] = "the node nearest the client (ties at random)"

    def __init__(self, rt: Runtime, stream: Stream, regions: RegionSet,
                 p: PrimaryParams) -> None:
        self.p = p
        self.rt = rt
        self.s = stream
        self.net = Network.with_client_link(rt, stream, regions, p.client_rtt_ms,
                                            p.client_sd_ms, p.timeout_ms)
        count = p.replicas or max(3, len(regions.regions))
        service = Delay.ms(0.05)
        fast = native.runs_natively(rt, stream)
        if fast:
            self.net.node_class = native.SimNode
        self.nodes = [self.net.add_node(f"n{i}", regions.regions[i % len(regions.regions)],
                                        service) for i in range(count)]
        self.primary = self.nodes[0]
        self.commit = Delay.ms(p.commit_ms, p.commit_ms / 10)
        self._nearest: dict[str, list[Node]] = {}
        self.net.on_rejoin.append(self._resync)
        if fast:
            # reads run in the native core (same steps, same draws); writes, faults and
            # the resync act on the same nodes from Python
            self.read = native.read_core(self).read  # type: ignore[method-assign]

    def _resync(self, node: Node) -> None:
        """Send ``node`` a copy of the primary's state (every replica, when the primary
        itself rejoins: writes may have missed any of them)."""
        primary = self.primary
        if not primary.up:
            return
        for replica in (self.nodes[1:] if node is primary else (node,)):
            if replica is not primary:
                self.net.send(primary, replica, replica.state.update, dict(primary.state),
                              fifo=True)

    def describe(self) -> dict[str, Any]:
        """Return the effective parameters and node placement."""
        return {"scheme": self.name, **asdict(self.p),
                "nodes": {n.name: n.region for n in self.nodes}}

    def _near(self, region: str) -> list[Node]:
        near = self._nearest.get(region)
        if near is None:
            dist = {n.name: self.net.client_delay(region, n).mean_ns for n in self.nodes}
            best = min(dist.values())
            near = self._nearest[region] = [n for n in self.nodes if dist[n.name] == best]
        return near

    def read(self, region: str, keys: Sequence[str], consistent: bool) -> Any:
        """Return a future of (values, serving node name): from the primary (consistent)
        or the nearest node (eventual)."""
        fut = self.rt.future()
        if consistent:
            node = self.primary
        else:
            near = self._near(region)
            node = near[self.s.index(len(near))] if len(near) > 1 else near[0]
        self.net.request(fut, region, node, 0, self._answer_read, fut, region, node, keys)
        return fut

    def _answer_read(self, fut: Any, region: str, node: Node, keys: Sequence[str]) -> None:
        state = node.state
        values = tuple(state.get(k) for k in keys)
        self.rt.resolve_later(self._reply_ns(node, region), fut, (values, node.name))

    def _reply_ns(self, node: Node, region: str) -> int:
        """Return ns until a reply from ``node`` reaches a client (``Network.to_client``)."""
        net = self.net
        return net.client_delay(region, node).draw(self.s) + net.extra_ns(node)

    def write(self, region: str, values: Mapping[str, str | None],
              expect: Mapping[str, Any] | None, absent: Any = None) -> Any:
        """Return a future of the primary's name: apply at the primary, forward to the
        replicas, acknowledge per the replication mode."""
        fut = self.rt.future()
        self.net.request(fut, region, self.primary, 0, self._serve_write, fut, region, values,
                         expect, absent)
        return fut

    def _serve_write(self, fut: Any, region: str, values: Mapping[str, str | None],
                     expect: Mapping[str, Any] | None, absent: Any) -> None:
        rt, net, s = self.rt, self.net, self.s
        primary = self.primary
        if expect and not expectation_holds(primary.state, expect, absent):
            rt.reject_later(self._reply_ns(primary, region), fut,
                            ConditionNotMet(f"condition failed at {primary.name}"))
            return
        primary.state.update(values)
        wait = self.commit.draw(s)
        missing = ""
        for node in self.nodes[1:]:
            fwd = net.send(primary, node, node.state.update, values, fifo=True)  # a log
            if self.p.replication == "sync":
                if not node.up or not net.reachable(primary.region, node.region):
                    missing = node.name
                wait = max(wait, fwd + net.link(node.region, primary.region).draw(s)
                           + net.extra_ns(node) + net.extra_ns(primary))
        if missing:
            rt.reject_later(net.timeout_ns, fut, Lost(
                f"replica {missing} did not acknowledge the synchronous write within "
                f"{net.timeout_ns / 1e6:.0f} ms"))
            return
        rt.continue_after(wait, self._ack_write, fut, region)

    def _ack_write(self, fut: Any, region: str) -> None:
        self.rt.resolve_later(self._reply_ns(self.primary, region), fut, self.primary.name)

"""The SimpleDB implementation hypothesised in seed 003 §4.3.

Per domain one primary and two secondaries. A write goes synchronously to all replicas;
the primary applies it at once; a secondary buffers it until the next write to the same
domain reaches it (which flushes the buffered one) or ``flush_ms`` passes. A write that
repeats, or is a subset of, the previous write to the domain is suppressed: it is not
forwarded and flushes nothing. A multi-element write travels as one message. An eventual
read asks one replica at random; a consistent read and a conditional write go to the primary.
Latencies are calibrated to seed 000: GetAttribute 22 ms (consistent 23), PutAttribute
110 ms, conditional PutAttribute 118 ms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from replicalab.regions import RegionSet
from replicalab.runtime import Runtime
from replicalab.sim.errors import ConditionNotMet, NotExpressible
from replicalab.sim.network import NS_PER_MS, Delay, Network, Node
from replicalab.sim.params import require
from replicalab.sim.random import Stream
from replicalab.sim.scheme import domain_of, expectation_holds


@dataclass(frozen=True)
class SimpleDBParams:
    """Parameters of ``sim://simpledb`` (times in ms)."""

    replicas: int = 3
    flush_ms: float = 500.0
    client_rtt_ms: float = 22.0
    client_sd_ms: float = 2.0
    commit_ms: float = 88.0
    commit_sd_ms: float = 8.0
    conditional_extra_ms: float = 8.0
    consistent_extra_ms: float = 1.0
    service_ms: float = 0.05
    suppress: bool = True
    timeout_ms: float = 5000.0

    def check(self, what: str) -> None:
        """Raise ValueError naming the first invalid parameter."""
        require(self.replicas >= 1, what, f"replicas={self.replicas} must be at least 1")
        for name in ("flush_ms", "client_rtt_ms", "commit_ms", "service_ms", "timeout_ms"):
            require(getattr(self, name) > 0, what, f"{name} must be positive")
        for name in ("client_sd_ms", "commit_sd_ms", "conditional_extra_ms",
                     "consistent_extra_ms"):
            require(getattr(self, name) >= 0, what, f"{name} must not be negative")


class _Group:
    __slots__ = ("last", "nodes", "primary", "secondaries")

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.primary = nodes[0]
        self.secondaries = nodes[1:]
        self.last: frozenset[tuple[str, str | None]] | None = None


class SimpleDB:
    """Primary + buffered secondaries per domain, as in seed 003 §4.3."""

    name: ClassVar[str] = "simpledb"
    features: ClassVar[frozenset[str]] = frozenset(
        {"eventual-read", "consistent-read", "conditional-write", "atomic-multi-write",
         "multi-read", "delete"})
    eventual_read_served_by: ClassVar[str] = (
        "one of the domain's replicas (primary or secondary) chosen uniformly at random")

    def __init__(self, rt: Runtime, stream: Stream, regions: RegionSet,
                 p: SimpleDBParams) -> None:
        self.p = p
        self.rt = rt
        self.s = stream
        self.region = regions.regions[0]
        self.net = Network.with_client_link(rt, stream, regions, p.client_rtt_ms,
                                            p.client_sd_ms, p.timeout_ms)
        self.commit = Delay.ms(p.commit_ms, p.commit_sd_ms)
        self.service = Delay.ms(p.service_ms)
        self.flush_ns = int(p.flush_ms * NS_PER_MS)
        self.cond_extra_ns = int(p.conditional_extra_ms * NS_PER_MS)
        self.cons_extra_ns = int(p.consistent_extra_ms * NS_PER_MS)
        self.groups: dict[str, _Group] = {}
        self._by_key: dict[str, _Group] = {}
        self.buffered: dict[str, tuple[Mapping[str, str | None], Any]] = {}

    def describe(self) -> dict[str, Any]:
        """Return the effective parameters."""
        return {"scheme": self.name, **asdict(self.p)}

    def _group(self, keys: Sequence[str] | Mapping[str, Any]) -> _Group:
        if len(keys) == 1:  # the hot path: one element, its group memoised
            (key,) = keys
            g = self._by_key.get(key)
            if g is None:
                g = self._by_key[key] = self._group_of(keys)
            return g
        return self._group_of(keys)

    def _group_of(self, keys: Sequence[str] | Mapping[str, Any]) -> _Group:
        it = iter(keys)
        domain = domain_of(next(it))
        for k in it:
            if domain_of(k) != domain:
                raise NotExpressible(
                    "one SimpleDB call can only touch elements of one domain; "
                    "use one call per domain")
        g = self.groups.get(domain)
        if g is None:
            nodes = [self.net.add_node(f"{domain}/{'p' if i == 0 else f's{i}'}", self.region,
                                       self.service) for i in range(self.p.replicas)]
            g = self.groups[domain] = _Group(nodes)
        return g

    async def read(self, region: str, keys: Sequence[str], consistent: bool
                   ) -> tuple[tuple[str | None, ...], str]:
        """Return the values of ``keys`` from the primary (consistent) or a random replica."""
        g = self._group(keys)
        node = g.primary if consistent else g.nodes[self.s.index(len(g.nodes))]
        await self.net.to_node(region, node)
        state = node.state
        values = (state.get(keys[0]),) if len(keys) == 1 else tuple(state.get(k) for k in keys)
        if consistent and self.cons_extra_ns:
            await self.rt.sleep_ns(self.cons_extra_ns)
        await self.net.to_client(node, region)
        return values, node.name

    async def write(self, region: str, values: Mapping[str, str | None],
                    expect: Mapping[str, Any] | None, absent: Any = None) -> str:
        """Apply one PutAttributes/BatchPutAttributes call; return the primary's name."""
        g = self._group(values)
        primary = g.primary
        await self.net.to_node(region, primary)
        wait = self.commit.draw(self.s)
        if expect:
            wait += self.cond_extra_ns
            if not expectation_holds(primary.state, expect, absent):
                await self.rt.sleep_ns(self.cond_extra_ns)
                await self.net.to_client(primary, region)
                raise ConditionNotMet(f"condition failed at {primary.name}")
        items = frozenset(values.items())
        if not (self.p.suppress and g.last is not None and items <= g.last):
            primary.state.update(values)
            g.last = items
            for sec in g.secondaries:
                self.net.send(primary, sec, self._receive, sec, values)
        await self.rt.sleep_ns(wait)
        await self.net.to_client(primary, region)
        return primary.name

    def _receive(self, sec: Node, values: Mapping[str, str | None]) -> None:
        pending = self.buffered.pop(sec.name, None)
        if pending is not None:
            sec.state.update(pending[0])
            pending[1].cancel()
        timer = self.rt.call_later(self.flush_ns, self._flush, sec)
        self.buffered[sec.name] = (values, timer)

    def _flush(self, sec: Node) -> None:
        pending = self.buffered.pop(sec.name, None)
        if pending is not None:
            sec.state.update(pending[0])

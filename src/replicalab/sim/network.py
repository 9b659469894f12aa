"""The network kernel: nodes with processing queues, links with one-way delay distributions.

Delays are drawn per message: ``mean + sd * N(0,1)`` plus an optional exponential tail,
never below ``floor``. A node serves requests FIFO, one at a time, each taking its service
time; a crashed node or a partitioned pair drops messages (callers time out).

Faults (driven by ``faults.sim.SimNemesis`` on a schedule): ``crash``/``restart`` a node
(it keeps its state, as a restart from its data directory would), ``cut_region``/
``heal_region`` (messages between the region and every other one are lost), ``pause``
(its queue stalls), ``slow`` (extra one-way delay on every message to or from it). A
scheme that can catch a node up after a restart or a heal registers ``on_rejoin``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replicalab.regions import RegionSet
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_MS
from replicalab.sim.errors import Lost
from replicalab.sim.random import NativeStream, Stream


@dataclass(frozen=True, slots=True)
class Delay:
    """A delay distribution in ns: normal(mean, sd) + exponential(tail mean), floored."""

    mean_ns: int
    sd_ns: int = 0
    tail_ns: int = 0
    floor_ns: int = 0

    @classmethod
    def ms(cls, mean: float, sd: float = 0.0, tail: float = 0.0) -> Delay:
        """Return a Delay from ms figures; the floor is a tenth of the mean."""
        return cls(int(mean * NS_PER_MS), int(sd * NS_PER_MS), int(tail * NS_PER_MS),
                   int(mean * NS_PER_MS / 10))

    def draw(self, s: Stream) -> int:
        """Return one delay in ns."""
        if type(s) is NativeStream:  # the same arithmetic and draws, in one native call
            return s.delay(self.mean_ns, self.sd_ns, self.tail_ns, self.floor_ns)
        d = self.mean_ns
        if self.sd_ns:
            d += int(self.sd_ns * s.normal())
        if self.tail_ns:
            d += int(self.tail_ns * s.exponential())
        return d if d > self.floor_ns else self.floor_ns


@dataclass(slots=True)
class Node:
    """A server: region, service time per request, a FIFO queue served by ``pipelines``
    parallel workers, key/value state, up or down."""

    name: str
    region: str
    service: Delay
    state: dict[str, Any] = field(default_factory=dict)
    free_at_ns: list[int] = field(default_factory=lambda: [0])
    up: bool = True


class Network:
    """Places nodes and clients in regions and moves messages between them in virtual time."""

    def __init__(self, rt: Runtime, stream: Stream, regions: RegionSet,
                 client_link: Delay | None = None, timeout_ms: float = 5000.0) -> None:
        self.rt = rt
        self.s = stream
        self.regions = regions
        self.client_link = client_link
        self.timeout_ns = int(timeout_ms * NS_PER_MS)
        self.nodes: dict[str, Node] = {}
        self.cut: set[frozenset[str]] = set()  # partitioned region pairs
        self.slow_ns: dict[str, int] = {}  # node name -> extra one-way delay (ns)
        self.on_rejoin: list[Callable[[Node], None]] = []  # catch-up after restart/heal
        self._links: dict[tuple[str, str], Delay] = {}
        self._last_arrival: dict[tuple[str, str], int] = {}  # fifo sends, per node pair
        # what add_node makes: Node, or the native core's SimNode (same fields)
        self.node_class: Callable[..., Any] = Node

    @classmethod
    def with_client_link(cls, rt: Runtime, stream: Stream, regions: RegionSet,
                         client_rtt_ms: float, client_sd_ms: float, timeout_ms: float
                         ) -> Network:
        """Return a network whose same-region clients reach nodes over an RTT of
        ``client_rtt_ms`` (sd ``client_sd_ms``); requests time out after ``timeout_ms``."""
        return cls(rt, stream, regions,
                   Delay.ms(client_rtt_ms / 2, client_sd_ms / math.sqrt(2)), timeout_ms)

    def add_node(self, name: str, region: str, service: Delay, pipelines: int = 1) -> Node:
        """Create and return a node in ``region`` whose queue has ``pipelines`` workers."""
        self.regions.index(region)
        if pipelines < 1:
            raise ValueError(f"node {name}: pipelines={pipelines} must be at least 1")
        node = self.node_class(name, region, service, free_at_ns=[0] * pipelines)
        self.nodes[name] = node
        return node

    def link(self, src: str, dst: str) -> Delay:
        """Return the one-way delay distribution between regions ``src`` and ``dst``."""
        key = (src, dst)
        d = self._links.get(key)
        if d is None:
            mean, sd = self.regions.one_way_ms(src, dst)
            d = self._links[key] = Delay.ms(mean, sd)
        return d

    def client_delay(self, client_region: str, node: Node) -> Delay:
        """Return the one-way delay between a client and ``node`` (client link if same region)."""
        if self.client_link is not None and client_region == node.region:
            return self.client_link
        return self.link(client_region, node.region)

    def reachable(self, a: str, b: str) -> bool:
        """Return False if regions/nodes ``a`` and ``b`` are partitioned from each other."""
        return not self.cut or frozenset((a, b)) not in self.cut

    def crash(self, node: Node) -> None:
        """Take ``node`` down: messages to it are lost until ``restart``, which finds its
        queue empty."""
        node.up = False
        node.free_at_ns[:] = [0] * len(node.free_at_ns)

    def restart(self, node: Node) -> None:
        """Bring ``node`` back with the state it had, then let the scheme catch it up."""
        node.up = True
        self._rejoined([node])

    def cut_region(self, region: str) -> None:
        """Partition ``region`` from every other region (clients included)."""
        for other in self.regions.regions:
            if other != region:
                self.cut.add(frozenset((region, other)))

    def heal_region(self, region: str) -> None:
        """End ``region``'s partition; the scheme catches its nodes up."""
        self.cut = {pair for pair in self.cut if region not in pair}
        self._rejoined([n for n in self.nodes.values() if n.up])

    def slow(self, node: Node, extra_ns: int) -> None:
        """Add ``extra_ns`` (may be negative, to undo) to every message to or from ``node``."""
        left = self.slow_ns.get(node.name, 0) + extra_ns
        if left:
            self.slow_ns[node.name] = left
        else:
            self.slow_ns.pop(node.name, None)

    def extra_ns(self, node: Node) -> int:
        """Return the extra one-way delay of messages to or from ``node`` (ns; 0 unless
        slowed)."""
        return self.slow_ns.get(node.name, 0) if self.slow_ns else 0

    def held_ns(self, node: Node, at_ns: int) -> int:
        """Return how long a message reaching ``node`` at ``at_ns`` waits for a pause to
        end, for schemes that bypass the node's queue (ns)."""
        free = node.free_at_ns[0]
        return free - at_ns if free > at_ns else 0

    def _rejoined(self, nodes: list[Node]) -> None:
        for hook in self.on_rejoin:
            for node in nodes:
                hook(node)

    def pause(self, node: Node, duration_ns: int) -> None:
        """Stop ``node`` serving for ``duration_ns`` from now, like SIGSTOP: work already
        queued waits that much longer, new work queues behind it, nothing is lost."""
        now = self.rt.now_ns()
        node.free_at_ns[:] = [(f if f > now else now) + duration_ns for f in node.free_at_ns]

    def process(self, node: Node, service_ns: int) -> int:
        """Queue ``service_ns`` of work at ``node`` now; return ns until it is done.

        The work goes to the worker that frees up first (FIFO across workers).
        """
        now = self.rt.now_ns()
        free = node.free_at_ns
        if len(free) == 1:
            start = free[0] if free[0] > now else now
            free[0] = done = start + service_ns
        else:
            i = min(range(len(free)), key=free.__getitem__)
            start = free[i] if free[i] > now else now
            free[i] = done = start + service_ns
        return done - now

    def _admit(self, node: Node) -> int:
        return self.process(node, node.service.draw(self.s))

    async def to_node(self, client_region: str, node: Node, depart_ns: int = 0) -> None:
        """Carry a client request to ``node`` and through its queue; raise Lost if it is lost.

        ``depart_ns`` is how long (ns) the request waits on the client before it leaves
        (e.g. for the client's CPU); it is folded into the trip, so the caller wakes once.
        """
        rt = self.rt
        t0 = rt.now_ns() + depart_ns
        # client_delay, reachable and _admit inlined: this runs once per simulated call
        link = self.client_link
        if link is None or client_region != node.region:
            link = self.link(client_region, node.region)
        trip = link.draw(self.s)
        if self.slow_ns:
            trip += self.slow_ns.get(node.name, 0)
        await rt.sleep_ns(depart_ns + trip)
        if not node.up or (self.cut and frozenset((client_region, node.region)) in self.cut):
            await rt.sleep_ns(self.timeout_ns - (rt.now_ns() - t0))
            raise Lost(f"no reply from {node.name} within {self.timeout_ns / 1e6:.0f} ms")
        wait = self.process(node, node.service.draw(self.s))
        if wait:
            await rt.sleep_ns(wait)

    def request(self, fut: Any, client_region: str, node: Node, depart_ns: int,
                then: Callable[..., Any], *args: Any) -> None:
        """Carry a client request to ``node`` and through its queue, then call
        ``then(*args)`` there; if it is lost, fail ``fut`` with :class:`Lost` when the
        client's timeout expires.

        The event-driven twin of :meth:`to_node` (same draws at the same virtual times,
        so the same history): a simulated call is a chain of plain callbacks that settles
        one future, and the client's coroutine wakes once per call instead of once per hop.
        ``depart_ns`` is how long (ns) the request waits on the client before it leaves.
        """
        link = self.client_link
        if link is None or client_region != node.region:
            link = self.link(client_region, node.region)
        trip = link.draw(self.s)
        if self.slow_ns:
            trip += self.slow_ns.get(node.name, 0)
        rt = self.rt
        rt.continue_after(depart_ns + trip, self._reach, fut, client_region, node,
                    rt.now_ns() + depart_ns, then, args)

    def _reach(self, fut: Any, client_region: str, node: Node, t0_ns: int,
               then: Callable[..., Any], args: tuple[Any, ...]) -> None:
        rt = self.rt
        if not node.up or (self.cut and frozenset((client_region, node.region)) in self.cut):
            rt.reject_later(self.timeout_ns - (rt.now_ns() - t0_ns), fut, Lost(
                f"no reply from {node.name} within {self.timeout_ns / 1e6:.0f} ms"))
            return
        wait = self.process(node, node.service.draw(self.s))
        if wait:
            rt.continue_after(wait, then, *args)
        else:
            then(*args)

    async def to_client(self, node: Node, client_region: str) -> None:
        """Carry a reply from ``node`` back to a client."""
        await self.rt.sleep_ns(self.client_delay(client_region, node).draw(self.s)
                               + self.extra_ns(node))

    def send(self, src: Node, dst: Node, fn: Callable[..., Any], *args: Any,
             fifo: bool = False) -> int:
        """Deliver ``fn(*args)`` at ``dst`` after link delay and its queue; return the delay ns.

        Lost messages (crashed destination, partition) are dropped silently. ``fifo``: never
        arrive before an earlier fifo message from ``src`` to ``dst`` (a TCP stream, e.g. a
        replication log); otherwise each message draws its delay alone and may overtake.
        """
        delay = self.link(src.region, dst.region).draw(self.s)
        if self.slow_ns:
            delay += self.slow_ns.get(src.name, 0) + self.slow_ns.get(dst.name, 0)
        if fifo:
            now = self.rt.now_ns()
            pair = (src.name, dst.name)
            last = self._last_arrival.get(pair, 0)
            if now + delay < last:
                delay = last - now
            self._last_arrival[pair] = now + delay
        if dst.up and self.reachable(src.region, dst.region):
            self.rt.call_later(delay, self._arrive, dst, fn, args)
        return delay

    def _arrive(self, dst: Node, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if not dst.up:
            return
        wait = self._admit(dst)
        if wait:
            self.rt.call_later(wait, fn, *args)
        else:
            fn(*args)

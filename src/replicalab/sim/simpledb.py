"""The SimpleDB implementation hypothesised in seed 003 §4.3.

Per domain one primary and two secondaries. A write goes synchronously to all replicas;
the primary applies it at once; a secondary buffers it until the next write to the same
domain reaches it (which flushes the buffered one) or ``flush_ms`` passes. A write that
repeats, or is a subset of, the previous write to the domain is suppressed: it is not
forwarded and flushes nothing. A multi-element write travels as one message. An eventual
read asks one replica at random; a consistent read and a conditional write go to the primary.
Latencies are calibrated to seed 000 (GetAttribute 22 ms, with ConsistentRead 23,
PutAttribute 110, conditional 118), means including SimpleDB's "normal variation": one call
in a hundred hits a slow server and pays an extra exponentially distributed delay
(``*_hiccup_p``, ``*_hiccup_ms``). The model's own differences are 0.5 ms (consistent read;
seed 003 §4.3 finds both reads cost the same) and 6 ms (conditional put; the seed's "few
milliseconds"), below what that variation lets 1,000 calls tell apart, as the seed found.

Seed 000's thread sweeps need two more things. Each replica commits the writes to one item
one batch at a time, a batch holding the item for ``item_hold_share`` of ``commit_ms``
(writes arriving meanwhile wait and go together in the next batch; a read of the item waits
for the batch in progress), so one hot item makes every call slower while an idle one costs
nothing; and the client machine (the seed's EC2 m1.small) spends ``client_cpu_ms`` of its
single core on each call (before the request leaves), which caps the throughput of many threads
at the same level for one item or many, so the two converge.

Seed 000 could jam SimpleDB: past some load it answered 503 ServiceUnavailable. Each domain
admits calls up to ``capacity_per_s`` units of work per second (a read is one unit, a write
``write_cost`` units, the seed's ratio of their charges) with ``burst_ms`` of capacity as
tolerance for calls arriving together (a generic cell rate algorithm, in integer ns); a call
beyond it is refused at once, before any work, and the client hears ServiceUnavailable after
the reply's trip. ``clients_per_machine`` puts every that many consecutive connections on a
client machine of their own (each its own core), as seed 003 §4 ran 100 clients per VM; 0
keeps every client on one machine. docs/simulator.md has the calibration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from replicalab.regions import RegionSet
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_MS
from replicalab.sim import native
from replicalab.sim.errors import ConditionNotMet, NotExpressible, ServiceUnavailable
from replicalab.sim.network import Delay, Network, Node
from replicalab.sim.params import require
from replicalab.sim.random import Stream
from replicalab.sim.scheme import domain_of, expectation_holds

WRITE_COST = 2.36
"""Units of work of a write, a read being one: seed 003 §4.2's charges, $3.387 per 10^6
writes against $1.436 per 10^6 reads, billed by SimpleDB machine hours used."""
CAPACITY_PER_S = 2000.0
"""Units of work a domain admits per second (see docs/simulator.md, calibrated to seed
000's jam by benchmarks/calibrate_simpledb_capacity.py)."""


@dataclass(frozen=True)
class SimpleDBParams:
    """Parameters of ``sim://simpledb`` (times in ms)."""

    replicas: int = 3
    flush_ms: float = 500.0
    # seed 000 means: read 22 = cpu 2.5 + rtt 18.5 + slow calls 1.0; consistent +0.5;
    # put 110 = cpu 2.5 + rtt 18.5 + commit 79 + slow calls 10; conditional +6
    client_rtt_ms: float = 18.5
    client_sd_ms: float = 2.0
    commit_ms: float = 79.0
    commit_sd_ms: float = 8.0
    conditional_extra_ms: float = 6.0
    consistent_extra_ms: float = 0.5
    service_ms: float = 0.05
    suppress: bool = True
    timeout_ms: float = 5000.0
    item_hold_share: float = 0.75  # share of commit_ms a write's batch holds its item
    client_cpu_ms: float = 2.5  # per call on the client machine's single core
    read_hiccup_p: float = 0.01  # chance a read hits a slow server ...
    read_hiccup_ms: float = 100.0  # ... and the mean of its extra (exponential) delay
    write_hiccup_p: float = 0.01
    write_hiccup_ms: float = 1000.0
    # admission control per domain (docs/simulator.md: calibrated to seed 000's jam)
    capacity_per_s: float = CAPACITY_PER_S  # units of work a second; 0 admits everything
    write_cost: float = WRITE_COST  # units of work of a write (a read is one)
    burst_ms: float = 100.0  # tolerance: this much of the capacity may arrive at once
    clients_per_machine: int = 0  # connections per client machine (0: all on one)

    def check(self, what: str) -> None:
        """Raise ValueError naming the first invalid parameter."""
        require(self.replicas >= 1, what, f"replicas={self.replicas} must be at least 1")
        for name in ("flush_ms", "client_rtt_ms", "commit_ms", "service_ms", "timeout_ms"):
            require(getattr(self, name) > 0, what, f"{name} must be positive")
        for name in ("client_sd_ms", "commit_sd_ms", "conditional_extra_ms",
                     "consistent_extra_ms", "client_cpu_ms",
                     "read_hiccup_ms", "write_hiccup_ms", "capacity_per_s", "write_cost",
                     "burst_ms"):
            require(getattr(self, name) >= 0, what, f"{name} must not be negative")
        for name in ("read_hiccup_p", "write_hiccup_p", "item_hold_share"):
            require(0 <= getattr(self, name) <= 1, what, f"{name} must be in [0, 1]")
        require(self.clients_per_machine >= 0, what,
                f"clients_per_machine={self.clients_per_machine} must not be negative")


class _Group:
    __slots__ = ("last", "nodes", "primary", "secondaries", "tat_ns")

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.primary = nodes[0]
        self.secondaries = nodes[1:]
        self.last: frozenset[tuple[str, str | None]] | None = None
        self.tat_ns = 0  # admission: when the work admitted so far is theoretically done


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
        self.item_commit_ns = int(p.item_hold_share * p.commit_ms * NS_PER_MS)
        self.cpu_ns = int(p.client_cpu_ms * NS_PER_MS)
        self.cpu_free_ns: dict[int, int] = {}  # per client machine: when its core is free
        # admission (GCRA): ns of capacity a read and a write take, the tolerance; 0: off
        self.read_cost_ns = round(1e9 / p.capacity_per_s) if p.capacity_per_s else 0
        self.write_cost_ns = (round(p.write_cost * 1e9 / p.capacity_per_s)
                              if p.capacity_per_s else 0)
        self.tolerance_ns = int(p.burst_ms * NS_PER_MS)
        self.read_hiccup_p = p.read_hiccup_p  # read once per call: no dataclass lookup
        self._items: dict[str, str] = {}  # element -> its item, memoised
        # (node name, item) -> [start_ns, end_ns] of the item's latest commit batch there
        self.batches: dict[tuple[str, str], list[int]] = {}
        if native.runs_natively(rt, stream):
            # calls run in the native core (same steps, same draws); these methods stay
            # the reference and run in real time or when the core is not built
            try:
                core = native.simpledb_core(self)
            except TypeError:
                # a core built before admission control and client machines cannot hold
                # this scheme: the reference runs (the same draws) until `make native`
                core = None
            if core is not None:
                self.net.node_class = native.SimNode
                self.read = core.read  # type: ignore[method-assign]
                self.write = core.write  # type: ignore[method-assign]

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

    def read(self, region: str, keys: Sequence[str], consistent: bool,
             machine: int = 0) -> Any:
        """Return a future of (values, serving node name): ``keys`` read from the primary
        (consistent) or a replica chosen at random (eventual), by a client on client
        machine ``machine``."""
        fut = self.rt.future()
        g = self._group(keys)
        node = g.primary if consistent else g.nodes[self.s.index(len(g.nodes))]
        self.net.request(fut, region, node, self._client_cpu_ns(machine), self._serve_read,
                         fut, region, node, keys, consistent, g)
        return fut

    def _admitted(self, fut: Any, region: str, node: Node, g: _Group, cost_ns: int) -> bool:
        """Return True if ``g``'s domain admits a call costing ``cost_ns`` of its capacity
        now (a generic cell rate algorithm); else refuse it: the client hears
        ServiceUnavailable after the reply's trip."""
        now = self.rt.now_ns()
        tat = g.tat_ns if g.tat_ns > now else now
        if tat - now <= self.tolerance_ns:
            g.tat_ns = tat + cost_ns
            return True
        self.rt.reject_later(self._reply_ns(node, region, 0), fut, self._overloaded(node))
        return False

    def _overloaded(self, node: Node) -> ServiceUnavailable:
        """Return the error of a call ``node``'s domain refused (also raised by the native
        core)."""
        return ServiceUnavailable(
            f"ServiceUnavailable (503): domain {node.name.rsplit('/', 1)[0]!r} is over its "
            f"capacity of {self.p.capacity_per_s:g} units/s; try again later or lower the "
            "load")

    def _serve_read(self, fut: Any, region: str, node: Node, keys: Sequence[str],
                    consistent: bool, g: _Group) -> None:
        """The read at ``node``: admitted or refused, then it waits for the commit in
        progress of its items, if any."""
        if self.read_cost_ns and not self._admitted(fut, region, node, g, self.read_cost_ns):
            return
        if self.batches:
            if len(keys) == 1:  # _busy_ns inlined for the hot path: one element
                b = self.batches.get((node.name, self._item(keys[0])))
                now = self.rt.now_ns()
                busy = 0 if b is None or now >= b[1] else (b[1] if now >= b[0] else b[0]) - now
            else:
                busy = self._busy_ns(node, keys)
            if busy:
                self.rt.continue_after(busy, self._answer_read, fut, region, node, keys, consistent)
                return
        self._answer_read(fut, region, node, keys, consistent)

    def _answer_read(self, fut: Any, region: str, node: Node, keys: Sequence[str],
                     consistent: bool) -> None:
        """Take the values at ``node`` now; the client has them after the reply's trip."""
        state = node.state
        values = (state.get(keys[0]),) if len(keys) == 1 else tuple(state.get(k) for k in keys)
        extra = self.cons_extra_ns if consistent else 0
        if self.read_hiccup_p:
            extra += self._hiccup_ns(self.read_hiccup_p, self.p.read_hiccup_ms)
        self.rt.resolve_later(extra + self.net.client_delay(region, node).draw(self.s), fut,
                              (values, node.name))

    def write(self, region: str, values: Mapping[str, str | None],
              expect: Mapping[str, Any] | None, absent: Any = None, machine: int = 0) -> Any:
        """Return a future of the primary's name: one PutAttributes/BatchPutAttributes
        call from client machine ``machine`` (ConditionNotMet if ``expect`` does not hold
        at the primary)."""
        fut = self.rt.future()
        g = self._group(values)
        self.net.request(fut, region, g.primary, self._client_cpu_ns(machine),
                         self._serve_write, fut, region, g, values, expect, absent)
        return fut

    def _serve_write(self, fut: Any, region: str, g: _Group,
                     values: Mapping[str, str | None], expect: Mapping[str, Any] | None,
                     absent: Any) -> None:
        """The write at the primary: admitted or refused, then decide, apply, forward; ack
        after its commit batch."""
        primary = g.primary
        if self.write_cost_ns and not self._admitted(fut, region, primary, g,
                                                     self.write_cost_ns):
            return
        wait = self.commit.draw(self.s) + self._hiccup_ns(self.p.write_hiccup_p,
                                                          self.p.write_hiccup_ms)
        if expect:
            wait += self.cond_extra_ns
            if not expectation_holds(primary.state, expect, absent):
                self.rt.reject_later(self._reply_ns(primary, region, self.cond_extra_ns), fut,
                                     ConditionNotMet(f"condition failed at {primary.name}"))
                return
        items = frozenset(values.items())
        if not (self.p.suppress and g.last is not None and items <= g.last):
            primary.state.update(values)
            g.last = items
            for sec in g.secondaries:
                self.net.send(primary, sec, self._receive, sec, values)
        # the ack waits for the item's commit batch; the value is visible at the primary
        # at once all the same (seed 003 §4.3), so the staleness windows do not move
        wait += self._commit_ns(primary, values)
        self.rt.resolve_later(self._reply_ns(primary, region, wait), fut, primary.name)

    def _receive(self, sec: Node, values: Mapping[str, str | None]) -> None:
        pending = self.buffered.pop(sec.name, None)
        if pending is not None:
            sec.state.update(pending[0])
            self._commit_ns(sec, pending[0])
            pending[1].cancel()
        timer = self.rt.call_later(self.flush_ns, self._flush, sec)
        self.buffered[sec.name] = (values, timer)

    def _flush(self, sec: Node) -> None:
        pending = self.buffered.pop(sec.name, None)
        if pending is not None:
            sec.state.update(pending[0])
            self._commit_ns(sec, pending[0])

    def _client_cpu_ns(self, machine: int = 0) -> int:
        """Reserve one call's CPU on client machine ``machine``'s single core, FIFO over
        its clients, and return the ns until it is done, when the request leaves (a
        reservation made now keeps the queue in call order; the caller folds the wait into
        the trip)."""
        if not self.cpu_ns:
            return 0
        now = self.rt.now_ns()
        free = self.cpu_free_ns.get(machine, 0)
        done = (now if now > free else free) + self.cpu_ns
        self.cpu_free_ns[machine] = done
        return done - now

    def _reply_ns(self, node: Node, region: str, server_ns: int) -> int:
        """Return ns until the client has the reply: ``server_ns`` more at ``node`` and
        the trip back (as ``Network.to_client``), in one step."""
        return server_ns + self.net.client_delay(region, node).draw(self.s)

    def _item(self, key: str) -> str:
        item = self._items.get(key)
        if item is None:
            item = self._items[key] = key.rsplit("/", 1)[0]
        return item

    def _hiccup_ns(self, p: float, mean_ms: float) -> int:
        """Return the extra delay in ns of a call that hits a slow server (usually 0)."""
        if p and self.s.uniform() < p:
            return int(mean_ms * NS_PER_MS * self.s.exponential())
        return 0

    def _commit_ns(self, node: Node, values: Mapping[str, Any]) -> int:
        """Start committing ``values`` at ``node``; return ns until its commit can start.

        Each item commits one batch at a time, a batch holding the item for
        ``item_hold_share * commit_ms``. A write finding its item free starts at once (0);
        one arriving while a batch holds the item waits for it and starts with the next
        batch, together with every write that arrives meanwhile: writes to one item are
        serialised, but batches are not capped in size, so a hot item adds latency, not a
        throughput limit.
        """
        if not self.item_commit_ns:
            return 0
        now = self.rt.now_ns()
        start = now
        for item in {self._item(k) for k in values}:
            b = self.batches.get((node.name, item))
            if b is None:
                self.batches[(node.name, item)] = [now, now + self.item_commit_ns]
            elif now >= b[1]:
                b[0], b[1] = now, now + self.item_commit_ns
            elif now >= b[0]:  # a batch holds the item: open the next one
                b[0], b[1] = b[1], b[1] + self.item_commit_ns
                start = max(start, b[0])
            else:  # the next batch is open: join it
                start = max(start, b[0])
        return start - now

    def _busy_ns(self, node: Node, keys: Sequence[str]) -> int:
        """Return ns until the commit in progress of ``keys``' items at ``node`` ends."""
        now = self.rt.now_ns()
        wait = 0
        for k in keys:
            b = self.batches.get((node.name, self._item(k)))
            if b is not None and now < b[1]:
                # a batch that has not started yet follows the one in progress back to back
                wait = max(wait, (b[1] if now >= b[0] else b[0]) - now)
        return wait

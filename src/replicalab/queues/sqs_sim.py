"""``sim://sqs`` — a simulated SQS queue in virtual time, on the ``sim/`` network kernel.

Standard queues (the default) follow what Amazon documents about SQS:

* every message is stored on several servers (``copies`` of the ``servers``);
* a receive is answered by one server drawn from a weighted random distribution (short
  polling "samples a subset of servers (based on a weighted random distribution)"), so it
  may come back empty although messages exist on other servers;
* a server hides what it returns at once, and the hide (visibility time, receive count,
  the new receipt) reaches the other holders only after a replication delay: two receives
  answered by different servers inside that window return the same message — the duplicate
  delivery of seed 000;
* a message not deleted becomes visible again when its visibility timeout expires;
* every delivery gets its own receipt; a delete or visibility change must name the receipt
  of the message's current delivery (as the server that handed it out knows it), anything
  else is refused with :class:`StaleReceipt` (SQS may accept an old receipt and silently
  not delete; the contract is stricter);
* a message received ``max_receives`` times goes to the dead-letter queue instead of being
  delivered again (SQS's redrive policy, maxReceiveCount).

Concurrent hides on two servers are merged by (receive count, hide time, server): the later
delivery wins, so the earlier one's receipt becomes stale once the hide has replicated.

``fifo=1`` gives a FIFO queue: one ordered copy (no replication duplicates), messages of a
group delivered in send order and never while an earlier one of the group is in flight, and
a 5-minute deduplication window on a deduplication id (the body's SHA-256, as SQS's
content-based deduplication, unless the sender passes ``dedup_id``).

The serial-reader guarantee of seed 000 ("if you read serially it is safe to assume that
you will only read each message once") holds by construction: a replication hop never takes
longer than the two client hops a serial reader needs between a reply from one server and
its next request reaching another (checked on the parameters).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from replicalab.queues.base import (
    DeadLetter,
    Delivery,
    QueueError,
    QueueInfo,
    QueueUnavailable,
    StaleReceipt,
)
from replicalab.regions import region_set
from replicalab.runtime import VirtualRuntime
from replicalab.runtime.base import NS_PER_MS, NS_PER_S
from replicalab.sim.errors import Lost
from replicalab.sim.network import Delay, Network, Node
from replicalab.sim.params import parse_params, require
from replicalab.sim.random import Stream

MAX_BATCH = 10  # SQS ReceiveMessage MaxNumberOfMessages is 1..10
MAX_VISIBILITY_S = 43_200.0  # 12 hours, SQS's maximum visibility timeout


@dataclass(frozen=True)
class SqsParams:
    """Parameters of ``sim://sqs`` (times in ms unless named otherwise); defaults and their
    sources are in docs/queues.md."""

    servers: int = 3
    copies: int = 3  # servers holding each message
    weights: str = ""  # comma-separated receive weights per server; empty = equal
    client_ms: float = 10.0  # one-way client <-> server: request latency "tens of ms"
    client_sd_ms: float = 3.0
    client_floor_ms: float = 3.0
    service_ms: float = 0.5
    replication_min_ms: float = 1.0  # one-way between servers (AZs: single-digit ms)
    replication_max_ms: float = 5.0
    max_receives: int = 10
    fifo: bool = False
    dedup_window_s: float = 300.0  # FIFO deduplication interval: 5 minutes
    timeout_ms: float = 5000.0

    def check(self, what: str) -> None:
        """Raise ValueError naming the first invalid parameter."""
        require(self.servers >= 1, what, f"servers={self.servers} must be at least 1")
        require(1 <= self.copies <= self.servers, what,
                f"copies={self.copies} must be between 1 and servers={self.servers}")
        require(self.max_receives >= 1, what,
                f"max_receives={self.max_receives} must be at least 1")
        for name in ("client_ms", "service_ms", "timeout_ms", "dedup_window_s"):
            require(getattr(self, name) > 0, what, f"{name} must be positive")
        for name in ("client_sd_ms", "client_floor_ms", "replication_min_ms"):
            require(getattr(self, name) >= 0, what, f"{name} must not be negative")
        require(self.replication_max_ms >= self.replication_min_ms, what,
                "replication_max_ms must be at least replication_min_ms")
        require(self.replication_max_ms <= 2 * self.client_floor_ms, what,
                f"replication_max_ms={self.replication_max_ms:g} must not exceed two client "
                f"hops (2 x client_floor_ms={2 * self.client_floor_ms:g}), or a serial reader "
                "would overtake replication; raise client_floor_ms")
        self.weight_list()

    def weight_list(self) -> list[float]:
        """Return the receive weight of each server (equal when ``weights`` is empty)."""
        if not self.weights:
            return [1.0] * self.servers
        try:
            w = [float(x) for x in self.weights.split(",")]
        except ValueError:
            raise ValueError(f"sim://sqs: weights={self.weights!r} must be numbers separated "
                             "by commas") from None
        if len(w) != self.servers or any(x < 0 for x in w) or sum(w) <= 0:
            raise ValueError(f"sim://sqs: weights={self.weights!r} needs {self.servers} "
                             "non-negative numbers, not all zero")
        return w


class _Copy:
    """One server's copy of a message and what that server knows of its visibility."""

    __slots__ = ("body", "count", "group", "holders", "id", "receipt", "seq", "version",
                 "visible_ns")

    def __init__(self, id: str, body: str, seq: int, group: str,
                 holders: tuple[int, ...]) -> None:
        self.id, self.body, self.seq, self.group, self.holders = id, body, seq, group, holders
        self.visible_ns = 0
        self.count = 0
        self.receipt = ""
        self.version: tuple[int, int, int] = (0, 0, -1)

    def clone(self) -> _Copy:
        c = _Copy(self.id, self.body, self.seq, self.group, self.holders)
        c.visible_ns, c.count, c.receipt, c.version = (self.visible_ns, self.count,
                                                       self.receipt, self.version)
        return c


class _Server:
    """A queue server's state: its copies (insertion order = oldest first) and tombstones."""

    __slots__ = ("copies", "deleted", "index", "node")

    def __init__(self, index: int, node: Node) -> None:
        self.index = index
        self.node = node
        self.copies: dict[str, _Copy] = {}
        self.deleted: set[str] = set()


class SqsClient:
    """A client of the simulated queue (one consumer's or producer's session)."""

    def __init__(self, queue: SqsSim) -> None:
        self.q = queue

    async def send(self, body: str, *, group_id: str = "0", dedup_id: str | None = None
                   ) -> str:
        """Enqueue ``body``; return its id once a server has stored it (FIFO: the id of the
        first send with the same deduplication id inside the window)."""
        return await self.q._request(self.q._pick_any(), self.q._send, body, group_id,
                                     dedup_id)

    async def receive(self, max_messages: int, visibility_timeout_s: float) -> list[Delivery]:
        """Return up to ``max_messages`` (1..10) visible messages from one sampled server,
        hidden there for ``visibility_timeout_s`` (0..43200) seconds."""
        if not 1 <= max_messages <= MAX_BATCH:
            raise ValueError(f"max_messages={max_messages} must be between 1 and {MAX_BATCH}")
        if not 0 <= visibility_timeout_s <= MAX_VISIBILITY_S:
            raise ValueError(f"visibility_timeout_s={visibility_timeout_s:g} must be between "
                             f"0 and {MAX_VISIBILITY_S:g}")
        return await self.q._request(self.q._pick_receive(), self.q._receive, max_messages,
                                     int(visibility_timeout_s * NS_PER_S))

    async def delete(self, receipt: str) -> None:
        """Delete the message of this delivery; StaleReceipt if not the current delivery."""
        await self.q._request(self.q._server_of(receipt), self.q._delete, receipt)

    async def change_visibility(self, receipt: str, timeout_s: float) -> None:
        """Hide this delivery's message for ``timeout_s`` more seconds (0 = visible now)."""
        if not 0 <= timeout_s <= MAX_VISIBILITY_S:
            raise ValueError(f"timeout_s={timeout_s:g} must be between 0 and "
                             f"{MAX_VISIBILITY_S:g}")
        await self.q._request(self.q._server_of(receipt), self.q._change, receipt,
                              int(timeout_s * NS_PER_S))

    async def close(self) -> None:
        """Nothing to release."""


class SqsSim:
    """The simulated queue: servers on a :class:`Network`, driven by a VirtualRuntime."""

    def __init__(self, url: str, seed: int, runtime: VirtualRuntime | None = None) -> None:
        parts = urlsplit(url)
        kind = parts.netloc or parts.path.lstrip("/")
        if kind != "sqs":
            raise ValueError(f"unknown simulated queue {kind!r} in {url!r}; use sim://sqs")
        p = parse_params(SqsParams, parse_qs(parts.query, keep_blank_values=True), "sim://sqs")
        if p.fifo and (p.servers != 1 or p.copies != 1):
            p = SqsParams(**{**asdict(p), "servers": 1, "copies": 1, "weights": ""})
        self.p = p
        self.runtime = runtime if runtime is not None else VirtualRuntime()
        self.rng = np.random.default_rng([seed, 0x5157])
        self.s = Stream(self.rng)
        lan = region_set("lan")
        self.region = lan.regions[0]
        link = Delay(int(p.client_ms * NS_PER_MS), int(p.client_sd_ms * NS_PER_MS), 0,
                     int(p.client_floor_ms * NS_PER_MS))
        self.net = Network(self.runtime, self.s, lan, link, p.timeout_ms)
        service = Delay.ms(p.service_ms, p.service_ms / 5)
        self.servers = [_Server(i, self.net.add_node(f"q{i}", self.region, service, 64))
                        for i in range(p.servers)]
        w = np.array(p.weight_list())
        self._cum = np.cumsum(w / w.sum()).tolist()
        self._seq = 0
        self._nonce = 0
        self._dlq: dict[str, DeadLetter] = {}
        self._dedup: dict[str, tuple[str, int]] = {}
        self.info = QueueInfo(url=url, kind="sim/sqs-fifo" if p.fifo else "sim/sqs",
                              max_receives=p.max_receives, fifo=p.fifo, params=asdict(p))

    # -- plumbing ---------------------------------------------------------------------------

    def _pick_receive(self) -> _Server:
        u = self.s.uniform()
        for i, c in enumerate(self._cum):
            if u < c:
                return self.servers[i]
        return self.servers[-1]

    def _pick_any(self) -> _Server:
        return self.servers[self.s.index(len(self.servers))]

    def _server_of(self, receipt: str) -> _Server:
        try:
            i = int(receipt.rsplit(".", 2)[1])
            return self.servers[i]
        except (ValueError, IndexError):
            raise StaleReceipt(f"receipt {receipt!r} was not handed out by this queue") from None

    async def _request(self, server: _Server, fn: Any, *args: Any) -> Any:
        """Carry a request to ``server``, apply ``fn(server, *args)`` there, carry the reply."""
        try:
            await self.net.to_node(self.region, server.node)
        except Lost as err:
            raise QueueUnavailable(str(err)) from None
        result = fn(server, *args)  # may raise StaleReceipt: the refusal travels back too
        await self.net.to_client(server.node, self.region)
        if isinstance(result, QueueError):
            raise result
        return result

    def _replicate(self, src: _Server, holders: tuple[int, ...], fn: Any, *args: Any) -> None:
        p = self.p
        lo, hi = int(p.replication_min_ms * NS_PER_MS), int(p.replication_max_ms * NS_PER_MS)
        for h in holders:
            if h == src.index:
                continue
            delay = lo + int((hi - lo) * self.s.uniform())
            self.runtime.call_later(delay, fn, self.servers[h], *args)

    # -- server-side operations --------------------------------------------------------------

    def _send(self, server: _Server, body: str, group: str, dedup_id: str | None) -> str:
        now = self.runtime.now_ns()
        if self.p.fifo:
            key = dedup_id or hashlib.sha256(body.encode()).hexdigest()
            seen = self._dedup.get(key)
            if seen is not None and seen[1] > now:
                return seen[0]
        self._seq += 1
        mid = f"m{self._seq:08d}"
        n = len(self.servers)
        holders = tuple((server.index + k) % n for k in range(self.p.copies))
        copy = _Copy(mid, body, self._seq, group, holders)
        server.copies[mid] = copy
        if self.p.fifo:
            self._dedup[key] = (mid, now + int(self.p.dedup_window_s * NS_PER_S))
        self._replicate(server, holders, self._apply_copy, copy.clone())
        return mid

    def _apply_copy(self, server: _Server, incoming: _Copy) -> None:
        """A replicated copy or hide arrives: keep the later delivery's state."""
        if incoming.id in server.deleted:
            return
        mine = server.copies.get(incoming.id)
        if mine is None:
            server.copies[incoming.id] = incoming
        elif incoming.version > mine.version:
            mine.visible_ns, mine.count, mine.receipt, mine.version = (
                incoming.visible_ns, incoming.count, incoming.receipt, incoming.version)

    def _apply_delete(self, server: _Server, mid: str) -> None:
        server.deleted.add(mid)
        server.copies.pop(mid, None)

    def _candidates(self, server: _Server, now: int) -> Iterator[_Copy]:
        """Yield the visible copies, oldest first (lazily: a receive stops at its batch)."""
        if not self.p.fifo:
            return (c for c in server.copies.values() if c.visible_ns <= now)
        heads: dict[str, _Copy] = {}
        for c in server.copies.values():  # insertion order is send order on the one server
            heads.setdefault(c.group, c)
        return (c for c in heads.values() if c.visible_ns <= now)

    def _receive(self, server: _Server, max_messages: int, vt_ns: int) -> list[Delivery]:
        now = self.runtime.now_ns()
        out: list[Delivery] = []
        dead: list[_Copy] = []
        for c in self._candidates(server, now):
            if len(out) == max_messages:
                break
            if c.count >= self.p.max_receives:
                dead.append(c)
                continue
            self._nonce += 1
            c.count += 1
            c.visible_ns = now + vt_ns
            c.receipt = f"{c.id}.{c.count}.{server.index}.{self._nonce}"
            c.version = (c.count, now, server.index)
            out.append(Delivery(c.id, c.body, c.receipt, c.count))
            self._replicate(server, c.holders, self._apply_copy, c.clone())
        for c in dead:  # moved after the scan: the scan walks the server's copies
            self._dlq.setdefault(c.id, DeadLetter(c.id, c.body, c.count))
            self._apply_delete(server, c.id)
            self._replicate(server, c.holders, self._apply_delete, c.id)
        return out

    def _current(self, server: _Server, receipt: str) -> _Copy | StaleReceipt:
        mid = receipt.split(".", 1)[0]
        c = server.copies.get(mid)
        if c is None:
            return StaleReceipt(f"message {mid} is gone (deleted or dead-lettered)")
        if c.receipt != receipt:
            return StaleReceipt(f"receipt {receipt} is stale: message {mid} was delivered "
                                f"again (receive {c.count})")
        return c

    def _delete(self, server: _Server, receipt: str) -> StaleReceipt | None:
        c = self._current(server, receipt)
        if isinstance(c, StaleReceipt):
            return c
        self._apply_delete(server, c.id)
        self._replicate(server, c.holders, self._apply_delete, c.id)
        return None

    def _change(self, server: _Server, receipt: str, timeout_ns: int) -> StaleReceipt | None:
        c = self._current(server, receipt)
        if isinstance(c, StaleReceipt):
            return c
        now = self.runtime.now_ns()
        c.visible_ns = now + timeout_ns
        c.version = (c.count, now, server.index)
        self._replicate(server, c.holders, self._apply_copy, c.clone())
        return None

    # -- the Queue protocol ------------------------------------------------------------------

    async def connect(self) -> SqsClient:
        """Return a new client session."""
        return SqsClient(self)

    async def dead_letters(self) -> list[DeadLetter]:
        """Return the dead-lettered messages, oldest first."""
        return sorted(self._dlq.values(), key=lambda d: d.id)

    async def depth(self) -> tuple[int, int]:
        """Return (visible, in flight) as one sampled server counts them, after a round
        trip to it (SQS's approximate counts)."""
        return await self._request(self._pick_any(), self._depth)

    def _depth(self, server: _Server) -> tuple[int, int]:
        now = self.runtime.now_ns()
        visible = sum(1 for c in server.copies.values() if c.visible_ns <= now)
        return visible, len(server.copies) - visible

    async def close(self) -> None:
        """Nothing to release."""


def open_sqs_sim(url: str, seed: int, runtime: VirtualRuntime | None = None) -> SqsSim:
    """Return a simulated SQS queue for ``url`` seeded with ``seed`` (on ``runtime`` when
    given, so a simulated central store can share the same virtual clock)."""
    return SqsSim(url, seed, runtime)

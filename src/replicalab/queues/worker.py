"""One consumer thread of the queue workload (:class:`Worker`): receive a batch, hand each
delivery to the strategy, and offer the strategy what it uses (``protocols.Consumer``):
processing, commit and skip records, deletes and visibility extensions with the delivery's
receipt, central-store clients, and the consumer's own clock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replicalab.queues.base import Delivery, Queue, QueueClient, QueueError, StaleReceipt
from replicalab.queues.effects import append_effect, effects_key
from replicalab.queues.nemesis import FaultPlan, FaultyCentralClient, Stall, StalledQueueClient
from replicalab.queues.producer import tag_of
from replicalab.queues.protocols import Strategy
from replicalab.queues.record import QueueLog
from replicalab.queues.spec import QueueSpec
from replicalab.queues.strategies import COMMIT_RETRY_S
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_MS, NS_PER_S
from replicalab.stores.base import Client, Store, StoreError

SETTLE_LIMIT_S = 90  # longer than a commit's retries (strategies.COMMIT_RETRY_S)


@dataclass
class Reader:
    """A reader process: its consumer threads share what it knows."""

    index: int
    seen: dict[str, Any] = field(default_factory=dict)  # tag strategy: tag -> thread | "done"
    in_flight: int = 0
    leases: dict[str, int] = field(default_factory=dict)  # message id -> lease end (ns)
    counts_ns: int = -1  # central-detect: when the queue counts were last read
    others: bool = True  # ... and whether they showed another reader at work

    def held(self, now_ns: int) -> int:
        """Return how many messages this reader holds a live lease on (delivered, not
        deleted, visibility timeout not over: what the queue counts as in flight for it)."""
        for mid in [m for m, end in self.leases.items() if end <= now_ns]:
            del self.leases[mid]
        return len(self.leases)


@dataclass
class Ctx:
    """What every consumer of one run (or one consumer process) shares."""

    spec: QueueSpec
    rt: Runtime
    queue: Queue
    log: QueueLog
    strategy: Strategy
    store: Store  # claims (central strategies) and effects
    claim_domain: str
    token: str
    plan: FaultPlan = field(default_factory=FaultPlan)
    deleted: set[str] = field(default_factory=set)  # message ids deleted (acknowledged)
    pending: set[str] = field(default_factory=set)  # acknowledged sends not deleted yet
    maybe_deleted: set[str] = field(default_factory=set)  # deletes of unknown outcome
    stopping: bool = False


class Worker:
    """One consumer thread: receive a batch, hand each delivery to the strategy."""

    def __init__(self, ctx: Ctx, index: int, gen: int, reader: Reader, client: QueueClient,
                 store: Client | None) -> None:
        self.ctx, self.index, self.gen, self.reader = ctx, index, gen, reader
        self.rt = ctx.rt
        self.log = ctx.log
        self.claims = ctx.claim_domain
        self.visibility_s = ctx.spec.visibility_s
        self.stall = Stall(ctx.rt, ctx.plan, index)
        self.client = StalledQueueClient(client, self.stall)
        # a store client carries one call at a time (as every store workload uses them), so
        # the deliveries of a batch, handled concurrently, each borrow one from this pool
        self.stores: list[Client] = ([FaultyCentralClient(store, self.stall)]
                                     if store is not None else [])
        self.commit_retry_ns = int(COMMIT_RETRY_S * NS_PER_S)
        self._free: list[Client] = list(self.stores)
        self._store_of: dict[str, Client] = {}
        self.tasks: list[Any] = []
        self.deleting: set[str] = set()  # message ids whose delete is in flight
        self.rng = np.random.default_rng([ctx.spec.seed, 7, index, gen])

    def now_ns(self) -> int:
        """Return this consumer's own clock (ns): the run's, off by a skew fault."""
        now = self.rt.now_ns()
        return now + self.ctx.plan.skew_ns(self.index, now)

    def process_ns(self) -> int:
        """Return how long the next processing takes (ns)."""
        s = self.ctx.spec
        if self.rng.random() < s.slow_fraction:
            return int(s.slow_s * NS_PER_S)
        return int(s.process_ms * NS_PER_MS * float(np.exp(s.process_sigma
                                                            * self.rng.standard_normal())))

    async def sleep_ns(self, ns: int) -> None:
        """Sleep ``ns`` and pass a pause point (a paused consumer wakes when it resumes)."""
        await self.rt.sleep_ns(ns)
        await self.stall.point()

    async def run(self) -> None:
        """Receive and handle batches until the run stops."""
        ctx, rt, log, spec = self.ctx, self.rt, self.log, self.ctx.spec
        vt_ns = int(spec.visibility_s * NS_PER_S)
        while not ctx.stopping:
            i = log.invoke("receive", self.index, rt.now_ns())
            try:
                got = await self.client.receive(spec.batch, spec.visibility_s)
            except (QueueError, OSError) as err:
                log.done(i, rt.now_ns(), "info", note=str(err))
                await self.sleep_ns(int(spec.empty_poll_ms * NS_PER_MS))
                continue
            now = rt.now_ns()
            log.done(i, now, count=len(got))
            for d in got:
                log.record("deliver", self.index, log.cols["invoke_ns"][i], now,
                           tag=tag_of(d.body), msg_id=d.id, receipt=d.receipt,
                           count=d.receive_count, lease_ns=vt_ns)
            if not got:
                await self.sleep_ns(int(spec.empty_poll_ms * NS_PER_MS))
                continue
            self.reader.in_flight += len(got)
            for d in got:
                self.reader.leases[d.id] = now + vt_ns
            if ctx.strategy.detect:
                await self.others_working()  # one read of the counts per batch
            self.tasks = [rt.spawn(self._handle(d)) for d in got]
            for t in self.tasks:
                await t
            self.tasks = []

    def store_of(self, d: Delivery) -> Client:
        """Return the central-store client lent to the handling of ``d``."""
        return self._store_of[d.receipt]

    async def _handle(self, d: Delivery) -> None:
        lent: Client | None = None
        try:
            if self._free:
                lent = self._free.pop()
            else:
                lent = FaultyCentralClient(await self.ctx.store.connect(), self.stall)
                self.stores.append(lent)
            self._store_of[d.receipt] = lent
            await self.ctx.strategy.handle(self, d, tag_of(d.body))
        except (QueueError, StoreError, OSError) as err:
            # a backend failed under this delivery: the message comes back after its lease;
            # the consumer carries on, as a real worker's error handler would
            self.skip(d, tag_of(d.body), f"error: {type(err).__name__}: {err}")
        finally:
            self.reader.in_flight -= 1
            if lent is not None:
                self._store_of.pop(d.receipt, None)
                self._free.append(lent)

    async def process(self, d: Delivery, tag: str,
                      heartbeat: Callable[[], Awaitable[bool]] | None = None,
                      every_ns: int = 0) -> bool:
        """Process ``d`` (sleep its processing time, renewing a claim with ``heartbeat``
        every ``every_ns``); return False if the claim was lost and the work abandoned."""
        rt, log = self.rt, self.log
        left = self.process_ns()
        i = log.invoke("process", self.index, rt.now_ns(), tag=tag, msg_id=d.id,
                       receipt=d.receipt)
        while heartbeat is not None and left > every_ns > 0:
            await self.sleep_ns(every_ns)
            left -= every_ns
            if not await heartbeat():
                log.done(i, rt.now_ns(), "fail", note="claim lost: work abandoned")
                return False
        await self.sleep_ns(left)
        log.done(i, rt.now_ns())
        return True

    def effect_entry(self, d: Delivery) -> str:
        """Return the entry naming this handling of ``d`` in an effect list."""
        return f"c{self.index}.{self.gen}.{d.receipt}"

    async def commit(self, d: Delivery, tag: str) -> bool:
        """Write the result of processing ``d`` to the effect store (append this delivery's
        entry to the message's effect list, unconditionally on any claim); return True once
        it certainly landed, False when its outcome stayed unknown (``commit`` row ``ok`` /
        ``info``; the consumer's own record, cross-checked against the store)."""
        rt, log = self.rt, self.log
        entry = self.effect_entry(d)
        i = log.invoke("commit", self.index, rt.now_ns(), tag=tag, msg_id=d.id,
                       receipt=d.receipt, note=entry)
        landed = await append_effect(rt, log, self.index, self.store_of(d),
                                     effects_key(self.claims, tag), entry, tag, d.id,
                                     d.receipt, self.commit_retry_ns)
        if landed:
            log.done(i, rt.now_ns())
            return True
        log.done(i, rt.now_ns(), "info", note=f"{entry}: outcome unknown")
        return False

    def skip(self, d: Delivery, tag: str, why: str) -> None:
        """Record that the strategy did not process ``d``, and why."""
        now = self.rt.now_ns()
        self.log.record("skip", self.index, now, now, tag=tag, msg_id=d.id,
                        receipt=d.receipt, note=why)

    async def delete(self, d: Delivery, tag: str) -> bool:
        """Delete ``d``'s message with its receipt; return True if the queue accepted it."""
        rt, log = self.rt, self.log
        i = log.invoke("delete", self.index, rt.now_ns(), tag=tag, msg_id=d.id,
                       receipt=d.receipt)
        self.deleting.add(d.id)  # a crash now leaves the delete's outcome unknown
        try:
            await self.client.delete(d.receipt)
        except StaleReceipt as err:
            log.done(i, rt.now_ns(), "stale", note=str(err))
            return False
        except QueueError as err:
            log.done(i, rt.now_ns(), "info", note=str(err))
            self.ctx.maybe_deleted.add(d.id)
            return False
        finally:
            self.deleting.discard(d.id)
        log.done(i, rt.now_ns())
        self.ctx.deleted.add(d.id)
        self.ctx.pending.discard(d.id)
        self.reader.leases.pop(d.id, None)
        return True

    async def extend(self, d: Delivery, tag: str) -> bool:
        """Hide ``d``'s message for another visibility timeout from now with its receipt;
        return True if the queue accepted it (False: stale receipt or no answer)."""
        rt, log = self.rt, self.log
        vt_ns = int(self.visibility_s * NS_PER_S)
        i = log.invoke("change_visibility", self.index, rt.now_ns(), tag=tag, msg_id=d.id,
                       receipt=d.receipt, lease_ns=vt_ns)
        try:
            await self.client.change_visibility(d.receipt, self.visibility_s)
        except StaleReceipt as err:
            log.done(i, rt.now_ns(), "stale", note=str(err))
            return False
        except (QueueError, OSError) as err:
            log.done(i, rt.now_ns(), "info", note=str(err))
            return False
        log.done(i, rt.now_ns())
        self.reader.leases[d.id] = log.cols["invoke_ns"][i] + vt_ns
        return True

    async def others_working(self) -> bool:
        """Return True when the queue's counts show more messages in flight than this
        reader holds leases on (re-read at most every ``detect_ttl_s``; unknown counts say
        True)."""
        r, rt, log = self.reader, self.rt, self.log
        if r.counts_ns >= 0 and rt.now_ns() - r.counts_ns < self.ctx.spec.detect_ttl_s * NS_PER_S:
            return r.others
        i = log.invoke("depth", self.index, rt.now_ns())
        try:
            visible, in_flight = await self.stall.call(self.ctx.queue.depth)
        except QueueError as err:
            log.done(i, rt.now_ns(), "info", note=str(err))
            return True
        log.done(i, rt.now_ns(), count=in_flight, note=f"visible={visible}")
        r.counts_ns, r.others = rt.now_ns(), in_flight > r.held(rt.now_ns())
        return r.others


async def settle_commits(rt: Runtime, log: QueueLog, every_ns: int,
                         limit_ns: int = SETTLE_LIMIT_S * NS_PER_S,
                         dead: Callable[[], Collection[str]] = frozenset) -> None:
    """Wait (up to ``limit_ns``) for the commits still in flight to learn their outcome, and
    for the processing of a message in ``dead()`` (dead-lettered) to reach its commit: a
    consumer may be committing a message another has already found committed and deleted, a
    record cut before the reply could not say what happened, and a message dead-lettered
    while its owner still works on it is committed once that work ends (stopping first
    recorded it "dead-lettered without a commit" when a busy machine slowed the owner)."""
    deadline = rt.now_ns() + limit_ns

    def working() -> bool:
        if log.open_commits:
            return True
        gone = dead() if log.open_processes else ()
        return any(m in gone for m in log.open_processes.values())

    while working() and rt.now_ns() < deadline:
        await rt.sleep_ns(min(every_ns, deadline - rt.now_ns()))

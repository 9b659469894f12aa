"""The ``queue`` workload: producers send N tagged messages, C consumers receive them in
parallel, process each for a random time (some longer than the visibility timeout), commit a
result and delete the message, under one of the strategies of :mod:`strategies`. A consumer
can be crashed by the fault schedule: it stops where it is, without deleting, and comes back
as a fresh thread after the fault's duration. Every operation is recorded in a
:class:`QueueLog`.

The same code runs in virtual time (``sim://sqs``, with a ``sim://`` central store sharing
its clock) and in real time against real queue backends and stores.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from replicalab.faults.schedule import Fault
from replicalab.queues.base import Delivery, Queue, QueueClient, QueueError, StaleReceipt
from replicalab.queues.record import PRODUCER, QueueLog
from replicalab.queues.registry import open_queue
from replicalab.queues.strategies import CENTRAL, STRATEGIES, Strategy, make_strategy
from replicalab.runtime import Runtime
from replicalab.stores.base import Client, Feature, Store, StoreError

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
# how often the run looks whether every message is finished: each look asks a real backend
# for its dead letters, so a tenth of a second there; one event per virtual second is free
CHECK_EVERY_NS = {True: NS_PER_S, False: NS_PER_S // 10}
DEFAULT_CENTRAL = "sim://simpledb"


@dataclass(frozen=True)
class QueueSpec:
    """One queue run: backend, strategy, load and processing-time distribution."""

    queue: str = "sim://sqs"
    consumers: int = 4
    strategy: str = "none"
    central: str | None = None
    messages: int = 1000
    producers: int = 2
    readers: int = 0  # 0: one reader per consumer (tag: one reader for all)
    batch: int = 10
    visibility_s: float = 30.0
    process_ms: float = 1000.0  # median processing time
    process_sigma: float = 0.5  # lognormal shape
    slow_fraction: float = 0.01  # share of processings that take slow_s
    slow_s: float = 45.0  # longer than the default visibility timeout
    empty_poll_ms: float = 200.0  # wait after an empty receive
    detect_ttl_s: float = 1.0  # central-detect: a reader re-reads the queue counts this often
    groups: int = 16  # FIFO queues: message groups
    max_duration_s: float = 3600.0
    seed: int = 1
    faults: tuple[Fault, ...] = ()
    processes: bool = False  # real queues: each reader a process of its own (SIGKILL crashes)

    def check(self) -> None:
        """Raise ValueError (one line naming the fix) for an impossible run."""
        if self.consumers < 1:
            raise ValueError(f"--consumers {self.consumers}: give at least 1 consumer")
        if self.messages < 1:
            raise ValueError(f"--messages {self.messages}: send at least 1 message")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"--strategy {self.strategy!r}: use one of "
                             f"{', '.join(STRATEGIES)}")
        if self.producers < 1 or self.batch < 1 or self.batch > 10:
            raise ValueError("producers must be at least 1 and --batch between 1 and 10")
        if self.readers < 0 or self.readers > self.consumers:
            raise ValueError(f"--readers {self.readers}: between 1 and --consumers "
                             f"({self.consumers}), or 0 for one per consumer")
        if not 0 < self.visibility_s <= 43_200:
            raise ValueError(f"visibility {self.visibility_s:g} s must be in (0, 43200]")
        if self.process_ms < 0 or self.process_sigma < 0 or self.slow_s < 0:
            raise ValueError("processing times must not be negative")
        if not 0 <= self.slow_fraction <= 1:
            raise ValueError(f"--slow-fraction {self.slow_fraction:g} must be in [0, 1]")
        if self.max_duration_s <= 0:
            raise ValueError("--max-duration must be positive")
        if self.central is not None and self.strategy not in CENTRAL:
            raise ValueError(f"--central is used by the central strategies only, not "
                             f"{self.strategy!r}; drop it or pick --strategy central")
        if self.processes and self.queue.startswith("sim://"):
            raise ValueError("--processes runs consumers as processes of their own against a "
                             "real queue; sim://sqs lives in one process's virtual time: drop "
                             "--processes or give a redis:// or postgresql:// queue")
        targets, what = ((self.n_readers(), "consumer processes") if self.processes
                         else (self.consumers, "consumers"))
        for f in self.faults:
            if f.action != "crash" or f.node is None:
                raise ValueError(f"fault {f.label!r}: queue runs take crash faults on a "
                                 "consumer (crash node=K at=10s for=30s)")
            if f.node >= targets:
                raise ValueError(f"fault {f.label!r}: there are {what} 0...{targets - 1}; "
                                 "pick one of them")

    def n_readers(self) -> int:
        """Return how many readers the consumers form (tag: 1 unless told)."""
        if self.readers:
            return self.readers
        return 1 if self.strategy == "tag" else self.consumers

    def to_json(self) -> dict[str, Any]:
        """Return the spec as JSON-ready data (faults as their fields)."""
        d = asdict(self)
        d["faults"] = [asdict(f) for f in self.faults]
        return d


@dataclass
class Reader:
    """A reader process: its consumer threads share what it knows."""

    index: int
    seen: dict[str, Any] = field(default_factory=dict)  # tag strategy: tag -> thread | "done"
    in_flight: int = 0
    leases: dict[str, int] = field(default_factory=dict)  # message id -> lease end (ns)

    def held(self, now_ns: int) -> int:
        """Return how many messages this reader holds a live lease on (delivered, not
        deleted, visibility timeout not over: what the queue counts as in flight for it)."""
        for mid in [m for m, end in self.leases.items() if end <= now_ns]:
            del self.leases[mid]
        return len(self.leases)
    counts_ns: int = -1  # central-detect: when the queue counts were last read
    others: bool = True  # ... and whether they showed another reader at work


@dataclass
class Ctx:
    """What every consumer of one run shares."""

    spec: QueueSpec
    rt: Runtime
    queue: Queue
    log: QueueLog
    strategy: Strategy
    store: Store | None
    claim_domain: str
    token: str
    deleted: set[str] = field(default_factory=set)  # message ids deleted (acknowledged)
    pending: set[str] = field(default_factory=set)  # acknowledged sends not deleted yet
    stopping: bool = False


def tag_of(body: str) -> str:
    """Return the tag a producer wrote at the start of a message body."""
    return body.split("|", 1)[0]


class Worker:
    """One consumer thread: receive a batch, hand each delivery to the strategy."""

    def __init__(self, ctx: Ctx, index: int, gen: int, reader: Reader, client: QueueClient,
                 store: Client | None) -> None:
        self.ctx, self.index, self.gen, self.reader = ctx, index, gen, reader
        self.rt = ctx.rt
        self.client = client
        self.store: Client = store  # type: ignore[assignment]
        # a store client carries one call at a time (as every store workload uses them), so
        # the deliveries of a batch, handled concurrently, each borrow one from this pool
        self.stores: list[Client] = [store] if store is not None else []
        self._free: list[Client] = list(self.stores)
        self._store_of: dict[str, Client] = {}
        self.tasks: list[Any] = []
        self.rng = np.random.default_rng([ctx.spec.seed, 7, index, gen])

    def process_ns(self) -> int:
        """Return how long the next processing takes (ns)."""
        s = self.ctx.spec
        if self.rng.random() < s.slow_fraction:
            return int(s.slow_s * NS_PER_S)
        return int(s.process_ms * NS_PER_MS * float(np.exp(s.process_sigma
                                                            * self.rng.standard_normal())))

    async def run(self) -> None:
        """Receive and handle batches until the run stops."""
        ctx, rt, log, spec = self.ctx, self.rt, self.ctx.log, self.ctx.spec
        vt_ns = int(spec.visibility_s * NS_PER_S)
        while not ctx.stopping:
            i = log.invoke("receive", self.index, rt.now_ns())
            try:
                got = await self.client.receive(spec.batch, spec.visibility_s)
            except (QueueError, OSError) as err:
                log.done(i, rt.now_ns(), "info", note=str(err))
                await rt.sleep_ns(int(spec.empty_poll_ms * NS_PER_MS))
                continue
            now = rt.now_ns()
            log.done(i, now, count=len(got))
            for d in got:
                log.record("deliver", self.index, log.cols["invoke_ns"][i], now,
                           tag=tag_of(d.body), msg_id=d.id, receipt=d.receipt,
                           count=d.receive_count, lease_ns=vt_ns)
            if not got:
                await rt.sleep_ns(int(spec.empty_poll_ms * NS_PER_MS))
                continue
            self.reader.in_flight += len(got)
            for d in got:
                self.reader.leases[d.id] = now + vt_ns
            if getattr(ctx.strategy, "detect", False):
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
            if self.ctx.store is not None:
                if self._free:
                    lent = self._free.pop()
                else:
                    lent = await self.ctx.store.connect()
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
        rt, log = self.rt, self.ctx.log
        left = self.process_ns()
        i = log.invoke("process", self.index, rt.now_ns(), tag=tag, msg_id=d.id,
                       receipt=d.receipt)
        while heartbeat is not None and left > every_ns > 0:
            await rt.sleep_ns(every_ns)
            left -= every_ns
            if not await heartbeat():
                log.done(i, rt.now_ns(), "fail", note="claim lost: work abandoned")
                return False
        await rt.sleep_ns(left)
        log.done(i, rt.now_ns())
        return True

    def commit(self, d: Delivery, tag: str) -> None:
        """Record the result of processing ``d`` (the commit record downstream filters on)."""
        now = self.rt.now_ns()
        self.ctx.log.record("commit", self.index, now, now, tag=tag, msg_id=d.id,
                            receipt=d.receipt)

    def skip(self, d: Delivery, tag: str, why: str) -> None:
        """Record that the strategy did not process ``d``, and why."""
        now = self.rt.now_ns()
        self.ctx.log.record("skip", self.index, now, now, tag=tag, msg_id=d.id,
                            receipt=d.receipt, note=why)

    async def delete(self, d: Delivery, tag: str) -> bool:
        """Delete ``d``'s message with its receipt; return True if the queue accepted it."""
        rt, log = self.rt, self.ctx.log
        i = log.invoke("delete", self.index, rt.now_ns(), tag=tag, msg_id=d.id,
                       receipt=d.receipt)
        try:
            await self.client.delete(d.receipt)
        except StaleReceipt as err:
            log.done(i, rt.now_ns(), "stale", note=str(err))
            return False
        except QueueError as err:
            log.done(i, rt.now_ns(), "info", note=str(err))
            return False
        log.done(i, rt.now_ns())
        self.ctx.deleted.add(d.id)
        self.ctx.pending.discard(d.id)
        self.reader.leases.pop(d.id, None)
        return True

    async def others_working(self) -> bool:
        """Return True when the queue's counts show more messages in flight than this
        reader holds leases on (re-read at most every ``detect_ttl_s``; unknown counts say
        True)."""
        r, rt, log = self.reader, self.rt, self.ctx.log
        if r.counts_ns >= 0 and rt.now_ns() - r.counts_ns < self.ctx.spec.detect_ttl_s * NS_PER_S:
            return r.others
        i = log.invoke("depth", self.index, rt.now_ns())
        try:
            visible, in_flight = await self.ctx.queue.depth()
        except QueueError as err:
            log.done(i, rt.now_ns(), "info", note=str(err))
            return True
        log.done(i, rt.now_ns(), count=in_flight, note=f"visible={visible}")
        r.counts_ns, r.others = rt.now_ns(), in_flight > r.held(rt.now_ns())
        return r.others


@dataclass
class QueueOutcome:
    """What a run leaves: the log, the message ids dead-lettered, descriptions, notes."""

    log: QueueLog
    dead_letters: list[str]
    queue_info: dict[str, Any]
    central_info: dict[str, Any] | None
    duration_ns: int
    wall_s: float
    notes: list[str]
    interrupted: bool = False


def open_backends(spec: QueueSpec) -> tuple[Queue, Store | None]:
    """Open the queue and (central strategies) the central store, sharing one virtual clock
    when both are simulated; ValueError names a bad URL, a store without conditional writes
    or a simulated/real mix."""
    store: Store | None = None
    if spec.strategy in CENTRAL:
        from replicalab.stores import open_store

        url = spec.central or (DEFAULT_CENTRAL if spec.queue.startswith("sim://") else None)
        if url is None:
            raise ValueError(f"--strategy {spec.strategy} needs --central URL: a store with "
                             "conditional writes (redis://, postgresql://, etcd://, zk://)")
        store = open_store(url, spec.seed)
        if Feature.CONDITIONAL_WRITE not in store.info.features:
            raise ValueError(f"central store {url} has no conditional writes; use one that "
                             "has (sim://simpledb, redis://, postgresql://, etcd://, zk://)")
        sim_store = getattr(store.runtime, "virtual", False)
        if spec.queue.startswith("sim://") != sim_store:
            raise ValueError(f"queue {spec.queue} and central store {url} run on different "
                             "clocks; pair sim://sqs with a sim:// store (virtual time) and a "
                             "real queue with a real store")
        return open_queue(spec.queue, spec.seed, store.runtime if sim_store else None), store
    return open_queue(spec.queue, spec.seed), None


def run_workload(spec: QueueSpec, progress: Callable[[float], None] | None = None
                 ) -> QueueOutcome:
    """Run ``spec`` to the end (every acknowledged message deleted or dead-lettered, or
    ``max_duration_s``) and return what it recorded; Ctrl-C keeps what was recorded."""
    spec.check()
    if spec.processes:
        from replicalab.queues.processes import run_processes

        return run_processes(spec, progress)
    queue, store = open_backends(spec)
    rt = queue.runtime
    log = QueueLog()
    token = f"r{spec.seed}" if rt.virtual else f"r{time.time_ns() % 10**12:x}"
    ctx = Ctx(spec, rt, queue, log, make_strategy(spec.strategy, spec.visibility_s), store,
              f"claims-{token}", token)
    notes: list[str] = []
    dead: list[str] = []
    acked: set[str] = set()
    t0 = [0]
    wall0 = time.monotonic()

    async def produce(p: int) -> None:
        client = await queue.connect()
        try:
            for k in range(p, spec.messages, spec.producers):
                if ctx.stopping:
                    return
                tag = f"{token}.{k:06d}"
                body = f"{tag}|payload {k}"
                i = log.invoke("send", PRODUCER, rt.now_ns(), tag=tag)
                try:
                    if queue.info.fifo:
                        mid = await client.send(  # type: ignore[call-arg]
                            body, group_id=f"g{k % spec.groups}")
                    else:
                        mid = await client.send(body)
                except QueueError as err:
                    log.done(i, rt.now_ns(), "info", note=str(err))
                    continue
                log.done(i, rt.now_ns(), msg_id=mid)
                acked.add(mid)
                if mid not in ctx.deleted:  # a fast consumer may delete before the ack
                    ctx.pending.add(mid)
        finally:
            await client.close()

    readers = [Reader(r) for r in range(spec.n_readers())]
    workers: dict[int, Worker] = {}
    retired: list[Worker] = []  # crashed workers: their clients are closed at the end
    tasks: dict[int, Any] = {}

    async def start_worker(k: int, gen: int) -> None:
        client = await queue.connect()
        sclient = await store.connect() if store is not None else None
        w = Worker(ctx, k, gen, readers[k % len(readers)], client, sclient)
        workers[k] = w
        tasks[k] = rt.spawn(w.run())

    def crash(k: int, for_ns: int) -> None:
        w = workers.get(k)
        if w is None or ctx.stopping:
            return
        for t in [tasks.pop(k, None), *w.tasks]:
            if t is not None:
                t.cancel()
        for tag, state in list(w.reader.seen.items()):
            if state == k:  # the reader sees its thread die and forgets its work in progress
                del w.reader.seen[tag]
        if len(readers) == spec.consumers:  # the consumer was a reader process of its own
            readers[k] = Reader(k)  # ... and comes back with nothing in memory
        retired.append(w)
        now = rt.now_ns()
        log.close_open(now, "crashed", process=k)
        row = log.invoke("crash", k, now, note=f"consumer {k} stopped without deleting")
        rt.call_later(for_ns, restart, k, w.gen + 1, row)

    def restart(k: int, gen: int, row: int) -> None:
        log.done(row, rt.now_ns())
        if not ctx.stopping:
            rt.spawn(start_worker(k, gen))

    async def main() -> None:
        t0[0] = rt.now_ns()
        producers = [rt.spawn(produce(p)) for p in range(spec.producers)]
        for k in range(spec.consumers):
            await start_worker(k, 0)
        for f in spec.faults:
            rt.call_later(int(f.at_s * NS_PER_S), crash, f.node, int(f.for_s * NS_PER_S))
        deadline = t0[0] + int(spec.max_duration_s * NS_PER_S)
        try:
            while True:
                await rt.sleep_ns(CHECK_EVERY_NS[rt.virtual])
                sent = all(p.done() for p in producers)
                with contextlib.suppress(QueueError):  # the next check asks again
                    dead[:] = [d.id for d in await queue.dead_letters()]
                # kept up to date by the deletes: no pass over every message per check
                finished = len(acked) - len(ctx.pending - set(dead))
                if progress is not None:
                    progress(finished / spec.messages)
                if sent and finished == len(acked):
                    break
                failed = _failure(tasks.values())
                if failed:
                    notes.append(f"stopped: every consumer failed ({failed}); what was "
                                 "recorded is kept")
                    break
                if rt.now_ns() >= deadline:
                    notes.append(f"stopped at --max-duration {spec.max_duration_s:g} s with "
                                 f"{len(acked) - finished} messages not yet deleted")
                    break
        finally:
            ctx.stopping = True
            for t in [*producers, *tasks.values(),
                      *(t for w in workers.values() for t in w.tasks)]:
                t.cancel()
            log.close_open(rt.now_ns(), "run ended")
            await _close(queue, store, [*retired, *workers.values()])

    interrupted = False
    try:
        rt.run(main())
    except KeyboardInterrupt:
        interrupted = True
        log.close_open(rt.now_ns(), "interrupted")
        notes.append("interrupted by Ctrl-C: what was recorded is kept")
    return QueueOutcome(log, dead, queue.info.to_json(),
                        store.info.to_json() if store is not None else None,
                        rt.now_ns() - t0[0], time.monotonic() - wall0, notes, interrupted)


def _failure(tasks: Any) -> str:
    """Return the error of a failed consumer task when every consumer task has ended (a
    consumer only ends when the run stops or a crash cancels it), else ""."""
    tasks = list(tasks)
    if not tasks or not all(t.done() for t in tasks):
        return ""
    for t in tasks:
        try:
            t.result()
        except BaseException as err:  # reported, not raised
            if type(err).__name__ != "CancelledError":
                return f"{type(err).__name__}: {err}"
    return ""


async def _close(queue: Queue, store: Store | None, workers: list[Worker]) -> None:
    # closing must not hide the run's result: a failing close is ignored
    things: list[Any] = [c for w in workers for c in (w.client, *w.stores)]
    for thing in [*things, queue, store]:
        if thing is not None:
            with contextlib.suppress(Exception):
                await thing.close()


__all__ = ["QueueOutcome", "QueueSpec", "Worker", "open_backends", "run_workload", "tag_of"]

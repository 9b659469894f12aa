"""The queue workload in one process: consumers are tasks of one event loop, in virtual time
(``sim://sqs``, with a ``sim://`` central store sharing its clock) or in real time against
real queue backends and stores.

A crash fault stops a consumer where it is, without deleting, and it comes back as a fresh
consumer after the fault's duration; a pause holds it at its next pause point
(``nemesis.py``); a skew shifts its clock; store faults make its central-store calls fail.
Each fault is recorded as a row of its own (``crash``, ``pause``, ``skew``,
``store_fault``) spanning its window.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from replicalab.queues.backends import open_backends
from replicalab.queues.base import Queue, QueueError
from replicalab.queues.effects import read_back
from replicalab.queues.nemesis import FaultPlan, record_fault_windows, windows
from replicalab.queues.producer import produce
from replicalab.queues.record import QueueLog
from replicalab.queues.spec import QueueOutcome, QueueSpec, consumer_of
from replicalab.queues.strategies import CENTRAL, make_strategy
from replicalab.queues.worker import Ctx, Reader, Worker, settle_commits
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_S
from replicalab.stores.base import Store

# how often the run looks whether every message is finished: each look asks a real backend
# for its dead letters, so a tenth of a second there; one event per virtual second is free
CHECK_EVERY_NS = {True: NS_PER_S, False: NS_PER_S // 10}
def run_threads(spec: QueueSpec, progress: Callable[[float], None] | None = None
                ) -> QueueOutcome:
    """Run ``spec`` with every consumer a task of this process; return what it recorded."""
    queue, store = open_backends(spec)
    rt = queue.runtime
    log = QueueLog()
    token = f"r{spec.seed}" if rt.virtual else f"r{time.time_ns() % 10**12:x}"
    ctx = Ctx(spec, rt, queue, log, make_strategy(spec.strategy, spec.visibility_s), store,
              f"claims-{token}", token)
    notes: list[str] = []
    dead: list[str] = []
    acked: set[str] = set()
    t0, end = [0], [0]
    wall0 = time.monotonic()

    def on_ack(mid: str) -> None:
        acked.add(mid)
        if mid not in ctx.deleted:  # a fast consumer may delete before the ack
            ctx.pending.add(mid)

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
        ctx.maybe_deleted |= w.deleting  # deletes cut short: they may or may not have landed
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
        ctx.plan = FaultPlan(windows(spec.faults, t0[0]))
        record_fault_windows(rt, log, spec.faults)
        producers = [rt.spawn(produce(queue, spec, log, token, p, on_ack,
                                      lambda: ctx.stopping))
                     for p in range(spec.producers)]
        for k in range(spec.consumers):
            await start_worker(k, 0)
        for f in spec.faults:
            if f.action == "crash":
                rt.call_later(int(f.at_s * NS_PER_S), crash, consumer_of(f),
                              int(f.for_s * NS_PER_S))
        try:
            await _until_finished(spec, rt, queue, ctx, producers, tasks, acked, dead, notes,
                                  t0[0], progress)
            await settle_commits(rt, log, CHECK_EVERY_NS[rt.virtual], dead=lambda: dead)
        finally:
            ctx.stopping = True
            end[0] = rt.now_ns()
            for t in [*producers, *tasks.values(),
                      *(t for w in workers.values() for t in w.tasks)]:
                t.cancel()
            log.close_open(rt.now_ns(), "run ended")
            await _close(None, None, [*retired, *workers.values()])
        # what a downstream observer sees: every message's effects, read back from the store
        try:
            if await read_back(rt, store, ctx.claim_domain, tags_of(log), log):
                notes.append("some effect lists could not be read back from the store: "
                             "those messages are counted from the consumers' record")
        finally:
            await _close(queue, store, [])

    interrupted = False
    try:
        rt.run(main())
    except KeyboardInterrupt:
        interrupted = True
        log.close_open(rt.now_ns(), "interrupted")
        notes.append("interrupted by Ctrl-C: what was recorded is kept")
    return QueueOutcome(log, dead, queue.info.to_json(),
                        store.info.to_json() if spec.strategy in CENTRAL else None,
                        (end[0] or rt.now_ns()) - t0[0], time.monotonic() - wall0, notes,
                        interrupted, store.info.to_json(), ctx.claim_domain)


def tags_of(log: QueueLog) -> set[str]:
    """Return the tags of every message a run sent (acknowledged or not) or delivered: the
    messages whose effects are read back."""
    c = log.columns()
    return {t for k, t in zip(c["kind"], c["tag"], strict=True)
            if t and k in ("send", "deliver")}


async def _until_finished(spec: QueueSpec, rt: Runtime, queue: Queue, ctx: Ctx,
                          producers: list[Any], tasks: dict[int, Any], acked: set[str],
                          dead: list[str], notes: list[str], t0_ns: int,
                          progress: Callable[[float], None] | None) -> None:
    """Return once every acknowledged message is deleted or dead-lettered, every consumer
    has failed, or ``max_duration_s`` has passed (noting why in ``notes``)."""
    deadline = t0_ns + int(spec.max_duration_s * NS_PER_S)
    while True:
        await rt.sleep_ns(CHECK_EVERY_NS[rt.virtual])
        sent = all(p.done() for p in producers)
        with contextlib.suppress(QueueError):  # the next check asks again
            dead[:] = [d.id for d in await queue.dead_letters()]
        # kept up to date by the deletes: no pass over every message per check
        left = ctx.pending - set(dead)
        finished = len(acked) - len(left)
        if progress is not None:
            progress(finished / spec.messages)
        if sent and finished == len(acked):
            return
        if sent and left <= ctx.maybe_deleted and await _queue_empty(queue):
            return  # what is left had deletes of unknown outcome, and they landed
        failed = _failure(tasks.values())
        if failed:
            notes.append(f"stopped: every consumer failed ({failed}); what was "
                         "recorded is kept")
            return
        if rt.now_ns() >= deadline:
            notes.append(f"stopped at the maximum duration, {spec.max_duration_s:g} s, with "
                         f"{len(acked) - finished} messages not yet deleted")
            return


async def _queue_empty(queue: Queue) -> bool:
    """Return True when the queue counts nothing visible and nothing in flight."""
    try:
        return await queue.depth() == (0, 0)
    except QueueError:
        return False


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


async def _close(queue: Queue | None, store: Store | None, workers: list[Worker]) -> None:
    # closing must not hide the run's result: a failing close is ignored
    things: list[Any] = [c for w in workers for c in (w.client, *w.stores)]
    for thing in [*things, queue, store]:
        if thing is not None:
            with contextlib.suppress(Exception):
                await thing.close()

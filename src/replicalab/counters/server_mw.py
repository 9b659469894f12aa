"""Server-based middleware (seed 004 §IV-C): one serialiser per counter per DC.

Each counter has an actor: a task that owns the counter's cached state and takes the
operations sent to it in batches. A batch (group commit) is every operation that arrived
within ``batch_ms`` of the first one, at most ``batch_max`` — plus whatever queued while
the previous write was in flight. The actor applies the batch to a copy of the cached
state, writes the result with ONE conditional write, and only when that write has
returned updates the cache and acknowledges the operations. Acknowledging from the cache
before the write would let a crash lose decrements whose rights a later merge hands back:
an oversell. A failed condition (another writer: a peer's sync, a transfer executed by a
peer, a second middleware) re-reads the store and re-applies the batch; a write with an
unknown outcome (``Unavailable``) fails the batch with ``Unavailable`` and the next batch
starts from a fresh read.

``batch_ms=0`` is the server-based middleware without batching: one write per operation.
Operations that fail on the cached state (not enough rights) are answered at once: they
change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from replicalab.counters.crdt import BoundedCounter, CounterError
from replicalab.counters.middleware import Middleware, Options
from replicalab.counters.service import Contended, Placement, read_state, write_state
from replicalab.stores import ConditionFailed, StoreError, Unavailable


@dataclass
class _Op:
    kind: str  # "inc" | "dec" | "merge" | "read"
    n: int = 0
    other: BoundedCounter | None = None
    fut: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop()
                                     .create_future())
    t_s: float = field(default_factory=lambda: asyncio.get_running_loop().time())


@dataclass
class BatchStats:
    """Group-commit counts of one DC's serialisers."""

    writes: int = 0
    ops: int = 0
    conflicts: int = 0


class KeyActor:
    """The serialiser of one counter in one DC."""

    def __init__(self, mw: ServerMiddleware, key: str) -> None:
        self.mw = mw
        self.key = key
        self.loaded = False
        self.state: BoundedCounter | None = None  # durable: what the store holds
        self.text: str | None = None
        self.inbox: list[_Op] = []
        self.current: list[_Op] = []  # the batch being written
        self.wake = asyncio.Event()
        self.full = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, op: _Op) -> asyncio.Future[Any]:
        """Queue ``op``; return the future that completes when it is durable (or failed)."""
        self.inbox.append(op)
        self.wake.set()
        if len(self.inbox) >= self.mw.batch_max:
            self.full.set()
        return op.fut

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            if self.mw.batch_ms > 0 and len(self.inbox) < self.mw.batch_max:
                # the latency cap runs from the oldest waiting operation's arrival
                left_s = (self.inbox[0].t_s + self.mw.batch_ms / 1000
                          - asyncio.get_running_loop().time())
                if left_s > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.full.wait(), left_s)
            size = self.mw.batch_max if self.mw.batch_ms > 0 else 1
            batch, self.inbox = self.inbox[:size], self.inbox[size:]
            if not self.inbox:
                self.wake.clear()
            if len(self.inbox) < self.mw.batch_max:
                self.full.clear()
            self.current = batch
            try:
                await self._commit(batch)
            except Exception as err:  # one bad batch must not kill the actor
                _fail(batch, err)
            self.current = []

    async def _load(self) -> None:
        async with self.mw.stores.session(self.mw.dc) as client:
            stored = await read_state(client, self.key, self.mw.dc)
        self.state, self.text, self.loaded = stored.state, stored.text, True

    async def _commit(self, batch: list[_Op]) -> None:
        mw = self.mw
        for _ in range(mw.opt.retries):
            if not self.loaded:
                await self._load()
            state, outcomes = self._apply(batch)
            if state == self.state:
                _resolve(batch, outcomes)
                return
            try:
                async with mw.stores.session(mw.dc) as client:
                    text = await write_state(client, self.key, state,  # type: ignore[arg-type]
                                             self.text)
            except ConditionFailed:
                mw.batch_stats.conflicts += 1
                self.loaded = False
                continue
            except StoreError as err:
                # the write may or may not have happened: nobody is acknowledged, and the
                # next batch starts from what the store really holds
                self.loaded = False
                _fail(batch, Unavailable(f"{mw.dc}: writing {self.key!r} failed with an "
                                         f"unknown outcome ({err}); it may have happened"))
                return
            self.state, self.text = state, text  # the cache follows the durable write
            mw.batch_stats.writes += 1
            mw.batch_stats.ops += len(batch)
            mw.syncer.touch(self.key)
            _resolve(batch, outcomes)
            return
        _fail(batch, Contended(f"{mw.dc}: {self.key!r} lost {mw.opt.retries} conditional "
                               "writes in a row (another writer on this DC's store)"))

    def _apply(self, batch: list[_Op]) -> tuple[BoundedCounter | None, list[Any]]:
        state = self.state
        outcomes: list[Any] = []
        for op in batch:
            if op.kind == "merge":
                assert op.other is not None
                try:
                    state = op.other if state is None else state.merge(op.other)
                    outcomes.append(None)
                except CounterError as err:
                    outcomes.append(err)
                continue
            if state is None:
                outcomes.append(self.mw.unknown(self.key))
                continue
            try:
                if op.kind == "dec":
                    state = state.dec(self.mw.dc, op.n)
                elif op.kind == "inc":
                    state = state.inc(self.mw.dc, op.n)
                outcomes.append(state.value())
            except CounterError as err:
                outcomes.append(err)
        return state, outcomes


def _resolve(batch: list[_Op], outcomes: list[Any]) -> None:
    for op, out in zip(batch, outcomes, strict=True):
        if op.fut.done():
            continue
        if isinstance(out, BaseException):
            op.fut.set_exception(out)
        else:
            op.fut.set_result(out)


def _fail(batch: list[_Op], err: BaseException) -> None:
    for op in batch:
        if not op.fut.done():
            op.fut.set_exception(err)


class ServerMiddleware(Middleware):
    """One DC's server-based middleware: a serialiser per counter, cache, group commit."""

    def __init__(self, placement: Placement, options: Options | None = None, *,
                 batch_ms: float = 2.0, batch_max: int = 256, **kw: Any) -> None:
        super().__init__(placement, options, **kw)
        if batch_ms < 0 or batch_max < 1:
            raise CounterError(f"batch_ms={batch_ms} must be >= 0 and batch_max={batch_max} "
                               ">= 1")
        self.batch_ms = batch_ms
        self.batch_max = batch_max
        self.name = "server-based+batch" if batch_ms > 0 else "server-based"
        self.actors: dict[str, KeyActor] = {}
        self.batch_stats = BatchStats()

    def actor(self, key: str) -> KeyActor:
        """Return the serialiser of ``key`` (started on first use)."""
        a = self.actors.get(key)
        if a is None:
            a = self.actors[key] = KeyActor(self, key)
        return a

    async def _apply(self, key: str, op: str, n: int) -> int:
        """Send ``op`` of ``n`` to the key's serialiser; return the value once durable."""
        result: int = await self.actor(key).submit(_Op(op, n))
        return result

    async def durable(self, key: str) -> BoundedCounter | None:
        """Return ``key`` as the serialiser last wrote or read it (else from the store)."""
        a = self.actors.get(key)
        if a is not None and a.loaded:
            return a.state
        async with self.stores.session(self.dc) as client:
            return (await read_state(client, key, self.dc)).state

    async def absorb(self, key: str, other: BoundedCounter) -> None:
        """Merge ``other`` through the key's serialiser (batched with its operations)."""
        await self.actor(key).submit(_Op("merge", other=other))

    async def _close_serialisers(self) -> None:
        for a in self.actors.values():
            a.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await a.task
            _fail(a.current, Unavailable(f"{self.dc}: middleware closed while writing the "
                                         "operation; it may have happened"))
            _fail(a.inbox, Unavailable(f"{self.dc}: middleware closed before the operation "
                                       "was written; it did not happen"))
        self.actors.clear()

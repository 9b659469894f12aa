"""Client-based middleware (seed 004 §IV-B): every operation reads the counter from this
DC's store, applies it to the CRDT and writes it back conditionally on what it read.

The store's conditional write serialises operations within the DC: of two clients racing
on one counter, one wins and the other re-reads and re-applies (up to ``retries`` times,
with jittered exponential back-off), then fails with ``Contended`` — the seed's finding
that this design does not scale under contention is this retry loop.
"""

from __future__ import annotations

import asyncio

from replicalab.counters.crdt import BoundedCounter
from replicalab.counters.middleware import Middleware
from replicalab.counters.service import Contended, read_state, write_state
from replicalab.stores import ConditionFailed

BACKOFF_BASE_S = 0.001
BACKOFF_CAP_S = 0.05


class ClientMiddleware(Middleware):
    """One DC's client-based middleware: read, apply, conditional write, retry."""

    name = "client-based"

    async def _backoff(self, attempt: int) -> None:
        # full jitter: racing clients spread out instead of colliding again in lock-step
        await asyncio.sleep(self.rng.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt)))

    async def _apply(self, key: str, op: str, n: int) -> int:
        """Apply ``op`` of ``n`` by read / apply / conditional write; return the value."""
        for attempt in range(self.opt.retries):
            async with self.stores.session(self.dc) as client:
                stored = await read_state(client, key, self.dc)
                if stored.state is None:
                    raise self.unknown(key)
                new = (stored.state.dec(self.dc, n) if op == "dec"
                       else stored.state.inc(self.dc, n))
                try:
                    await write_state(client, key, new, stored.text)
                except ConditionFailed:
                    new = None
            if new is None:
                await self._backoff(attempt)
                continue
            self.syncer.touch(key)
            return new.value()
        raise Contended(f"{op} on {key!r} in {self.dc} lost {self.opt.retries} conditional "
                        "writes in a row to concurrent clients; retry, or use the "
                        "server-based middleware under contention")

    async def durable(self, key: str) -> BoundedCounter | None:
        """Return ``key`` as stored in this DC's store."""
        async with self.stores.session(self.dc) as client:
            return (await read_state(client, key, self.dc)).state

    async def absorb(self, key: str, other: BoundedCounter) -> None:
        """Merge ``other`` into this DC's store by conditional read-merge-write."""
        for attempt in range(self.opt.retries):
            async with self.stores.session(self.dc) as client:
                stored = await read_state(client, key, self.dc)
                merged = other if stored.state is None else stored.state.merge(other)
                if stored.state is not None and merged == stored.state:
                    return
                try:
                    await write_state(client, key, merged, stored.text)
                    return
                except ConditionFailed:
                    pass
            await self._backoff(attempt)
        raise Contended(f"merging {key!r} into {self.dc} lost {self.opt.retries} races")


"""Counter state synchronised between data centres (seed 004 §IV-B, §IV-C).

Every ``sync_ms`` (and right after every transfer) a DC exchanges the counters it changed
with each peer: it reads the peer's state through the WAN link, merges it into its own
(through its middleware, so a server-based middleware's serialiser sees it), and writes
the merge of both into the peer's store conditionally on what it read. Every
``full_every`` rounds it exchanges every counter it knows, changed or not, so a DC also
learns what it never pushed; a counter that brought news from one peer is exchanged with
the others at the next round. Merge is the CRDT's pointwise max: lost, duplicated or
reordered exchanges are harmless.

Only *durable* local state is ever pushed: a peer must never learn of a transfer that a
crash could still undo here.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Protocol

from replicalab.counters.crdt import BoundedCounter, CounterError
from replicalab.counters.service import Placement, Stores, read_state, write_state
from replicalab.stores import ConditionFailed, StoreError

log = logging.getLogger(__name__)


class LocalReplica(Protocol):
    """What the synchroniser needs from one DC's middleware."""

    dc: str

    async def durable(self, key: str) -> BoundedCounter | None:
        """Return counter ``key`` as durably stored in this DC (None if absent)."""
        ...

    async def absorb(self, key: str, other: BoundedCounter) -> None:
        """Merge ``other`` into this DC's stored state of ``key``."""
        ...


@dataclass
class SyncStats:
    """Counts of the synchroniser's work since start."""

    rounds: int = 0
    pulled: int = 0
    pushed: int = 0
    errors: int = 0


@dataclass
class Syncer:
    """Periodic, push-pull anti-entropy of one DC's counters with every peer."""

    replica: LocalReplica
    placement: Placement
    stores: Stores
    sync_ms: float = 200.0
    full_every: int = 10
    retries: int = 4
    seed: int = 0
    known: set[str] = field(default_factory=set)
    dirty: set[str] = field(default_factory=set)
    stats: SyncStats = field(default_factory=SyncStats)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def touch(self, key: str) -> None:
        """Note that ``key`` changed here: it is pushed at the next round."""
        self.known.add(key)
        self.dirty.add(key)

    async def run(self) -> None:
        """Exchange changed counters every ``sync_ms`` until cancelled."""
        while True:
            await asyncio.sleep(self.sync_ms / 1000)
            await self.round()

    async def round(self) -> None:
        """Exchange this round's counters with every peer (errors counted, not raised)."""
        self.stats.rounds += 1
        full = self.full_every > 0 and self.stats.rounds % self.full_every == 0
        keys = sorted(self.known if full else self.dirty)
        self.dirty.difference_update(keys)
        failed = await asyncio.gather(*(self.sync_key(k) for k in keys))
        # a key whose exchange failed with some peer is tried again next round
        self.dirty.update(k for k, ok in zip(keys, failed, strict=True) if not ok)

    async def sync_key(self, key: str) -> bool:
        """Exchange ``key`` with every peer; return True when every exchange succeeded."""
        self.known.add(key)
        oks = await asyncio.gather(*(self.exchange(key, p) for p in self.placement.peers))
        return all(oks)

    async def exchange(self, key: str, peer: str) -> bool:
        """Pull ``key`` from ``peer`` and push the merge back; return True on success."""
        try:
            for attempt in range(self.retries):
                local = await self.replica.durable(key)
                async with self.stores.session(peer) as client:
                    remote = await read_state(client, key, peer)
                if remote.state is not None and (local is None or not remote.state.leq(local)):
                    await self.replica.absorb(key, remote.state)
                    self.stats.pulled += 1
                    # what this DC just learnt goes on to the other peers next round, so
                    # news spreads epidemically instead of waiting for a full round
                    self.dirty.add(key)
                    local = await self.replica.durable(key)
                if local is None or (remote.state is not None and local.leq(remote.state)):
                    return True
                merged = local if remote.state is None else remote.state.merge(local)
                try:
                    async with self.stores.session(peer) as client:
                        await write_state(client, key, merged, remote.text)
                except ConditionFailed:
                    await asyncio.sleep(self._rng.uniform(0, 0.002 * 2 ** attempt))
                    continue
                self.stats.pushed += 1
                return True
            return False
        except (StoreError, CounterError) as err:
            # an unreachable peer or a malformed state there: leave both stores as they
            # are and try again next round
            self.stats.errors += 1
            log.debug("sync of %s with %s failed: %s", key, peer, err)
            return False

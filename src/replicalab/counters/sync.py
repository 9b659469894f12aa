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

Each peer has its own loop and its own set of changed counters: an unreachable or
partitioned peer (whose calls wait for their timeout) does not hold up the exchanges with the
others.
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

    rounds: int = 0  # rounds with one peer
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
    pending: dict[str, set[str]] = field(default_factory=dict)  # per peer: changed counters
    stats: SyncStats = field(default_factory=SyncStats)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._rounds = dict.fromkeys(self.placement.peers, 0)
        for p in self.placement.peers:
            self.pending.setdefault(p, set())

    @property
    def dirty(self) -> set[str]:
        """Return the counters some peer has yet to be sent (a copy)."""
        return set().union(*self.pending.values())

    def touch(self, key: str) -> None:
        """Note that ``key`` changed here: it is pushed to every peer at its next round."""
        self.known.add(key)
        for keys in self.pending.values():
            keys.add(key)

    async def run(self) -> None:
        """Exchange changed counters with each peer every ``sync_ms`` until cancelled."""
        await asyncio.gather(*(self._peer_loop(p) for p in self.placement.peers))

    async def _peer_loop(self, peer: str) -> None:
        while True:
            await asyncio.sleep(self.sync_ms / 1000)
            await self.round_with(peer)

    async def round(self) -> None:
        """Run one round with every peer at once (errors counted, not raised)."""
        await asyncio.gather(*(self.round_with(p) for p in self.placement.peers))

    async def round_with(self, peer: str) -> None:
        """Exchange this round's counters with ``peer``: the changed ones, every known one
        each ``full_every`` rounds (errors counted, not raised)."""
        self._rounds[peer] += 1
        self.stats.rounds += 1
        full = self.full_every > 0 and self._rounds[peer] % self.full_every == 0
        keys = sorted(self.known if full else self.pending[peer])
        self.pending[peer].difference_update(keys)
        oks = await asyncio.gather(*(self.exchange(k, peer) for k in keys))
        # a key whose exchange failed is tried again next round
        self.pending[peer].update(k for k, ok in zip(keys, oks, strict=True) if not ok)

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
                    for other, keys in self.pending.items():
                        if other != peer:
                            keys.add(key)
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

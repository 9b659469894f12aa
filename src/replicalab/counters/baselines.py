"""The two baselines of seed 004 §V-A, behind the CounterService interface.

* **Weak** — each data centre keeps its own PN-counter in its own store and replicates its
  part to the others asynchronously. A decrement reads the value, checks it against the bound
  and then decrements: the check and the update are not one atomic step and other DCs'
  decrements arrive late, so concurrent clients oversell (the seed's Riak native counters).
* **Strong** — one store in the home DC (US-E in the seed) holds the value; every client, local
  or remote, reads it and writes it back with a conditional write, so remote clients pay the
  round trip and concurrent writers fail (the seed's Riak strong consistency, no retries).

Store layout (one item per counter, so each multi-element write is atomic in every adapter):

* ``counters/<key>/weak-init`` = ``"<initial>,<lower>"``, in every DC's store;
* ``counters/<key>/weak-<dc>-<shard>`` = ``"<incremented>,<decremented>"``: DC ``dc``'s part of
  the PN-counter, split over shards so that concurrent updates in one DC rarely collide (Riak's
  counters have one entry per virtual node for the same reason; each client session keeps to
  its own shard, so only sessions sharing a shard ever retry). Only ``dc`` updates
  its shards in its own store; the replicator copies them to the other DCs, merging by
  per-shard maximum, which is the PN-counter's merge;
* ``counters/<key>/strong`` = ``"<value>,<lower>"``, in the home DC's store only.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from replicalab.counters.crdt import BoundViolation, CounterError, InsufficientRights
from replicalab.counters.service import Contended, CounterExists, UnknownCounter
from replicalab.stores import ABSENT, Client, ConditionFailed, Store, StoreError, Unavailable

DOMAIN = "counters"
WEAK_SHARDS = 16
SYNC_PERIOD_MS = 100.0
"""How often a DC pushes the counters it changed to the other DCs (ms)."""
CAS_RETRIES = 200
"""Bound on compare-and-set retries of one local PN update (each is one local round trip)."""


class Topology(Protocol):
    """What the baselines need of :class:`replicalab.cluster.datacentres.DataCentres`."""

    dcs: tuple[str, ...]

    def store(self, dc: str, from_dc: str | None = None) -> Store: ...


def check_key(key: str) -> str:
    """Return ``key`` if it can name a counter (CounterError naming the fix otherwise)."""
    if not isinstance(key, str) or not key or "/" in key or key != key.strip():
        raise CounterError(f"counter name {key!r} must be non-empty, without '/' or "
                           "surrounding spaces; e.g. stock-42")
    return key


def _check_bounds(initial: int, lower: int | None, upper: int | None) -> int:
    """Return ``lower`` once the baselines can keep these bounds (CounterError: they keep
    a lower bound only; BoundViolation: ``initial < lower``)."""
    if upper is not None or lower is None:
        raise CounterError("the weak and strong baselines keep a lower bound only; use the "
                           "client- or server-based middleware for an upper bound")
    if initial < lower:
        raise BoundViolation(f"initial value {initial} is below the lower bound {lower}")
    return lower


def _amount(n: int, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise CounterError(f"{what} amount {n!r} must be a positive integer")
    return n


def _pair(text: str | None, where: str) -> tuple[int, int]:
    """Return the two ints of ``"a,b"`` (CounterError naming ``where`` if malformed)."""
    try:
        a, b = str(text).split(",")
        return int(a), int(b)
    except ValueError:
        raise CounterError(f"malformed counter state {text!r} at {where}: it was not "
                           "written by replicalab; delete it or use another counter name"
                           ) from None


async def _connect(topo: Topology, dc: str, from_dc: str | None) -> tuple[Store, Client]:
    """Return ``dc``'s store as reached from ``from_dc`` and a session of it."""
    store = topo.store(dc, from_dc=from_dc)
    try:
        return store, await store.connect()
    except ValueError as err:  # the adapters' "cannot reach": an unreachable DC
        await store.close()
        raise Unavailable(f"cannot reach the store of data centre {dc}: {err}") from None


# --------------------------------------------------------------------------- Weak


def weak_elements(key: str, dcs: Sequence[str], shards: int) -> list[str]:
    """Return the element names of a weak counter: init first, then each DC's shards."""
    return [f"{DOMAIN}/{key}/weak-init"] + [f"{DOMAIN}/{key}/weak-{dc}-{s}"
                                            for dc in dcs for s in range(shards)]


def weak_value(texts: Sequence[str | None], where: str) -> tuple[int, int]:
    """Return (value, lower) of a weak counter from its elements read in
    :func:`weak_elements` order (UnknownCounter when it was never created)."""
    if texts[0] is None:
        raise UnknownCounter(f"no counter {where!r}: create it first "
                             "(`replicalab counter create`)")
    initial, lower = _pair(texts[0], where)
    total = initial
    for t in texts[1:]:
        if t is not None:
            p, n = _pair(t, where)
            total += p - n
    return total, lower


@dataclass
class WeakReplicator:
    """One DC's anti-entropy: pushes this DC's PN parts of changed counters to the others
    every ``sync_period_ms`` through the inter-DC links (which carry the dc3 delays)."""

    dc: str
    dcs: tuple[str, ...]
    local: Client
    peers: dict[str, Client]
    shards: int = WEAK_SHARDS
    sync_period_ms: float = SYNC_PERIOD_MS
    dirty: set[str] = field(default_factory=set)
    pushes: int = 0
    errors: int = 0
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the background loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.sync_period_ms / 1000)
            await self.flush()

    async def flush(self) -> None:
        """Push every changed counter now; a peer that fails keeps it dirty for next time."""
        keys, self.dirty = sorted(self.dirty), set()
        if not keys:
            return
        results = await asyncio.gather(*(self._push(k) for k in keys), return_exceptions=True)
        for k, r in zip(keys, results, strict=True):
            if isinstance(r, BaseException):
                self.errors += 1
                self.dirty.add(k)

    async def _push(self, key: str) -> None:
        mine = [f"{DOMAIN}/{key}/weak-{self.dc}-{s}" for s in range(self.shards)]
        texts = (await self.local.read(mine, consistent=True)).values
        await asyncio.gather(*(self._merge_into(peer, mine, texts)
                               for peer in self.peers.values()))
        self.pushes += 1

    async def _merge_into(self, peer: Client, names: list[str],
                          texts: Sequence[str | None]) -> None:
        for _ in range(CAS_RETRIES):
            have = (await peer.read(names, consistent=True)).values
            new = {}
            for name, ours, theirs in zip(names, texts, have, strict=True):
                if ours is None:
                    continue
                op, on = _pair(ours, name)
                tp, tn = _pair(theirs, name) if theirs is not None else (0, 0)
                merged = (max(op, tp), max(on, tn))
                if theirs is None or merged != (tp, tn):
                    new[name] = f"{merged[0]},{merged[1]}"
            if not new:
                return
            expect = {n: (have[names.index(n)] if have[names.index(n)] is not None
                          else ABSENT) for n in new}
            try:
                await peer.write(new, expect=expect)
                return
            except ConditionFailed:
                continue
        raise StoreError(f"could not merge {names[0]} into a peer after {CAS_RETRIES} tries")

    async def close(self) -> None:
        """Stop the loop after one last push."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(StoreError):
            await self.flush()


@dataclass
class Weak:
    """A client's view of weakly consistent counters in data centre ``dc``."""

    dc: str
    dcs: tuple[str, ...]
    local: Client
    replicator: WeakReplicator
    lane: int
    shards: int = WEAK_SHARDS
    owned: list[Any] = field(default_factory=list)  # stores this view closes
    name: str = "weak"

    def _shard(self, key: str) -> str:
        return f"{DOMAIN}/{key}/weak-{self.dc}-{self.lane % self.shards}"

    async def _read(self, key: str) -> tuple[int, int, str | None]:
        """Return (value, lower, text of this session's shard) from one multi-read."""
        names = weak_elements(key, self.dcs, self.shards)
        texts = (await self.local.read(names, consistent=True)).values
        value, lower = weak_value(texts, key)
        return value, lower, texts[names.index(self._shard(key))]

    async def create(self, key: str, initial: int, lower: int | None = 0,
                     upper: int | None = None) -> None:
        """Create ``key`` with value ``initial`` in every DC's store (BoundViolation if
        ``initial < lower``; CounterError if it exists or an upper bound is asked for)."""
        check_key(key)
        lower = _check_bounds(initial, lower, upper)
        stores = [self.local, *self.replicator.peers.values()]
        text = f"{initial},{lower}"
        name = f"{DOMAIN}/{key}/weak-init"
        results = await asyncio.gather(*(c.write({name: text}, expect={name: ABSENT})
                                         for c in stores), return_exceptions=True)
        for r in results:
            if isinstance(r, ConditionFailed):
                raise CounterExists(f"counter {key!r} already exists; pick another name")
            if isinstance(r, BaseException):
                raise r

    async def _add(self, key: str, dp: int, dn: int, old: str | None) -> None:
        """Add (dp, dn) to this session's shard by compare-and-set from ``old`` (its text in
        the read that checked the bound): the store has no atomic add, and a lost update
        would hide decrements instead of exposing them."""
        shard = self._shard(key)
        for attempt in range(CAS_RETRIES):
            if attempt:
                (old,) = (await self.local.read([shard], consistent=True)).values
            p, n = _pair(old, shard) if old is not None else (0, 0)
            try:
                await self.local.write({shard: f"{p + dp},{n + dn}"},
                                       expect={shard: ABSENT if old is None else old})
            except ConditionFailed:
                continue
            self.replicator.dirty.add(key)
            return
        raise StoreError(f"{shard}: compare-and-set lost {CAS_RETRIES} times in a row")

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value this DC believed after subtracting ``n``: read, check, then
        decrement (not atomic; ``allow_global`` changes nothing here)."""
        _amount(n, "decrement")
        value, lower, old = await self._read(check_key(key))
        if value - n < lower:
            raise InsufficientRights(f"counter {key!r} is exhausted in {self.dc} (value "
                                     f"{value}, lower bound {lower})", max(0, value - lower), n)
        await self._add(key, 0, n, old)
        return value - n

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value this DC believed after adding ``n`` (no upper bound here, so
        ``allow_global`` changes nothing)."""
        _amount(n, "increment")
        value, _, old = await self._read(check_key(key))
        await self._add(key, n, 0, old)
        return value + n

    async def value(self, key: str) -> int:
        """Return the value as this DC's store knows it now."""
        return (await self._read(check_key(key)))[0]

    async def close(self) -> None:
        """Close the stores this view opened (the replicator belongs to its deployment)."""
        for s in self.owned:
            await s.close()


# --------------------------------------------------------------------------- Strong


def strong_element(key: str) -> str:
    """Return the element that holds a strong counter."""
    return f"{DOMAIN}/{key}/strong"


@dataclass
class Strong:
    """A client in ``dc`` of counters held by one store in ``home`` (conditional writes)."""

    dc: str
    home: str
    client: Client
    retries: int = 0
    owned: list[Any] = field(default_factory=list)
    name: str = "strong"

    async def _read(self, key: str) -> tuple[str, int, int]:
        el = strong_element(check_key(key))
        (text,) = (await self.client.read([el], consistent=True)).values
        if text is None:
            raise UnknownCounter(f"no counter {key!r} in {self.home}: create it first "
                                 "(`replicalab counter create`)")
        v, lower = _pair(text, el)
        return text, v, lower

    async def create(self, key: str, initial: int, lower: int | None = 0,
                     upper: int | None = None) -> None:
        """Create ``key`` at the home store (BoundViolation / CounterError if it exists or
        an upper bound is asked for)."""
        lower = _check_bounds(initial, lower, upper)
        el = strong_element(check_key(key))
        try:
            await self.client.write({el: f"{initial},{lower}"}, expect={el: ABSENT})
        except ConditionFailed:
            raise CounterExists(f"counter {key!r} already exists; pick another name") from None

    async def _update(self, key: str, delta: int, n: int) -> int:
        for attempt in range(self.retries + 1):
            text, v, lower = await self._read(key)
            if v + delta < lower:
                raise InsufficientRights(f"counter {key!r} is exhausted (value {v}, lower "
                                         f"bound {lower})", max(0, v - lower), n)
            try:
                await self.client.write({strong_element(key): f"{v + delta},{lower}"},
                                        expect={strong_element(key): text})
                return v + delta
            except ConditionFailed:
                if attempt == self.retries:
                    raise Contended(f"counter {key!r} changed concurrently at {self.home}; "
                                    "retry the operation") from None
        raise AssertionError("unreachable")

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value after subtracting ``n`` at the home store (Contended when a
        concurrent writer won and retries are used up)."""
        return await self._update(key, -_amount(n, "decrement"), n)

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value after adding ``n`` at the home store (``allow_global`` changes
        nothing: every operation is global)."""
        return await self._update(key, _amount(n, "increment"), n)

    async def value(self, key: str) -> int:
        """Return the value at the home store."""
        return (await self._read(key))[1]

    async def close(self) -> None:
        """Close the store this client opened."""
        for s in self.owned:
            await s.close()


# --------------------------------------------------------------------------- deployments


@dataclass
class WeakDeployment:
    """Weak counters on a topology: one replicator per DC, one store session per client."""

    topo: Topology
    seed: int = 1
    shards: int = WEAK_SHARDS
    sync_period_ms: float = SYNC_PERIOD_MS
    name: str = "weak"
    replicators: dict[str, WeakReplicator] = field(default_factory=dict)
    _stores: list[Store] = field(default_factory=list)
    _n: int = 0

    async def open(self) -> WeakDeployment:
        """Connect each DC's replicator to its store and to its peers; start them."""
        dcs = tuple(self.topo.dcs)
        for dc in dcs:
            s, local = await _connect(self.topo, dc, None)
            self._stores.append(s)
            peers = {}
            for other in dcs:
                if other != dc:
                    ps, peers[other] = await _connect(self.topo, other, dc)
                    self._stores.append(ps)
            rep = WeakReplicator(dc, dcs, local, peers, self.shards, self.sync_period_ms)
            rep.start()
            self.replicators[dc] = rep
        return self

    async def service(self, dc: str) -> Weak:
        """Return a new client session in ``dc``."""
        if dc not in self.replicators:
            raise ValueError(f"unknown data centre {dc!r}; use one of "
                             f"{', '.join(self.replicators)}")
        self._n += 1
        s, local = await _connect(self.topo, dc, None)
        lane = random.Random(self.seed).randrange(self.shards) + self._n
        return Weak(dc, tuple(self.topo.dcs), local, self.replicators[dc], lane, self.shards,
                    [s])

    async def close(self) -> None:
        """Stop the replicators (after a last push) and close their stores."""
        for rep in self.replicators.values():
            await rep.close()
        for s in self._stores:
            await s.close()
        self._stores.clear()


@dataclass
class StrongDeployment:
    """Strong counters: every client connects to the home DC's store over its link."""

    topo: Topology
    home: str = "US-E"
    retries: int = 0
    seed: int = 1
    name: str = "strong"
    _n: int = 0

    async def open(self) -> StrongDeployment:
        """Check the home DC exists in the topology."""
        if self.home not in self.topo.dcs:
            raise ValueError(f"home data centre {self.home!r} is not one of "
                             f"{', '.join(self.topo.dcs)}")
        return self

    async def service(self, dc: str) -> Strong:
        """Return a new client in ``dc`` connected to the home store."""
        if dc not in self.topo.dcs:
            raise ValueError(f"unknown data centre {dc!r}; use one of {', '.join(self.topo.dcs)}")
        self._n += 1
        s, client = await _connect(self.topo, self.home, dc)
        return Strong(dc, self.home, client, self.retries, [s])

    async def close(self) -> None:
        """Nothing shared to release: each client closes its own store."""


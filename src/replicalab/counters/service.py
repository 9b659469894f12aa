"""The counter-service contract shared by the middlewares and the baselines, and the one
way counter state touches a store.

A counter ``<key>`` lives in each data centre's own store as the element
``counters/<key>/state`` holding :meth:`BoundedCounter.to_text`. Every write of that
element is conditional on the text read before it (``ABSENT`` for a new counter), so two
writers racing on one store never lose each other's update: the loser gets
``ConditionFailed`` and starts again from what is there now.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from replicalab.counters.crdt import BoundedCounter, CounterError, MalformedState
from replicalab.stores import ABSENT, Client, Store, Unavailable, open_store
from replicalab.stores.base import redact_url


class CounterService(Protocol):
    """One data centre's view of the counters: what a client in ``dc`` calls."""

    dc: str
    name: str  # "weak", "strong", "client-based", "server-based", "server-based+batch"

    async def create(self, key: str, initial: int, lower: int | None = 0,
                     upper: int | None = None) -> None:
        """Create counter ``key`` with value ``initial`` and invariant
        ``lower <= value <= upper`` (a None bound is no bound)."""
        ...

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value this DC saw after subtracting ``n``; InsufficientRights (with a
        hint) when it cannot without risking the invariant."""
        ...

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value this DC saw after adding ``n``; InsufficientRights (with a
        hint) at an upper bound it cannot pass without risking the invariant."""
        ...

    async def value(self, key: str) -> int:
        """Return the value as this DC knows it."""
        ...

    async def close(self) -> None:
        """Stop background work and release connections."""
        ...


class UnknownCounter(CounterError):
    """No counter of that name exists in this data centre's store."""


class CounterExists(CounterError):
    """``create`` found a counter of that name already in the store."""


class Contended(CounterError):
    """Every conditional write of an operation lost a race: it did not happen."""


def state_key(key: str) -> str:
    """Return the store element holding counter ``key``'s state (CounterError if the name
    cannot be one item of an element)."""
    if not isinstance(key, str) or not key or "/" in key:
        raise CounterError(f"counter name {key!r} must be a non-empty string without '/'")
    return f"counters/{key}/state"


@dataclass(frozen=True)
class Stored:
    """A counter state as read from one store: the parsed state and the exact text (the
    condition of the next write), both None when the element is absent."""

    state: BoundedCounter | None
    text: str | None


async def read_state(client: Client, key: str, where: str = "") -> Stored:
    """Return counter ``key`` as stored behind ``client`` (consistent read).

    Raises MalformedState naming the element and the store when the text is not a Bounded
    Counter; the store is left as it is.
    """
    element = state_key(key)
    got = await client.read([element], consistent=True)
    text = got.values[0]
    if text is None:
        return Stored(None, None)
    try:
        return Stored(BoundedCounter.from_text(text), text)
    except MalformedState as err:
        raise MalformedState(f"{element} in {where or 'the store'}: {err}; repair or delete "
                             "that element (replicalab never overwrites it)") from None


async def write_state(client: Client, key: str, new: BoundedCounter,
                      expect_text: str | None) -> str:
    """Write ``new`` as counter ``key`` only if the store still holds ``expect_text``
    (None = must be absent); return the text written. ConditionFailed otherwise."""
    text = new.to_text()
    element = state_key(key)
    await client.write({element: text},
                       expect={element: ABSENT if expect_text is None else expect_text})
    return text


@dataclass(frozen=True)
class Placement:
    """Where one data centre's middleware finds the stores.

    ``dcs`` are all data centres (the counter's replicas, in this order); ``store_of(d)``
    returns an opened Store of ``d``'s own store as reached from ``dc`` (direct for ``dc``
    itself, through a WAN link for the others); ``names[d]`` says what it is in messages.
    """

    dc: str
    dcs: tuple[str, ...]
    store_of: Callable[[str], Store]
    names: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.dc not in self.dcs:
            raise CounterError(f"data centre {self.dc!r} is not one of {list(self.dcs)}")

    @property
    def peers(self) -> tuple[str, ...]:
        """Return the other data centres, in order."""
        return tuple(d for d in self.dcs if d != self.dc)

    @classmethod
    def from_urls(cls, dc: str, dcs: Sequence[str], urls: Mapping[str, str],
                  opener: Callable[[str], Store] = open_store) -> Placement:
        """Return the placement of ``dc`` given each DC's store URL as reached from ``dc``."""
        missing = [d for d in dcs if d not in urls]
        if missing:
            raise CounterError(f"no store URL for data centre(s) {missing}; give one per DC")
        return cls(dc, tuple(dcs), lambda d: opener(urls[d]),
                   {d: redact_url(u) for d, u in urls.items()})

    @classmethod
    def from_topology(cls, topo: Any, dc: str) -> Placement:
        """Return the placement of ``dc`` in a ``cluster.datacentres.DataCentres``."""
        return cls(dc, tuple(topo.dcs), lambda d: topo.store(d, from_dc=dc))


@dataclass
class Stores:
    """Client sessions of each data centre's store, lent out one caller at a time.

    A session is never used by two operations at once (a PostgreSQL session is one
    connection: concurrent transactions on it would interleave). Up to ``pool`` sessions
    per DC are opened on demand; further callers wait for one to come back. Connection
    failures surface as :class:`Unavailable` naming the data centre.
    """

    placement: Placement
    pool: int = 8
    _stores: dict[str, Store] = field(default_factory=dict)
    _all: dict[str, list[Client]] = field(default_factory=dict)
    _idle: dict[str, asyncio.Queue[Client]] = field(default_factory=dict)
    # one per DC: opening a session to an unreachable DC waits for its timeout, and must not
    # hold up the sessions of the others
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def session(self, dc: str) -> AsyncIterator[Client]:
        """Lend a connected session of ``dc``'s store for the duration of the block."""
        idle = self._idle.setdefault(dc, asyncio.Queue())
        opened = self._all.setdefault(dc, [])
        if idle.empty() and len(opened) < self.pool:
            async with self._locks.setdefault(dc, asyncio.Lock()):
                if idle.empty() and len(opened) < self.pool:
                    opened.append(await self._connect(dc))
                    idle.put_nowait(opened[-1])
        client = await idle.get()
        try:
            yield client
        finally:
            idle.put_nowait(client)

    async def _connect(self, dc: str) -> Client:
        try:
            store = self._stores.get(dc)
            if store is None:
                store = self._stores[dc] = self.placement.store_of(dc)
            return await store.connect()
        except Unavailable:
            raise
        except (ValueError, OSError) as err:
            where = self.placement.names.get(dc, "")
            raise Unavailable(f"cannot reach {dc}'s store {where}: {err}".replace("  ", " ")
                              ) from None

    async def close(self) -> None:
        """Close every session and store opened here."""
        for sessions in self._all.values():
            for c in sessions:
                with contextlib.suppress(Exception):
                    await c.close()
        for store in self._stores.values():
            with contextlib.suppress(Exception):
                await store.close()
        self._all.clear()
        self._idle.clear()
        self._stores.clear()

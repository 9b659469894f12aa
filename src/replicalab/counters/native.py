"""The Weak baseline on Cassandra: its native counter columns, as seed 004 used Riak's.

A Cassandra counter is a CRDT (per-replica shards merged by the store): increments and
decrements from every data centre are never lost, but nothing keeps a bound. A decrement
reads the value in its own data centre, checks it against the bound and then decrements:
check and update are not one step, and other DCs' decrements arrive one WAN delay late, so
concurrent clients oversell, as with Riak's counters in the paper.

Tables (keyspace ``bc_native``, replicated to every DC; sessions pinned to the client's DC
node, LOCAL_ONE): ``native_bounds (key PRIMARY KEY, initial, lower)`` written once by an
``IF NOT EXISTS`` lightweight transaction, and ``native_counters (key PRIMARY KEY, delta
counter)``; the value is ``initial + delta``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replicalab.counters.baselines import Topology, _amount, _check_bounds, check_key
from replicalab.counters.crdt import InsufficientRights
from replicalab.counters.service import CounterExists, UnknownCounter
from replicalab.stores import Store, Unavailable

LEVEL = "LOCAL_ONE"
SCHEMA_TIMEOUT_S = 60.0
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {ks}.native_bounds (key text PRIMARY KEY, initial bigint, "
    "lower bigint)",
    "CREATE TABLE IF NOT EXISTS {ks}.native_counters (key text PRIMARY KEY, delta counter)",
)


async def ensure_schema(client: Any, keyspace: str) -> None:
    """Create the native-counter tables in ``keyspace`` unless they exist (a schema change
    waits for every data centre to agree: minutes are allowed, not the URL's timeout)."""
    for ddl in _SCHEMA:
        await client.cql(ddl.format(ks=keyspace), (), "ONE", timeout_s=SCHEMA_TIMEOUT_S)


@dataclass
class NativeWeak:
    """A client in data centre ``dc`` of Cassandra's native counters."""

    dc: str
    client: Any  # stores.cassandra.CassandraClient pinned to dc's node
    ks: str
    bounds: dict[str, tuple[int, int]] = field(default_factory=dict)
    name: str = "weak"

    async def _bounds(self, key: str) -> tuple[int, int]:
        if key not in self.bounds:
            rows = await self.client.cql(f"SELECT initial, lower FROM {self.ks}.native_bounds "
                                         "WHERE key = ?", (key,), LEVEL)
            if not rows:
                raise UnknownCounter(f"no counter {key!r} in {self.dc}: create it first "
                                     "(`replicalab counter create`)")
            self.bounds[key] = (int(rows[0][0]), int(rows[0][1]))
        return self.bounds[key]

    async def _value(self, key: str) -> tuple[int, int]:
        initial, lower = await self._bounds(check_key(key))
        rows = await self.client.cql(f"SELECT delta FROM {self.ks}.native_counters WHERE "
                                     "key = ?", (key,), LEVEL)
        delta = int(rows[0][0]) if rows and rows[0][0] is not None else 0
        return initial + delta, lower

    async def _add(self, key: str, delta: int) -> None:
        await self.client.cql(f"UPDATE {self.ks}.native_counters SET delta = delta + ? "
                              "WHERE key = ?", (delta, key), LEVEL)

    async def create(self, key: str, initial: int, lower: int | None = 0,
                     upper: int | None = None) -> None:
        """Create ``key`` (its bounds, once for all DCs; CounterExists if it exists)."""
        lower = _check_bounds(initial, lower, upper)
        rows = await self.client.cql(f"INSERT INTO {self.ks}.native_bounds (key, initial, "
                                     "lower) VALUES (?, ?, ?) IF NOT EXISTS",
                                     (check_key(key), initial, lower), "QUORUM", "SERIAL")
        if not rows or not rows[0][0]:
            raise CounterExists(f"counter {key!r} already exists; pick another name")

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value this DC believed after subtracting ``n``: read, check, then
        decrement the native counter (not atomic: this is what oversells)."""
        _amount(n, "decrement")
        value, lower = await self._value(key)
        if value - n < lower:
            raise InsufficientRights(f"counter {key!r} is exhausted in {self.dc} (value "
                                     f"{value}, lower bound {lower})", max(0, value - lower), n)
        await self._add(key, -n)
        return value - n

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value this DC believed after adding ``n``."""
        _amount(n, "increment")
        value, _ = await self._value(key)
        await self._add(key, n)
        return value + n

    async def value(self, key: str) -> int:
        """Return the value as this DC's replica knows it now."""
        return (await self._value(key))[0]

    async def close(self) -> None:
        """The session belongs to the deployment."""


@dataclass
class NativeWeakDeployment:
    """Native counters on a Cassandra topology (``cluster.datacentres`` of kind cassandra):
    one store per DC, pinned to that DC's node, shared by the DC's clients."""

    topo: Topology
    keyspace: str = "bc_native"
    name: str = "weak"
    _stores: dict[str, Store] = field(default_factory=dict)
    _clients: dict[str, Any] = field(default_factory=dict)

    async def open(self) -> NativeWeakDeployment:
        """Connect to every DC's node; create the tables unless they exist."""
        for dc in self.topo.dcs:
            store = self.topo.native_store(dc)  # type: ignore[attr-defined]
            self._stores[dc] = store
            try:
                self._clients[dc] = await store.connect()
            except ValueError as err:
                raise Unavailable(f"cannot reach data centre {dc}'s node: {err}") from None
        await ensure_schema(self._clients[self.topo.dcs[0]], self.keyspace)
        return self

    async def service(self, dc: str) -> NativeWeak:
        """Return a client in ``dc``."""
        if dc not in self._clients:
            raise ValueError(f"unknown data centre {dc!r}; use one of "
                             f"{', '.join(self._clients)}")
        return NativeWeak(dc, self._clients[dc], self.keyspace)

    async def close(self) -> None:
        """Close every DC's store."""
        for s in self._stores.values():
            await s.close()
        self._stores.clear()
        self._clients.clear()

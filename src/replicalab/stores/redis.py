"""``redis://`` — Redis primary + replicas (redis-py asyncio), in real time.

URL: ``redis://127.0.0.1:P?replicas=127.0.0.1:P1,127.0.0.1:P2&node_regions=US-E,US-W,EU
&regions=dc3&read=nearest|random&wait=0&wait_ms=100&timeout_ms=2000`` (what
``replicalab cluster up redis`` prints). Each element ``domain/item/attribute`` is one Redis
string key of that name. A consistent read asks the primary; an eventual read asks one
replica: ``nearest`` = a replica in the client's region (else the first), ``random`` =
chosen at random per client. Multi-element reads are one ``MGET`` (one node, one instant);
multi-element writes one ``MSET`` (atomic); conditional writes one Lua script at the primary
that compares and sets atomically. ``wait=n`` adds ``WAIT n wait_ms`` after every write.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from replicalab.regions import region_set
from replicalab.runtime import RealRuntime
from replicalab.stores.base import (
    ABSENT,
    ConditionFailed,
    Feature,
    ReadResult,
    StoreError,
    StoreInfo,
    Unavailable,
    WriteResult,
)

_PARAMS = ("replicas", "regions", "node_regions", "read", "wait", "wait_ms", "timeout_ms")

# Compare every expected value, then set all: atomic because Redis runs a script alone.
# KEYS = expected keys then keys to set; ARGV = count of expected, expected values, new values.
_CAS = """
local ne = tonumber(ARGV[1])
for i = 1, ne do
  local have = redis.call('GET', KEYS[i])
  local want = ARGV[i + 1]
  if want == '\\0absent' then
    if have then return 0 end
  elseif have ~= want then return 0 end
end
for i = ne + 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 1]) end
return 1
"""
_ABSENT_MARK = "\0absent"


def _hostport(text: str, url: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ValueError(f"{text!r} in {url!r} is not HOST:PORT") from None


@dataclass(frozen=True)
class _Node:
    name: str
    host: str
    port: int
    region: str


class RedisStore:
    """An opened Redis deployment (primary plus replicas)."""

    def __init__(self, url: str, seed: int) -> None:
        parts = urlsplit(url)
        q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        for k in q:
            if k not in _PARAMS:
                raise ValueError(f"unknown parameter {k!r} for redis://; valid: "
                                 f"{', '.join(_PARAMS)}")
        if not parts.port:
            raise ValueError(f"{url!r} needs a port: redis://127.0.0.1:6379")
        addrs = [(parts.hostname or "127.0.0.1", parts.port)]
        addrs += [_hostport(x, url) for x in q.get("replicas", "").split(",") if x]
        node_regions = [x for x in q.get("node_regions", "").split(",") if x]
        if node_regions and len(node_regions) != len(addrs):
            raise ValueError(f"node_regions lists {len(node_regions)} regions for "
                             f"{len(addrs)} nodes in {url!r}; give one per node")
        self.regions = region_set(q.get("regions", "lan")) if node_regions else None
        regions = node_regions or ["local"] * len(addrs)
        self.nodes = [_Node(f"n{i}", h, p, regions[i]) for i, (h, p) in enumerate(addrs)]
        self.read_policy = q.get("read", "nearest")
        if self.read_policy not in ("nearest", "random"):
            raise ValueError(f"parameter read={self.read_policy!r} for redis:// must be "
                             "nearest or random")
        try:
            self.wait = int(q.get("wait", "0"))
            self.wait_ms = int(q.get("wait_ms", "100"))
            self.timeout_s = float(q.get("timeout_ms", "2000")) / 1000
        except ValueError:
            raise ValueError("parameters wait, wait_ms and timeout_ms of redis:// must be "
                             "numbers") from None
        if self.wait < 0 or self.wait_ms < 0 or not self.timeout_s > 0:
            raise ValueError("redis:// wait and wait_ms must not be negative, timeout_ms "
                             "must be positive")
        self.rng = random.Random(seed)
        self.runtime = RealRuntime()
        self.info = StoreInfo(
            url=url, kind="redis",
            features=frozenset({Feature.EVENTUAL_READ, Feature.CONSISTENT_READ,
                                Feature.CONDITIONAL_WRITE, Feature.ATOMIC_MULTI_WRITE,
                                Feature.MULTI_READ, Feature.DELETE}),
            regions=tuple(dict.fromkeys(regions)),
            params={"read": self.read_policy, "wait": self.wait, "wait_ms": self.wait_ms,
                    "nodes": {n.name: f"{n.host}:{n.port} ({n.region})" for n in self.nodes}},
            eventual_read_served_by=f"one replica per client ({self.read_policy}); the "
                                    "primary when there is no replica")
        self._clients: list[aioredis.Redis] = []

    def _client(self, node: _Node) -> aioredis.Redis:
        # No client-side retries: a failure must show up as a failed or unknown operation
        # in the history, not as one very slow success.
        c = aioredis.Redis(host=node.host, port=node.port, decode_responses=True,
                           socket_timeout=self.timeout_s, socket_connect_timeout=self.timeout_s,
                           retry=Retry(NoBackoff(), 0))
        self._clients.append(c)
        return c

    def _replica_for(self, region: str | None) -> _Node:
        replicas = self.nodes[1:]
        if not replicas:
            return self.nodes[0]
        if self.read_policy == "random":
            return self.rng.choice(replicas)
        local = [n for n in replicas if n.region == region]
        return local[0] if local else replicas[0]

    async def connect(self, region: str | None = None) -> RedisClient:
        """Return a client; ``region`` picks the nearest replica for eventual reads."""
        if region is not None and region not in self.info.regions:
            raise ValueError(f"region {region!r} is not one of this store's regions "
                             f"({', '.join(self.info.regions)})")
        primary = self.nodes[0]
        replica = self._replica_for(region or primary.region)
        client = RedisClient(self, self._client(primary), primary.name,
                             self._client(replica), replica.name)
        try:
            await client.primary.ping()
        except RedisError as err:
            raise ValueError(f"cannot reach Redis at {primary.host}:{primary.port} "
                             f"({err}); is the cluster up? (`replicalab cluster status`)"
                             ) from None
        return client

    async def close(self) -> None:
        """Close every connection this store opened."""
        for c in self._clients:
            await c.aclose()
        self._clients.clear()


@dataclass
class RedisClient:
    """One client session: a connection to the primary and one to its read replica."""

    store: RedisStore
    primary: aioredis.Redis
    primary_name: str
    replica: aioredis.Redis
    replica_name: str

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` from the primary or this client's replica."""
        conn, name = ((self.primary, self.primary_name) if consistent
                      else (self.replica, self.replica_name))
        try:
            if len(keys) == 1:
                values: tuple[str | None, ...] = (await conn.get(keys[0]),)
            else:
                values = tuple(await conn.mget(list(keys)))
        except (RedisConnectionError, RedisTimeoutError) as err:
            raise Unavailable(f"{name}: {err}") from None
        except RedisError as err:
            raise StoreError(f"{name}: {err}") from None
        return ReadResult(values, name)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` atomically at the primary (compare-and-set if ``expect``)."""
        try:
            if expect:
                exp_keys, set_keys = list(expect), list(values)
                want = [_ABSENT_MARK if expect[k] is ABSENT else expect[k] for k in exp_keys]
                ok = await self.primary.eval(_CAS, len(exp_keys) + len(set_keys), *exp_keys,
                                             *set_keys, len(exp_keys), *want,
                                             *[values[k] for k in set_keys])
                if not int(ok):
                    raise ConditionFailed(f"{self.primary_name}: condition failed")
            elif len(values) == 1:
                ((k, v),) = values.items()
                await self.primary.set(k, v)
            else:
                await self.primary.mset(dict(values))
            if self.store.wait:
                await self.primary.wait(self.store.wait, self.store.wait_ms)
        except (RedisConnectionError, RedisTimeoutError) as err:
            raise Unavailable(f"{self.primary_name}: {err}") from None
        except RedisError as err:
            raise StoreError(f"{self.primary_name}: {err}") from None
        return WriteResult(self.primary_name)

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` at the primary."""
        try:
            await self.primary.delete(*keys)
        except (RedisConnectionError, RedisTimeoutError) as err:
            raise Unavailable(f"{self.primary_name}: {err}") from None
        return WriteResult(self.primary_name)

    async def close(self) -> None:
        """Connections are closed by the store."""


def open_redis(url: str, seed: int) -> RedisStore:
    """Return a Redis store for ``url``."""
    return RedisStore(url, seed)

"""``redis://`` — Redis primary + replicas, in real time, over the lean RESP client.

URL: ``redis://127.0.0.1:P?replicas=127.0.0.1:P1,127.0.0.1:P2&node_regions=US-E,US-W,EU
&regions=dc3&read=nearest|random&wait=0&wait_ms=100&timeout_ms=2000`` (what
``replicalab cluster up redis`` prints). A store replicalab did not start:
``redis://[USER]:PASSWORD@HOST:PORT/DB`` logs in with ``AUTH`` (the password may instead
come from ``REDISCLI_AUTH``, as for redis-cli) and selects database DB (default 0) on every
connection, replicas included; ``rediss://`` (or ``tls=1``) connects over TLS, verifying
the server against the system CAs or ``tls_ca=PATH`` (``tls_cert``/``tls_key``: a client
certificate). Each element ``domain/item/attribute`` is one Redis
string key of that name. A consistent read asks the primary; an eventual read asks one
replica: ``nearest`` = a replica in the client's region, else the primary when it is in the
client's region (a local copy, not a WAN round trip to a remote replica), else the nearest
replica; ``random`` = chosen at random per client. Multi-element reads are one ``MGET``
(one node, one instant); multi-element writes one ``MSET`` (atomic); conditional writes one
Lua script at the primary that compares and sets atomically. ``wait=n`` adds ``WAIT n
wait_ms`` after every write.

Transactions (``transact``), all on the primary: ``WATCH`` every key the transaction
touches, ``MGET`` them (one instant), play the micro-operations out on those values, then
``MULTI``, one ``SET`` per key written, ``EXEC``. An ``EXEC`` answering nil (a watched key
changed) raises TxnAborted; a read-only transaction ends after the ``MGET`` (``UNWATCH``).
Lists are kept as the text ``[1,2,3]`` of a string key (like every other value here).

Commands go through :class:`replicalab.stores.resp.RespConnection` (hiredis, one bare
asyncio Protocol per connection), which stamps each request at the socket: a probe records
the interval from the request leaving to its reply arriving, not the client's own overhead
(see docs/stores/redis.md for what that buys on a LAN). No client-side retries: a failure
shows up as a failed or unknown operation in the history, not as one very slow success.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from replicalab.runtime import RealRuntime

# an import list: every adapter names the same parts of the Store contract (duplicates lists it)
from replicalab.stores.base import (
    ABSENT,
    ALL_FEATURES,
    ConditionFailed,
    Feature,
    MicroOp,
    ReadResult,
    StoreError,
    StoreInfo,
    TxnAborted,
    Unavailable,
    WriteResult,
    redact_url,
)
from replicalab.stores.resp import RespConnection, RespError
from replicalab.stores.txnops import check_ops, keys_of, play
from replicalab.stores.url import Endpoint, StoreUrl, parse_store_url

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


class RedisStore:
    """An opened Redis deployment (primary plus replicas)."""

    def __init__(self, url: str, seed: int) -> None:
        u = parse_store_url(url, "replicas", ("wait", "wait_ms"), "redis://127.0.0.1:6379",
                            tls_scheme="rediss")
        self.url = u
        self.shown_url = redact_url(url)
        self.setup_commands = _setup_commands(u)
        self.tls_context = u.tls.context() if u.tls is not None else None
        self.nodes = list(u.nodes)
        self.read_policy = u.read
        self.timeout_s = u.timeout_s
        self.wait = int(u.number("wait", 0))
        self.wait_ms = int(u.number("wait_ms", 100))
        self.rng = random.Random(seed)
        self.runtime = RealRuntime()
        self.info = StoreInfo(
            url=self.shown_url, kind="redis",
            features=ALL_FEATURES | {Feature.TRANSACTIONS},
            regions=u.region_names(),
            params={"read": self.read_policy, "wait": self.wait, "wait_ms": self.wait_ms,
                    "database": int(u.credentials.database or 0),
                    "tls": self.tls_context is not None,
                    "nodes": {n.name: f"{n.host}:{n.port} ({n.region})" for n in self.nodes}},
            eventual_read_served_by=f"one node per client ({self.read_policy}"
                                    + (": the replica in the client's region, else the "
                                       "primary when it is there, else the nearest replica"
                                       if self.read_policy == "nearest" else ": a replica at "
                                       "random") + "); the primary when there is no replica")
        self._conns: list[RespConnection] = []

    def _conn(self, node: Endpoint) -> RespConnection:
        c = RespConnection(node.host, node.port, self.timeout_s, self.setup_commands,
                           self.tls_context)
        self._conns.append(c)
        return c

    def _replica_for(self, region: str | None) -> Endpoint:
        """Return the node that serves a client's eventual reads (``region``: where the
        client stands, None: unplaced): see the module doc."""
        primary, replicas = self.nodes[0], self.nodes[1:]
        if not replicas:
            return primary
        if (self.read_policy == "nearest" and region == primary.region
                and all(r.region != region for r in replicas)):
            return primary  # the local copy: no WAN round trip to a remote replica
        return self.url.pick(replicas, region or primary.region, self.rng)

    async def connect(self, region: str | None = None) -> RedisClient:
        """Return a client; ``region`` picks the nearest replica for eventual reads."""
        region = self.url.placed(region)
        primary = self.nodes[0]
        replica = self._replica_for(region)
        # a client in a region reaches the nodes of other regions over its client links
        primary, replica = self.url.via(primary, region), self.url.via(replica, region)
        client = RedisClient(self, self._conn(primary), primary.name, self._conn(replica),
                             replica.name)
        for conn, node in ((client.primary, primary), (client.replica, replica)):
            try:
                reply, _, _ = await conn.call("PING")
                if isinstance(reply, RespError):
                    raise StoreError(str(reply))
            except (StoreError, TimeoutError) as err:
                raise ValueError(f"cannot reach Redis at {node.host}:{node.port} (node "
                                 f"{node.name} of {self.shown_url}): {err or 'no answer'}"
                                 ) from None
        return client

    async def remove_keys(self, keys: Sequence[str]) -> int:
        """Delete ``keys`` at the primary (batches of 500); return how many existed."""
        conn = self._conn(self.nodes[0])
        removed = 0
        try:
            for i in range(0, len(keys), 500):
                n, _, _ = await _call(conn, self.nodes[0].name, "DEL", *keys[i:i + 500])
                removed += int(n)
        finally:
            conn.close()
        return removed

    async def close(self) -> None:
        """Close every connection this store opened."""
        for c in self._conns:
            c.close()
        self._conns.clear()


async def _call(conn: RespConnection, name: str, *args: str | int) -> tuple[Any, int, int]:
    """Return (reply, sent_ns, received_ns) of one command at node ``name``; Unavailable when
    the outcome is unknown, StoreError for an error reply."""
    try:
        reply, sent, received = await conn.call(*args)
    except TimeoutError as err:
        raise Unavailable(f"{name}: {err}") from None
    except Unavailable as err:
        raise Unavailable(f"{name}: {err}") from None
    if isinstance(reply, RespError):
        raise StoreError(f"{name}: {reply}")
    return reply, sent, received


@dataclass
class RedisClient:
    """One client session: a connection to the primary and one to its read replica."""

    store: RedisStore
    primary: RespConnection
    primary_name: str
    replica: RespConnection
    replica_name: str

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` from the primary or this client's replica, with the
        request's wire stamps."""
        conn, name = ((self.primary, self.primary_name) if consistent
                      else (self.replica, self.replica_name))
        if len(keys) == 1:
            reply, sent, received = await _call(conn, name, "GET", keys[0])
            values: tuple[str | None, ...] = (reply,)
        else:
            reply, sent, received = await _call(conn, name, "MGET", *keys)
            values = tuple(reply)
        return ReadResult(values, name, sent, received)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` atomically at the primary (compare-and-set if ``expect``); the
        wire stamps span the write and its ``WAIT``, if any."""
        name = self.primary_name
        if expect:
            exp_keys, set_keys = list(expect), list(values)
            want = [_ABSENT_MARK if expect[k] is ABSENT else expect[k] for k in exp_keys]
            ok, sent, received = await _call(
                self.primary, name, "EVAL", _CAS, len(exp_keys) + len(set_keys), *exp_keys,
                *set_keys, len(exp_keys), *want, *[values[k] for k in set_keys])
            if not int(ok):
                raise ConditionFailed(f"{name}: condition failed")
        elif len(values) == 1:
            ((k, v),) = values.items()
            _, sent, received = await _call(self.primary, name, "SET", k, v)
        else:
            flat = [x for kv in values.items() for x in kv]
            _, sent, received = await _call(self.primary, name, "MSET", *flat)
        if self.store.wait:
            _, _, received = await _call(self.primary, name, "WAIT", self.store.wait,
                                         self.store.wait_ms)
        return WriteResult(name, sent, received)

    async def transact(self, ops: list[MicroOp], *, gap_ns: int = 0) -> list[MicroOp]:
        """Run ``ops`` as one optimistic transaction at the primary (WATCH, MGET, MULTI,
        SETs, EXEC; ``gap_ns`` per micro-operation between the read and the MULTI); return
        the ops with reads filled. TxnAborted when EXEC answers nil."""
        check_ops(ops)
        keys = keys_of(ops)
        conn, name = self.primary, self.primary_name
        await _call(conn, name, "WATCH", *keys)
        try:
            got, _, _ = await _call(conn, name, "MGET", *keys)
            played = play(ops, dict(zip(keys, got, strict=True)))
            if gap_ns and len(ops) > 1:
                await self.store.runtime.sleep_ns(gap_ns * (len(ops) - 1))
            if not played.writes:
                await _call(conn, name, "UNWATCH")
                return played.ops
            await _call(conn, name, "MULTI")
        except StoreError:
            await _call(conn, name, "UNWATCH")
            raise
        try:
            for k, v in played.writes.items():
                await _call(conn, name, "SET", k, v)
            done, _, _ = await _call(conn, name, "EXEC")
        except RespError:
            await _call(conn, name, "DISCARD")  # a refused command: nothing was applied
            raise
        if done is None:
            raise TxnAborted(f"{name}: a watched key changed before EXEC")
        if self.store.wait:
            await _call(conn, name, "WAIT", self.store.wait, self.store.wait_ms)
        return played.ops

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` at the primary."""
        _, sent, received = await _call(self.primary, self.primary_name, "DEL", *keys)
        return WriteResult(self.primary_name, sent, received)

    async def close(self) -> None:
        """Connections are closed by the store."""


def _setup_commands(u: StoreUrl) -> list[tuple[str, ...]]:
    """Return the commands every new connection sends first: AUTH (URL, else
    ``REDISCLI_AUTH``) and SELECT of the URL's database (ValueError for a bad number)."""
    creds = u.credentials.with_env(None, os.environ.get("REDISCLI_AUTH"))
    out: list[tuple[str, ...]] = []
    if creds.password is not None:
        out.append(("AUTH", creds.user, creds.password) if creds.user else
                   ("AUTH", creds.password))
    elif creds.user:
        raise ValueError(f"{u.scheme}:// URL names user {creds.user!r} without a password; "
                         f"use {u.scheme}://USER:PASSWORD@HOST:PORT or set REDISCLI_AUTH")
    db = creds.database
    if db:
        if not db.isdigit():
            raise ValueError(f"database {db!r} in the {u.scheme}:// URL must be a number "
                             f"(e.g. {u.scheme}://HOST:PORT/2)")
        if int(db):
            out.append(("SELECT", str(int(db))))
    return out


def open_redis(url: str, seed: int) -> RedisStore:
    """Return a Redis store for ``url``."""
    return RedisStore(url, seed)

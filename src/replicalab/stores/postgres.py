"""``postgresql://`` — PostgreSQL primary + hot standbys (psycopg 3 async), in real time.

URL: ``postgresql://postgres@127.0.0.1:P/postgres?standbys=127.0.0.1:P1,127.0.0.1:P2
&node_regions=US-E,US-W,EU&regions=dc3&read=nearest|random
&synchronous_commit=local|off|on|remote_write|remote_apply&timeout_ms=2000
&isolation=read-committed|repeatable-read|serializable&txn_reads=primary|standby
&lock_timeout_ms=20`` (what
``replicalab cluster up postgres`` prints, plus the transaction parameters). User,
password and database come from the URL or libpq's ``PG*`` environment (``PGUSER``,
``PGPASSWORD``, ``PGDATABASE``, ``PGPASSFILE``); the password is never logged or saved.
TLS: libpq's own parameters ``sslmode`` (``disable`` ... ``verify-full``), ``sslrootcert``,
``sslcert``, ``sslkey`` in the URL or as ``PGSSLMODE`` etc. in the environment.

Data model: one table ``replicalab_kv(domain, item, attr, value)`` keyed by the element's
three parts, created on the primary at the first connect. A consistent read asks the
primary; an eventual read asks one hot standby: ``nearest`` = a standby in the client's
region, else the primary when it is in the client's region (a local copy, not a WAN round
trip to a remote standby), else the nearest standby; ``random`` = chosen at random per
client. A multi-element read is
one SELECT (one snapshot of one server); a write is one upsert statement (atomic for any
number of elements); a conditional write is one transaction at the primary that locks and
checks every expectation (``UPDATE ... WHERE value = expected``; ``INSERT ... ON CONFLICT
DO NOTHING`` for ``ABSENT``) before writing, and raises ConditionFailed if any fails.
Transactions (``transact``): one interactive transaction at the primary at the URL's
``isolation`` (default ``read-committed``, PostgreSQL's own default), one statement per
micro-operation: a read is a SELECT, an append one upsert that extends the stored list text
in place (``value = left(value, -1) || ',x]'``: the row is locked and updated, never read
then written by the client), a write one upsert. A serialization failure or a deadlock
(SQLSTATE 40001, 40P01) rolls it back and raises TxnAborted; any other error leaves the
outcome unknown. ``lock_timeout_ms`` (default 20) sets ``lock_timeout`` in every
transaction: a micro-operation that waits longer for a row lock rolls the transaction back
(55P03, TxnAborted, a ``fail``) instead of waiting for the deadlock detector
(``deadlock_timeout``, 1 s by default) or the call's timeout, which on hot keys turned many
transactions into 1 s waits and ``info`` outcomes; ``lock_timeout_ms=0`` waits, as
PostgreSQL does by default. ``txn_reads=standby`` sends the
transaction's reads to the client's hot standby instead (each its own statement there: what
reading from replicas inside a transaction isolates, which is nothing).
``synchronous_commit`` is set for every session (default ``local``: commits do not wait for
standbys; ``remote_apply``: a commit returns once every standby has applied it, with the
cluster's ``synchronous_standby_names = 'ANY n (*)'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerr

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
    parse_element,
    redact_url,
)
from replicalab.stores.txnops import check_ops, decode_stored
from replicalab.stores.url import Endpoint, parse_store_url

T = TypeVar("T")

_SYNC = ("off", "local", "on", "remote_write", "remote_apply")
ISOLATIONS = {"read-committed": "READ COMMITTED", "repeatable-read": "REPEATABLE READ",
              "serializable": "SERIALIZABLE"}
_TXN_READS = ("primary", "standby")
_SSL_PARAMS = ("sslmode", "sslrootcert", "sslcert", "sslkey")
TABLE = "replicalab_kv"
_CREATE = (f"CREATE TABLE IF NOT EXISTS {TABLE} (domain text NOT NULL, item text NOT NULL, "
           "attr text NOT NULL, value text NOT NULL, PRIMARY KEY (domain, item, attr))")
_GET_ONE = f"SELECT value FROM {TABLE} WHERE domain = %s AND item = %s AND attr = %s"
_GET_MANY = (f"SELECT t.value FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY "
             f"AS k(d, i, a, n) LEFT JOIN {TABLE} t ON t.domain = k.d AND t.item = k.i "
             "AND t.attr = k.a ORDER BY k.n")
_UPSERT = (f"INSERT INTO {TABLE} (domain, item, attr, value) SELECT * FROM unnest(%s::text[], "
           "%s::text[], %s::text[], %s::text[]) ON CONFLICT (domain, item, attr) "
           "DO UPDATE SET value = EXCLUDED.value")
_CHECK = (f"UPDATE {TABLE} SET value = value WHERE domain = %s AND item = %s AND attr = %s "
          "AND value = %s")
_CLAIM = (f"INSERT INTO {TABLE} (domain, item, attr, value) VALUES (%s, %s, %s, '') "
          "ON CONFLICT (domain, item, attr) DO NOTHING")
_DELETE = (f"DELETE FROM {TABLE} t USING unnest(%s::text[], %s::text[], %s::text[]) "
           "AS k(d, i, a) WHERE t.domain = k.d AND t.item = k.i AND t.attr = k.a")
# an append extends the stored list text in place: the row is locked by the UPDATE
_APPEND = (f"INSERT INTO {TABLE} AS t (domain, item, attr, value) VALUES (%s, %s, %s, %s) "
           "ON CONFLICT (domain, item, attr) DO UPDATE SET value = left(t.value, -1) || %s")
_PUT = (f"INSERT INTO {TABLE} AS t (domain, item, attr, value) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (domain, item, attr) DO UPDATE SET value = EXCLUDED.value")
# the server lets a commit return, with only this warning, when its wait is cancelled
_SYNC_CANCELLED = "canceling wait for synchronous replication"


def _columns(keys: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    els = [parse_element(k) for k in keys]
    return [e.domain for e in els], [e.item for e in els], [e.attribute for e in els]


class PostgresStore:
    """An opened PostgreSQL deployment (primary plus hot standbys)."""

    def __init__(self, url: str, seed: int) -> None:
        u = parse_store_url(url, "standbys", ("synchronous_commit", "isolation", "txn_reads",
                                              "lock_timeout_ms", *_SSL_PARAMS),
                            "postgresql://postgres@127.0.0.1:5432/postgres")
        self.url = u
        self.nodes = list(u.nodes)
        self.read_policy = u.read
        self.timeout_s = u.timeout_s
        self.synchronous_commit = u.choice("synchronous_commit", _SYNC, "local")
        self.isolation = u.choice("isolation", tuple(ISOLATIONS), "read-committed")
        self.txn_reads = u.choice("txn_reads", _TXN_READS, "primary")
        self.lock_timeout_ms = int(u.number("lock_timeout_ms", 20))
        if self.lock_timeout_ms < 0:
            raise ValueError("postgresql:// lock_timeout_ms must be 0 (wait) or positive")
        # credentials and TLS: from the URL, else libpq reads its PG* environment itself
        creds = u.credentials
        self._auth: dict[str, str] = {k: v for k, v in (
            ("user", creds.user), ("password", creds.password), ("dbname", creds.database),
            *((p, u.query.get(p)) for p in _SSL_PARAMS)) if v}
        self.shown_url = redact_url(url)
        self.rng = random.Random(seed)
        self.runtime = RealRuntime()
        self.info = StoreInfo(
            url=self.shown_url, kind="postgres",
            features=ALL_FEATURES | {Feature.TRANSACTIONS},
            regions=u.region_names(),
            params={"read": self.read_policy, "synchronous_commit": self.synchronous_commit,
                    "isolation": self.isolation, "txn_reads": self.txn_reads,
                    "lock_timeout_ms": self.lock_timeout_ms,
                    "timeout_ms": round(self.timeout_s * 1000), "table": TABLE,
                    "nodes": {n.name: f"{n.host}:{n.port} ({n.region})" for n in self.nodes}},
            eventual_read_served_by=f"one hot standby per client ({self.read_policy}: "
                                    + ("the standby in the client's region, else the "
                                       "primary when it is there, else the nearest standby"
                                       if self.read_policy == "nearest" else "at random")
                                    + "); the primary when there is no standby")
        self._conns: list[_Conn] = []
        self._table_ready = False
        self._table_lock = asyncio.Lock()

    def _conn(self, node: Endpoint) -> _Conn:
        c = _Conn(self, node)
        self._conns.append(c)
        return c

    def _standby_for(self, region: str | None) -> Endpoint:
        """Return the node that serves a client's eventual reads (``region``: where the
        client stands, None: unplaced): see the module doc."""
        primary, standbys = self.nodes[0], self.nodes[1:]
        if not standbys:
            return primary
        if (self.read_policy == "nearest" and region == primary.region
                and all(s.region != region for s in standbys)):
            return primary  # the local copy: no WAN round trip to a remote standby
        return self.url.pick(standbys, region or primary.region, self.rng)

    async def _ensure_table(self, primary: _Conn, standby: _Conn) -> None:
        """Create the table on the primary if missing; wait (bounded) for the standby."""
        async with self._table_lock:
            if self._table_ready:
                return
            conn = await primary.get()
            row = await (await conn.execute("SELECT pg_is_in_recovery(), "
                                            f"to_regclass('{TABLE}') IS NOT NULL")).fetchone()
            assert row is not None
            if row[0]:
                n = primary.node
                raise ValueError(f"{n.host}:{n.port} is a standby (in recovery); the "
                                 "postgresql:// URL's host:port must be the primary")
            if not row[1]:
                # another client may create it at the same moment
                with contextlib.suppress(pgerr.UniqueViolation, pgerr.DuplicateTable,
                                         pgerr.DuplicateObject):
                    await conn.execute(_CREATE)
            if standby is not primary:
                sconn = await standby.get()
                deadline = asyncio.get_running_loop().time() + max(self.timeout_s, 5.0)
                while asyncio.get_running_loop().time() < deadline:
                    cur = await sconn.execute(f"SELECT to_regclass('{TABLE}') IS NOT NULL")
                    got = await cur.fetchone()
                    if got and got[0]:
                        break
                    await asyncio.sleep(0.01)
            self._table_ready = True

    async def connect(self, region: str | None = None) -> PostgresClient:
        """Return a client; ``region`` picks the nearest standby for eventual reads."""
        region = self.url.placed(region)
        primary_node = self.nodes[0]
        standby_node = self._standby_for(region)
        primary = self._conn(self.url.via(primary_node, region))  # client links: the WAN
        standby = (primary if standby_node is primary_node
                   else self._conn(self.url.via(standby_node, region)))
        for c in (primary, standby):
            try:
                await c.get()
            except Unavailable as err:
                raise ValueError(f"cannot reach PostgreSQL at {c.node.host}:{c.node.port} "
                                 f"(node {c.node.name} of {self.shown_url}): "
                                 f"{str(err).removeprefix(c.node.name + ': ')}") from None
        try:
            await asyncio.wait_for(self._ensure_table(primary, standby), self.timeout_s + 5.0)
        except (psycopg.Error, TimeoutError) as err:
            raise ValueError(f"cannot prepare table {TABLE} in PostgreSQL at "
                             f"{self.shown_url}: {_first_line(err)}") from None
        return PostgresClient(self, primary, standby)

    async def remove_keys(self, keys: Sequence[str]) -> int:
        """Delete the rows of ``keys`` at the primary (batches of 1,000); return how many
        existed."""
        c = self._conn(self.nodes[0])
        removed = 0
        try:
            for i in range(0, len(keys), 1000):
                d, it, a = _columns(keys[i:i + 1000])

                async def delete(conn: psycopg.AsyncConnection[Any],
                                 cols: tuple[list[str], ...] = (d, it, a)) -> int:
                    return (await conn.execute(_DELETE, cols)).rowcount

                removed += await c.run(delete)
        finally:
            await c.close()
        return removed

    async def close(self) -> None:
        """Close every connection this store opened."""
        for c in self._conns:
            await c.close()
        self._conns.clear()


@dataclass(eq=False)
class _Conn:
    """One lazily (re)opened autocommit connection to one server."""

    store: PostgresStore
    node: Endpoint
    conn: psycopg.AsyncConnection[Any] | None = None
    warnings: list[str] = field(default_factory=list)

    async def _open(self) -> psycopg.AsyncConnection[Any]:
        s = self.store
        conn = await psycopg.AsyncConnection.connect(
            host=self.node.host, port=self.node.port, autocommit=True,
            connect_timeout=max(2, math.ceil(s.timeout_s)), application_name="replicalab",
            options=f"-c synchronous_commit={s.synchronous_commit}", **s._auth)
        conn.add_notice_handler(self._notice)
        return conn

    def _notice(self, diag: psycopg.errors.Diagnostic) -> None:
        if diag.message_primary and _SYNC_CANCELLED in diag.message_primary:
            self.warnings.append(diag.message_primary)

    async def get(self) -> psycopg.AsyncConnection[Any]:
        """Return the open connection, opening a new one if there is none or it broke."""
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            return self.conn
        await self.close()
        try:
            self.conn = await asyncio.wait_for(self._open(), self.store.timeout_s + 1.0)
        except (psycopg.OperationalError, TimeoutError, OSError) as err:
            raise Unavailable(f"{self.node.name}: {_first_line(err) or 'connect timeout'}"
                              ) from None
        return self.conn

    async def run(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Return ``fn(connection)`` within the timeout, mapping errors to store errors.

        A call that outlasts the timeout is abandoned at once: its connection's socket is
        shut down (the query's wait ends on the spot) and the next call reconnects.
        Cancelling it instead would make psycopg ask the server to cancel the query and
        wait for that up to 10 s: a server that stopped answering would hold the call
        five times past its timeout."""
        conn = await self.get()
        self.warnings.clear()
        task = asyncio.ensure_future(fn(conn))
        try:
            done, _ = await asyncio.wait({task}, timeout=self.store.timeout_s)
        except asyncio.CancelledError:
            self._abandon(conn, task)
            raise
        if not done:
            self._abandon(conn, task)
            raise Unavailable(f"{self.node.name}: no answer within "
                              f"{self.store.timeout_s * 1000:.0f} ms")
        try:
            out = task.result()
        except (psycopg.OperationalError, psycopg.InterfaceError) as err:
            await self.close()
            raise Unavailable(f"{self.node.name}: {_first_line(err)}") from None
        except psycopg.Error as err:
            raise StoreError(f"{self.node.name}: {_first_line(err)}") from None
        if self.warnings:
            raise Unavailable(f"{self.node.name}: committed locally, but {self.warnings[0]}")
        return out

    def _abandon(self, conn: psycopg.AsyncConnection[Any], task: asyncio.Future[Any]) -> None:
        """Drop ``conn`` (state unknown) and end ``task``'s wait by shutting the socket."""
        if self.conn is conn:
            self.conn = None
        with contextlib.suppress(OSError, psycopg.Error):
            fd = conn.pgconn.socket
            dup = socket.socket(fileno=os.dup(fd))
            try:
                dup.shutdown(socket.SHUT_RDWR)
            finally:
                dup.close()

        def finished(t: asyncio.Future[Any]) -> None:
            if not t.cancelled():
                t.exception()  # retrieved: an abandoned call's error is expected
            with contextlib.suppress(psycopg.Error, OSError):
                conn.pgconn.finish()

        task.add_done_callback(finished)

    async def close(self) -> None:
        """Close the connection (if any)."""
        if self.conn is not None:
            conn, self.conn = self.conn, None
            with contextlib.suppress(psycopg.Error, TimeoutError, OSError):
                await asyncio.wait_for(conn.close(), 1.0)


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


@dataclass
class PostgresClient:
    """One client session: a connection to the primary and one to its read standby."""

    store: PostgresStore
    primary: _Conn
    standby: _Conn

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` (one SELECT) from the primary or this client's
        standby."""
        target = self.primary if consistent else self.standby
        d, i, a = _columns(keys)

        async def select(conn: psycopg.AsyncConnection[Any]) -> tuple[str | None, ...]:
            try:
                if len(keys) == 1:
                    cur = await conn.execute(_GET_ONE, (d[0], i[0], a[0]))
                    row = await cur.fetchone()
                    return (row[0] if row else None,)
                cur = await conn.execute(_GET_MANY, (d, i, a))
                return tuple(r[0] for r in await cur.fetchall())
            except pgerr.UndefinedTable:
                return (None,) * len(keys)  # a standby that has not replayed the CREATE yet

        return ReadResult(await target.run(select), target.node.name)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` atomically at the primary (only if ``expect`` holds)."""
        d, i, a = _columns(list(values))
        v = list(values.values())
        if not expect:
            async def upsert(conn: psycopg.AsyncConnection[Any]) -> None:
                await conn.execute(_UPSERT, (d, i, a, v))

            await self.primary.run(upsert)
            return WriteResult(self.primary.node.name)
        # lock and check expectations in key order (no deadlock between two such writes)
        ordered = sorted(expect.items(), key=lambda kv: kv[0])
        checks = [(parse_element(k), want) for k, want in ordered if want is not ABSENT]
        claims = [parse_element(k) for k, want in ordered if want is ABSENT]
        claimed_only = [parse_element(k) for k, want in ordered
                        if want is ABSENT and k not in values]

        async def cas(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction():
                for e, want in checks:
                    cur = await conn.execute(_CHECK, (e.domain, e.item, e.attribute, str(want)))
                    if cur.rowcount != 1:
                        raise ConditionFailed(f"{self.primary.node.name}: "
                                              f"{e.domain}/{e.item}/{e.attribute} is not "
                                              f"{want!r}")
                for e in claims:
                    cur = await conn.execute(_CLAIM, (e.domain, e.item, e.attribute))
                    if cur.rowcount != 1:
                        raise ConditionFailed(f"{self.primary.node.name}: "
                                              f"{e.domain}/{e.item}/{e.attribute} exists")
                await conn.execute(_UPSERT, (d, i, a, v))
                if claimed_only:
                    await conn.execute(_DELETE, ([e.domain for e in claimed_only],
                                                 [e.item for e in claimed_only],
                                                 [e.attribute for e in claimed_only]))

        await self.primary.run(cas)
        return WriteResult(self.primary.node.name)

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` at the primary (one statement)."""
        d, i, a = _columns(keys)

        async def delete(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(_DELETE, (d, i, a))

        await self.primary.run(delete)
        return WriteResult(self.primary.node.name)

    async def transact(self, ops: list[MicroOp], *, gap_ns: int = 0) -> list[MicroOp]:
        """Run ``ops`` as one transaction at the primary at the URL's isolation (one
        statement per micro-operation, ``gap_ns`` apart); return them with reads filled.
        TxnAborted on a serialization failure or deadlock (rolled back)."""
        check_ops(ops)
        level = ISOLATIONS[self.store.isolation]
        on_standby = self.store.txn_reads == "standby" and self.standby is not self.primary
        gap_s = gap_ns / 1e9
        name = self.primary.node.name
        lock_ms = self.store.lock_timeout_ms

        async def txn(conn: psycopg.AsyncConnection[Any]) -> list[MicroOp]:
            sconn = await self.standby.get() if on_standby else conn
            out: list[MicroOp] = []
            try:
                async with conn.transaction():
                    await conn.execute(f"SET TRANSACTION ISOLATION LEVEL {level}")
                    if lock_ms:
                        await conn.execute(f"SET LOCAL lock_timeout = {lock_ms}")
                    for n, (f, k, v) in enumerate(ops):
                        if n and gap_s:
                            await asyncio.sleep(gap_s)
                        e = parse_element(k)
                        if f == "r":
                            cur = await sconn.execute(_GET_ONE, (e.domain, e.item, e.attribute))
                            row = await cur.fetchone()
                            out.append((f, k, decode_stored(row[0] if row else None)))
                        elif f == "append":
                            await conn.execute(_APPEND, (e.domain, e.item, e.attribute,
                                                         f"[{int(v)}]", f",{int(v)}]"))
                            out.append((f, k, v))
                        else:
                            await conn.execute(_PUT, (e.domain, e.item, e.attribute,
                                                      str(int(v))))
                            out.append((f, k, v))
            except (pgerr.SerializationFailure, pgerr.DeadlockDetected,
                    pgerr.LockNotAvailable) as err:
                raise TxnAborted(f"{name}: {_first_line(err)}") from None
            return out

        return await self.primary.run(txn)

    async def close(self) -> None:
        """Connections are closed by the store."""


def open_postgres(url: str, seed: int) -> PostgresStore:
    """Return a PostgreSQL store for ``url``."""
    return PostgresStore(url, seed)

"""``postgresql://`` — a visibility-timeout queue as a PostgreSQL table (psycopg 3 async).

URL: ``postgresql://postgres@127.0.0.1:P/postgres?queue=NAME&max_receives=10
&synchronous_commit=local&timeout_ms=2000`` (the URL ``replicalab cluster up postgres``
prints is accepted as is, plus these parameters; everything goes to the primary, the node
before ``?``). User, password and database come from the URL or libpq's ``PG*``
environment; the password is never logged or saved.

Tables, created at the first connect, shared by all queues (a ``queue`` column, so a queue
name never becomes an SQL identifier): ``replicalab_queue(queue, id, body, sent_at,
visible_at, receive_count, receipt)`` and ``replicalab_queue_dead(queue, id, body,
receive_count, sent_at, dead_at)``.

How the contract maps:

* ``send`` = ``INSERT ... RETURNING id``: acknowledged at commit, so durable as the
  session's ``synchronous_commit`` says (default ``local``: the commit waits for its WAL to
  be flushed on the primary; ``off`` acknowledges before that and a crash of the server can
  lose the last ~3 x ``wal_writer_delay`` of sends; ``on``/``remote_*`` also wait for
  standbys). Against a power loss the flush needs ``fsync = on`` as well.
* ``receive`` = one statement: pick up to n rows with ``visible_at <= now()`` in id order
  ``FOR UPDATE SKIP LOCKED`` (concurrent receivers skip each other's rows instead of
  waiting, and never take the same row), move the picked rows already received
  ``max_receives`` times to the dead-letter table, and on the others set a new receipt,
  ``receive_count + 1`` and ``visible_at = now() + timeout``.
* ``delete`` / ``change_visibility`` = ``DELETE`` / ``UPDATE ... WHERE id = $1 AND
  receipt = $2``: zero rows means the receipt is not the current delivery's (StaleReceipt,
  nothing changed). A receipt stays valid until the next delivery of its message (as SQS).
* Receipts are ``<id>/<receive_count>/<random>``, made by the server in the receive.

Time: the server's clock (``now()``, the start of the statement's transaction, one per
statement here because sessions are in autocommit). Every client process and every
restarted consumer judges a lease by the same clock, and a lease keeps running while its
holder is dead, which is the point of a visibility timeout; a client's monotonic clock
would be neither shared with other machines nor stored with the row.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg import errors as pgerr

from replicalab.queues.base import (
    DeadLetter,
    Delivery,
    QueueError,
    QueueInfo,
    QueueUnavailable,
    StaleReceipt,
)
from replicalab.queues.redis import ClientSessions, check_timeout_s, queue_params, unreachable
from replicalab.runtime import RealRuntime
from replicalab.stores.base import redact_url
from replicalab.stores.url import parse_store_url

T = TypeVar("T")

TABLE = "replicalab_queue"
DEAD_TABLE = "replicalab_queue_dead"
_SYNC = ("off", "local", "on", "remote_write", "remote_apply")
QUEUE_PARAMS_PG = ("queue", "max_receives", "synchronous_commit")

_CREATE = [
    f"CREATE TABLE IF NOT EXISTS {TABLE} (queue text NOT NULL, "
    "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text NOT NULL, "
    "sent_at timestamptz NOT NULL DEFAULT now(), visible_at timestamptz NOT NULL "
    "DEFAULT now(), receive_count integer NOT NULL DEFAULT 0, receipt text)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_order ON {TABLE} (queue, id)",
    f"CREATE TABLE IF NOT EXISTS {DEAD_TABLE} (queue text NOT NULL, id bigint PRIMARY KEY, "
    "body text NOT NULL, receive_count integer NOT NULL, sent_at timestamptz NOT NULL, "
    "dead_at timestamptz NOT NULL DEFAULT now())",
]
_SEND = f"INSERT INTO {TABLE} (queue, body) VALUES (%s, %s) RETURNING id"
# One statement, one snapshot: the picked rows are locked by the subquery, the two
# data-modifying parts touch disjoint rows (receive_count decides which). Dead-lettered rows
# come back as markers (receive_count -1) so that the caller can fill the batch up.
_RECEIVE = f"""
WITH picked AS (
  SELECT id, receive_count FROM {TABLE}
  WHERE queue = %(q)s AND visible_at <= now()
  ORDER BY id LIMIT %(n)s FOR UPDATE SKIP LOCKED
), dead AS (
  DELETE FROM {TABLE} t USING picked p
  WHERE t.id = p.id AND p.receive_count >= %(max)s
  RETURNING t.queue, t.id, t.body, t.receive_count, t.sent_at
), moved AS (
  INSERT INTO {DEAD_TABLE} (queue, id, body, receive_count, sent_at)
  SELECT * FROM dead RETURNING id
), leased AS (
  UPDATE {TABLE} t SET receive_count = p.receive_count + 1,
    visible_at = now() + make_interval(secs => %(vis)s),
    receipt = t.id || '/' || (p.receive_count + 1) || '/' || left(md5(random()::text), 8)
  FROM picked p WHERE t.id = p.id AND p.receive_count < %(max)s
  RETURNING t.id, t.body, t.receipt, t.receive_count
)
SELECT id, body, receipt, receive_count FROM leased
UNION ALL SELECT id, '', '', -1 FROM moved
"""
_FILL_ROUNDS = 16  # receives in a row that may dead-letter before a batch is returned
_DELETE = f"DELETE FROM {TABLE} WHERE id = %s AND receipt = %s"
_CHANGE = (f"UPDATE {TABLE} SET visible_at = now() + make_interval(secs => %s) "
           "WHERE id = %s AND receipt = %s")
_DEPTH = (f"SELECT count(*) FILTER (WHERE visible_at <= now()), "
          f"count(*) FILTER (WHERE visible_at > now()) FROM {TABLE} WHERE queue = %s")
_DEAD = (f"SELECT id, body, receive_count FROM {DEAD_TABLE} WHERE queue = %s "
         "ORDER BY dead_at, id")


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class PostgresQueue(ClientSessions["PostgresQueueClient"]):
    """An opened queue on one PostgreSQL server (the primary of a ``cluster up``
    deployment)."""

    def __init__(self, url: str, seed: int) -> None:
        u = parse_store_url(url, "standbys", QUEUE_PARAMS_PG,
                            "postgresql://postgres@127.0.0.1:5432/postgres?queue=jobs")
        self.name, self.max_receives = queue_params(u.query, "postgresql")
        self.node = u.nodes[0]
        self.timeout_s = u.timeout_s
        self.synchronous_commit = u.choice("synchronous_commit", _SYNC, "local")
        self.seed = seed
        parts = urlsplit(url)
        # credentials: from the URL, else libpq reads PGUSER/PGPASSWORD/PGDATABASE itself
        self._auth: dict[str, str] = {}
        if parts.username:
            self._auth["user"] = unquote(parts.username)
        if parts.password is not None:
            self._auth["password"] = unquote(parts.password)
        if parts.path.strip("/"):
            self._auth["dbname"] = unquote(parts.path.strip("/"))
        self.runtime = RealRuntime()
        self.info = QueueInfo(
            url=redact_url(url), kind="postgres", max_receives=self.max_receives,
            params={"queue": self.name, "server": f"{self.node.host}:{self.node.port}",
                    "table": TABLE, "dead_letters": DEAD_TABLE,
                    "synchronous_commit": self.synchronous_commit,
                    "clock": "PostgreSQL server (now())",
                    "timeout_ms": round(self.timeout_s * 1000)})
        self._numbers = itertools.count()
        self._clients: list[PostgresQueueClient] = []
        self._admin: PostgresQueueClient | None = None
        self._tables_ready = False

    async def _ensure_tables(self, c: PostgresQueueClient) -> None:
        if self._tables_ready:
            return
        for attempt in range(3):
            try:
                conn = await c.conn()
                for stmt in _CREATE:
                    await conn.execute(stmt)
                break
            except (pgerr.UniqueViolation, pgerr.DuplicateTable, pgerr.DuplicateObject):
                # another client created them at the same moment: look again
                if attempt == 2:
                    raise
        self._tables_ready = True

    async def connect(self) -> PostgresQueueClient:
        """Return a new client session (its own connection; ValueError if the server cannot
        be reached or is a standby)."""
        c = PostgresQueueClient(self, next(self._numbers))
        self._clients.append(c)
        try:
            conn = await c.conn()
            cur = await conn.execute("SELECT pg_is_in_recovery()")
            row = await cur.fetchone()
            if row and row[0]:
                raise ValueError(f"{self.node.host}:{self.node.port} is a standby; the "
                                 "postgresql:// URL's host:port must be the primary")
            await asyncio.wait_for(self._ensure_tables(c), self.timeout_s + 5.0)
        except (QueueUnavailable, psycopg.Error, TimeoutError) as err:
            raise unreachable("PostgreSQL", self.node.host, self.node.port, err) from None
        return c

    async def dead_letters(self) -> list[DeadLetter]:
        """Return the dead-letter table's messages of this queue, oldest first."""
        c = await self._admin_client()
        rows = await c.run(lambda conn: _fetch(conn, _DEAD, (self.name,)))
        return [DeadLetter(str(i), b, int(n)) for i, b, n in rows]

    async def depth(self) -> tuple[int, int]:
        """Return (visible, in flight) counts by the server's clock."""
        c = await self._admin_client()
        rows = await c.run(lambda conn: _fetch(conn, _DEPTH, (self.name,)))
        return int(rows[0][0]), int(rows[0][1])

    async def purge(self) -> None:
        """Delete this queue's messages and dead letters (tests and benchmarks start from
        an empty queue)."""
        c = await self._admin_client()

        async def go(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(f"DELETE FROM {TABLE} WHERE queue = %s", (self.name,))
            await conn.execute(f"DELETE FROM {DEAD_TABLE} WHERE queue = %s", (self.name,))

        await c.run(go)


async def _fetch(conn: psycopg.AsyncConnection[Any], sql: str,
                 params: tuple[Any, ...] | dict[str, Any]) -> list[tuple[Any, ...]]:
    cur = await conn.execute(sql, params)
    return await cur.fetchall()


class PostgresQueueClient:
    """One client session: one autocommit connection, opened lazily and again after a
    failure (no retries: a failed call raises QueueUnavailable, outcome unknown)."""

    def __init__(self, queue: PostgresQueue, number: int) -> None:
        self.q = queue
        self.number = number
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def conn(self) -> psycopg.AsyncConnection[Any]:
        """Return the open connection, opening it if needed (QueueUnavailable if it cannot)."""
        if self._conn is not None and not self._conn.closed:
            return self._conn
        q = self.q
        try:
            self._conn = await psycopg.AsyncConnection.connect(
                host=q.node.host, port=q.node.port, autocommit=True,
                connect_timeout=max(2, math.ceil(q.timeout_s)),
                application_name=f"replicalab-queue-{self.number}",
                options=f"-c synchronous_commit={q.synchronous_commit}", **q._auth)
        except psycopg.Error as err:
            raise QueueUnavailable(f"PostgreSQL at {q.node.host}:{q.node.port}: "
                                   f"{_first_line(err)}") from None
        return self._conn

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()

    async def run(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Return ``fn(connection)`` within the URL's timeout; QueueUnavailable (and a new
        connection next time) when the server fails or does not answer in time."""
        q = self.q
        conn = await self.conn()
        try:
            return await asyncio.wait_for(fn(conn), q.timeout_s)
        except (psycopg.OperationalError, TimeoutError) as err:
            await self._drop()
            raise QueueUnavailable(f"PostgreSQL at {q.node.host}:{q.node.port}: "
                                   f"{_first_line(err) or 'no answer in time'}") from None
        except psycopg.Error as err:
            raise QueueError(f"PostgreSQL refused the call: {_first_line(err)}") from None

    async def send(self, body: str) -> str:
        """Insert ``body``; return its id once the commit is acknowledged."""
        rows = await self.run(lambda conn: _fetch(conn, _SEND, (self.q.name, body)))
        return str(rows[0][0])

    async def receive(self, max_messages: int, visibility_timeout_s: float) -> list[Delivery]:
        """Return up to ``max_messages`` visible messages in id order, each leased for
        ``visibility_timeout_s`` s by the server's clock; messages past ``max_receives``
        met on the way go to the dead-letter table instead."""
        if max_messages < 1:
            raise ValueError(f"max_messages {max_messages} must be at least 1")
        vis_s = check_timeout_s(visibility_timeout_s) / 1000
        out: list[Delivery] = []
        for _ in range(_FILL_ROUNDS):
            params = {"q": self.q.name, "n": max_messages - len(out),
                      "max": self.q.max_receives, "vis": vis_s}
            rows = await self.run(lambda conn, p=params: _fetch(conn, _RECEIVE, p))
            out += [Delivery(str(i), b, r, int(n)) for i, b, r, n in rows if n >= 0]
            # a round that moved messages to the dead-letter table took them from the
            # batch: look again (as SQS would keep looking), else the queue is drained
            if len(out) >= max_messages or all(n >= 0 for *_, n in rows):
                break
        return sorted(out, key=lambda d: int(d.id))

    @staticmethod
    def _id_of(receipt: str) -> int:
        try:
            return int(receipt.partition("/")[0])
        except ValueError:
            raise StaleReceipt(f"{receipt!r} is not a receipt of this queue") from None

    async def _guarded(self, sql: str, params: tuple[Any, ...], receipt: str) -> None:
        async def go(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute(sql, params)
            return cur.rowcount

        if await self.run(go) != 1:
            raise StaleReceipt(f"receipt {receipt} is not the current delivery's")

    async def delete(self, receipt: str) -> None:
        """Delete the message of this delivery; StaleReceipt (nothing changed) when
        ``receipt`` is not its current delivery's."""
        await self._guarded(_DELETE, (self._id_of(receipt), receipt), receipt)

    async def change_visibility(self, receipt: str, timeout_s: float) -> None:
        """Lease the message of this delivery for ``timeout_s`` s from now (0 = visible
        now); StaleReceipt (nothing changed) when ``receipt`` is not current."""
        vis_s = check_timeout_s(timeout_s) / 1000
        await self._guarded(_CHANGE, (vis_s, self._id_of(receipt), receipt), receipt)

    async def close(self) -> None:
        """Close the connection."""
        await self._drop()


def open_postgres_queue(url: str, seed: int) -> PostgresQueue:
    """Return the queue a ``postgresql://`` URL names (ValueError naming a bad parameter);
    no connection is made until :meth:`PostgresQueue.connect`."""
    return PostgresQueue(url, seed)


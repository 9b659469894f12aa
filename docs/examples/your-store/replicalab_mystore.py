"""``mystore://`` — a replicalab store adapter for a SQLite file: the worked example of
docs/your-store.md.

URL: ``mystore:///PATH/TO/FILE.db?timeout_ms=2000``. One table ``kv(key, value)`` holds
every element ``domain/item/attribute`` under its full name. There is one copy of the
data, so an eventual read is as fresh as a consistent one; a write of several elements is
one transaction (atomic); a conditional write checks and writes inside one ``BEGIN
IMMEDIATE`` transaction. A call that cannot get the file's lock within ``timeout_ms``
raises Unavailable, as any call the store does not answer in time must.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replicalab.runtime import RealRuntime
from replicalab.stores import (
    ABSENT,
    ConditionFailed,
    Feature,
    ReadResult,
    StoreError,
    StoreInfo,
    Unavailable,
    WriteResult,
)

_SCHEMA = "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


class MyClient:
    """One session: its own connection to the file, one call at a time."""

    def __init__(self, path: str, timeout_s: float) -> None:
        self._db = sqlite3.connect(path, timeout=timeout_s, isolation_level=None,
                                   check_same_thread=False)
        self._lock = asyncio.Lock()

    async def _run(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(db, *args)`` in a thread; map SQLite's errors onto the Store's."""
        async with self._lock:
            try:
                return await asyncio.to_thread(fn, self._db, *args)
            except sqlite3.OperationalError as err:
                if "locked" in str(err) or "busy" in str(err):
                    raise Unavailable(f"sqlite: {err}") from None  # no answer in time
                raise StoreError(f"sqlite: {err}") from None
            except sqlite3.Error as err:
                raise StoreError(f"sqlite: {err}") from None

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` in the order asked (None = absent)."""

        def select(db: sqlite3.Connection) -> tuple[str | None, ...]:
            marks = ",".join("?" * len(keys))
            rows = dict(db.execute(f"SELECT key, value FROM kv WHERE key IN ({marks})",
                                   list(keys)).fetchall())
            return tuple(rows.get(k) for k in keys)

        return ReadResult(await self._run(select), "file")

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` in one transaction, only if every ``expect`` holds."""

        def upsert(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            try:
                for key, want in (expect or {}).items():
                    row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
                    have = row[0] if row else None
                    if (want is ABSENT and have is not None) or (
                            want is not ABSENT and have != want):
                        db.execute("ROLLBACK")
                        return False
                db.executemany("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) "
                               "DO UPDATE SET value = excluded.value", list(values.items()))
                db.execute("COMMIT")
                return True
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        if not await self._run(upsert):
            raise ConditionFailed("condition failed")
        return WriteResult("file")

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` in one statement."""

        def remove(db: sqlite3.Connection) -> None:
            db.execute(f"DELETE FROM kv WHERE key IN ({','.join('?' * len(keys))})",
                       list(keys))

        await self._run(remove)
        return WriteResult("file")

    async def close(self) -> None:
        """Close this session's connection."""
        self._db.close()


class MyStore:
    """A SQLite file opened as a replicalab store."""

    def __init__(self, url: str, seed: int) -> None:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(query) - {"timeout_ms"}
        if unknown or not parts.path:
            raise ValueError(f"use mystore:///PATH/TO/FILE.db?timeout_ms=2000, not {url!r}")
        self.path = parts.path
        self.timeout_s = float(query.get("timeout_ms", 2000)) / 1000
        self.runtime = RealRuntime()
        self.info = StoreInfo(
            url=url, kind="mystore",
            # one copy, every single-object feature holds; no transact(): no TRANSACTIONS
            features=frozenset(Feature) - {Feature.TRANSACTIONS},
            params={"path": self.path, "timeout_ms": self.timeout_s * 1000},
            eventual_read_served_by="the one database file (always current)")
        self._clients: list[MyClient] = []

    async def connect(self, region: str | None = None) -> MyClient:
        """Return a new session (ValueError naming the file if it cannot be opened)."""
        try:
            client = MyClient(self.path, self.timeout_s)
            await client._run(lambda db: db.execute(_SCHEMA))
        except (sqlite3.Error, StoreError) as err:
            raise ValueError(f"cannot open {self.path}: {err}") from None
        self._clients.append(client)
        return client

    async def close(self) -> None:
        """Close every session."""
        for c in self._clients:
            await c.close()
        self._clients.clear()


def open_mystore(url: str, seed: int) -> MyStore:
    """The entry point: return the store for a ``mystore://`` URL."""
    return MyStore(url, seed)

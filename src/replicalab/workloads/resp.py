"""A lean Redis client for the load generator's hot path: one connection, one request in
flight, GET and SET only, over a bare asyncio Protocol.

redis-py's asyncio client spends most of each call in its connection pool, command packing
and response machinery; under open-loop load that overhead, not Redis, limits the rate a
single core can offer. This client writes a pre-packed RESP command and wakes the caller
from ``data_received``: one write, one future and one await per operation. No pipelining:
the caller awaits each reply before it sends the next request on the same connection.
It implements the read/write part of :class:`replicalab.stores.Client` against the primary
only (reads of a primary are always current, so ``consistent`` changes nothing here).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from replicalab.stores.base import ReadResult, StoreError, Unavailable, WriteResult


class RespError(StoreError):
    """Redis answered with an error reply (``-ERR ...``, ``-BUSY ...``, ...)."""


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


def pack_command(*args: str | bytes) -> bytes:
    """Return the RESP encoding (bytes) of one command with its arguments."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        parts.append(_bulk(a.encode() if isinstance(a, str) else a))
    return b"".join(parts)


def parse_reply(buf: bytes | bytearray, start: int = 0) -> tuple[Any, int] | None:
    """Return (reply, end offset) for the RESP reply at ``start`` of ``buf``, or None if it is
    not complete yet. Bulk strings come back as str, nil as None, errors as RespError."""
    end = buf.find(b"\r\n", start)
    if end < 0:
        return None
    kind = buf[start]
    head = bytes(buf[start + 1:end])
    if kind == 0x24:  # '$' bulk string
        n = int(head)
        if n < 0:
            return None, end + 2
        stop = end + 2 + n
        if len(buf) < stop + 2:
            return None
        return bytes(buf[end + 2:stop]).decode(), stop + 2
    if kind == 0x2B:  # '+' simple string
        return head.decode(), end + 2
    if kind == 0x3A:  # ':' integer
        return int(head), end + 2
    if kind == 0x2D:  # '-' error
        return RespError(head.decode()), end + 2
    raise StoreError(f"unexpected Redis reply type {chr(kind)!r}; is this a Redis server?")


class _Conn(asyncio.Protocol):
    """The protocol object: hands each complete reply to the waiting future."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[Any] | None = None
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        # Fast path: exactly one whole bulk reply (what a GET usually gets in one segment).
        if not self.buf and data[:1] == b"$" and data.endswith(b"\r\n"):
            head_end = data.find(b"\r\n")
            n = int(data[1:head_end])
            if n < 0 or len(data) == head_end + 4 + n:
                w, self.waiter = self.waiter, None
                if w is not None and not w.done():
                    w.set_result(None if n < 0 else data[head_end + 2:head_end + 2 + n]
                                 .decode())
                return
        buf = self.buf
        buf += data
        parsed = parse_reply(buf)
        if parsed is None:
            return
        reply, end = parsed
        del buf[:end]
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = Unavailable(f"connection lost: {exc or 'closed by server'}")
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_exception(self.lost)


class RespClient:
    """One connection to one Redis node; GET for reads, SET for writes, no retries."""

    def __init__(self, conn: _Conn, name: str) -> None:
        self._conn = conn
        self.name = name
        self._gets: dict[str, bytes] = {}  # packed once per key: the hot path only writes

    async def _call(self, payload: bytes) -> Any:
        conn = self._conn
        if conn.lost is not None:
            raise conn.lost
        fut = asyncio.get_running_loop().create_future()
        conn.waiter = fut
        conn.transport.write(payload)  # type: ignore[union-attr]
        reply = await fut
        if isinstance(reply, RespError):
            raise reply
        return reply

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the value of the single key in ``keys`` (GET at the primary)."""
        if len(keys) != 1:
            raise StoreError("the fast Redis client reads one key per call")
        key = keys[0]
        payload = self._gets.get(key)
        if payload is None:
            payload = self._gets[key] = pack_command("GET", key)
        return ReadResult((await self._call(payload),), self.name)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """SET the single key in ``values`` (unconditional)."""
        if expect or len(values) != 1:
            raise StoreError("the fast Redis client writes one key per call, unconditionally")
        ((k, v),) = values.items()
        await self._call(pack_command("SET", k, v))
        return WriteResult(self.name)

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """DEL ``keys``."""
        await self._call(pack_command("DEL", *keys))
        return WriteResult(self.name)

    async def close(self) -> None:
        """Close the connection."""
        if self._conn.transport is not None:
            self._conn.transport.close()


async def connect(host: str, port: int, name: str = "n0",
                  timeout_s: float = 2.0) -> RespClient:
    """Return a connected client (Unavailable naming the address if it cannot connect)."""
    loop = asyncio.get_running_loop()
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(_Conn, host, port), timeout_s)
    except (OSError, TimeoutError) as err:
        raise Unavailable(f"cannot connect to Redis at {host}:{port}: {err}") from None
    return RespClient(conn, name)

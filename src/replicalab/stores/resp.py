"""Lean Redis clients over bare asyncio Protocols and hiredis: the probe's request/response
connection (:class:`RespConnection`, used by the ``redis://`` adapter) and the load
generator's open-loop schedule driven from the event loop's callbacks (:func:`drive_schedule`,
``load --client fast``).

**Probe path.** :class:`RespConnection` sends one command and returns its reply with two
``time.monotonic_ns()`` stamps taken at the wire: just before the request is written to the
socket, and on entry to the ``data_received`` callback that carries the end of its reply.
The wake-up of the awaiting task, redis-py's pool and response machinery, and everything
the caller does around the call fall outside that interval, which is what a probe records
(``ReadResult.sent_ns``/``received_ns``): the server's processing certainly happened inside
it, so the interval is valid for the checkers and as narrow as a client in Python can
measure it. Replies are matched to requests in order; a request that times out closes the
connection (a late reply must not be taken for the next request's), which the next call
opens again.

**Load path.**

Why not the store adapter: redis-py's asyncio client spends most of each call in its
connection pool, command packing and response machinery, and even a lean client awaited from
one coroutine per connection pays a future, a task switch and a coroutine resumption per
request. Here each connection is a small state machine: ``data_received`` parses the reply
(hiredis's C reader), stamps its completion time and immediately sends that connection's next
due request, or arms a timer for its intended start. That is the shape redis-benchmark has on
its own event loop, with the same rule: no pipelining, the next request on a connection is
sent only after the previous reply arrived.

Every request is still recorded: :class:`LoadRecord` holds preallocated typed arrays indexed
by the request's position in the schedule (connection, send time, completion time, outcome)
plus its value and error, and the caller turns them into History rows after the run. A
request's intended start is ``t0 + offset``; its send and completion times are
``time.monotonic_ns()`` readings (the real runtime's clock). One reading serves as both the
completion of a reply and the send of the next request when that one is already due (they
happen in the same callback, microseconds apart; the service time then also includes the
reply's bookkeeping, so it errs on the long side).

Reads go to the primary only (reads of a primary are always current, so ``consistent``
changes nothing here).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from array import array
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import hiredis

from replicalab.history import encode_value
from replicalab.stores.base import StoreError, Unavailable

OPEN, OK, FAIL, INFO = 0, 1, 2, 3
"""Outcome codes of a recorded request (the History's type codes)."""

_MORE = object()  # what the reader returns while a reply is still incomplete
_WATCHDOG_MAX_S = 0.1


class RespError(StoreError):
    """Redis answered with an error reply (``-ERR ...``, ``-BUSY ...``, ...)."""


def pack_command(*args: str | bytes) -> bytes:
    """Return the RESP encoding (bytes) of one command with its arguments (hiredis packs)."""
    return hiredis.pack_command(args)


def new_reader() -> hiredis.Reader:
    """Return a RESP reply reader: bulk strings come back as str (undecodable bytes
    replaced), nil as None, error replies as RespError instances, and ``gets()`` returns a
    private sentinel while a reply is incomplete."""
    return hiredis.Reader(encoding="utf-8", errors="replace", replyError=RespError,
                          notEnoughData=_MORE)


@dataclass
class Schedule:
    """What to send (parallel arrays, one entry per request, in intended-start order)."""

    offsets_ns: array  # intended start minus t0 (ns), nondecreasing
    is_read: array  # 1 = GET, 0 = SET
    key_index: array  # index into ``keys``
    keys: Mapping[int, str]  # key index -> key name

    def __len__(self) -> int:
        return len(self.offsets_ns)


@dataclass
class LoadRecord:
    """Per-request results, indexed like the schedule; rows ``0..taken-1`` were sent (or
    failed at once on a lost connection), the rest were never sent."""

    conn: array  # connection number (0..C-1)
    send_ns: array  # actual send time (monotonic ns)
    done_ns: array  # completion time (monotonic ns), -1 while open
    outcome: array  # OPEN / OK / FAIL / INFO
    values: list[str | None]  # value a GET saw, or the value a SET wrote
    errors: dict[int, str] = field(default_factory=dict)  # request index -> error message
    taken: int = 0
    t0_ns: int = 0
    end_ns: int = 0

    @classmethod
    def allocate(cls, n: int) -> LoadRecord:
        """Return an empty record for ``n`` requests (arrays preallocated)."""
        return cls(array("i", bytes(4 * n)), array("q", bytes(8 * n)),
                   array("q", [-1]) * n, array("b", bytes(n)), [None] * n)

    def close_open(self, now_ns: int, reason: str) -> int:
        """Close every sent request still open as INFO with ``reason``; return how many."""
        closed = 0
        for i in range(self.taken):
            if self.outcome[i] == OPEN:
                self.outcome[i], self.done_ns[i], self.errors[i] = INFO, now_ns, reason
                closed += 1
        return closed


class _RespProtocol(asyncio.Protocol):
    """One TCP connection of a :class:`RespConnection`: replies matched to requests in
    order, stamped on arrival."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.transport: asyncio.Transport | None = None
        self.reader = new_reader()
        self.waiting: deque[tuple[asyncio.Future[tuple[Any, int]], asyncio.TimerHandle]] = \
            deque()
        self.dead = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()  # the reply is here: stamp before parsing it
        reader = self.reader
        reader.feed(data)
        while self.waiting:
            reply = reader.gets()
            if reply is _MORE:
                return
            fut, timer = self.waiting.popleft()
            timer.cancel()
            if not fut.done():
                fut.set_result((reply, now))

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(Unavailable(f"{self.where}: connection lost: {exc or 'closed by the server'}"))

    def fail(self, err: Exception) -> None:
        """Fail every waiting request with ``err`` and drop the connection for good."""
        self.dead = True
        while self.waiting:
            fut, timer = self.waiting.popleft()
            timer.cancel()
            if not fut.done():
                fut.set_exception(err)
        if self.transport is not None:
            self.transport.abort()
            self.transport = None


class RespConnection:
    """A connection to one Redis server for request/response calls (see the module
    docstring); opened by the first :meth:`call`, opened again after a failure.

    ``setup`` are commands sent on every new connection before any call (``AUTH``,
    ``SELECT``): an error reply to one of them raises :class:`RespError` naming the command
    (never its arguments: they hold the password). ``tls`` wraps the connection in TLS.
    """

    def __init__(self, host: str, port: int, timeout_s: float,
                 setup: Sequence[Sequence[str]] = (), tls: ssl.SSLContext | None = None
                 ) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self.setup = [tuple(c) for c in setup]
        self.tls = tls
        self._proto: _RespProtocol | None = None
        self._opening: asyncio.Lock | None = None

    async def _open(self) -> _RespProtocol:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:  # concurrent first calls share one connection
            if self._proto is not None and not self._proto.dead:
                return self._proto
            loop = asyncio.get_running_loop()
            where = f"{self.host}:{self.port}"
            try:
                _, proto = await asyncio.wait_for(
                    loop.create_connection(lambda: _RespProtocol(where), self.host, self.port,
                                           ssl=self.tls,
                                           server_hostname=self.host if self.tls else None),
                    self.timeout_s)
            except ssl.SSLError as err:
                raise RespError(f"TLS handshake with Redis at {where} failed: "
                                f"{err.reason or err}") from None
            except (OSError, TimeoutError) as err:
                raise Unavailable(f"cannot connect to Redis at {where}: "
                                  f"{err or 'timed out'}") from None
            for command in self.setup:
                reply, _, _ = await self._send(proto, command)
                if isinstance(reply, RespError):
                    proto.fail(Unavailable(f"{where}: {command[0]} refused"))
                    raise RespError(f"Redis at {where} refused {command[0]}: {reply}")
            self._proto = proto
            return proto

    def _timed_out(self, proto: _RespProtocol) -> None:
        # the reply may still come: drop the connection so that it cannot be taken for
        # the answer to a later request
        proto.fail(TimeoutError(f"{proto.where}: no reply within "
                                f"{self.timeout_s * 1000:g} ms"))

    async def _send(self, proto: _RespProtocol, args: Sequence[str | bytes | int]
                    ) -> tuple[Any, int, int]:
        if proto.dead or proto.transport is None:
            # lost between being opened and this call: a proxy in front of a crashed server
            # (a client link through Toxiproxy) accepts the connection and closes it at once
            raise Unavailable(f"{proto.where}: connection lost: closed as it was opened")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[Any, int]] = loop.create_future()
        proto.waiting.append((fut, loop.call_later(self.timeout_s, self._timed_out, proto)))
        payload = hiredis.pack_command(tuple(args))
        sent = time.monotonic_ns()
        proto.transport.write(payload)  # type: ignore[union-attr]
        reply, received = await fut
        return reply, sent, received

    async def call(self, *args: str | bytes | int) -> tuple[Any, int, int]:
        """Send one command; return (reply, sent_ns, received_ns) with the wire stamps
        (monotonic ns). An error reply comes back as a :class:`RespError` instance (not
        raised); Unavailable when the connection fails, TimeoutError when no reply comes
        within the timeout (both: outcome unknown); RespError (raised) when a new
        connection's setup command (AUTH, SELECT) or its TLS handshake is refused."""
        proto = self._proto
        if proto is None or proto.dead:
            proto = await self._open()
        return await self._send(proto, args)

    def close(self) -> None:
        """Close the connection (calls still waiting fail as Unavailable)."""
        if self._proto is not None:
            proto, self._proto = self._proto, None
            if proto.transport is not None:
                proto.transport.close()


class _Conn(asyncio.Protocol):
    """One connection: hands each complete reply to the driver."""

    def __init__(self, driver: _Driver, number: int) -> None:
        self.driver = driver
        self.number = number
        self.process = driver.process_base + number
        self.reader = new_reader()
        self.transport: asyncio.Transport | None = None
        self.current = -1  # index of the request in flight, -1 when none
        self.late = False  # the request in flight already timed out: drop its reply
        self.lost: str = ""
        self.pending: asyncio.TimerHandle | None = None
        self.idle = False  # got nothing more to send: the schedule is out or stop passed
        self.hello: asyncio.Future[None] | None = None  # set while AUTH/SELECT are answered
        self.hello_left = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    async def greet(self, setup: Sequence[Sequence[str]], timeout_s: float) -> None:
        """Send ``setup`` (AUTH, SELECT) before the schedule; RespError naming what Redis
        answered (never the arguments: they hold the password), Unavailable when no answer
        comes in time."""
        if not setup:
            return
        self.hello = asyncio.get_running_loop().create_future()
        self.hello_left = len(setup)
        for command in setup:
            self.transport.write(pack_command(*command))  # type: ignore[union-attr]
        try:
            await asyncio.wait_for(self.hello, timeout_s)
        except TimeoutError:
            raise Unavailable(f"no answer to {setup[0][0]} within {timeout_s:g} s") from None
        finally:
            self.hello, self.hello_left = None, 0

    def _greeted(self) -> None:
        reader, fut = self.reader, self.hello
        while self.hello_left and fut is not None and not fut.done():
            reply = reader.gets()
            if reply is _MORE:
                return
            self.hello_left -= 1
            if isinstance(reply, RespError):
                fut.set_exception(RespError(f"Redis refused the connection's setup: {reply}"))
            elif not self.hello_left:
                fut.set_result(None)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        if self.hello is not None:
            self._greeted()
            return
        reply = reader.gets()
        if reply is _MORE:
            return
        now = time.monotonic_ns()
        d = self.driver
        i = self.current
        if i < 0:
            return  # nothing in flight (one request at a time): not a reply of ours
        self.current = -1
        if self.late:
            self.late = False
        else:
            rec = d.rec
            rec.done_ns[i] = now
            if type(reply) is RespError:
                rec.outcome[i] = FAIL
                rec.errors[i] = str(reply)
            else:
                rec.outcome[i] = OK
                if d.is_read[i]:
                    rec.values[i] = reply
        d.advance(self, now)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = f"connection lost: {exc or 'closed by server'}"
        d = self.driver
        if d.finished.done():
            return
        now = time.monotonic_ns()
        i = self.current
        self.current = -1
        if i >= 0 and not self.late:
            d.rec.outcome[i], d.rec.done_ns[i], d.rec.errors[i] = INFO, now, self.lost
        self.late = False
        if self.pending is None and not self.idle:
            d.advance(self, now)  # the rest of its requests fail at once, at their due time


class _Driver:
    """Hands out the schedule first come first served to the connections that are free."""

    def __init__(self, sched: Schedule, rec: LoadRecord, process_base: int,
                 stop_after_ns: int, timeout_ns: int) -> None:
        self.offsets = sched.offsets_ns
        self.is_read = sched.is_read
        self.key_index = sched.key_index
        self.keys = sched.keys
        self.rec = rec
        self.process_base = process_base
        self.stop_after_ns = stop_after_ns
        self.timeout_ns = timeout_ns
        self.n = len(sched)
        self.t0 = 0
        self.stop_ns = 0
        self.cursor = 0
        self.active = 0
        self.seq = 0
        self.conns: list[_Conn] = []
        self.gets: dict[int, bytes] = {}  # GET packed once per key: the hot path only writes
        self.loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[None] = self.loop.create_future()

    def start(self) -> None:
        """Start the clock (t0 = now) and give every connection its first request."""
        self.t0 = self.rec.t0_ns = time.monotonic_ns()
        self.stop_ns = self.t0 + self.stop_after_ns
        self.active = len(self.conns)
        for c in self.conns:
            self.advance(c, time.monotonic_ns())
        self._watchdog()

    def advance(self, conn: _Conn, now: int) -> None:
        """Give ``conn`` the next request: sent now if it is due, else at its intended start;
        a connection finds nothing more once the schedule is out or ``stop_ns`` has passed."""
        offsets, t0 = self.offsets, self.t0
        while now < self.stop_ns and self.cursor < self.n:
            i = self.cursor
            self.cursor = i + 1
            due = t0 + offsets[i]
            if due > now:
                conn.pending = self.loop.call_later((due - now) / 1e9, self._due, conn, i)
                return
            if self._send(conn, i, now):
                return
            now = time.monotonic_ns()  # the connection is gone: op i failed at once
        conn.idle = True
        self.active -= 1
        if self.active == 0 and not self.finished.done():
            self.finished.set_result(None)

    def _due(self, conn: _Conn, i: int) -> None:
        now = time.monotonic_ns()
        wait_ns = self.t0 + self.offsets[i] - now
        if wait_ns > 0:  # a timer may fire early (uvloop's are in whole ms): never send early
            conn.pending = self.loop.call_later(wait_ns / 1e9, self._due, conn, i)
            return
        conn.pending = None
        if not self._send(conn, i, now):
            self.advance(conn, now)

    def _send(self, conn: _Conn, i: int, now: int) -> bool:
        """Send request ``i`` on ``conn``; False if the connection is lost (op i then fails
        at once, as a lost connection refuses the call)."""
        rec = self.rec
        rec.send_ns[i] = now
        rec.conn[i] = conn.number
        k = self.key_index[i]
        if self.is_read[i]:
            payload = self.gets.get(k)
            if payload is None:
                payload = self.gets[k] = pack_command("GET", self.keys[k])
        else:
            self.seq += 1
            value = rec.values[i] = encode_value(conn.process, self.seq, now)
            payload = pack_command("SET", self.keys[k], value)
        if conn.lost:
            rec.outcome[i], rec.done_ns[i], rec.errors[i] = INFO, now, conn.lost
            return False
        conn.current = i
        conn.transport.write(payload)  # type: ignore[union-attr]
        return True

    def _watchdog(self) -> None:
        """Every ~timeout/10 (≤ 100 ms), close requests older than the timeout as INFO
        ``timeout``; their connection stays busy until the late reply arrives (no second
        request is sent on it before that: still one in flight)."""
        if self.finished.done():
            return
        now = time.monotonic_ns()
        rec = self.rec
        for c in self.conns:
            i = c.current
            if i >= 0 and not c.late and now - rec.send_ns[i] > self.timeout_ns:
                rec.outcome[i], rec.done_ns[i], rec.errors[i] = INFO, now, "timeout"
                c.late = True
        self.loop.call_later(min(max(self.timeout_ns / 1e10, 1e-3), _WATCHDOG_MAX_S),
                             self._watchdog)

    def close(self) -> None:
        """Cancel pending sends and close every connection."""
        for c in self.conns:
            if c.pending is not None:
                c.pending.cancel()
            if c.transport is not None:
                c.transport.close()


async def drive_schedule(host: str, port: int, connections: int,
                         sched: Schedule, rec: LoadRecord, *, process_base: int = 0,
                         stop_after_ns: int, timeout_ns: int,
                         on_start: Callable[[], Any] | None = None,
                         setup: Sequence[Sequence[str]] = (),
                         tls: ssl.SSLContext | None = None) -> None:
    """Run ``sched`` against the Redis at ``host:port`` over ``connections`` connections and
    fill ``rec`` (times in monotonic ns). Requests not yet sent ``stop_after_ns`` after the
    start stay unsent; replies missing ``timeout_ns`` after their send are closed as
    timeouts, and whatever is still open ``stop_after_ns + timeout_ns`` after the start is
    closed as "timeout: no reply by the drain limit". Every connection first sends
    ``setup`` (AUTH, SELECT: the redis:// adapter's) and is wrapped in ``tls`` when given.
    Raises Unavailable if it cannot connect, RespError if the setup is refused; what was
    recorded stays in ``rec`` whatever happens."""
    d = _Driver(sched, rec, process_base, stop_after_ns, timeout_ns)
    loop = d.loop
    try:
        for c in range(connections):
            try:
                _, conn = await asyncio.wait_for(
                    loop.create_connection(lambda c=c: _Conn(d, c), host, port, ssl=tls,
                                           server_hostname=host if tls else None),
                    timeout_ns / 1e9)
            except (OSError, TimeoutError) as err:
                raise Unavailable(f"cannot connect to Redis at {host}:{port}: {err}") from None
            d.conns.append(conn)
            await conn.greet(setup, timeout_ns / 1e9)
        if on_start is not None:
            on_start()
        d.start()
        try:
            await asyncio.wait_for(asyncio.shield(d.finished),
                                   (stop_after_ns + timeout_ns) / 1e9)
        except TimeoutError:
            rec.taken = d.cursor
            rec.close_open(time.monotonic_ns(), "timeout: no reply by the drain limit")
    finally:
        rec.taken = d.cursor
        rec.end_ns = time.monotonic_ns()
        if not d.finished.done():
            d.finished.set_result(None)
        d.close()

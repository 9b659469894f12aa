"""The server-based middleware as its own process, and a client of it.

``replicalab counter serve --dc US-E --store US-E=URL --store US-W=URL --store EU=URL
--port P`` (:func:`serve`) serves one data centre's CounterService over TCP on 127.0.0.1:
one JSON object per line each way. A request ``{"id": 7, "op": "dec", "key": "stock", "n": 1,
"allow_global": false}`` gets ``{"id": 7, "ok": true, "value": 41}`` or ``{"id": 7, "ok":
false, "error": "InsufficientRights", "message": "...", "available": 0, "needed": 1}``.
Requests on one connection may be pipelined; answers carry the request's id and may come
back in any order (that is what lets one connection feed a group commit). Ops: ``create``
(key, initial, lower, upper), ``dec`` and ``inc`` (key, n, allow_global), ``value`` (key),
``ping``. An operation is answered only after the write holding it has returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import signal
from collections.abc import Sequence
from typing import Any

from replicalab.counters import crdt, service
from replicalab.counters.middleware import Options
from replicalab.counters.server_mw import ServerMiddleware
from replicalab.counters.service import CounterExists, Placement, UnknownCounter
from replicalab.stores import StoreError, Unavailable

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1 << 20
_ERRORS: dict[str, type[Exception]] = {
    cls.__name__: cls for cls in (
        crdt.CounterError, crdt.InsufficientRights, crdt.BoundViolation, crdt.UnknownReplica,
        crdt.MalformedState, UnknownCounter, CounterExists, service.Contended, Unavailable,
        StoreError)}


def _error_doc(err: BaseException) -> dict[str, Any]:
    name = type(err).__name__ if type(err).__name__ in _ERRORS else (
        "CounterError" if isinstance(err, crdt.CounterError) else
        "Unavailable" if isinstance(err, Unavailable) else "StoreError")
    doc: dict[str, Any] = {"ok": False, "error": name, "message": str(err)}
    if isinstance(err, crdt.InsufficientRights):
        doc.update(available=err.available, needed=err.needed)
    return doc


def _error_from(doc: dict[str, Any]) -> Exception:
    cls = _ERRORS.get(str(doc.get("error")), StoreError)
    msg = str(doc.get("message", "error"))
    if cls is crdt.InsufficientRights:
        return crdt.InsufficientRights(msg, int(doc.get("available", 0)),
                                       int(doc.get("needed", 0)))
    return cls(msg)


async def _answer(mw: ServerMiddleware, req: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    try:
        key = req.get("key", "")
        if op == "dec":
            value = await mw.dec(key, req.get("n", 1), allow_global=bool(req.get("allow_global")))
        elif op == "inc":
            value = await mw.inc(key, req.get("n", 1), allow_global=bool(req.get("allow_global")))
        elif op == "value":
            value = await mw.value(key)
        elif op == "create":
            await mw.create(key, req["initial"], req.get("lower", 0), req.get("upper"))
            value = None
        elif op == "ping":
            return {"ok": True, "dc": mw.dc, "name": mw.name}
        else:
            raise crdt.CounterError(f"unknown op {op!r}; use create, dec, inc, value or ping")
    except (crdt.CounterError, StoreError) as err:
        return _error_doc(err)
    except (KeyError, TypeError) as err:
        return _error_doc(crdt.CounterError(f"malformed request: missing or mistyped {err}"))
    return {"ok": True, "value": value}


async def _serve_conn(mw: ServerMiddleware, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
    lock = asyncio.Lock()
    pending: set[asyncio.Task[None]] = set()

    async def one(line: bytes) -> None:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError:
            out = _error_doc(crdt.CounterError("request is not one JSON object per line"))
            req = {}
        else:
            out = await _answer(mw, req)
        out["id"] = req.get("id")
        async with lock:
            writer.write(json.dumps(out).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    try:
        while line := await reader.readline():
            t = asyncio.get_running_loop().create_task(one(line))
            pending.add(t)
            t.add_done_callback(pending.discard)
    except (ConnectionError, asyncio.LimitOverrunError, ValueError):
        pass
    except asyncio.CancelledError:
        # The server is stopping with this client still connected. End normally: Python
        # 3.11's stream callback logs a cancelled handler as an error with a traceback.
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        pending.clear()
    finally:
        for t in list(pending):
            with contextlib.suppress(Exception):
                await t
        writer.close()


async def serve_async(dc: str, store: str, peers: dict[str, str], port: int, *,
                      host: str = "127.0.0.1", dcs: Sequence[str] | None = None,
                      batch_ms: float = 2.0, batch_max: int = 256,
                      options: Options | None = None,
                      started: asyncio.Event | None = None) -> None:
    """Serve ``dc``'s server-based middleware on ``host:port`` until cancelled.

    ``store`` is ``dc``'s own store URL; ``peers`` maps every other DC to its store URL as
    reached from ``dc`` (through the WAN link). The counters' replicas are ``dcs`` (default:
    ``dc`` then the peers in the order given).
    """
    order = tuple(dcs) if dcs else (dc, *peers)
    placement = Placement.from_urls(dc, order, {dc: store, **peers})
    mw = ServerMiddleware(placement, options, batch_ms=batch_ms, batch_max=batch_max)
    mw.start()
    server = await asyncio.start_server(lambda r, w: _serve_conn(mw, r, w), host, port,
                                        limit=MAX_LINE_BYTES)
    try:
        print(f"counter server {dc} ({mw.name}) listening on {host}:{port}", flush=True)
        if started is not None:
            started.set()
        async with server:
            await server.serve_forever()
    finally:
        server.close()
        await mw.close()


def serve(dc: str, store: str, peers: dict[str, str], port: int, *, host: str = "127.0.0.1",
          dcs: Sequence[str] | None = None, batch_ms: float = 2.0, batch_max: int = 256,
          sync_ms: float = 200.0, threshold: int = 20, seed: int = 0) -> None:
    """Run ``dc``'s server-based middleware on ``host:port`` until SIGTERM/SIGINT (blocks).

    Times in ms. Raises ValueError naming the problem for a bad URL or option.
    """
    options = Options(sync_ms=sync_ms, threshold=threshold, seed=seed)

    async def main() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)  # type: ignore[union-attr]
        with contextlib.suppress(asyncio.CancelledError):
            await serve_async(dc, store, peers, port, host=host, dcs=dcs, batch_ms=batch_ms,
                              batch_max=batch_max, options=options)

    asyncio.run(main())


class RemoteCounterService:
    """CounterService of one DC served by a counter server, over one pipelined connection.

    ``await RemoteCounterService.connect(host, port)``; a lost connection fails every
    waiting call with Unavailable.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 dc: str, name: str, timeout_s: float) -> None:
        self.dc = dc
        self.name = name
        self.timeout_s = timeout_s
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, host: str, port: int, *, timeout_s: float = 10.0
                      ) -> RemoteCounterService:
        """Return a client of the counter server at ``host:port`` (Unavailable if none)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=MAX_LINE_BYTES), timeout_s)
        except (OSError, TimeoutError) as err:
            raise Unavailable(f"no counter server at {host}:{port} ({err}); start one with "
                              "`replicalab counter serve`") from None
        svc = cls(reader, writer, "?", "server-based", timeout_s)
        hello = await svc._call({"op": "ping"})
        svc.dc, svc.name = hello["dc"], hello["name"]
        return svc

    async def _read_loop(self) -> None:
        err: Exception = Unavailable("counter server closed the connection")
        try:
            while line := await self._reader.readline():
                doc = json.loads(line)
                fut = self._waiting.pop(doc.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(doc)
        except (OSError, ValueError) as e:
            err = Unavailable(f"connection to the counter server broke: {e}")
        finally:
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(err)
            self._waiting.clear()

    async def _call(self, req: dict[str, Any]) -> dict[str, Any]:
        if self._task.done():
            raise Unavailable("connection to the counter server is closed")
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        try:
            self._writer.write(json.dumps({**req, "id": rid}).encode() + b"\n")
            await self._writer.drain()
            doc = await asyncio.wait_for(fut, self.timeout_s)
        except (OSError, TimeoutError) as err:
            self._waiting.pop(rid, None)
            raise Unavailable(f"counter server did not answer: {err or 'timeout'}") from None
        if not doc.get("ok"):
            raise _error_from(doc)
        return doc

    async def create(self, key: str, initial: int, lower: int | None = 0,
                     upper: int | None = None) -> None:
        """Create ``key`` at the server's DC."""
        await self._call({"op": "create", "key": key, "initial": initial, "lower": lower,
                          "upper": upper})

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value after subtracting ``n`` at the server's DC."""
        return int((await self._call({"op": "dec", "key": key, "n": n,
                                      "allow_global": allow_global}))["value"])

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value after adding ``n`` at the server's DC."""
        return int((await self._call({"op": "inc", "key": key, "n": n,
                                      "allow_global": allow_global}))["value"])

    async def value(self, key: str) -> int:
        """Return the value as the server's DC knows it."""
        return int((await self._call({"op": "value", "key": key}))["value"])

    async def close(self) -> None:
        """Close the connection."""
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

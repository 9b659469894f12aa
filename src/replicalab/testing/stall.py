"""Making a store stop answering for a while, for the conformance suite's timeout check.

A :class:`Staller` gives the URL of the store to stall, freezes it and thaws it again:

* :class:`TcpStaller` (any URL with ``HOST:PORT``): a TCP relay on 127.0.0.1 that stands in
  for the URL's first node. Frozen, it keeps every connection open but passes no byte in
  either direction (a server stopped with SIGSTOP looks the same to a client); thawed, it
  delivers what it held, so a request sent during the freeze may still be carried out:
  its outcome is truly unknown to the client.
* :class:`SimStaller` (``sim://``): crashes every node of the simulated network and
  restarts them (in virtual time).

An adapter author whose store has neither can pass their own object with the same three
methods to :func:`replicalab.testing.run_conformance`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit


class Staller(Protocol):
    """Stalls one store: ``start`` returns the URL to open, then ``freeze``/``thaw``."""

    async def start(self, url: str) -> str:
        """Return the URL the stalled store is opened from (may be ``url`` itself)."""
        ...

    def freeze(self, store: Any) -> None:
        """Make ``store`` (opened from the URL ``start`` returned) stop answering."""
        ...

    def thaw(self, store: Any) -> None:
        """Make it answer again."""
        ...

    async def stop(self) -> None:
        """Release what ``start`` set up."""
        ...


class SimStaller:
    """Crashes and restarts every node of a simulated store's network."""

    async def start(self, url: str) -> str:
        """Return ``url`` unchanged (the simulated store is stalled from inside)."""
        return url

    def freeze(self, store: Any) -> None:
        """Crash every node the simulated network has now."""
        net = store.scheme.net
        for node in list(net.nodes.values()):
            net.crash(node)

    def thaw(self, store: Any) -> None:
        """Restart every node."""
        net = store.scheme.net
        for node in list(net.nodes.values()):
            net.restart(node)

    async def stop(self) -> None:
        """Nothing to release."""


class TcpStaller:
    """A relay in front of the URL's first ``HOST:PORT`` that can hold all traffic."""

    def __init__(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._upstream: tuple[str, int] = ("127.0.0.1", 0)

    async def start(self, url: str) -> str:
        """Listen on a free port of 127.0.0.1 and return ``url`` with its first node's
        ``HOST:PORT`` replaced by the relay's (user, password, path and query kept)."""
        parts = urlsplit(url)
        if parts.hostname is None or parts.port is None:
            raise ValueError("the URL names no HOST:PORT to stall")
        self._upstream = (parts.hostname, parts.port)
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        userinfo, at, _ = parts.netloc.rpartition("@")
        return urlunsplit(parts._replace(netloc=f"{userinfo}{at}127.0.0.1:{port}"))

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                     ) -> None:
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._pump(src, dst))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await src.read(65536):
                await self._flowing.wait()  # frozen: hold the bytes, read nothing more
                dst.write(data)
                await dst.drain()
        dst.close()

    def freeze(self, store: Any) -> None:
        """Hold every byte in both directions from now on."""
        self._flowing.clear()

    def thaw(self, store: Any) -> None:
        """Deliver what was held and let traffic flow again."""
        self._flowing.set()

    async def stop(self) -> None:
        """Close the relay and every connection through it."""
        self._flowing.set()
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)


def staller_for(url: str) -> Staller | None:
    """Return the staller that fits ``url``: simulated, TCP, or None (no ``HOST:PORT``)."""
    parts = urlsplit(url)
    if parts.scheme == "sim":
        return SimStaller()
    try:
        port = parts.port
    except ValueError:
        port = None
    return TcpStaller() if parts.hostname and port else None

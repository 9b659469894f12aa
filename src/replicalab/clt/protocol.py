"""The CLT wire format: length-prefixed frames over persistent TCP.

Every frame is ``u32 length | u8 kind | body`` (length counts kind and body). Kinds:

* PING / PONG: ``u32 round | u64 hlc_l_us | u32 hlc_c | payload``; the echo carries the
  payload back unchanged with the echoing agent's HLC timestamp.
* JSON: a UTF-8 JSON object, the control messages between coordinator and agent (``op``).
* BLOB: ``u32 json_length | JSON header | raw bytes``, bulk results sent back at the end.

:class:`FrameProtocol` is an asyncio protocol that cuts the byte stream into frames and hands
each to a callback together with the monotonic arrival time in µs, taken once per read so
that parsing cost is not charged to the measured round trip.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Callable
from typing import Any

PING = 1
PONG = 2
JSON = 3
BLOB = 4

_FRAME = struct.Struct("!IB")
_ECHO = struct.Struct("!IQI")
MAX_FRAME_BYTES = 1 << 30
"""Larger frames are refused: a peer speaking another protocol sends garbage lengths."""


def mono_us() -> int:
    """Return the machine's monotonic clock in µs."""
    return time.monotonic_ns() // 1000


def frame(kind: int, body: bytes) -> bytes:
    """Return one frame of ``kind`` around ``body``."""
    return _FRAME.pack(len(body) + 1, kind) + body


def echo_frame(kind: int, round_no: int, hlc_l_us: int, hlc_c: int, payload: bytes) -> bytes:
    """Return a PING or PONG frame for ``round_no`` stamped with HLC ``(l, c)``."""
    body_len = _ECHO.size + len(payload)
    return (_FRAME.pack(body_len + 1, kind) + _ECHO.pack(round_no, hlc_l_us, hlc_c)
            + payload)


def parse_echo(body: bytes) -> tuple[int, int, int, bytes]:
    """Return (round, hlc_l_us, hlc_c, payload) of a PING/PONG body (ValueError if short)."""
    if len(body) < _ECHO.size:
        raise ValueError(f"ping frame of {len(body)} bytes is shorter than its header")
    r, l_us, c = _ECHO.unpack_from(body)
    return r, l_us, c, body[_ECHO.size:]


def json_frame(obj: dict[str, Any]) -> bytes:
    """Return a JSON control frame."""
    return frame(JSON, json.dumps(obj, separators=(",", ":")).encode())


def blob_frame(header: dict[str, Any], data: bytes) -> bytes:
    """Return a BLOB frame: a JSON header followed by raw bytes."""
    head = json.dumps(header, separators=(",", ":")).encode()
    return frame(BLOB, struct.pack("!I", len(head)) + head + data)


def parse_blob(body: bytes) -> tuple[dict[str, Any], bytes]:
    """Return (header, data) of a BLOB body."""
    (n,) = struct.unpack_from("!I", body)
    return json.loads(body[4:4 + n]), body[4 + n:]


FrameHandler = Callable[[int, bytes, int], None]
"""Called with (kind, body, arrival_mono_us) for every complete frame."""


class FrameProtocol(asyncio.Protocol):
    """Splits a TCP stream into frames; ``on_frame`` gets each, ``on_lost`` the close."""

    def __init__(self, on_frame: FrameHandler,
                 on_lost: Callable[[Exception | None], None] | None = None) -> None:
        self.on_frame = on_frame
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket
            # Small pings must leave at once; Nagle would batch them and add delay.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        now = mono_us()
        buf = self._buf
        buf += data
        pos = 0
        while len(buf) - pos >= _FRAME.size:
            length, kind = _FRAME.unpack_from(buf, pos)
            if length < 1 or length > MAX_FRAME_BYTES:
                if self.transport is not None:
                    self.transport.close()
                return
            end = pos + 4 + length
            if end > len(buf):
                break
            self.on_frame(kind, bytes(buf[pos + 5:end]), now)
            pos = end
        if pos:
            del buf[:pos]

    def send(self, data: bytes) -> None:
        """Queue ``data`` on the transport (dropped silently once closed)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if self.on_lost is not None:
            self.on_lost(exc)


def split_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """Return (host, port) of ``HOST:PORT`` or ``PORT`` (ValueError naming the form)."""
    host, _, port = text.strip().rpartition(":")
    try:
        port_no = int(port)
    except ValueError:
        port_no = -1
    if not 0 < port_no < 65536:
        raise ValueError(f"address {text!r} must look like HOST:PORT (e.g. 127.0.0.1:7100)")
    return (host or default_host), port_no

"""Byte relays between two TCP streams, shared by the peer demultiplexers that sit in front
of etcd members (``cluster/etcd.py``) and Cassandra nodes (``cluster/cassandra_node.py``)."""

from __future__ import annotations

import asyncio


async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
               src_writer: asyncio.StreamWriter | None = None) -> None:
    """Copy ``src`` to ``dst`` until end of stream, then half-close ``dst``; returns None.

    On a broken connection ``dst`` is aborted, and so is ``src_writer`` (the other direction
    of ``src``'s connection) when given, so the opposite pipe stops too.
    """
    try:
        while data := await src.read(1 << 16):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except (OSError, RuntimeError):
        dst.transport.abort()
        if src_writer is not None:
            src_writer.transport.abort()

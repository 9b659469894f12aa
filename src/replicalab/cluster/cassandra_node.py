"""The process each Cassandra node runs under: its JVM, plus a demultiplexer of the
internode connections other nodes open to it (``python -m replicalab.cluster.cassandra_node``).

Why. Node j advertises ``broadcast_address`` A_j and listens on ``listen_address`` L_j (both
port 7000). Every node dials A_j to reach j, and Cassandra does not bind its outgoing
sockets, so the source address of every internode connection is 127.0.0.1 whoever opened
it: a per-destination proxy cannot know which region the sender is in. The internode
handshake names it, though: its first message (``HandshakeProtocol.Initiate``) is the
protocol magic ``0xCA552DFA``, a 4-byte flags word, then the initiator's broadcast address
(one length byte = address bytes + 2, the address, a 2-byte port) and a CRC. This
demultiplexer listens on A_j:7000, reads that much of each new connection, and splices it,
bytes read included, into the Toxiproxy proxy ``peer-i-j`` for sender i (upstream L_j:7000),
which carries the i→j delay one way and j→i the other. A connection that names no known
sender goes straight to L_j.

It also holds a shared lock on the cluster's loopback block (see ``loopback.py``) for as
long as it runs, and it ends when the JVM ends (signals are passed on).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

from replicalab.cluster.loopback import hold_shared
from replicalab.cluster.relay import pipe

PROTOCOL_MAGIC = 0xCA552DFA
_HEAD_TIMEOUT_S = 30.0
STOP_KILL_S = 3.0
"""After SIGTERM the JVM gets this long to drain (its shutdown hook flushes memtables and
tells the other nodes), then SIGKILL: ``cluster down`` deletes the data anyway, and a node
that waits on a peer already gone would otherwise hold the command for the full grace."""


def initiator_address(head: bytes) -> str | bool | None:
    """Return the sender's IPv4 address named by an internode Initiate message in ``head``,
    None if ``head`` is not one (or names none), or False if more bytes are needed."""
    if len(head) < 9:
        return False
    magic, flags = struct.unpack(">II", head[:8])
    if magic != PROTOCOL_MAGIC:
        return None
    request_version, max_version = (flags >> 8) & 0xFF, (flags >> 24) & 0xFF
    if request_version < 12 or max_version < 12:  # VERSION_40 = 12: older ones name no sender
        return None
    size = head[8]
    if len(head) < 9 + size:
        return False
    if size != 6:  # an IPv6 sender: not one of ours
        return None
    return socket.inet_ntoa(head[9:13])


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  direct: tuple[str, int], routes: dict[str, int]) -> None:
    up_writer = None
    try:
        head = b""
        sender: str | bool | None = False
        while sender is False:
            chunk = await asyncio.wait_for(reader.read(64), _HEAD_TIMEOUT_S)
            if not chunk:
                return
            head += chunk
            sender = initiator_address(head)
        port = routes.get(sender) if isinstance(sender, str) else None
        host, dport = ("127.0.0.1", port) if port else direct
        up_reader, up_writer = await asyncio.open_connection(host, dport)
        up_writer.write(head)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        pass
    finally:
        for w in (writer, up_writer):
            if w is not None:
                w.close()


async def _serve(listen: tuple[str, int], direct: tuple[str, int], routes: dict[str, int],
                 argv: list[str]) -> int:
    server = await asyncio.start_server(lambda r, w: _handle(r, w, direct, routes),
                                        listen[0], listen[1], reuse_address=True)
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    loop = asyncio.get_running_loop()

    def forward(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(sig)
        loop.call_later(STOP_KILL_S, kill)

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            child.kill()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, forward, sig)
    async with server:
        code = await asyncio.to_thread(child.wait)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run one node: hold the block lock, demultiplex, run the JVM; return its exit code."""
    p = argparse.ArgumentParser(prog="python -m replicalab.cluster.cassandra_node")
    p.add_argument("--lock", type=Path, required=True, help="the loopback block's lock file")
    p.add_argument("--listen", required=True, help="ADDRESS:PORT the node advertises")
    p.add_argument("--direct", required=True, help="ADDRESS:PORT the JVM listens on")
    p.add_argument("--route", action="append", default=[], help="SENDER_ADDRESS=PROXY_PORT")
    p.add_argument("java", nargs=argparse.REMAINDER, help="-- java ARGS...")
    args = p.parse_args(argv)
    java = args.java[1:] if args.java[:1] == ["--"] else args.java
    lock_fd = hold_shared(args.lock)  # noqa: F841 - held open until this process exits
    host, _, port = args.listen.rpartition(":")
    dhost, _, dport = args.direct.rpartition(":")
    routes = {}
    for r in args.route:
        address, _, proxy = r.rpartition("=")
        routes[address] = int(proxy)
    return asyncio.run(_serve((host, int(port)), (dhost, int(dport)), routes, java))


if __name__ == "__main__":
    sys.exit(main())

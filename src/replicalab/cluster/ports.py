"""Ports on 127.0.0.1: find free ones, refuse busy ones, wait for a server to listen."""

from __future__ import annotations

import socket
import time
from collections.abc import Collection


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (the OS picked it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def is_free(port: int) -> bool:
    """Return True if nothing listens on 127.0.0.1:``port`` and we may bind it.

    SO_REUSEADDR, as servers use it: connections lingering in TIME_WAIT do not count.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def allocate(count: int, base: int | None = None, avoid: Collection[int] = ()) -> list[int]:
    """Return ``count`` free ports: consecutive from ``base`` (ValueError naming a busy one),
    or picked by the OS when ``base`` is None, never one of ``avoid`` (ports promised to
    servers that have not bound them yet)."""
    if base is None:
        ports: list[int] = []
        while len(ports) < count:
            p = free_port()
            if p not in ports and p not in avoid:
                ports.append(p)
        return ports
    if not 1024 <= base <= 65535 - count:
        raise ValueError(f"--base-port {base} must be between 1024 and {65535 - count}")
    ports = list(range(base, base + count))
    for p in ports:
        if not is_free(p):
            raise ValueError(f"port {p} on 127.0.0.1 is already in use; pass another "
                             f"--base-port (this cluster needs {count} consecutive ports)")
    return ports


def wait_listening(port: int, timeout_s: float = 20.0) -> bool:
    """Return True once something accepts connections on 127.0.0.1:``port`` (False on timeout)."""
    return wait_listening_on("127.0.0.1", port, timeout_s)


def wait_listening_on(host: str, port: int, timeout_s: float = 20.0) -> bool:
    """Return True once something accepts connections on ``host``:``port`` (a loopback
    address; False on timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

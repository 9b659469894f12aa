"""Ports on 127.0.0.1: find free ones, refuse busy ones, wait for a server to listen.

Ports handed to servers come from below the kernel's ephemeral range. A port the OS picked
for ``bind(0)`` lies inside that range, where any outgoing connection may take it as its own
local port in the seconds before a slow server (a JVM starting, a node restarting after a
crash) binds it, and the server then dies with "address already in use". Processes that
allocate at the same time (pytest workers, two clusters) are kept apart by a small registry
of recently handed-out ports, shared through a locked file in the temp directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
import time
from collections.abc import Collection, Iterator
from pathlib import Path

from replicalab.errors import ParameterError

LOWEST = 20000       # the first port handed out; below it live many well-known services
HOLD_S = 600.0       # a handed-out port is not handed out again for this long
_TRIES_PER_PORT = 200


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free and promised to no one else."""
    return allocate(1)[0]


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


@contextlib.contextmanager
def _held() -> Iterator[dict[int, float]]:
    """Yield the registry {port: time handed out} under an exclusive lock; write it back."""
    path = Path(tempfile.gettempdir()) / f"replicalab-ports-{os.getuid()}"
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        now = time.time()
        held: dict[int, float] = {}
        for line in f.read().split("\n"):
            with contextlib.suppress(ValueError):
                port, at = line.split()
                if now - float(at) < HOLD_S:
                    held[int(port)] = float(at)
        yield held
        f.seek(0)
        f.truncate()
        f.write("".join(f"{p} {at:.3f}\n" for p, at in held.items()))


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
    or, when ``base`` is None, drawn below the ephemeral range and promised to no other
    caller for :data:`HOLD_S`, never one of ``avoid`` (ports promised to servers that have not
    bound them yet)."""
    if base is None:
        return _pick(count, set(avoid))
    if not 1024 <= base <= 65535 - count:
        raise ParameterError("base_port", f"{base} must be between 1024 and {65535 - count}")
    ports = list(range(base, base + count))
    for p in ports:
        if not is_free(p):
            raise ParameterError("base_port", f"{base}: port {p} on 127.0.0.1 is already in "
                                              f"use; pick another (this cluster needs {count} "
                                              "consecutive ports)")
    return ports


def _pick(count: int, avoid: set[int]) -> list[int]:
    hi = _ephemeral_low()
    if hi - LOWEST < 1000:  # an unusual kernel setting: fall back to the OS's picks
        return _os_picks(count, avoid)
    ports: list[int] = []
    with _held() as held:
        for _ in range(_TRIES_PER_PORT * count):
            p = random.randrange(LOWEST, hi)
            if p not in held and p not in avoid and p not in ports and is_free(p):
                ports.append(p)
                held[p] = time.time()
                if len(ports) == count:
                    return ports
    raise ValueError(f"found only {len(ports)} of {count} free ports on 127.0.0.1 between "
                     f"{LOWEST} and {hi}; stop servers left running (replicalab cluster down)")


def _os_picks(count: int, avoid: set[int]) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            p = int(s.getsockname()[1])
        if p not in ports and p not in avoid:
            ports.append(p)
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

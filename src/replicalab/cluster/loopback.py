"""Blocks of loopback addresses (127.B.K.0/24) that one cluster claims for itself.

Servers that need a fixed port on an address of their own (Cassandra: every node on
storage port 7000 and CQL port 9042) get a /24 of the loopback range. A block is claimed
machine-wide through lock files in the system's temporary directory, so a test cluster, a
user's cluster and another checkout's test run never share addresses:

* ``claim.lock``: held exclusively for the few milliseconds a claim takes, so claims are
  serialised;
* ``127.B.K.lock``: every process of the cluster (the node wrappers) holds a *shared* lock
  on it while it runs; a claimant takes it only if it can lock it *exclusively*, i.e. no
  process of another cluster holds it. The lock dies with the processes (a SIGKILL
  included): no stale claims to clean up.

The claimant converts its exclusive lock to a shared one under ``claim.lock`` (so no other
claimant can slip in) and keeps it until its node wrappers hold theirs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SECOND_OCTET = 42
"""Blocks are 127.42.K.0/24, K = 1..250 (127.0.0.0/16 left to everything else)."""

_CLAIM_WAIT_S = 30.0


def lock_dir() -> Path:
    """Return the machine-wide directory of block lock files (created, world-writable)."""
    d = Path(os.environ.get("REPLICALAB_LOCK_DIR") or tempfile.gettempdir()) / \
        "replicalab-loopback"
    d.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        d.chmod(0o1777)
    return d


@dataclass
class Block:
    """A claimed 127.42.K.0/24 and the open lock file that holds it (shared)."""

    k: int
    lock_path: Path
    fd: int = -1

    def address(self, host: int) -> str:
        """Return ``127.42.K.host``."""
        if not 1 <= host <= 254:
            raise ValueError(f"host part {host} is outside 1..254")
        return f"127.{SECOND_OCTET}.{self.k}.{host}"

    def release(self) -> None:
        """Close the claimant's lock (the node wrappers keep theirs)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def block_of(address: str) -> int:
    """Return K of an address ``127.42.K.x`` (ValueError for another address)."""
    parts = address.split(".")
    if len(parts) != 4 or parts[:2] != ["127", str(SECOND_OCTET)]:
        raise ValueError(f"{address} is not in a replicalab loopback block")
    return int(parts[2])


def lock_path(k: int) -> Path:
    """Return the lock file of block ``k``."""
    return lock_dir() / f"127.{SECOND_OCTET}.{k}.lock"


@contextlib.contextmanager
def _claim_lock(wait_s: float) -> Iterator[None]:
    fd = os.open(lock_dir() / "claim.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ValueError(f"another process holds {lock_dir() / 'claim.lock'} for "
                                     f"over {wait_s:.0f} s; try again") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _bindable(addresses: Sequence[str], ports: Sequence[int]) -> bool:
    """Return True if nothing listens on any (address, port) pair (SO_REUSEADDR bind)."""
    for a in addresses:
        for p in ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind((a, p))
                except OSError:
                    return False
    return True


def claim(hosts: Sequence[int], ports: Sequence[int], first: int = 1, last: int = 250,
          wait_s: float = _CLAIM_WAIT_S) -> Block:
    """Claim the first free block among K = ``first``..``last`` whose addresses
    ``127.42.K.h`` (h in ``hosts``) have all ``ports`` free; return it holding a shared
    lock (ValueError when every block is taken)."""
    with _claim_lock(wait_s):
        for k in range(first, last + 1):
            path = lock_path(k)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            with contextlib.suppress(OSError):
                os.chmod(path, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            b = Block(k, path)
            if not _bindable([b.address(h) for h in hosts], ports):
                os.close(fd)  # someone outside replicalab's locks uses these addresses
                continue
            fcntl.flock(fd, fcntl.LOCK_SH)  # under claim.lock: no claimant can slip in
            b.fd = fd
            return b
    raise ValueError(f"every loopback block 127.{SECOND_OCTET}.{first}..{last}.0/24 is "
                     f"taken (lock files in {lock_dir()}); stop a cluster first")


def hold_shared(path: Path, wait_s: float = 10.0) -> int:
    """Open ``path`` and take a shared lock on it (waiting out a claimant's momentary
    exclusive check); return the fd, kept open as long as the caller runs."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                return fd  # run unlocked rather than not at all; the claim check binds too
            time.sleep(0.05)

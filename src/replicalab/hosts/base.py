"""The Host protocol (Jepsen's ``control``): what replicalab asks of a machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from replicalab.hosts.inventory import HostSpec


class HostError(ValueError):
    """A host could not be reached, refused the key, or a command on it failed: one line
    naming the host and the fix."""


@dataclass(frozen=True)
class RunResult:
    """What a command on a host did: exit code, standard output and error (text)."""

    rc: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        """Return True when the command exited 0."""
        return self.rc == 0


class Host(Protocol):
    """A machine replicalab runs commands on."""

    spec: HostSpec

    def run(self, cmd: str, timeout_s: float = 30.0, stdin: bytes | None = None,
            check: bool = True) -> RunResult:
        """Run shell command ``cmd`` on the host; HostError when it fails and ``check``."""
        ...

    def put(self, data: bytes, remote: str, mode: int = 0o644) -> None:
        """Write ``data`` to file ``remote`` on the host (its directory created)."""
        ...

    def start(self, cmd: str, log: str, pid_file: str) -> int:
        """Start ``cmd`` detached in a session of its own (it outlives the SSH session),
        output to ``log``, its pid written to ``pid_file``; return the pid."""
        ...

    def signal(self, pid: int, sig: str) -> None:
        """Send signal ``sig`` (a name: KILL, STOP, CONT, TERM) to ``pid``'s process group
        and ``pid``."""
        ...

    def read(self, path: str) -> str:
        """Return the text of file ``path`` on the host."""
        ...

"""Hosts over SSH: the OpenSSH client with one multiplexed connection per host.

Every command is one ``ssh`` call through the host's control socket, so a command costs a
round trip, not a handshake. The master connection is opened on first use with its output
to a log file (a master that inherits a pipe keeps the first caller waiting) and closes by
itself ``CONTROL_PERSIST_S`` after its last use, or at :meth:`SshHost.close`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from replicalab.hosts.base import HostError, RunResult
from replicalab.hosts.inventory import HostSpec, Inventory

CONTROL_PERSIST_S = 60
"""How long an idle master connection stays open (s)."""
CONNECT_TIMEOUT_S = 5
_SSH_FAILED = 255  # what ssh exits with when it, not the remote command, failed

T = TypeVar("T")


def running_test(pid: int | str) -> str:
    """Return a shell test that succeeds while process ``pid`` (a number, or a shell
    expansion such as ``$p``) runs: it exists and is not a zombie. The blank after
    ``State:`` is excluded from the class too: with ``[^Z]`` alone, ``[[:space:]]*`` matches
    nothing and the tab itself passes as "not Z", so a zombie the init process has not yet
    reaped (here that takes seconds) read as a live server and a crashed one was never
    restarted."""
    return f"grep -qs '^State:[[:space:]]*[^Z[:space:]]' /proc/{pid}/status"
A = TypeVar("A")


def control_dir() -> Path:
    """Return the directory of the control sockets (short: a socket path has ~100 bytes)."""
    d = Path(tempfile.gettempdir()) / f"rl-ssh-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    return d


class SshHost:
    """A host reached with the OpenSSH client (see the module docstring)."""

    def __init__(self, spec: HostSpec, known_hosts: str = "") -> None:
        self.spec = spec
        self.known_hosts = known_hosts
        tag = hashlib.sha1(f"{spec.where}|{spec.key}".encode()).hexdigest()[:16]
        self.control = control_dir() / tag
        self._lock = threading.Lock()
        self._connected = False

    def _options(self) -> list[str]:
        s = self.spec
        opts = ["-p", str(s.port), "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", f"ControlPath={self.control}", "-o", "LogLevel=ERROR"]
        if s.key:
            opts += ["-i", s.key, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            # a known_hosts made for these hosts (emulated ones): their keys must match
            opts += ["-o", f"UserKnownHostsFile={self.known_hosts}",
                     "-o", "StrictHostKeyChecking=yes"]
        else:
            opts += ["-o", "StrictHostKeyChecking=accept-new"]
        return opts

    def _argv(self, *options: str, command: str | None = None) -> list[str]:
        tail = [] if command is None else ["--", command]
        return ["ssh", *self._options(), *options, f"{self.spec.user}@{self.spec.address}",
                *tail]

    def _problem(self, err: str) -> HostError:
        s = self.spec
        last = next((x for x in reversed(err.strip().splitlines()) if x.strip()), "no answer")
        if "Permission denied" in err:
            why = (f"refuses the key {s.key or '(ssh defaults)'}: add its public key to "
                   f"{s.user}'s ~/.ssh/authorized_keys there")
        elif "Host key verification failed" in err or "REMOTE HOST IDENTIFICATION" in err:
            why = (f"has another host key than {self.known_hosts or '~/.ssh/known_hosts'} "
                   "says; check the machine, then update that file")
        else:
            why = f"is unreachable ({last}); check the address, port and that sshd runs"
        return HostError(f"host {s.name} ({s.where}) {why}")

    def connect(self) -> None:
        """Open the master connection if none is open (HostError naming the problem)."""
        with self._lock:
            if self._connected:
                return
            check = subprocess.run(self._argv("-O", "check"), capture_output=True, text=True,
                                   timeout=CONNECT_TIMEOUT_S + 5, check=False)
            if check.returncode == 0:
                self._connected = True
                return
            # no master answers there: a socket left by one that was killed would make the
            # new master give up multiplexing ("already exists")
            self.control.unlink(missing_ok=True)
            log = self.control.with_suffix(".log")
            with log.open("ab") as out:
                done = subprocess.run(
                    self._argv("-o", "ControlMaster=yes",
                               "-o", f"ControlPersist={CONTROL_PERSIST_S}", command="true"),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                    timeout=CONNECT_TIMEOUT_S + 10, check=False)
            if done.returncode != 0:
                said = log.read_text(errors="replace")[-2000:]
                log.unlink(missing_ok=True)  # no master: nothing will remove it
                raise self._problem(said)
            self._connected = True

    def close(self) -> None:
        """Close the master connection (nothing if none is open)."""
        self._connected = False
        subprocess.run(self._argv("-O", "exit"), capture_output=True, timeout=10, check=False)
        self.control.with_suffix(".log").unlink(missing_ok=True)

    def _wrap(self, cmd: str) -> str:
        return f"sudo -n sh -c {shlex.quote(cmd)}" if self.spec.sudo else cmd

    def run(self, cmd: str, timeout_s: float = 30.0, stdin: bytes | None = None,
            check: bool = True) -> RunResult:
        """Run ``cmd`` (a POSIX shell line) on the host; return its exit code and output.
        HostError when ssh cannot reach the host, or when ``check`` and the command fails."""
        for attempt in range(2):
            self.connect()
            try:
                done = subprocess.run(
                    # never a master here: one would keep this call's pipes open; a master
                    # gone since (idle time out, sshd restarted) fails with 255 and the
                    # loop opens another
                    self._argv("-o", "ControlMaster=no", command=self._wrap(cmd)),
                    input=stdin if stdin is not None else b"", capture_output=True,
                    timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                raise HostError(f"host {self.spec.name}: {cmd.split()[0]!r} took over "
                                f"{timeout_s:g} s") from None
            out = done.stdout.decode(errors="replace")
            err = done.stderr.decode(errors="replace")
            if done.returncode != _SSH_FAILED or out:
                break
            self._connected = False
            if attempt:
                raise self._problem(err)
        result = RunResult(done.returncode, out, err)
        if check and not result.ok:
            said = (err.strip() or out.strip() or "no output").splitlines()[-1]
            raise HostError(f"host {self.spec.name}: `{cmd[:80]}` failed (exit "
                            f"{done.returncode}): {said}")
        return result

    def put(self, data: bytes, remote: str, mode: int = 0o644) -> None:
        """Write ``data`` to ``remote`` on the host (its directory created)."""
        q = shlex.quote(remote)
        self.run(f"mkdir -p $(dirname {q}) && cat > {q}.part && chmod {mode:o} {q}.part "
                 f"&& mv {q}.part {q}", stdin=data)

    def start(self, cmd: str, log: str, pid_file: str) -> int:
        """Start ``cmd`` detached (``setsid``, stdin from /dev/null, output appended to
        ``log``), write its pid to ``pid_file`` and return it."""
        lq, pq = shlex.quote(log), shlex.quote(pid_file)
        # the pid printed is $! itself, not the file read back: a started script that
        # writes its own pid to the same file truncates it first, and a `cat` between the
        # two read it empty (the server then ran untracked)
        line = (f"mkdir -p $(dirname {lq}) $(dirname {pq}) || exit 1; "
                f"setsid sh -c {shlex.quote('exec ' + cmd)} >>{lq} 2>&1 </dev/null & "
                f"p=$!; echo $p > {pq}; echo $p")
        out = self.run(line).out.strip()
        try:
            return int(out.splitlines()[-1])
        except (ValueError, IndexError):
            raise HostError(f"host {self.spec.name}: starting {cmd.split()[0]!r} gave no "
                            f"pid ({out[:80]!r}); see {log} there") from None

    def signal(self, pid: int, sig: str) -> None:
        """Send ``sig`` to ``pid``'s process group and to ``pid`` (gone: nothing)."""
        self.run(f"kill -s {sig} -- -{pid} 2>/dev/null; kill -s {sig} {pid} 2>/dev/null; "
                 "true")

    def read(self, path: str) -> str:
        """Return the text of ``path`` on the host (HostError when it cannot be read)."""
        return self.run(f"cat {shlex.quote(path)}").out

    def alive(self, pid: int) -> bool:
        """Return True if ``pid`` runs on the host and is not a zombie."""
        r = self.run(running_test(int(pid)), check=False)
        return r.ok


def hosts_of(inv: Inventory) -> list[SshHost]:
    """Return one SshHost per host of the inventory, in its order."""
    return [SshHost(h, inv.known_hosts) for h in inv.hosts]


def each(items: Sequence[A], fn: Callable[[A], T]) -> list[T]:
    """Return ``fn(item)`` for every item (a host, or a host and its work), run
    concurrently; the first error (in item order) is raised once all are done."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(len(items), 16),
                            thread_name_prefix="host") as pool:
        futures = [pool.submit(fn, h) for h in items]
    return [f.result() for f in futures]

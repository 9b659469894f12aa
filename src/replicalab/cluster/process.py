"""Server processes started by replicalab: start, signal, stop; nothing else is touched."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def start(argv: list[str], log: Path, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> int:
    """Start ``argv`` detached in its own session, output to ``log``; return its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=cwd,
                                env={**os.environ, **(env or {})}, start_new_session=True)
    return proc.pid


def alive(pid: int) -> bool:
    """Return True if process ``pid`` exists and is not a zombie."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def descendants(pid: int) -> list[int]:
    """Return the pids of every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(") ", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group led by ``pid`` and to every descendant (servers
    such as PostgreSQL put their children in groups of their own)."""
    targets = descendants(pid)
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)
    for child in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, sig)


def stop(pid: int, timeout_s: float = 10.0) -> None:
    """Stop ``pid``'s group: SIGCONT (it may be paused), SIGTERM, then SIGKILL after a wait."""
    if not alive(pid):
        _reap(pid)
        return
    signal_group(pid, signal.SIGCONT)
    signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not alive(pid):
            return
        time.sleep(0.05)
    signal_group(pid, signal.SIGKILL)
    for _ in range(100):
        _reap(pid)
        if not alive(pid):
            return
        time.sleep(0.02)


def kill9(pid: int) -> None:
    """Crash ``pid``'s group at once (SIGKILL), as a power failure would."""
    signal_group(pid, signal.SIGKILL)
    for _ in range(100):
        _reap(pid)
        if not alive(pid):
            return
        time.sleep(0.02)

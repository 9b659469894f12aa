"""Processes replicalab starts, and the one registry that stops them.

Every server, proxy, agent and worker a command starts goes through :func:`start` (or, for a
process started another way such as a ``multiprocessing`` worker, :func:`track`), which puts
its pid in the registry. :func:`stop` stops one and forgets it; :func:`stop_all` stops every
process still registered, all at once (SIGCONT, SIGTERM, then SIGKILL after a grace time).
The CLI entry calls :func:`stop_all` whatever way a command ends (normal exit, error,
Ctrl-C, SIGTERM, which :func:`install_signal_handlers` turns into Ctrl-C), and an ``atexit``
hook does the same for library users, so nothing started is left behind. A process meant
to outlive its command (``replicalab cluster up``) is handed over with :func:`release`.

Servers start in a session of their own: a Ctrl-C at the terminal reaches the command, not
its servers, and the command stops them in order after saving what it recorded.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import NoReturn

from replicalab.runtime import interrupts

STOP_GRACE_S = 10.0
"""How long a stopped process gets to exit after SIGTERM before SIGKILL (s)."""


_BORN: dict[int, int] = {}
"""Start time (clock ticks since boot) of every pid this process started or tracked, kept
after the process is gone: a pid that dies can be handed to an unrelated process, and a
stale pid (a crashed node's, say) must not get that process stopped."""


def start_ticks(pid: int) -> int | None:
    """Return when process ``pid`` started, in clock ticks since boot (/proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def born(pid: int) -> int | None:
    """Return the start time (clock ticks since boot) this process recorded for ``pid``
    (it started or tracked it, or loaded a cluster that saved it), else None."""
    return _BORN.get(pid)


def remember_born(pid: int, ticks: int) -> None:
    """Record that ``pid`` was started at ``ticks`` (by another replicalab command: a saved
    cluster), so that :func:`reused` recognises a recycled pid; a start time this process
    saw itself is kept."""
    _BORN.setdefault(pid, ticks)


def reused(pid: int) -> bool:
    """Return True if ``pid`` now names another process than the one this process started
    or tracked under it (the pid was recycled); False when unknown."""
    born = _BORN.get(pid)
    now = start_ticks(pid) if born is not None else None
    return born is not None and now is not None and now != born


class Registry:
    """The pids this process started and still owns, each with a label (thread-safe)."""

    def __init__(self) -> None:
        self._pids: dict[int, str] = {}
        self._lock = threading.Lock()

    def add(self, pid: int, label: str) -> None:
        """Own ``pid`` (stopped by :meth:`stop_all` unless released or stopped first)."""
        born = start_ticks(pid)
        with self._lock:
            self._pids[pid] = label
            if born is not None:
                _BORN[pid] = born

    def discard(self, pid: int) -> None:
        """Forget ``pid`` (it was stopped, or handed over)."""
        with self._lock:
            self._pids.pop(pid, None)

    def owned(self) -> dict[int, str]:
        """Return {pid: label} of every process still owned."""
        with self._lock:
            return dict(self._pids)

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> list[int]:
        """Stop every owned process at once; return their pids."""
        pids = list(self.owned())
        stop_many(pids, grace_s)
        return pids


REGISTRY = Registry()


def start(argv: list[str], log: Path, cwd: Path | None = None,
          env: dict[str, str] | None = None, label: str = "") -> int:
    """Start ``argv`` detached in its own session, output to ``log``, owned by the registry
    (see the module docstring); return its pid."""
    import subprocess  # here: a command that starts nothing (check FILE) does not load it

    log.parent.mkdir(parents=True, exist_ok=True)
    # A Ctrl-C while Popen waits for the child's exec raised out of Popen with the child
    # running and its pid lost: an agent of `clt local` outlived its command by hours. The
    # signal waits until the pid is registered (stop_all then stops the child), then acts.
    with signals_deferred():
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=cwd,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
        REGISTRY.add(proc.pid, label or Path(argv[0]).name)
    return proc.pid


def track(pid: int, label: str) -> None:
    """Own a process started some other way (e.g. a multiprocessing worker): it is stopped
    with everything else unless :func:`stop` or :func:`release` comes first."""
    REGISTRY.add(pid, label)


def release(pids: Iterable[int]) -> None:
    """Hand ``pids`` over: they outlive this process (``cluster up`` leaves its cluster)."""
    for pid in pids:
        REGISTRY.discard(pid)


def owned() -> dict[int, str]:
    """Return {pid: label} of every process this process started and still owns."""
    return REGISTRY.owned()


def stop_all(grace_s: float = STOP_GRACE_S) -> list[int]:
    """Stop every process still owned, all at once; return their pids."""
    return REGISTRY.stop_all(grace_s)


atexit.register(stop_all)


def exit_now(code: int) -> NoReturn:
    """End this process with ``code`` at once: stop every process still owned, run the exit
    hooks (``atexit``: temporary directories, log handlers), flush stdout and stderr, and
    leave without tearing the interpreter down. Freeing the modules of a command that
    loaded numpy, pyarrow and the simulator took 0.25-0.7 s on a busy 2-core machine, of
    the one second a Ctrl-C'd command has to end in; everything it saved is on disk by
    then."""
    with signals_held():
        stop_all()
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def install_signal_handlers() -> None:
    """Make SIGTERM (what ``timeout``, CI runners and process managers send) act as Ctrl-C:
    the same orderly shutdown, whatever the running code does with SIGINT (a Python
    KeyboardInterrupt, asyncio's cancellation of the main task, a loop's own handler)."""

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, on_sigterm)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM inside the block (a second Ctrl-C must not cut the
    stopping of servers short; the block is bounded by the stop grace time)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in before:
        signal.signal(s, signal.SIG_IGN)
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM inside the block and deliver them, in the order they came,
    to the handlers in force once it ends: for a block that must not be cut half way but is
    short (start a process and register its pid). Outside the main thread (where Python
    runs no signal handler) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def note(sig: int, _frame: FrameType | None) -> None:
        held.append(sig)

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in before:
        signal.signal(s, note)
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        for sig in dict.fromkeys(held):
            # an asyncio loop's add_signal_handler already had it (through its wakeup fd)
            if getattr(before[sig], "__name__", "") != "_sighandler_noop":
                signal.raise_signal(sig)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[list[bool]]:
    """Yield a flag, ``[False]``, that a SIGINT or SIGTERM inside the block sets instead of
    cutting the block short: saving what a run recorded must not be interrupted half way
    (a Ctrl-C during the save once left a run directory holding only a ``.tmp`` file).
    The caller treats a set flag as an interrupt once the block is done."""
    flag = [False]
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def note(_sig: int, _frame: FrameType | None) -> None:
        flag[0] = True
        interrupts.note()

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in before:
        signal.signal(s, note)
    try:
        yield flag
    finally:
        for s, h in before.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


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
    """Send ``sig`` to ``pid``, to the process group it leads and to every descendant
    (servers such as PostgreSQL put their children in groups of their own); nothing when
    ``pid`` was recycled for a process this one did not start (:func:`reused`)."""
    if reused(pid):
        return
    targets = descendants(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    for child in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, sig)


def _wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait up to ``timeout_s`` for ``pids`` to exit (reaping our children); return those
    still alive."""
    deadline = time.monotonic() + timeout_s
    left = list(pids)
    while left:
        for pid in left:
            _reap(pid)
        left = [p for p in left if alive(p)]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    return left


def stop_many(pids: Iterable[int], grace_s: float = STOP_GRACE_S) -> None:
    """Stop every process of ``pids`` (and its group and descendants) at once: SIGCONT (it
    may be paused), SIGTERM, SIGKILL for those still alive after ``grace_s``; forget them."""
    pids = [p for p in pids if p > 0]
    # a descendant must not outlive its parent's SIGKILL: remember them all now
    family = {p: descendants(p) for p in pids if alive(p) and not reused(p)}
    for pid in family:
        signal_group(pid, signal.SIGCONT)
        signal_group(pid, signal.SIGTERM)
    left = _wait_gone(list(family), grace_s)
    for pid in left:
        signal_group(pid, signal.SIGKILL)
    stragglers = [c for p in family for c in family[p] if alive(c)]
    for child in stragglers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    _wait_gone(left + stragglers, 2.0)
    for pid in pids:
        _reap(pid)
        REGISTRY.discard(pid)


def stop(pid: int, timeout_s: float = STOP_GRACE_S) -> None:
    """Stop ``pid``'s group: SIGCONT (it may be paused), SIGTERM, then SIGKILL after a wait;
    the registry forgets it."""
    stop_many([pid], timeout_s)


def kill9(pid: int) -> None:
    """Crash ``pid``'s group at once (SIGKILL), as a power failure would."""
    signal_group(pid, signal.SIGKILL)
    _wait_gone([pid], 2.0)
    REGISTRY.discard(pid)

"""The machine's own noise while a real-time run measures something: what the client process
and the emulated network added that the measured system did not.

Two instruments run beside a workload, in its event loop, for as long as it runs:

* a **stall detector**: a task that asks to wake every ``tick_ms`` and records how late it
  woke. Lateness is time the client process could not run (other processes on the cores,
  the collector, the workload's own callbacks): every operation the run times can be
  stretched by as much.
* a **loopback echo**: a small TCP echo server in a thread of this process, pinged every
  ``echo_every_ms`` over one connection, either directly or through a Toxiproxy proxy with
  no toxic (``workloads/noise.py`` makes one on the run's own Toxiproxy). Its round trip less
  the fastest one seen is what one hop through the emulation added: the emulated links of
  a run are the same Toxiproxy process on the same cores.

and, in a process of its own beside the servers the run measures (:class:`ServerWatch`,
``runtime/serverwatch.py``):

* their **run-queue wait**: how long the servers' threads (and their children's, and
  Toxiproxy's) waited for a core each time they were woken, from the kernel's per-thread
  ``/proc/PID/task/TID/schedstat``: a busy machine delays the servers as it delays the client,
  and the client's stall detector cannot see it;
* an **fsync** in a directory on the servers' disk, for a store whose writes wait for one
  (etcd's log, MinIO's metadata): its time above the fastest is what the disk added to such a
  write. A write that took 673 ms where its model said 175 (etcd, a quiet suite, the client
  stalled 28 ms at most) is what this is for.

:class:`NoiseFloor` is what they measured; ``added_p99_ms`` is the larger of the two p99
figures and, where measured, the servers' p99 wait per wake-up and the fsync's p99 above its
fastest: the "machine added X ms at p99" of a verdict that cannot be trusted beyond it.
Every stall or echo excess of ``EVENT_MS`` or more is kept with its time (``events``, time
on the machine-wide monotonic clock of the history), so a single late measurement can be
matched with what the machine did while it was taken (``added_between_ms``); the servers'
own (``server_events``) are kept apart, since what the client saw is also what the PBS model
draws its added delays from (``draw_added``) and the servers' share of it is already there.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

TICK_MS = 5.0
"""How often the stall detector asks to wake (ms)."""
ECHO_EVERY_MS = 20.0
"""How often the echo is pinged (ms)."""
STOP_S = 1.0
"""How long :meth:`NoiseMonitor.stop` waits for its tasks to end (they end at their next
wake-up; a task that does not is left, never waited for)."""
ECHO_TIMEOUT_S = 2.0
"""A ping unanswered this long counts as a round trip of this long (the run goes on)."""
_PING = b"replicalab-noise\n"
EVENT_MS = 2.0
"""A stall, or an echo above its fastest, at least this long is kept with its time, so that a
late measurement can be matched with the noise that was there when it was taken."""
MAX_EVENTS = 2000
"""Events kept per run (the longest, when there are more)."""
SERVER_EVERY_MS = 100.0
"""How often the servers' threads and the fsync are sampled (ms), at the most."""
SERVER_MAX_S = 6 * 3600.0
"""The longest the server watch runs if nobody stops it (a client killed with -9 closes its
stdin, which stops it too)."""


def _pct(x: list[float], q: float) -> float:
    return round(float(np.percentile(x, q)), 3) if x else 0.0


def load_1m() -> float:
    """Return the machine's 1-minute load average (runnable processes; 0.0 where unknown)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return 0.0


@dataclass(frozen=True)
class NoiseFloor:
    """What the machine added while a run ran (ms): the client loop's stalls (how late a
    ``tick_ms`` timer fired) and a loopback echo's round trip above its fastest, ``via``
    Toxiproxy (no toxic) or plain loopback; the 1-minute load average at both ends."""

    stall_p50_ms: float
    stall_p99_ms: float
    stall_max_ms: float
    stall_samples: int
    echo_via: str
    echo_min_ms: float
    echo_p50_ms: float
    echo_p99_ms: float
    echo_max_ms: float
    echo_samples: int
    load_1m_start: float
    load_1m_end: float
    cores: int
    events: tuple[tuple[int, float], ...] = ()  # (monotonic ns at its end, ms added)
    # the servers (ServerWatch; 0 samples: not watched, as in a floor recorded before them)
    server_wait_p50_ms: float = 0.0  # a server thread's wait for a core per wake-up
    server_wait_p99_ms: float = 0.0
    server_wait_max_ms: float = 0.0
    server_samples: int = 0
    server_threads: int = 0  # the most threads one sample read
    fsync_dir: str = ""  # where the fsync ran ("": not measured, the store waits for none)
    fsync_min_ms: float = 0.0
    fsync_p50_ms: float = 0.0
    fsync_p99_ms: float = 0.0
    fsync_max_ms: float = 0.0
    fsync_samples: int = 0
    server_events: tuple[tuple[int, float], ...] = ()

    @property
    def echo_added_p99_ms(self) -> float:
        """Return the echo's p99 above its fastest round trip (ms)."""
        return round(max(self.echo_p99_ms - self.echo_min_ms, 0.0), 3)

    @property
    def fsync_added_p99_ms(self) -> float:
        """Return the fsync's p99 above its fastest (ms; 0.0 when none was measured)."""
        return round(max(self.fsync_p99_ms - self.fsync_min_ms, 0.0), 3)

    @property
    def added_p99_ms(self) -> float:
        """Return what the machine added at p99 (ms): the largest of the client loop's p99
        stall, the echo's p99 above its fastest round trip, the servers' p99 wait for a core
        per wake-up and the fsync's p99 above its fastest."""
        return round(max(self.stall_p99_ms, self.echo_added_p99_ms, self.server_wait_p99_ms,
                         self.fsync_added_p99_ms), 3)

    @property
    def added_max_ms(self) -> float:
        """Return the most the machine added to one measurement during the run (ms): the
        longest stall, echo excess, server wait per wake-up or fsync excess."""
        return round(max(self.stall_max_ms, max(self.echo_max_ms - self.echo_min_ms, 0.0),
                         self.server_wait_max_ms,
                         max(self.fsync_max_ms - self.fsync_min_ms, 0.0)), 3)

    @property
    def cause(self) -> str:
        """Return which instrument measured :attr:`added_p99_ms` ("client stalls", "the
        echo", "server run-queue wait" or "fsync")."""
        figures = [(self.stall_p99_ms, "client stalls"), (self.echo_added_p99_ms, "the echo"),
                   (self.server_wait_p99_ms, "server run-queue wait"),
                   (self.fsync_added_p99_ms, "fsync")]
        return max(figures, key=lambda x: x[0])[1]

    def to_json(self) -> dict[str, Any]:
        """Return the floor as plain data (ms, counts, load averages; events as [ns, ms])."""
        return {**asdict(self), "events": [list(e) for e in self.events],
                "server_events": [list(e) for e in self.server_events],
                "echo_added_p99_ms": self.echo_added_p99_ms,
                "fsync_added_p99_ms": self.fsync_added_p99_ms,
                "added_p99_ms": self.added_p99_ms, "cause": self.cause}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> NoiseFloor:
        """Return the floor :meth:`to_json` wrote."""
        names = cls.__dataclass_fields__
        got = {k: v for k, v in d.items() if k in names}
        for k in ("events", "server_events"):
            got[k] = tuple((int(t), float(ms)) for t, ms in d.get(k, ()))
        return cls(**got)

    def added_between_ms(self, start_ns: int, end_ns: int) -> float:
        """Return the longest stall, echo excess, server wait or fsync excess (ms) that ended
        within [start, end + its own length] ns: what the machine added while something
        between those times ran."""
        return max((ms for t, ms in (*self.events, *self.server_events)
                    if start_ns <= t <= end_ns + int(ms * 1e6)), default=0.0)

    def draw_added(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Return ``n`` draws (ms) of what the machine added to one measured step, as the
        run saw it: each of its stall and echo samples equally likely, the ``events`` (the
        samples of ``EVENT_MS`` or more, the longest ``MAX_EVENTS`` of them) at their
        value and every other sample as 0."""
        samples = self.stall_samples + self.echo_samples
        out = np.zeros(n)
        if samples <= 0 or not self.events:
            return out
        hit = rng.random(n) < min(len(self.events) / samples, 1.0)
        out[hit] = rng.choice(np.array([ms for _, ms in self.events]), int(hit.sum()))
        return out

    def line(self) -> str:
        """Return one sentence: what the machine added at p99 and from what."""
        servers = "" if not self.server_samples else (
            f"; the servers' threads waited {self.server_wait_p99_ms:.1f} ms per wake-up for "
            f"a core at p99, max {self.server_wait_max_ms:.1f} ms")
        disk = "" if not self.fsync_samples else (
            f"; an fsync beside their data {self.fsync_added_p99_ms:.1f} ms over its fastest "
            f"{self.fsync_min_ms:.2f} ms at p99, max {self.fsync_max_ms:.1f} ms")
        return (f"the machine added {self.added_p99_ms:.1f} ms at p99 (client stalls p99 "
                f"{self.stall_p99_ms:.1f} ms, max {self.stall_max_ms:.1f} ms; a loopback echo "
                f"through {self.echo_via} {self.echo_added_p99_ms:.1f} ms over its fastest "
                f"{self.echo_min_ms:.2f} ms{servers}{disk}; load {self.load_1m_start:g} to "
                f"{self.load_1m_end:g} on {self.cores} cores)")


def worst(floors: list[NoiseFloor]) -> NoiseFloor | None:
    """Return the floor that added the most at p99 (None for none)."""
    return max(floors, key=lambda f: f.added_p99_ms, default=None)


class EchoServer:
    """A TCP echo server on 127.0.0.1 in a thread of its own (blocking sockets: it runs
    whatever the event loop under test is doing)."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="noise-echo", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        conn.settimeout(0.5)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                with contextlib.suppress(OSError):
                    conn.sendall(data)

    def close(self) -> None:
        """Stop serving (the thread ends within 0.5 s)."""
        self._stop.set()
        self._sock.close()


@dataclass(frozen=True)
class ServerNoise:
    """What :class:`ServerWatch` measured (ms; the events as (monotonic ns, ms))."""

    waits_ms: tuple[float, ...]
    threads: int
    fsync_dir: str
    fsyncs_ms: tuple[float, ...]
    events: tuple[tuple[int, float], ...]

    @classmethod
    def parse(cls, text: str, fsync_dir: str) -> ServerNoise:
        """Return what the lines of ``runtime/serverwatch.py`` say (a last line cut short
        by a kill is left out); an fsync's event is its time above the fastest before it."""
        waits, fsyncs, events, threads = [], [], [], 0
        fastest = math.inf
        for line in text.splitlines():
            parts = line.split()
            try:
                if parts[0] == "t":
                    threads = max(threads, int(parts[1]))
                elif parts[0] in ("w", "f") and len(parts) == 3:
                    ns, ms = int(parts[1]), float(parts[2])
                    if parts[0] == "w":
                        waits.append(ms)
                        added = ms
                    else:
                        fsyncs.append(ms)
                        fastest = min(fastest, ms)
                        added = ms - fastest
                    if added >= EVENT_MS:
                        events.append((ns, round(added, 3)))
            except (IndexError, ValueError):
                continue
        return cls(tuple(waits), threads, fsync_dir if fsyncs else "", tuple(fsyncs),
                   tuple(events))


class ServerWatch:
    """Samples, in a process of its own (``runtime/serverwatch.py``), the run-queue wait of
    ``pids``' threads (and their descendants') and, when ``fsync_dir`` is given, how long a
    4 KiB write and fsync take there, every ``every_ms`` or less often (at most
    ``serverwatch.CPU_SHARE`` of a core); ``max_s``: it stops on its own after that long."""

    def __init__(self, pids: Iterable[int], fsync_dir: str | Path | None = None,
                 every_ms: float = SERVER_EVERY_MS, max_s: float = SERVER_MAX_S) -> None:
        self.pids = [p for p in pids if p > 0]
        self.fsync_dir = str(fsync_dir) if fsync_dir else ""
        self.every_ms, self.max_s = every_ms, max_s
        fd, name = tempfile.mkstemp(prefix="replicalab-serverwatch-", suffix=".txt")
        os.close(fd)
        self.out = Path(name)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the watching process."""
        argv = [sys.executable, "-m", "replicalab.runtime.serverwatch", str(self.out),
                str(self.every_ms), str(self.max_s)]
        argv += [self.fsync_dir] if self.fsync_dir else []
        self._proc = subprocess.Popen([*argv, "--", *map(str, self.pids)],
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)

    def sofar(self) -> ServerNoise:
        """Return what was measured so far (the process goes on)."""
        try:
            return ServerNoise.parse(self.out.read_text(), self.fsync_dir)
        except OSError:
            return ServerNoise((), 0, "", (), ())

    def stop(self, timeout_s: float = STOP_S) -> ServerNoise:
        """Stop the process (it ends at once unless an fsync holds it: then it is killed
        after ``timeout_s``) and return what it measured."""
        if self._proc is not None:
            with contextlib.suppress(OSError):
                assert self._proc.stdin is not None
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        got = self.sofar()
        with contextlib.suppress(OSError):
            self.out.unlink()
        return got


class NoiseMonitor:
    """Measures a :class:`NoiseFloor` in the running event loop between :meth:`start` and
    :meth:`stop` (``echo_port``: where the echo answers, directly or through a proxy;
    None: no echo), and the servers ``server_pids`` beside it (:class:`ServerWatch`, with an
    fsync in ``fsync_dir`` when given; no pids and no directory: not watched)."""

    def __init__(self, echo_port: int | None, echo_via: str = "loopback",
                 tick_ms: float = TICK_MS, echo_every_ms: float = ECHO_EVERY_MS,
                 server_pids: Iterable[int] = (), fsync_dir: str | Path | None = None
                 ) -> None:
        self.echo_port, self.echo_via = echo_port, echo_via
        pids = list(server_pids)
        self._servers = ServerWatch(pids, fsync_dir) if pids or fsync_dir else None
        self.tick_s, self.echo_every_s = tick_ms / 1000, echo_every_ms / 1000
        self.stalls_ms: list[float] = []
        self.echoes_ms: list[float] = []
        self.events: list[tuple[int, float]] = []
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._load_start = 0.0

    def start(self) -> None:
        """Start both instruments as tasks of the running loop."""
        self._load_start = load_1m()
        if self._servers is not None:
            self._servers.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._stalls())]
        if self.echo_port is not None:
            self._tasks.append(loop.create_task(self._echo()))

    async def _stalls(self) -> None:
        while not self._stopping:
            t0 = time.perf_counter()
            await asyncio.sleep(self.tick_s)
            late_ms = max((time.perf_counter() - t0 - self.tick_s) * 1000, 0.0)
            self.stalls_ms.append(late_ms)
            if late_ms >= EVENT_MS:
                self.events.append((time.monotonic_ns(), round(late_ms, 3)))

    async def _echo(self) -> None:
        assert self.echo_port is not None
        # asyncio.timeout, not wait_for: before Python 3.12, wait_for can swallow the
        # cancellation that stop() sends when the inner read completes at the same moment,
        # and the loop went on pinging while stop() waited for it (a run that never ended)
        try:
            async with asyncio.timeout(ECHO_TIMEOUT_S):
                reader, writer = await asyncio.open_connection("127.0.0.1", self.echo_port)
        except (OSError, TimeoutError):
            return  # no echo: the floor says so (no samples)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fastest = math.inf
        try:
            while not self._stopping:
                t0 = time.perf_counter()
                writer.write(_PING)
                try:
                    async with asyncio.timeout(ECHO_TIMEOUT_S):
                        await reader.readexactly(len(_PING))
                    rtt_ms = (time.perf_counter() - t0) * 1000
                    self.echoes_ms.append(rtt_ms)
                    fastest = min(fastest, rtt_ms)
                    if rtt_ms - fastest >= EVENT_MS:
                        self.events.append((time.monotonic_ns(), round(rtt_ms - fastest, 3)))
                except TimeoutError:
                    self.echoes_ms.append(ECHO_TIMEOUT_S * 1000)
                    return
                await asyncio.sleep(self.echo_every_s)
        except (OSError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def stop(self) -> NoiseFloor:
        """Stop both instruments (within a second, whatever they were doing) and return what
        they measured."""
        self._stopping = True
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=STOP_S)
        sv = (self._servers.stop() if self._servers is not None
              else ServerNoise((), 0, "", (), ()))
        s, e, w, f = self.stalls_ms, self.echoes_ms, list(sv.waits_ms), list(sv.fsyncs_ms)
        return NoiseFloor(
            stall_p50_ms=_pct(s, 50), stall_p99_ms=_pct(s, 99),
            stall_max_ms=round(max(s, default=0.0), 3), stall_samples=len(s),
            echo_via=self.echo_via if e else "none",
            echo_min_ms=round(min(e, default=0.0), 3), echo_p50_ms=_pct(e, 50),
            echo_p99_ms=_pct(e, 99), echo_max_ms=round(max(e, default=0.0), 3),
            echo_samples=len(e), load_1m_start=self._load_start, load_1m_end=load_1m(),
            cores=os.cpu_count() or 1,
            events=_longest(self.events),
            server_wait_p50_ms=_pct(w, 50), server_wait_p99_ms=_pct(w, 99),
            server_wait_max_ms=round(max(w, default=0.0), 3), server_samples=len(w),
            server_threads=sv.threads, fsync_dir=sv.fsync_dir,
            fsync_min_ms=round(min(f, default=0.0), 3), fsync_p50_ms=_pct(f, 50),
            fsync_p99_ms=_pct(f, 99), fsync_max_ms=round(max(f, default=0.0), 3),
            fsync_samples=len(f), server_events=_longest(list(sv.events)))


def _longest(events: list[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    """Return the ``MAX_EVENTS`` longest of ``events``, in time order."""
    return tuple(sorted(sorted(events, key=lambda x: -x[1])[:MAX_EVENTS]))

"""The servers' share of the noise floor (``runtime/noise.py``), measured in a process of its
own: how long the servers' threads waited for a core each time they ran, and how long an
fsync beside their data took.

A process, not a thread of the client: reading the schedstat of three Cassandra JVMs' 450
threads takes about 5 ms of Python, and in a thread that time is taken from the client's
event loop (its stall p99 went from 0.4 to 1.7-3.0 ms watching a process of 500 threads),
the very noise the floor is there to measure. It imports only the standard library.

Run as ``python -m replicalab.runtime.serverwatch OUT EVERY_MS MAX_S [FSYNC_DIR] -- PID...``:
it samples until its stdin closes (the monitor stops it, or the client died) or ``MAX_S``
passed, appending one line per measurement to OUT:

* ``t N``: a sample read N threads;
* ``w NS MS``: between two samples the threads waited MS ms per run for a core (NS: the
  machine-wide monotonic clock at the sample);
* ``f NS MS``: a 4 KiB write and fsync in FSYNC_DIR took MS ms.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Iterable
from pathlib import Path

CPU_SHARE = 0.04
"""The share of one core the watch may take: reading a thread's schedstat costs about 11 us
here, so it samples a server of many threads less often than ``every_ms``."""
TREE_EVERY = 10
"""Samples between two walks of the servers' process trees (a restarted child is found)."""
SYNC_BYTES = 4096


def process_tree(pids: Iterable[int]) -> list[int]:
    """Return those of ``pids`` that are alive and all their live descendants (the servers a
    wrapper started: etcd under its demultiplexer, a JVM under its launcher)."""
    out: list[int] = []
    todo = [p for p in pids if p > 0]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        if pid in out:
            continue
        out.append(pid)
        for tid in tids:
            with (contextlib.suppress(OSError, ValueError),
                  open(f"/proc/{pid}/task/{tid}/children") as f):
                todo += [int(x) for x in f.read().split()]
    return out


def run_queue(pids: Iterable[int]) -> dict[tuple[int, int], tuple[int, int]]:
    """Return, per thread (pid, tid) of ``pids``, the ns it has waited for a core and how
    many times it has run since it began (``/proc/PID/task/TID/schedstat``; a thread that
    ended while being read is left out)."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    _, waited, runs = f.read().split()[:3]
                out[(pid, int(tid))] = (int(waited), int(runs))
            except (OSError, ValueError):
                continue
    return out


def wait_per_run_ms(before: dict[tuple[int, int], tuple[int, int]],
                    after: dict[tuple[int, int], tuple[int, int]]) -> float | None:
    """Return the mean wait for a core per time a thread ran (ms) between two
    :func:`run_queue` samples, over the threads in both (None when none of them ran)."""
    waited = runs = 0
    for key, (w1, r1) in after.items():
        if key in before:
            w0, r0 = before[key]
            waited += max(w1 - w0, 0)
            runs += max(r1 - r0, 0)
    return waited / runs / 1e6 if runs else None


def _stopped(timeout_s: float) -> bool:
    """Return True once stdin has closed (waiting at most ``timeout_s``)."""
    ready, _, _ = select.select([sys.stdin], [], [], timeout_s)
    return bool(ready) and not os.read(sys.stdin.fileno(), 4096)


def watch(pids: list[int], out: Path, every_s: float, max_s: float,
          fsync_dir: Path | None) -> None:
    """Sample until stdin closes or ``max_s`` passed, appending lines to ``out``."""
    fd, probe = -1, None
    if fsync_dir is not None:
        probe = fsync_dir / f".replicalab-noise-{os.getpid()}"
        with contextlib.suppress(OSError):
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600)
    block = b"\0" * SYNC_BYTES
    tree: list[int] = []
    before: dict[tuple[int, int], tuple[int, int]] = {}
    end = time.monotonic() + max_s
    n = 0
    try:
        with open(out, "a", buffering=1) as log:
            while time.monotonic() < end:
                t0 = time.perf_counter()
                if n % TREE_EVERY == 0:
                    tree = process_tree(pids)
                n += 1
                now = run_queue(tree)
                log.write(f"t {len(now)}\n")
                per = wait_per_run_ms(before, now) if before else None
                before = now
                if per is not None:
                    log.write(f"w {time.monotonic_ns()} {per:.4f}\n")
                cost = time.perf_counter() - t0
                if fd >= 0:
                    f0 = time.perf_counter()
                    os.pwrite(fd, block, 0)
                    os.fsync(fd)
                    took = (time.perf_counter() - f0) * 1000
                    log.write(f"f {time.monotonic_ns()} {took:.4f}\n")
                if _stopped(max(every_s, cost / CPU_SHARE)):
                    return
    except OSError:
        return  # the disk or /proc refused: what was written stands
    finally:
        if fd >= 0:
            os.close(fd)
        if probe is not None:
            with contextlib.suppress(OSError):
                probe.unlink()


def main(argv: list[str]) -> int:
    """Run :func:`watch` from the command line (the module docstring's form); exit status."""
    head, pids = argv[:argv.index("--")], [int(p) for p in argv[argv.index("--") + 1:]]
    out, every_ms, max_s = Path(head[0]), float(head[1]), float(head[2])
    fsync_dir = Path(head[3]) if len(head) > 3 else None
    watch(pids, out, every_ms / 1000, max_s, fsync_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

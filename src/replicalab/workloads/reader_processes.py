"""Readers in processes of their own (seed 003 §2.1.2, "a reader and a writer in separate
processes"): the staleness probe's ``--placement separate-processes``.

Each reader is a spawned process (owned by the process registry, so Ctrl-C leaves none
behind) that opens the store from its URL (under the run's key prefix, if any), connects in
the reader region, tells the parent it is ready, waits for the go with the run's end time,
reads at the probe's rate until then and sends its own History back. Processes of one
machine share one monotonic clock (``time.monotonic_ns``), which the real runtime's times
are, so the readers' rows sit on the writer's timeline as they are. Only real stores: a
simulated store lives in the memory of one process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from typing import Any

from replicalab.cluster import process
from replicalab.history import History
from replicalab.runtime.interrupts import stop_handler
from replicalab.stores import open_store
from replicalab.stores.prefix import PrefixedStore
from replicalab.workloads.recorder import Recorder

READY_LIMIT_S = 120.0
"""How long the readers get to start (spawn, import, connect) before the probe gives up."""
POLL_NS = 20_000_000

ReadLoop = Callable[[Recorder, Any, int, int], Awaitable[None]]
"""``loop(rec, client, process, until_ns)``: the reads of one reader until ``until_ns``."""


def _reader_main(conn: Connection, url: str, prefix: str, seed: int, region: str | None,
                 proc: int, loop: ReadLoop) -> None:
    """A reader process: connect, say ready, read from the go until the end, send back
    ``("done", history, error)``. A SIGINT or SIGTERM ends the reads early; the history
    recorded so far is still sent."""
    stopping = [False]
    once = stop_handler(stopping)
    signal.signal(signal.SIGINT, once)
    signal.signal(signal.SIGTERM, once)
    h = History()
    error = ""
    try:
        store = open_store(url, seed)
        if prefix:
            store = PrefixedStore(store, prefix)
        rt = store.runtime
        rec = Recorder(h, rt)

        async def main() -> None:
            client = await store.connect(region)
            try:
                conn.send(("ready", os.getpid()))
                limit = rt.now_ns() + int(READY_LIMIT_S * 1e9)
                while not conn.poll() and rt.now_ns() < limit:
                    await rt.sleep_ns(POLL_NS)
                msg = conn.recv() if conn.poll() else ("stop",)
                if msg[0] == "go":
                    await loop(rec, client, proc, msg[1])
            finally:
                await client.close()
                await store.close()

        rt.run(main())
    except KeyboardInterrupt:
        error = "interrupted"
    except Exception as err:  # the store failed: send what was recorded and why
        error = f"{type(err).__name__}: {err}"
    stopping[0] = True
    h.close_in_flight(time.monotonic_ns(), error or "interrupted")
    with contextlib.suppress(BrokenPipeError, OSError):
        conn.send(("done", h, error))
    conn.close()


class ReaderProcesses:
    """The reader processes of one probe: start, wait until ready, go, collect."""

    def __init__(self, url: str, prefix: str, seed: int, region: str | None,
                 processes: list[int], loop: ReadLoop) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        self.results: dict[int, tuple[History, str]] = {}
        self.pids: dict[int, int] = {}  # reader -> the pid that said it was ready
        try:
            for i, proc in enumerate(processes):
                mine, theirs = ctx.Pipe()
                p = ctx.Process(target=_reader_main, name=f"replicalab-reader-{i}",
                                args=(theirs, url, prefix, seed * 1000 + i, region, proc, loop),
                                daemon=True)
                with process.signals_deferred():  # a Ctrl-C here must not lose the pid
                    p.start()
                    process.track(p.pid, f"staleness reader {i}")
                theirs.close()
                self.procs.append(p)
                self.conns.append(mine)
        except BaseException:
            self.close()
            raise

    async def ready(self, sleep_ns: Callable[[int], Awaitable[None]]) -> None:
        """Return once every reader has connected; ValueError naming the first that could
        not (it exited, or did not answer within :data:`READY_LIMIT_S`)."""
        waiting = set(range(len(self.conns)))
        deadline = time.monotonic() + READY_LIMIT_S
        while waiting:
            for i in sorted(waiting):
                c = self.conns[i]
                if c.poll():
                    try:
                        msg = c.recv()
                    except (EOFError, OSError):
                        msg = ("gone",)
                    if msg[0] == "done":  # it failed before it was ready
                        raise ValueError(f"reader process {i} could not start: "
                                         f"{msg[2] or 'no reason given'}")
                    if msg[0] != "ready":
                        raise ValueError(f"reader process {i} exited before it was ready")
                    self.pids[i] = msg[1]
                    waiting.discard(i)
            if waiting:
                if time.monotonic() > deadline:
                    raise ValueError(f"{len(waiting)} reader process(es) not ready within "
                                     f"{READY_LIMIT_S:g} s; is the machine overloaded?")
                await sleep_ns(POLL_NS)

    def go(self, until_ns: int) -> None:
        """Tell every reader to read until ``until_ns`` (the shared monotonic clock)."""
        for c in self.conns:
            c.send(("go", until_ns))

    async def collect(self, sleep_ns: Callable[[int], Awaitable[None]], limit_s: float
                      ) -> None:
        """Receive each reader's history, waiting up to ``limit_s`` for all of them."""
        deadline = time.monotonic() + limit_s
        while len(self.results) < len(self.conns) and time.monotonic() < deadline:
            for i, c in enumerate(self.conns):
                if i in self.results or not c.poll():
                    continue
                with contextlib.suppress(EOFError, OSError):
                    msg = c.recv()
                    if msg[0] == "done":
                        self.results[i] = (msg[1], msg[2])
            await sleep_ns(POLL_NS)

    def stop(self) -> None:
        """Ask the readers still running to stop and send what they recorded."""
        for p in self.procs:
            if p.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)

    def close(self) -> None:
        """Stop every reader process left and close the pipes."""
        for c in self.conns:
            c.close()
        process.stop_many([p.pid for p in self.procs if p.pid], grace_s=1.0)
        for p in self.procs:
            p.join(0.1)


def merge_into(h: History, parts: list[History]) -> None:
    """Append the rows of ``parts`` to ``h`` in invoke order (their process ids kept)."""
    rows = sorted(((op.invoke_ns, k, j), op) for k, part in enumerate(parts)
                  for j, op in enumerate(part))
    for _, op in rows:
        i = h.invoke(op.process, op.f, op.keys, op.values, op.consistency, op.invoke_ns)
        if op.type == "ok":
            h.ok(i, op.complete_ns, op.values, op.node)
        elif op.type == "fail":
            h.fail(i, op.complete_ns, op.error, op.node)
        elif op.type == "info":
            h.info(i, op.complete_ns, op.error)

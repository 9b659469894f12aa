"""Open-loop load (seed 003 §4): requests arrive on a schedule at an offered rate, whatever
the store does, and each is timed from its intended start as well as from its actual send.

Concurrency: ``max_in_flight`` connections, one request in flight on each. When all are
busy, due requests wait in the generator, first come first served, and their wait counts in
their response time (coordinated omission corrected). Requests still waiting when the drain
limit passes (``duration + drain``) are never sent and are counted as ``unsent`` errors.

One call of :func:`run_worker` is one worker's share of one step: it opens the store, runs
the schedule in the store's runtime (virtual for ``sim://``, real otherwise) and returns a
:class:`WorkerResult` with its history, intended start times, encoded histograms, counts
and the machine's clocks. Real time runs on the event loop ``LoadSpec.loop`` names (uvloop
by default when it is installed), in a loop of its own: nothing else in replicalab changes
its event loop. ``client="fast"`` drives Redis through :mod:`replicalab.stores.resp`
(callbacks, no per-request coroutine) and turns its per-request arrays into History rows
after the run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import logging
import os
import socket
import time
from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from replicalab.checkers.load import (
    Counts,
    count_outcomes,
    encode_histograms,
    load_histograms,
)
from replicalab.history import History, encode_value
from replicalab.history.core import OpType
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import Client, Feature, Store, open_store
from replicalab.workloads.arrivals import arrival_offsets_ns, check_arrivals
from replicalab.workloads.recorder import Recorder

CLIENTS = ("store", "fast")
LOOPS = ("uvloop", "asyncio")
KEY_DOMAIN = "load"
PROCESS_STRIDE = 100_000
"""Worker w's connections are processes w*PROCESS_STRIDE + c in a merged history."""


def default_loop() -> str:
    """Return "uvloop" when uvloop can be imported, else "asyncio"."""
    return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"


@dataclass(frozen=True)
class LoadSpec:
    """One open-loop load (times in s, rates per s); saved in config.json."""

    store: str
    rate_per_s: float = 100.0
    duration_s: float = 10.0
    arrivals: str = "poisson"
    read_ratio: float = 0.99
    keyspace: int = 1000
    max_in_flight: int = 16
    consistency: str = "eventual"
    timeout_ms: float = 2000.0
    drain_s: float = 5.0
    client: str = "store"
    seed: int = 1
    loop: str = field(default_factory=default_loop)  # real time only; sim:// is virtual

    def check(self) -> None:
        """Raise ValueError naming the first invalid option and its fix."""
        check_arrivals(self.arrivals, self.rate_per_s, self.duration_s)
        if not 0.0 <= self.read_ratio <= 1.0:
            raise ValueError(f"--read-ratio {self.read_ratio} must be between 0 and 1 "
                             "(e.g. 0.99, 0.75, 0.5)")
        if self.keyspace < 1:
            raise ValueError(f"--keyspace {self.keyspace} must be at least 1")
        if not 1 <= self.max_in_flight <= 10_000:
            raise ValueError(f"--max-in-flight {self.max_in_flight} must be 1..10000")
        if self.consistency not in ("eventual", "consistent"):
            raise ValueError(f"--consistency {self.consistency!r}: use eventual or consistent")
        if not self.timeout_ms > 0:
            raise ValueError(f"--timeout-ms {self.timeout_ms} must be positive")
        if self.drain_s < 0:
            raise ValueError(f"--drain {self.drain_s} s must not be negative")
        if self.client not in CLIENTS:
            raise ValueError(f"--client {self.client!r}: use store or fast")
        if self.client == "fast" and not self.store.startswith(("redis://", "rediss://")):
            raise ValueError("--client fast speaks Redis only; use a redis:// store or "
                             "--client store")
        if self.loop not in LOOPS:
            raise ValueError(f"--loop {self.loop!r}: use uvloop or asyncio")
        if self.loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
            raise ValueError("--loop uvloop needs the uvloop package (pip install uvloop); "
                             "or use --loop asyncio")

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict (a password in the store URL is masked)."""
        from replicalab.stores.base import redact_url
        return {**asdict(self), "store": redact_url(self.store)}

    def with_rate(self, rate_per_s: float, seed: int | None = None) -> LoadSpec:
        """Return a copy at another offered rate (and optionally another seed)."""
        d = asdict(self)
        d["rate_per_s"] = rate_per_s
        if seed is not None:
            d["seed"] = seed
        return LoadSpec(**d)


@dataclass
class WorkerClock:
    """One worker machine's clocks at the start and end of its run (ns), and who it is.

    ``wall - monotonic`` maps the worker's monotonic times (the history's clock in real
    time) onto wall time; the end readings show how far that mapping drifted during the run.
    """

    hostname: str
    pid: int
    wall_start_ns: int
    mono_start_ns: int
    wall_end_ns: int = 0
    mono_end_ns: int = 0

    @classmethod
    def now(cls) -> WorkerClock:
        """Return a clock record started now."""
        return cls(socket.gethostname(), os.getpid(), time.time_ns(), time.monotonic_ns())

    def stop(self) -> None:
        """Record the end readings."""
        self.wall_end_ns, self.mono_end_ns = time.time_ns(), time.monotonic_ns()

    @property
    def offset_ns(self) -> int:
        """Return wall minus monotonic at the start (ns)."""
        return self.wall_start_ns - self.mono_start_ns

    @property
    def drift_ns(self) -> int:
        """Return how much wall minus monotonic changed between start and end (ns)."""
        return (self.wall_end_ns - self.mono_end_ns) - self.offset_ns


@dataclass
class WorkerResult:
    """What one worker returns for one step (picklable; merged exactly by the caller)."""

    worker: int
    rate_per_s: float
    duration_s: float
    virtual: bool
    t0_ns: int
    end_ns: int
    clock: WorkerClock
    counts: Counts
    histograms: dict[str, str]
    history: History
    intended_ns: array = field(default_factory=lambda: array("q"))
    error: str = ""
    loop: str = ""  # the event loop that ran it ("uvloop 0.23.0", "asyncio") or "virtual"


class TimedClient:
    """A Client whose calls raise TimeoutError after ``timeout_ns`` (from the actual send)."""

    def __init__(self, inner: Client, rt: Runtime, timeout_ns: int) -> None:
        self.inner, self.rt, self.timeout_ns = inner, rt, timeout_ns

    async def read(self, keys: Any, *, consistent: bool) -> Any:
        """Return the inner read's result or raise TimeoutError."""
        return await self.rt.timeout(self.inner.read(keys, consistent=consistent),
                                     self.timeout_ns)

    async def write(self, values: Any, *, expect: Any = None) -> Any:
        """Return the inner write's result or raise TimeoutError."""
        return await self.rt.timeout(self.inner.write(values, expect=expect), self.timeout_ns)

    async def delete(self, keys: Any) -> Any:
        """Return the inner delete's result."""
        return await self.inner.delete(keys)

    async def close(self) -> None:
        """Close the inner client."""
        await self.inner.close()


def plan_ops(spec: LoadSpec, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (is_read bool array, key index array) for ``count`` requests, from ``seed``."""
    rng = np.random.default_rng([seed, 7])
    return rng.random(count) < spec.read_ratio, rng.integers(0, spec.keyspace, count)


def key_name(index: int) -> str:
    """Return the element address of key ``index`` (all keys in one domain)."""
    return f"{KEY_DOMAIN}/k{index}/v"


def _append_record(h: History, intended: array, rec: Any, sched: Any, spec: LoadSpec,
                   node: str, process_base: int) -> None:
    """Append the sent requests of a fast-path record to ``h`` (in schedule order) and their
    intended starts to ``intended`` (aligned with h's rows)."""
    taken = rec.taken
    send = np.frombuffer(rec.send_ns, np.int64, taken)
    sent = np.flatnonzero(send > 0)  # 0 = taken but never sent (interrupted while waiting)
    if len(intended) < len(h):
        intended.extend([-1] * (len(h) - len(intended)))
    offsets = np.frombuffer(sched.offsets_ns, np.int64, taken)[sent]
    intended.frombytes((rec.t0_ns + offsets).astype(np.int64).tobytes())
    reads = np.frombuffer(sched.is_read, np.int8, taken)[sent].astype(bool)
    outcome = np.frombuffer(rec.outcome, np.int8, taken)[sent]
    conn = np.frombuffer(rec.conn, np.int32, taken)[sent]
    h.process.frombytes((process_base + conn).astype(np.int32).tobytes())
    h.type.frombytes(outcome.astype(np.int8).tobytes())
    h.f.frombytes(np.where(reads, h.f_code("read"), h.f_code("write"))
                  .astype(np.int8).tobytes())
    h.consistency.frombytes(np.where(reads, h.consistency_code(spec.consistency),
                                     h.consistency_code("none")).astype(np.int8).tobytes())
    h.invoke_ns.frombytes(send[sent].tobytes())
    h.complete_ns.frombytes(np.frombuffer(rec.done_ns, np.int64, taken)[sent].tobytes())
    idx = sent.tolist()
    key_idx = np.frombuffer(sched.key_index, np.int64, taken)[sent].tolist()
    h.keys.extend((sched.keys[k],) for k in key_idx)
    h.values.extend((rec.values[i],) for i in idx)
    h.expects.extend(() for _ in idx)  # GETs and SETs: no cas
    h.node.extend(node if o == OpType.OK else "" for o in outcome.tolist())
    h.error.extend(rec.errors.get(i, "") for i in idx)


async def _drive_fast(store: Store, spec: LoadSpec, offsets_ns: np.ndarray, h: History,
                      intended: array, process_base: int, on_start: Any) -> tuple[int, int]:
    """``drive`` for ``client="fast"``: Redis GET/SET at the primary through resp.py."""
    from replicalab.stores import resp
    primary = store.nodes[0]  # type: ignore[attr-defined]
    is_read, key_idx = plan_ops(spec, len(offsets_ns), spec.seed)
    sched = resp.Schedule(array("q", np.asarray(offsets_ns, np.int64).tobytes()),
                          array("b", is_read.astype(np.int8).tobytes()),
                          array("q", key_idx.astype(np.int64).tobytes()),
                          {int(k): key_name(int(k)) for k in np.unique(key_idx)})
    rec = resp.LoadRecord.allocate(len(sched))
    try:
        await resp.drive_schedule(
            primary.host, primary.port, spec.max_in_flight, sched, rec,
            process_base=process_base, stop_after_ns=int((spec.duration_s + spec.drain_s)
                                                         * NS_PER_S),
            timeout_ns=int(spec.timeout_ms * 1e6), on_start=on_start,
            setup=getattr(store, "setup_commands", ()), tls=getattr(store, "tls_context", None))
    finally:
        _append_record(h, intended, rec, sched, spec, primary.name, process_base)
    return rec.t0_ns, rec.end_ns


async def drive(store: Store, spec: LoadSpec, offsets_ns: np.ndarray, h: History,
                intended: array, process_base: int = 0,
                on_start: Any = None) -> tuple[int, int]:
    """Run the schedule ``offsets_ns`` against ``store``, recording into ``h`` and
    ``intended`` (aligned with h's rows); return (t0_ns, end_ns) in the runtime's clock."""
    if spec.client == "fast":
        return await _drive_fast(store, spec, offsets_ns, h, intended, process_base, on_start)
    rt = store.runtime
    consistent = spec.consistency == "consistent"
    need = Feature.CONSISTENT_READ if consistent else Feature.EVENTUAL_READ
    if spec.client == "store" and need not in store.info.features:
        raise ValueError(f"{spec.store} cannot do {need.value}; pick another --consistency")
    timeout_ns = int(spec.timeout_ms * 1e6)
    clients: list[Client] = []
    try:
        for _ in range(spec.max_in_flight):
            clients.append(TimedClient(await store.connect(), rt, timeout_ns))
        is_read, key_idx = plan_ops(spec, len(offsets_ns), spec.seed)
        reads, keys = is_read.tolist(), key_idx.tolist()
        offsets = offsets_ns.tolist()
        names = [key_name(k) for k in range(spec.keyspace)] if spec.keyspace <= 1_000_000 \
            else None
        rec = Recorder(h, rt)
        seq = itertools.count(1)
        n = len(offsets)
        cursor = [0]
        if on_start is not None:
            on_start()
        t0 = rt.now_ns()
        stop_ns = t0 + int((spec.duration_s + spec.drain_s) * NS_PER_S)

        async def connection(client: Client, proc: int) -> None:
            while True:
                i = cursor[0]
                if i >= n:
                    return
                due = t0 + offsets[i]
                now = rt.now_ns()
                if now >= stop_ns:
                    return  # the rest stay unsent: the generator's backlog at the limit
                cursor[0] = i + 1
                while due > now:  # uvloop's timers are in whole ms and may fire early
                    await rt.sleep_ns(due - now)
                    now = rt.now_ns()
                key = names[keys[i]] if names is not None else key_name(keys[i])
                if len(intended) < len(h):
                    intended.extend([-1] * (len(h) - len(intended)))
                intended.append(due)  # row len(h) is the op the recorder opens next
                if reads[i]:
                    await rec.read(client, proc, (key,), consistent)
                else:
                    await rec.write(client, proc,
                                    {key: encode_value(proc, next(seq), rt.now_ns())})

        # Every loop above is bounded by stop_ns; this bounds the last replies too.
        bound_ns = stop_ns - t0 + timeout_ns
        try:
            await rt.timeout(rt.gather(*(connection(c, process_base + p)
                                         for p, c in enumerate(clients))), bound_ns)
        except TimeoutError:
            h.close_in_flight(rt.now_ns(), "timeout: no reply by the drain limit")
        return t0, rt.now_ns()
    finally:
        for c in clients:
            await c.close()


def run_worker(spec: LoadSpec, worker: int = 0, workers: int = 1,
               start_at_wall_ns: int = 0) -> WorkerResult:
    """Run worker ``worker``'s share (1/``workers`` of the rate, its own seed) of ``spec``
    and return its WorkerResult; a real-time worker waits until wall time
    ``start_at_wall_ns`` so that all workers start together. Never raises for store
    failures: the error is in ``WorkerResult.error`` with what was recorded so far."""
    rate = spec.rate_per_s / workers
    seed = spec.seed * 1000 + worker
    share = spec.with_rate(rate, seed)
    offsets = arrival_offsets_ns(share.arrivals, rate, share.duration_s, seed)
    store = open_store(share.store, seed)
    rt = store.runtime
    h = History()
    intended: array = array("q")
    clock = WorkerClock.now()
    span = [0, 0]
    error = ""

    def sync_start() -> None:
        if not rt.virtual and start_at_wall_ns:
            wait_s = (start_at_wall_ns - time.time_ns()) / 1e9
            if 0 < wait_s < 60:
                time.sleep(wait_s)  # connections are open; nothing else runs yet
        clock.wall_start_ns, clock.mono_start_ns = time.time_ns(), time.monotonic_ns()

    async def main() -> None:
        try:
            span[0], span[1] = await drive(store, share, offsets, h, intended,
                                           worker * PROCESS_STRIDE, sync_start)
        finally:
            span[1] = span[1] or rt.now_ns()
            await store.close()

    loop = "virtual"
    try:
        if rt.virtual:
            rt.run(main())
        else:
            loop = _run_real(main(), share.loop)
    except KeyboardInterrupt:
        error = "interrupted"
    except ValueError as err:
        error = str(err)
    except Exception as err:  # the store failed: keep what was recorded, report why
        error = f"{type(err).__name__}: {err}"
    clock.stop()
    h.close_in_flight(rt.now_ns(), error or "interrupted")
    if len(intended) > len(h):
        del intended[len(h):]
    counts = count_outcomes(h, len(offsets))
    hists = encode_histograms(load_histograms(h, intended))
    return WorkerResult(worker, rate, share.duration_s, rt.virtual, span[0], span[1], clock,
                        counts, hists, h, intended, error, loop)


def _run_real(main: Any, loop: str) -> str:
    """Run coroutine ``main`` to completion on a new event loop of kind ``loop`` (uvloop or
    asyncio, closed afterwards; the process's loop policy is left alone) and return the
    loop's name and version."""
    factory = None
    name = "asyncio"
    if loop == "uvloop":
        import uvloop
        factory, name = uvloop.new_event_loop, f"uvloop {uvloop.__version__}"
    with asyncio.Runner(loop_factory=factory) as runner:
        try:
            runner.run(main)
        except KeyboardInterrupt:
            # the run is being torn down: requests cut off mid-flight (their server may be
            # stopping too) are expected, and asyncio's notes about those tasks ("exception
            # never retrieved", "destroyed but pending") would read as a crash on stderr
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)
            raise
    return name

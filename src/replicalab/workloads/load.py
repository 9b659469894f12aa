"""Load (seed 003 §4). Open loop: requests arrive on a schedule at an offered rate, whatever
the store does, and each is timed from its intended start as well as from its actual send.
Paced closed loop (``groups`` >= 1), as seed 003 §4 ran its clients: ``groups`` client
machines of ``clients_per_group`` clients each, every client sending one request every
``1 / client_rate_per_s`` seconds and waiting for its reply; a reply later than the next
slot skips the slots it outlasted (the client sends less than its rate), never catching up
in a burst. Skipped slots are counted as ``unsent``.

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
from replicalab.errors import ParameterError
from replicalab.history import History, encode_value
from replicalab.history.core import OpType
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import Client, Feature, Store, open_store
from replicalab.workloads.arrivals import arrival_offsets_ns, check_arrivals
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.slots import Slots

CLIENTS = ("store", "fast")
LOOPS = ("uvloop", "asyncio")
MAX_PACED_CLIENTS = 100_000  # a bound on one paced step's clients, not a target
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
    # paced closed loop when groups >= 1 (rate_per_s is then the groups' offered load)
    groups: int = 0
    clients_per_group: int = 100
    client_rate_per_s: float = 1.0

    @classmethod
    def paced(cls, store: str, groups: int, clients_per_group: int = 100,
              client_rate_per_s: float = 1.0, **kw: Any) -> LoadSpec:
        """Return a paced closed-loop spec: ``groups`` x ``clients_per_group`` clients at
        ``client_rate_per_s`` each (the offered rate is their product)."""
        kw.pop("rate_per_s", None)  # the groups' product, whatever was given
        return cls(store=store, rate_per_s=groups * clients_per_group * client_rate_per_s,
                   groups=groups, clients_per_group=clients_per_group,
                   client_rate_per_s=client_rate_per_s, **kw)

    def with_groups(self, groups: int, clients_per_group: int, client_rate_per_s: float
                    ) -> LoadSpec:
        """Return this load as paced clients (``groups`` 0: unchanged, open loop)."""
        if not groups:
            return self
        return LoadSpec.paced(**{**asdict(self), "groups": groups,
                                 "clients_per_group": clients_per_group,
                                 "client_rate_per_s": client_rate_per_s,
                                 "rate_per_s": None})  # type: ignore[arg-type]

    @property
    def clients(self) -> int:
        """Return the number of paced clients (0 for open loop)."""
        return self.groups * self.clients_per_group

    def check(self) -> None:
        """Raise ParameterError naming the first invalid parameter (as ``load_run`` names
        it) and its fix."""
        if self.groups:
            self._check_paced()
        else:
            check_arrivals(self.arrivals, self.rate_per_s, self.duration_s)
        if not 0.0 <= self.read_ratio <= 1.0:
            raise ParameterError("read_ratio", f"{self.read_ratio} must be between 0 and 1 "
                                               "(e.g. 0.99, 0.75, 0.5)")
        if self.keyspace < 1:
            raise ParameterError("keyspace", f"{self.keyspace} must be at least 1")
        if not 1 <= self.max_in_flight <= 10_000:
            raise ParameterError("max_in_flight", f"{self.max_in_flight} must be 1..10000")
        if self.consistency not in ("eventual", "consistent"):
            raise ParameterError("consistency", f"{self.consistency!r}: use eventual or "
                                                "consistent")
        if not self.timeout_ms > 0:
            raise ParameterError("timeout_ms", f"{self.timeout_ms} must be positive")
        if self.drain_s < 0:
            raise ParameterError("drain", f"{self.drain_s} s must not be negative")
        if self.client not in CLIENTS:
            raise ParameterError("client", f"{self.client!r}: use store or fast")
        if self.client == "fast" and not self.store.startswith(("redis://", "rediss://")):
            raise ParameterError("client", "fast speaks Redis only; use a redis:// store or "
                                           "{client} store", {"client": "client"})
        if self.loop not in LOOPS:
            raise ParameterError("loop", f"{self.loop!r}: use uvloop or asyncio")
        if self.loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
            raise ParameterError("loop", "uvloop needs the uvloop package (pip install "
                                         "uvloop); or use {loop} asyncio", {"loop": "loop"})

    def _check_paced(self) -> None:
        if self.groups < 0 or self.clients_per_group < 1:
            raise ParameterError("groups", f"{self.groups} and {{clients}} "
                                           f"{self.clients_per_group} must be at least 1 (e.g. "
                                           "{groups} 5 {clients} 100)",
                                 {"groups": "groups", "clients": "clients"})
        if not self.client_rate_per_s > 0:
            raise ParameterError("client_rate", f"{self.client_rate_per_s:g} must be positive "
                                                "(requests per second per client, e.g. 1)")
        if self.clients > MAX_PACED_CLIENTS:
            raise ParameterError("groups", f"x {{clients}} = {self.clients:,} clients is more "
                                           f"than {MAX_PACED_CLIENTS:,}; use fewer",
                                 {"clients": "clients"})
        if not self.duration_s > 0:
            raise ParameterError("duration", f"{self.duration_s} s must be positive")
        offered = self.clients * self.client_rate_per_s
        if abs(self.rate_per_s - offered) > 1e-9 * offered:
            raise ValueError(f"a paced load offers groups x clients x client rate = "
                             f"{offered:g}/s, not {self.rate_per_s:g}/s; build it with "
                             "LoadSpec.paced")
        if self.client == "fast":
            raise ParameterError("client", "fast drives an open-loop schedule; paced clients "
                                           "({groups}) use {client} store",
                                 {"groups": "groups", "client": "client"})

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

    def share(self, worker: int, workers: int) -> LoadSpec:
        """Return worker ``worker``'s share of ``workers``: an open loop's rate split
        evenly, a paced load's groups dealt out (the first ``groups % workers`` workers
        get one more); each worker with its own seed."""
        seed = self.seed * 1000 + worker
        if not self.groups:
            return self.with_rate(self.rate_per_s / workers, seed)
        mine = self.groups // workers + (1 if worker < self.groups % workers else 0)
        d = {**asdict(self), "groups": mine, "seed": seed,
             "rate_per_s": mine * self.clients_per_group * self.client_rate_per_s}
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


def paced_offered(spec: LoadSpec) -> int:
    """Return how many requests a paced load's clients are meant to send: each client's
    slots inside the duration, from its phase (the same phases :func:`_drive_paced`
    draws)."""
    period_ns = int(NS_PER_S / spec.client_rate_per_s)
    phases = _phases_ns(spec, period_ns)
    end_ns = int(spec.duration_s * NS_PER_S)
    return int(np.maximum(0, -(-(end_ns - phases) // period_ns)).sum())


def _phases_ns(spec: LoadSpec, period_ns: int) -> np.ndarray:
    """Return each paced client's first slot (ns from the start), uniform over a period:
    clients started together would otherwise send in lockstep."""
    return np.random.default_rng([spec.seed, 11]).integers(0, period_ns, spec.clients)


async def _drive_paced(store: Store, spec: LoadSpec, h: History, intended: array,
                       process_base: int, on_start: Any) -> tuple[int, int]:
    """``drive`` for a paced load: every client on its own connection (connected group by
    group, so a store that places clients on machines by connection order puts each group
    on one), one request per slot, waiting for its reply."""
    rt = store.runtime
    consistent = spec.consistency == "consistent"
    timeout_ns = int(spec.timeout_ms * 1e6)
    period_ns = int(NS_PER_S / spec.client_rate_per_s)
    per_client = int(spec.duration_s * spec.client_rate_per_s) + 1
    clients: list[Client] = []
    try:
        for _ in range(spec.clients):
            clients.append(TimedClient(await store.connect(), rt, timeout_ns))
        phases = _phases_ns(spec, period_ns).tolist()
        is_read, key_idx = plan_ops(spec, spec.clients * per_client, spec.seed)
        reads, keys = is_read.tolist(), key_idx.tolist()
        names = [key_name(k) for k in range(min(spec.keyspace, 1_000_000))]
        rec = Recorder(h, rt)
        seq = itertools.count(1)
        if on_start is not None:
            on_start()
        t0 = rt.now_ns()
        end_ns = t0 + int(spec.duration_s * NS_PER_S)
        stop_ns = end_ns + int(spec.drain_s * NS_PER_S)

        async def client(c: int, conn: Client, proc: int) -> None:
            slots = Slots(rt, period_ns, t0 + phases[c])
            k = c * per_client
            while slots.slot_ns < end_ns and rt.now_ns() < stop_ns:
                await slots.wait()
                key = names[keys[k]] if keys[k] < len(names) else key_name(keys[k])
                if len(intended) < len(h):
                    intended.extend([-1] * (len(h) - len(intended)))
                intended.append(slots.slot_ns)  # the row the recorder opens next
                if reads[k]:
                    await rec.read(conn, proc, (key,), consistent)
                else:
                    await rec.write(conn, proc,
                                    {key: encode_value(proc, next(seq), rt.now_ns())})
                k += 1
                slots.advance()

        try:
            await rt.timeout(rt.gather(*(client(c, conn, process_base + c)
                                         for c, conn in enumerate(clients))),
                             stop_ns - t0 + timeout_ns)
        except TimeoutError:
            h.close_in_flight(rt.now_ns(), "timeout: no reply by the drain limit")
        return t0, rt.now_ns()
    finally:
        for conn in clients:
            await conn.close()


def reads_refused(spec: LoadSpec, features: frozenset[Feature]) -> ParameterError | None:
    """Return the error naming ``consistency`` when a store of ``features`` cannot do the
    reads ``spec`` asks for (the fast client reads its own way), else None. A worker
    records it as its error, the Python way (``consistency 'consistent': ...``)."""
    need = (Feature.CONSISTENT_READ if spec.consistency == "consistent"
            else Feature.EVENTUAL_READ)
    if spec.client != "store" or need in features:
        return None
    from replicalab.stores.base import redact_url

    other = "eventual" if spec.consistency == "consistent" else "consistent"
    return ParameterError("consistency", f"{spec.consistency!r}: {redact_url(spec.store)} "
                                         f"cannot do {need.value}; use {other} or another "
                                         "store")


async def drive(store: Store, spec: LoadSpec, offsets_ns: np.ndarray, h: History,
                intended: array, process_base: int = 0,
                on_start: Any = None) -> tuple[int, int]:
    """Run the schedule ``offsets_ns`` (open loop) or the paced clients of ``spec``
    against ``store``, recording into ``h`` and ``intended`` (aligned with h's rows);
    return (t0_ns, end_ns) in the runtime's clock."""
    if spec.client == "fast":
        return await _drive_fast(store, spec, offsets_ns, h, intended, process_base, on_start)
    rt = store.runtime
    consistent = spec.consistency == "consistent"
    refused = reads_refused(spec, store.info.features)
    if refused is not None:
        raise refused
    if spec.groups:
        return await _drive_paced(store, spec, h, intended, process_base, on_start)
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
    """Run worker ``worker``'s share of ``spec`` (:meth:`LoadSpec.share`: 1/``workers`` of
    an open loop's rate, or of a paced load's groups; its own seed) and return its
    WorkerResult; a real-time worker waits until wall time ``start_at_wall_ns`` so that
    all workers start together. Never raises for store failures: the error is in
    ``WorkerResult.error`` with what was recorded so far."""
    share = spec.share(worker, workers)
    rate, seed = share.rate_per_s, share.seed
    if share.groups:
        offsets = np.zeros(0, np.int64)  # paced: no schedule; the clients keep their slots
        offered = paced_offered(share)
    else:
        offsets = arrival_offsets_ns(share.arrivals, rate, share.duration_s, seed)
        offered = len(offsets)
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
            if spec.groups and not share.groups:
                return  # more workers than groups: this one has none to run
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
    counts = count_outcomes(h, offered)
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

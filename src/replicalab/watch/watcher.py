"""``watch``: the seed-001 microbenchmark suite, run every interval against each backend.

Each round reads and writes one small record (default 1 KiB) chosen at random from a large
keyspace (default 1,000,000 records) of every backend and appends the timed samples to the
samples database in one commit. Backends run independently on their own schedule, so a slow
or unreachable one does not delay the others; an unreachable one yields error samples.

The keyspace is loaded once per backend and remembered in the database; on restart the last
record is read back, and the keyspace is loaded again only if it is missing (a simulated
store lives in the watcher's memory, so it is reloaded on every start).

A backend with ``staleness = true`` also runs a staleness probe beside its rounds (a writer
and readers per region, ``watch/staleness.py``): one freshness row per region every
``--interval``, committed to the database like the rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import string
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from replicalab.errors import ParameterError
from replicalab.stores import Client, Feature, Store, open_store
from replicalab.stores.base import redact_url
from replicalab.watch.config import BackendSpec
from replicalab.watch.db import SampleDB
from replicalab.watch.staleness import FreshnessRow, StalenessOptions, StalenessProbe
from replicalab.watch.stats import Sample, percentile

ITEM_RECORDS = 100  # records per item: one atomic multi-element write loads an item
LOAD_TIMEOUT_FACTOR = 10  # a loading call writes up to 100 records, not one
RECENT = 200  # samples per operation kept for the live view's percentiles


# Data: options and defaults, alike in shape to sim/simpledb.py's SimpleDBParams.
@dataclass(frozen=True)
class SuiteOptions:
    """How often and what the suite runs, and when the watcher stops (None = never)."""

    interval_s: float = 10.0
    records: int = 1_000_000
    record_bytes: int = 1024
    reads: int = 1
    writes: int = 1
    timeout_s: float = 5.0
    seed: int = 1
    load_concurrency: int = 16
    max_rounds: int | None = None
    duration_s: float | None = None
    staleness: StalenessOptions = field(default_factory=StalenessOptions)

    def check(self) -> None:
        """Raise ParameterError naming the first parameter (as ``watch`` names it) out of
        range."""
        if not self.interval_s > 0:
            raise ParameterError("interval", "must be positive, e.g. 10s")
        if self.records < 1 or self.record_bytes < 16:
            raise ParameterError("records", "must be >= 1 and {record_bytes} >= 16",
                                 {"record_bytes": "record_bytes"})
        if self.reads < 0 or self.writes < 0 or self.reads + self.writes == 0:
            raise ParameterError("reads", "and {writes} must be >= 0 and not both 0",
                                 {"writes": "writes"})
        if not self.timeout_s > 0:
            raise ParameterError("timeout", "must be positive, e.g. 5s")
        if self.max_rounds is not None and self.max_rounds < 1:
            raise ParameterError("max_rounds", "must be at least 1")
        self.staleness.check()


@dataclass
class BackendState:
    """What the live view shows of one backend."""

    name: str
    url: str
    status: str = "starting"  # starting | loading | ok | unavailable
    rounds: int = 0
    errors: int = 0
    last_error: str = ""
    load_fraction: float = 0.0
    recent: dict[str, deque[float]] = field(
        default_factory=lambda: {"read": deque(maxlen=RECENT), "write": deque(maxlen=RECENT)})

    def quantile_ms(self, op: str, q: float) -> float | None:
        """Return the ``q``-th percentile in ms of the recent successful ``op`` samples."""
        return percentile(sorted(self.recent[op]), q)


def record_key(i: int) -> str:
    """Return the element holding record ``i``: 100 records per item, one domain."""
    return f"watch/i{i // ITEM_RECORDS}/a{i % ITEM_RECORDS}"


def _error_text(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    if isinstance(err, TimeoutError):
        text = "timeout"
    return text[:300]


class _Backend:
    def __init__(self, spec: BackendSpec, opts: SuiteOptions, db: SampleDB) -> None:
        self.spec = spec
        self.store: Store = open_store(spec.url, opts.seed)
        if self.store.runtime.virtual:
            raise ValueError(f"backend {spec.name!r} runs in virtual time; use clock=real")
        self.records = spec.records or opts.records
        self.rng = random.Random(opts.seed * 1_000_003 + zlib.crc32(spec.name.encode()))
        self.pad = "".join(self.rng.choices(string.ascii_letters, k=opts.record_bytes))
        self.client: Client | None = None
        self.loaded = False
        self.round = db.next_round(spec.name)
        self.seq = 0
        self.state = BackendState(spec.name, redact_url(spec.url))

    def value(self, tag: str) -> str:
        """Return a record of exactly record_bytes characters starting with ``tag``."""
        return (tag + ":" + self.pad)[: len(self.pad)]


class Watcher:
    """Runs the suite against every backend until stopped; samples go to ``db``."""

    def __init__(self, specs: Sequence[BackendSpec], db: SampleDB, opts: SuiteOptions,
                 on_round: Callable[[BackendState, list[Sample]], None] | None = None,
                 on_freshness: Callable[[list[FreshnessRow]], None] | None = None) -> None:
        opts.check()
        self.opts = opts
        self.db = db
        self.on_round = on_round or (lambda _state, _samples: None)
        self.on_freshness = on_freshness or (lambda _rows: None)
        self.backends = [_Backend(s, opts, db) for s in specs]
        # the probe shares its backend's store: a simulated one lives in that object
        self.probes = [StalenessProbe(b.spec.name, b.store, opts.staleness, opts.interval_s,
                                      self._freshness) for b in self.backends if b.spec.staleness]
        db.declare(specs, opts.record_bytes, opts.records)

    def _freshness(self, rows: list[FreshnessRow]) -> None:
        self.db.append_freshness(rows)
        self.on_freshness(rows)

    @property
    def freshness(self) -> list[FreshnessRow]:
        """Return the last freshness row of every region of every backend watching
        staleness (none before its first window)."""
        return [row for p in self.probes for row in p.state.last.values()]

    @property
    def states(self) -> list[BackendState]:
        """Return the live state of every backend, in file order."""
        return [b.state for b in self.backends]

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Run every backend's loop until ``stop`` is set, --max-rounds or --duration."""
        stop = stop or asyncio.Event()
        deadline = (time.monotonic() + self.opts.duration_s
                    if self.opts.duration_s is not None else math.inf)
        try:
            # Load every keyspace before the first round, so no round is timed while another
            # backend's load (simulated ones share this process) competes for the CPU.
            await asyncio.gather(*(self._prepare(b, stop) for b in self.backends))
            probes_stop = asyncio.Event()  # the probes end with the rounds
            probes = [asyncio.create_task(p.run(probes_stop)) for p in self.probes]
            try:
                await asyncio.gather(*(self._loop(b, stop, deadline) for b in self.backends))
            finally:
                probes_stop.set()
                for t in probes:
                    with contextlib.suppress(Exception):
                        await t
        finally:
            for b in self.backends:
                await self._disconnect(b)
                # closing a dead store must not hide the samples
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(b.store.close(), self.opts.timeout_s)

    async def _prepare(self, b: _Backend, stop: asyncio.Event) -> None:
        """Connect and load; on failure leave it to the first round to record the error."""
        try:
            b.client = await asyncio.wait_for(b.store.connect(), self.opts.timeout_s)
            await self._ensure_loaded(b, stop)
        except Exception:
            await self._disconnect(b)

    async def _loop(self, b: _Backend, stop: asyncio.Event, deadline: float) -> None:
        opts = self.opts
        t0 = time.monotonic()
        tick = 0
        while not stop.is_set() and time.monotonic() < deadline:
            if opts.max_rounds is not None and b.state.rounds >= opts.max_rounds:
                return
            samples = await self._round(b, stop)
            if samples:
                self.db.append(samples)
                self.on_round(b.state, samples)
            # fixed-rate schedule; ticks missed by a slow round are skipped, not bunched
            now = time.monotonic()
            tick = max(tick + 1, math.ceil((now - t0) / opts.interval_s))
            delay = min(t0 + tick * opts.interval_s, deadline) - now
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    async def _round(self, b: _Backend, stop: asyncio.Event) -> list[Sample]:
        opts = self.opts
        plan = ["read"] * opts.reads + ["write"] * opts.writes
        b.rng.shuffle(plan)
        number = b.round
        try:
            if b.client is None:
                b.client = await asyncio.wait_for(b.store.connect(), opts.timeout_s)
            if not b.loaded:
                await self._ensure_loaded(b, stop)
        except Exception as err:
            if stop.is_set():
                return []
            await self._disconnect(b)
            return self._failed(b, number, plan, err)
        b.round += 1
        samples = [await self._op(b, number, op) for op in plan]
        self._account(b, samples)
        if all(not s.ok for s in samples):
            await self._disconnect(b)  # reconnect next round: the connection may be dead
        return samples

    def _failed(self, b: _Backend, number: int, plan: list[str],
                err: BaseException) -> list[Sample]:
        b.round += 1
        now = time.time()
        text = _error_text(err)
        samples = [Sample(b.spec.name, number, now, op, None, text) for op in plan]
        self._account(b, samples)
        return samples

    def _account(self, b: _Backend, samples: list[Sample]) -> None:
        st = b.state
        st.rounds += 1
        for s in samples:
            if s.ok and s.latency_ms is not None:
                st.recent[s.op].append(s.latency_ms)
            else:
                st.errors += 1
                st.last_error = s.error or ""
        st.status = "ok" if any(s.ok for s in samples) else "unavailable"

    async def _op(self, b: _Backend, number: int, op: str) -> Sample:
        assert b.client is not None
        key = record_key(b.rng.randrange(b.records))
        if op == "read":
            consistent = (b.spec.read == "consistent"
                          and Feature.CONSISTENT_READ in b.store.info.features)
            call = b.client.read([key], consistent=consistent)
        else:
            b.seq += 1
            call = b.client.write({key: b.value(f"{number}.{b.seq}")})
        t_s = time.time()
        t0 = time.perf_counter_ns()
        try:
            await asyncio.wait_for(call, self.opts.timeout_s)
        except Exception as err:
            return Sample(b.spec.name, number, t_s, op, None, _error_text(err))
        return Sample(b.spec.name, number, t_s, op, (time.perf_counter_ns() - t0) / 1e6)

    async def _ensure_loaded(self, b: _Backend, stop: asyncio.Event) -> None:
        assert b.client is not None
        opts = self.opts
        if self.db.loaded(b.spec.name, b.spec.url, b.records, opts.record_bytes):
            last = await asyncio.wait_for(
                b.client.read([record_key(b.records - 1)], consistent=True), opts.timeout_s)
            if last.values[0] is not None:
                b.loaded = True
                return
        b.state.status = "loading"
        started = time.monotonic()
        await self._load(b, stop)
        self.db.mark_loaded(b.spec.name, b.spec.url, b.records, opts.record_bytes,
                            time.monotonic() - started)
        b.loaded = True

    async def _load(self, b: _Backend, stop: asyncio.Event) -> None:
        """Write every record once; one call per item where the store writes items
        atomically, else one call per record. The same value object is reused: loading
        only needs records of the right size to exist."""
        opts = self.opts
        client = b.client
        assert client is not None
        filler = b.value("load")
        items = math.ceil(b.records / ITEM_RECORDS)
        multi = Feature.ATOMIC_MULTI_WRITE in b.store.info.features
        todo = iter(range(items))
        limit_s = opts.timeout_s * LOAD_TIMEOUT_FACTOR
        done = [0]

        async def worker() -> None:
            for item in todo:
                if stop.is_set():
                    raise RuntimeError("stopped while loading")
                keys = [record_key(i) for i in range(item * ITEM_RECORDS,
                                                     min((item + 1) * ITEM_RECORDS, b.records))]
                if multi:
                    await asyncio.wait_for(client.write(dict.fromkeys(keys, filler)),
                                           limit_s)
                else:
                    for k in keys:
                        await asyncio.wait_for(client.write({k: filler}), limit_s)
                done[0] += 1
                b.state.load_fraction = done[0] / items

        await asyncio.gather(*(worker() for _ in range(min(opts.load_concurrency, items))))

    async def _disconnect(self, b: _Backend) -> None:
        client, b.client = b.client, None
        if client is not None:
            # a dead connection has nothing left to release
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), self.opts.timeout_s)

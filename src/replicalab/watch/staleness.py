"""Consistency watched continuously (seed 003's "tool support for monitoring consistency"):
a writer and readers per region, judged window by window.

One writer (a client in the store's first region) writes a new version of one key every
``write_interval_s``; in every region of the store ``readers`` clients read that key at
``read_rate_per_s`` each, eventually consistent where the store has such reads (the reads
that can be stale). A read is *fresh* when it returns the latest version whose write started
before the read started, or a newer one (seed 003 §2, as ``checkers/freshness.py`` judges a
probe). Every window (the watch ``--interval``) gives one row per region:

* ``reads`` and ``fresh``: the reads started in the window and how many were fresh;
* time to fresh, per write judged in the window: how long after the write started the
  region's reads became and stayed fresh until the next write (the start of the earliest
  read from which every read of that region, up to the next write, is fresh); its median
  and maximum over the window's writes in ms, and ``never``: the writes the region never
  saw before the next one was written.

A write is judged once its next write has started (its interval is complete); the window
that judges it is the one in which that happens.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from replicalab.errors import ParameterError
from replicalab.history.values import decode_value, encode_value
from replicalab.stores import Client, Feature, Store

KEY = "watch/staleness/v"
WRITER = 0


@dataclass(frozen=True)
class StalenessOptions:
    """How the staleness probe of a backend runs (times in s, rates per s)."""

    write_interval_s: float = 1.0
    read_rate_per_s: float = 10.0
    readers: int = 1  # per region
    timeout_s: float = 5.0

    def check(self) -> None:
        """Raise ParameterError naming the first parameter (as ``watch`` names it) out of
        range."""
        if not self.write_interval_s > 0:
            raise ParameterError("staleness_write_interval", "must be positive, e.g. 1s")
        if not self.read_rate_per_s > 0:
            raise ParameterError("staleness_read_rate", "must be positive, e.g. 10 (reads/s)")
        if self.readers < 1:
            raise ValueError(f"staleness readers {self.readers}: at least 1 per region")


@dataclass(frozen=True, slots=True)
class WriteMark:
    """One write of the probe: its version and when it started and was acknowledged (ns,
    the watcher's monotonic clock; ``ack_ns`` 0 when it failed)."""

    seq: int
    invoke_ns: int
    ack_ns: int


@dataclass(frozen=True, slots=True)
class ReadMark:
    """One read of the probe: the reader's region, when it started (ns), the version it
    returned (0: none yet, None: the read failed)."""

    region: str
    invoke_ns: int
    seq: int | None


@dataclass(frozen=True, slots=True)
class FreshnessRow:
    """One region's freshness over one window (what the samples database keeps)."""

    backend: str
    region: str
    t_s: float  # window end, Unix seconds
    window_s: float
    reads: int
    fresh: int
    errors: int
    writes: int  # writes judged in the window
    never: int  # of them, never fresh in the region before the next write
    ttf_p50_ms: float | None
    ttf_max_ms: float | None

    @property
    def fresh_fraction(self) -> float | None:
        """Return fresh / reads (None when no read was judged)."""
        return self.fresh / self.reads if self.reads else None


def _latest_started(writes: Sequence[WriteMark], starts: Sequence[int], at_ns: int) -> int:
    """Return the seq of the latest write started strictly before ``at_ns`` (0: none)."""
    i = bisect.bisect_left(starts, at_ns)
    return writes[i - 1].seq if i else 0


def judge_window(writes: Sequence[WriteMark], reads: Sequence[ReadMark], lo_ns: int,
                 hi_ns: int, judged_until_seq: int, regions: Sequence[str]
                 ) -> tuple[dict[str, dict[str, Any]], int]:
    """Return per region ``{reads, fresh, errors, ttf_ms (list), never}`` for the reads
    started in [lo_ns, hi_ns) and the writes after ``judged_until_seq`` whose next write
    started before ``hi_ns``; and the last seq judged. ``writes`` are in start order,
    every write ever made that a read in the window may be judged against."""
    starts = [w.invoke_ns for w in writes]
    out = {r: {"reads": 0, "fresh": 0, "errors": 0, "ttf_ms": [], "never": 0} for r in regions}
    for r in reads:
        if not lo_ns <= r.invoke_ns < hi_ns or r.region not in out:
            continue
        row = out[r.region]
        if r.seq is None:
            row["errors"] += 1
            continue
        want = _latest_started(writes, starts, r.invoke_ns)
        if want == 0:
            continue  # nothing written yet: no freshness to judge
        row["reads"] += 1
        row["fresh"] += r.seq >= want
    last = judged_until_seq
    by_region: dict[str, list[ReadMark]] = {}
    for r in sorted(reads, key=lambda r: r.invoke_ns):  # kept in the order they completed
        by_region.setdefault(r.region, []).append(r)
    for k, w in enumerate(writes[:-1]):
        nxt = writes[k + 1]
        if w.seq <= judged_until_seq or nxt.invoke_ns >= hi_ns:
            continue
        last = max(last, w.seq)
        for region in regions:
            mine = [r for r in by_region.get(region, ()) if w.invoke_ns <= r.invoke_ns
                    < nxt.invoke_ns and r.seq is not None]
            if not mine:
                continue  # no read of the region in the interval: nothing to say
            settled = None
            for r in reversed(mine):
                if r.seq < w.seq:  # type: ignore[operator]
                    break
                settled = r
            if settled is None:
                out[region]["never"] += 1
            else:
                out[region]["ttf_ms"].append((settled.invoke_ns - w.invoke_ns) / 1e6)
    return out, last


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


@dataclass
class StalenessState:
    """What the live view and /metrics show of one backend's freshness: the last row per
    region."""

    last: dict[str, FreshnessRow] = field(default_factory=dict)


class StalenessProbe:
    """Runs the writer and the readers of one backend until stopped, and hands one
    :class:`FreshnessRow` per region to ``on_window`` every ``window_s``."""

    def __init__(self, backend: str, store: Store, opts: StalenessOptions, window_s: float,
                 on_window: Callable[[list[FreshnessRow]], None]) -> None:
        opts.check()
        self.backend, self.store, self.opts = backend, store, opts
        self.window_s = window_s
        self.on_window = on_window
        self.regions = list(store.info.regions)
        self.consistent = Feature.EVENTUAL_READ not in store.info.features
        self.writes: list[WriteMark] = []
        self.reads: list[ReadMark] = []
        self.judged_seq = 0
        self.state = StalenessState()

    async def _call(self, coro: Any) -> Any:
        return await asyncio.wait_for(coro, self.opts.timeout_s)

    async def _writer(self, client: Client, stop: asyncio.Event) -> None:
        seq = 0
        period = self.opts.write_interval_s
        t0 = time.monotonic()
        tick = 0
        while not stop.is_set():
            seq += 1
            start = time.monotonic_ns()
            self.writes.append(WriteMark(seq, start, 0))
            try:
                await self._call(client.write({KEY: encode_value(WRITER, seq, start)}))
                self.writes[-1] = WriteMark(seq, start, time.monotonic_ns())
            except Exception:  # a failed write stays in the record: its version may land
                pass
            tick = max(tick + 1, math.ceil((time.monotonic() - t0) / period))
            await _sleep_until(t0 + tick * period, stop)

    async def _reader(self, client: Client, region: str, stop: asyncio.Event,
                      phase_s: float) -> None:
        period = 1.0 / self.opts.read_rate_per_s
        t0 = time.monotonic() + phase_s
        tick = 0
        await _sleep_until(t0, stop)
        while not stop.is_set():
            start = time.monotonic_ns()
            try:
                got = await self._call(client.read((KEY,), consistent=self.consistent))
                v = decode_value(got.values[0])
                self.reads.append(ReadMark(region, start, v.seq if v else 0))
            except Exception:
                self.reads.append(ReadMark(region, start, None))
            tick = max(tick + 1, math.ceil((time.monotonic() - t0) / period))
            await _sleep_until(t0 + tick * period, stop)

    def close_window(self, lo_ns: int, hi_ns: int) -> list[FreshnessRow]:
        """Judge the window [lo_ns, hi_ns), hand its rows on, forget what no later window
        needs, and return the rows."""
        got, self.judged_seq = judge_window(self.writes, self.reads, lo_ns, hi_ns,
                                            self.judged_seq, self.regions)
        now = time.time()
        rows = [FreshnessRow(self.backend, region, now, self.window_s, g["reads"], g["fresh"],
                             g["errors"], len(g["ttf_ms"]) + g["never"], g["never"],
                             _median(g["ttf_ms"]), max(g["ttf_ms"], default=None))
                for region, g in got.items()]
        # keep the last judged write and everything after it, and reads from it on
        keep = next((i for i, w in enumerate(self.writes) if w.seq >= self.judged_seq), 0)
        self.writes = self.writes[max(keep, 0):]
        oldest = min(self.writes[0].invoke_ns if self.writes else hi_ns, hi_ns)
        self.reads = [r for r in self.reads if r.invoke_ns >= oldest]
        for row in rows:
            self.state.last[row.region] = row
        self.on_window(rows)
        return rows

    async def _connect(self, stop: asyncio.Event, clients: list[Client]
                       ) -> tuple[Client, list[tuple[Client, str]]] | None:
        """Return the writer and the (reader, region) clients, trying again every window
        while the store cannot be reached; None if stopped first."""
        while not stop.is_set():
            try:
                writer = await self._call(self.store.connect(self.regions[0]))
                clients.append(writer)
                readers = []
                for region in self.regions:
                    for _ in range(self.opts.readers):
                        c = await self._call(self.store.connect(region))
                        clients.append(c)
                        readers.append((c, region))
                return writer, readers
            except Exception:
                await _close_all(clients, self.opts.timeout_s)
                await _sleep_until(time.monotonic() + self.window_s, stop)
        return None

    async def run(self, stop: asyncio.Event) -> None:
        """Connect, write and read until ``stop`` is set, closing a window every
        ``window_s``; a store that cannot be reached is tried again every window."""
        clients: list[Client] = []
        tasks: list[asyncio.Task[None]] = []
        inner = asyncio.Event()
        try:
            got = await self._connect(stop, clients)
            if got is None:
                return
            writer, readers = got
            tasks.append(asyncio.create_task(self._writer(writer, inner)))
            n = len(readers)
            for i, (c, region) in enumerate(readers):
                phase = i / (n * self.opts.read_rate_per_s)  # spread the readers' reads
                tasks.append(asyncio.create_task(self._reader(c, region, inner, phase)))
            lo = time.monotonic_ns()
            t0 = time.monotonic()
            k = 0
            while not stop.is_set():
                k += 1
                await _sleep_until(t0 + k * self.window_s, stop)
                if stop.is_set():
                    break
                hi = time.monotonic_ns()
                self.close_window(lo, hi)
                lo = hi
        finally:
            inner.set()
            for t in tasks:
                with contextlib.suppress(Exception):
                    await t
            await _close_all(clients, self.opts.timeout_s)


async def _close_all(clients: list[Client], timeout_s: float) -> None:
    """Close and forget ``clients`` (a dead connection has nothing left to release)."""
    for c in clients:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(c.close(), timeout_s)
    clients.clear()


async def _sleep_until(t_s: float, stop: asyncio.Event) -> None:
    """Sleep until monotonic time ``t_s`` or until ``stop`` is set."""
    delay = t_s - time.monotonic()
    if delay > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)

"""Staleness probe (seed 003 §2): one writer writes a unique value every interval; readers
read at a fixed rate; every read is judged fresh or stale against the latest write.

Placements (seed 003 §2.1.2): ``same-client`` (the writer reads between its writes),
``separate-clients`` (readers are other clients of this process) and ``separate-processes``
(readers are processes of their own, ``workloads/reader_processes.py``; real stores only).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import by_range, curve, judge, k_staleness, periods
from replicalab.checkers.sessions import (
    monotonic_read_violations,
    read_your_writes,
    successive_reads,
)
from replicalab.checkers.stats import parse_ranges
from replicalab.errors import ParameterError
from replicalab.history import History, encode_value
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import Feature, Store
from replicalab.workloads.base import Flag, ProbeOptions, Workload, deadline, envelope
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.slots import Slots

KEY = "probe/item/value"
WRITER = 0
PLACEMENTS = ("same-client", "separate-clients", "separate-processes")


@dataclass(frozen=True)
class StalenessConfig:
    """How clients are placed: one client doing both, or a writer and separate readers."""

    placement: str = "same-client"
    readers: int = 1
    writer_region: str | None = None
    reader_region: str | None = None
    ranges: str = "0-450,500-1000"
    successive_window_ms: tuple[float, float] = (0.0, 450.0)
    hold_ms: float = 50.0
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Raise ValueError naming the first invalid option."""
        if self.placement not in PLACEMENTS:
            raise ParameterError("placement", f"{self.placement!r}: use same-client, "
                                              "separate-clients or separate-processes")
        if self.readers < 1:
            raise ParameterError("readers", f"must be at least 1 (got {self.readers})")
        parse_ranges(self.ranges)


async def _read_until(rec: Recorder, client: Any, process: int, consistent: bool,
                      rate: float, until_ns: int, stop_ns: int) -> None:
    """Read at ``rate`` until ``until_ns`` (closed loop: a slow read delays the next, and
    the slots it outlasted are skipped, never caught up in a burst)."""
    rt = rec.rt
    slots = Slots(rt, int(NS_PER_S / rate))
    keys = (KEY,)
    while True:
        now = rt.now_ns()
        if slots.slot_ns >= until_ns or now >= until_ns or now >= stop_ns:
            return
        if slots.slot_ns > now:  # not due yet (a read that outlasts its slot is not)
            await slots.wait()
        await rec.read(client, process, keys, consistent)
        slots.advance()


async def _reads_for(rec: Recorder, client: Any, process: int, until_ns: int, *,
                     consistent: bool, rate: float) -> None:
    """One reader process's reads (see ``reader_processes.ReadLoop``)."""
    await _read_until(rec, client, process, consistent, rate, until_ns, until_ns)


async def _separate_processes(store: Store, h: History, opts: ProbeOptions,
                              cfg: StalenessConfig, rec: Recorder) -> None:
    """The probe with its readers in processes of their own: they start and connect
    first, then the writer's first write, then the run's duration of reads and writes."""
    from replicalab.workloads.reader_processes import ReaderProcesses, merge_into

    rt = store.runtime
    url = cfg.extra.get("store_url")
    if rt.virtual or store.info.kind.startswith("sim/") or not url:
        raise ParameterError("placement", "separate-processes needs a real store (a "
                                          "simulated one lives in one process); use "
                                          "separate-clients on sim://")
    consistent = opts.consistency == "consistent"
    writer = await store.connect(cfg.writer_region)
    readers = ReaderProcesses(url, getattr(store, "prefix", ""), opts.seed, cfg.reader_region,
                              [WRITER + 1 + i for i in range(cfg.readers)],
                              partial(_reads_for, consistent=consistent, rate=opts.read_rate))
    try:
        await readers.ready(rt.sleep_ns)
        stop = deadline(rt, opts.duration_s)
        interval = int(opts.write_interval_s * NS_PER_S)
        writes = Slots(rt, interval)
        # as with separate clients: the first write creates the key before any read
        await rec.write(writer, WRITER, {KEY: encode_value(WRITER, 1, rt.now_ns())})
        readers.go(stop)
        writes.advance()
        seq = 1
        await writes.wait()
        while writes.slot_ns < stop:
            seq += 1
            await rec.write(writer, WRITER, {KEY: encode_value(WRITER, seq, rt.now_ns())})
            writes.advance()
            await writes.wait()
        await readers.collect(rt.sleep_ns, opts.duration_s + 10.0)
    finally:
        if len(readers.results) < len(readers.conns):  # cut short: what they recorded
            readers.stop()
            with contextlib.suppress(BaseException):
                await readers.collect(rt.sleep_ns, 2.0)
        merge_into(h, [part for part, _ in (readers.results[i]
                                            for i in sorted(readers.results))])
        readers.close()
    failed = [e for _, e in readers.results.values() if e and e != "interrupted"]
    if failed:
        raise RuntimeError(f"a reader process failed: {failed[0]}")


async def generate(store: Store, h: History, opts: ProbeOptions, cfg: StalenessConfig,
                   rec: Recorder) -> None:
    """Drive the probe until ``opts.duration_s`` has passed on the store's runtime; a write
    that outlasts its interval skips the write slots it missed."""
    rt = store.runtime
    consistent = opts.consistency == "consistent"
    stop = deadline(rt, opts.duration_s)
    interval = int(opts.write_interval_s * NS_PER_S)
    if cfg.placement == "separate-processes":
        await _separate_processes(store, h, opts, cfg, rec)
        return
    writer = await store.connect(cfg.writer_region)
    if cfg.placement == "same-client":
        seq = 0
        writes = Slots(rt, interval)
        while writes.slot_ns < stop:
            seq += 1
            await rec.write(writer, WRITER, {KEY: encode_value(WRITER, seq, rt.now_ns())})
            await _read_until(rec, writer, WRITER, consistent, opts.read_rate,
                              writes.slot_ns + interval, stop)
            writes.advance()
            await writes.wait()
        return
    readers = [await store.connect(cfg.reader_region) for _ in range(cfg.readers)]
    writes = Slots(rt, interval)
    # the readers start once the first write is acknowledged: it creates the key (on
    # ZooKeeper the znode and each parent, a round trip to the leader apiece), and a read
    # of the key not yet created would count as stale against a write still in flight
    await rec.write(writer, WRITER, {KEY: encode_value(WRITER, 1, rt.now_ns())})
    writes.advance()

    async def write_loop() -> None:
        seq = 1
        await writes.wait()
        while writes.slot_ns < stop:
            seq += 1
            await rec.write(writer, WRITER, {KEY: encode_value(WRITER, seq, rt.now_ns())})
            writes.advance()
            await writes.wait()

    await rt.gather(write_loop(), *(
        _read_until(rec, c, WRITER + 1 + i, consistent, opts.read_rate, stop, stop)
        for i, c in enumerate(readers)))


def check(h: History, store_url: str, opts: ProbeOptions, cfg: StalenessConfig,
          features: frozenset[Feature] = frozenset()) -> dict[str, Any]:
    """Return the staleness results (see docs/probe.md for every field)."""
    writes, reads = element_ops(h, KEY)
    j = judge(writes, reads)
    out = envelope("staleness", store_url, opts, h)
    out["config"] = {**asdict(opts), **{k: v for k, v in asdict(cfg).items() if k != "extra"}}
    out["freshness"] = curve(j, 1.0)
    out["fresh_by_range"] = by_range(j, parse_ranges(cfg.ranges))
    out["periods"] = periods(j, writes, opts.period_s, cfg.hold_ms)
    out["k_staleness"] = k_staleness(j)
    out["read_your_writes"] = read_your_writes(writes, reads)
    out["successive_reads"] = successive_reads(j, reads, cfg.successive_window_ms)
    out["monotonic_reads"] = monotonic_read_violations(reads)
    return out


def required_features(opts: ProbeOptions, cfg: StalenessConfig | None = None) -> set[Feature]:
    """Return the store features this probe needs."""
    return {Feature.CONSISTENT_READ if opts.consistency == "consistent"
            else Feature.EVENTUAL_READ}


FLAGS = (
    Flag("placement", str, "same-client | separate-clients | separate-processes"),
    Flag("readers", int, "reader clients (separate-clients)"),
    Flag("writer_region", str, "region of the writer"),
    Flag("reader_region", str, "region of the readers"),
    Flag("ranges", str, "aggregate ranges in ms since the write started"),
)


def from_flags(given: dict[str, Any]) -> StalenessConfig:
    """Return the config of the given flags (ValueError for a reader option that the
    placement leaves without effect)."""
    placement = given.get("placement")
    if placement not in ("separate-clients", "separate-processes"):
        for name, used in (("reader_region", given.get("reader_region") is not None),
                           ("readers", given.get("readers") not in (None, 1))):
            if used:
                raise ParameterError(name, "has no effect with {placement} "
                                           f"{placement or 'same-client'} (the writer does the "
                                           "reads); add {placement} separate-clients or drop "
                                           "it", {"placement": "placement"})
    return StalenessConfig(**{k: v for k, v in given.items() if v is not None})


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the terminal summary rows: freshness by range, time to 99 % fresh, session
    guarantee violations."""
    rows = []
    for r in results["fresh_by_range"]:
        p = "n/a" if r["p"] is None else f"{100 * r['p']:.2f}%"
        rows.append((f"fresh in [{r['from_ms']:g}, {r['to_ms']:g}) ms",
                     f"{p} ({r['fresh']:,}/{r['total']:,})"))
    med = results["periods"]["first_ge_99_median_ms"]
    curve_p = results["freshness"]["p"]
    if curve_p and min(curve_p) >= 1.0:
        # the first time >= 99 % fresh would be the first bucket holding a read (78 ms for
        # SimpleDB's consistent reads), which reads like a staleness window there is not
        rows.append(("median first time >= 99% fresh", "none stale: every read fresh"))
    else:
        rows.append(("median first time >= 99% fresh",
                     "n/a" if med is None else f"{med:.1f} ms"))
    s = results["successive_reads"]
    if s["pairs"]:
        rows.append(("monotonic-read violations (fresh then stale)",
                     f"{100 * s['fresh_stale']:.2f}% of {s['pairs']:,} pairs"))
    ryw = results["read_your_writes"]
    if ryw["applicable"]:
        rows.append(("read-your-writes violations", f"{ryw['violations']:,} of {ryw['reads']:,}"))
    return rows


def figures(results: dict[str, Any]) -> dict[str, Any]:
    """Return one run's headline figures for a batch of runs: fresh reads per range (a
    (fresh, total) pair), the median first time a period is >= 99 % fresh and last time it
    is < 100 % fresh (ms), monotonic-read violations (a (fresh-then-stale, pairs) pair)."""
    out: dict[str, Any] = {}
    for r in results["fresh_by_range"]:
        out[f"fresh in [{r['from_ms']:g}, {r['to_ms']:g}) ms"] = (r["fresh"], r["total"])
    per = results["periods"]
    out["first time >= 99 % fresh (ms)"] = per["first_ge_99_median_ms"]
    out["last time < 100 % fresh (ms)"] = per["last_lt_100_median_ms"]
    s = results["successive_reads"]
    out["monotonic-read violations"] = (s["counts"]["fresh_stale"], s["pairs"])
    return out


def series(results: dict[str, Any]) -> dict[str, list[float | None]]:
    """Return seed 003's Figure 3 series of one run: per measurement period, the first
    time >= 99 % fresh and the last time < 100 % fresh (ms after the write started)."""
    per = results["periods"]
    return {"first time >= 99 % fresh (ms)": list(per["first_ge_99_ms"]),
            "last time < 100 % fresh (ms)": list(per["last_lt_100_ms"])}


WORKLOAD = Workload("staleness", StalenessConfig, generate, check, required_features,
                    flags=FLAGS, from_flags=from_flags, summary_rows=summary_rows,
                    legacy_config=lambda d: d["staleness"], figures=figures, series=series)

"""``watch`` measuring staleness continuously: the window judge against hand-made histories
(fresh per seed 003's definition, time to fresh), and on the shared dc3 Redis the US-W
freshness series drops while its replication link is slowed (a Toxiproxy latency toxic) and
recovers after, in the samples database, on the dashboard's data and at /metrics."""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from pathlib import Path

import httpx
import pytest

from replicalab.cluster.toxiproxy import Toxiproxy
from replicalab.report.dashboard import dashboard_data
from replicalab.watch.config import BackendSpec, parse_backends
from replicalab.watch.db import SampleDB
from replicalab.watch.metrics import WatchMetrics, serve
from replicalab.watch.staleness import ReadMark, StalenessOptions, WriteMark, judge_window
from replicalab.watch.watcher import SuiteOptions, Watcher

MS = 1_000_000


def _w(seq: int, at_ms: float) -> WriteMark:
    return WriteMark(seq, int(at_ms * MS), int(at_ms * MS) + MS)


def _r(region: str, at_ms: float, seq: int | None) -> ReadMark:
    return ReadMark(region, int(at_ms * MS), seq)


def test_a_read_is_fresh_when_it_returns_the_latest_write_started_before_it():
    writes = [_w(1, 0), _w(2, 100), _w(3, 200)]
    reads = [_r("A", 10, 0), _r("A", 50, 1), _r("A", 110, 1), _r("A", 150, 2),
             _r("A", 190, 3),  # newer than asked: fresh
             _r("B", 120, 2), _r("B", 130, None), _r("A", 5, 1)]
    got, last = judge_window(writes, reads, 0, 201 * MS, 0, ["A", "B"])
    # A: 10 stale, 50 fresh, 110 stale, 150 fresh, 190 fresh, 5 fresh
    assert (got["A"]["reads"], got["A"]["fresh"]) == (6, 4)
    assert (got["B"]["reads"], got["B"]["fresh"], got["B"]["errors"]) == (1, 1, 1)
    # write 1's interval [0, 100): A became and stayed fresh at the read at 50 ms (the one
    # at 5 ms, listed last as if it completed last, was fresh, then 10 ms stale); write 2's
    # [100, 200): at 150 ms; write 3 is not judged yet (no next write)
    assert sorted(got["A"]["ttf_ms"]) == [50.0, 50.0] and got["A"]["never"] == 0
    assert got["B"]["ttf_ms"] == [20.0]  # B's only read of write 2 was fresh at 120 ms
    assert last == 2


def test_a_region_that_never_catches_up_counts_the_write_as_never_fresh():
    writes = [_w(1, 0), _w(2, 100), _w(3, 200)]
    reads = [_r("A", 20, 0), _r("A", 80, 0), _r("A", 120, 1), _r("A", 180, 2)]
    got, last = judge_window(writes, reads, 0, 250 * MS, 0, ["A"])
    assert got["A"]["never"] == 1 and got["A"]["ttf_ms"] == [80.0]
    # judged once: a later window does not judge writes 1 and 2 again
    again, _ = judge_window(writes, reads, 250 * MS, 300 * MS, last, ["A"])
    assert again["A"]["never"] == 0 and again["A"]["ttf_ms"] == []


def test_backends_opt_in_to_staleness_and_bad_values_are_named():
    (spec,) = parse_backends({"backends": {"r": {"url": "sim://simpledb",
                                                 "staleness": True}}})
    assert spec.staleness is True
    with pytest.raises(ValueError, match="staleness must be true or false"):
        parse_backends({"backends": {"r": {"url": "sim://simpledb", "staleness": "yes"}}})
    with pytest.raises(ValueError, match="staleness_read_rate must be positive"):
        StalenessOptions(read_rate_per_s=0).check()


def _metric(text: str, name: str, region: str) -> float | None:
    m = re.search(rf'^{name}{{backend="redis",region="{region}"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


@pytest.mark.integration
def test_watch_freshness_drops_while_a_replication_link_is_slow_and_recovers(redis_dc3,
                                                                            tmp_path: Path):
    c, _ = redis_dc3
    # the replica in US-W pulls from the primary in US-E: the stream flows downstream
    link = next(x for x in c.links if x.src_region == "US-W" and x.dst_region == "US-E"
                and x.kind == "replication")
    extra_ms = 800.0  # > the 250 ms between writes: every US-W read falls behind
    db = SampleDB(tmp_path / "samples.sqlite")
    (spec,) = parse_backends({"backends": {"redis": {"url": c.url, "staleness": True,
                                                     "records": 100}}})
    assert isinstance(spec, BackendSpec)
    opts = SuiteOptions(interval_s=1.0, records=100, timeout_s=3.0,
                        staleness=StalenessOptions(write_interval_s=0.25,
                                                   read_rate_per_s=20.0))
    metrics = WatchMetrics(["redis"])
    server = serve(metrics, 0)
    port = server.server_address[1]
    rows: list = []

    def on_freshness(window: list) -> None:
        metrics.observe_freshness(window)
        rows.extend(r for r in window if r.region == "US-W")

    watcher = Watcher([spec], db, opts, on_freshness=on_freshness)
    tp = Toxiproxy(c.toxiproxy_port)
    phases: dict[str, int] = {}
    scraped: dict[str, str] = {}

    async def until(n: int, limit_s: float = 120.0) -> None:
        deadline = time.monotonic() + limit_s
        while len(rows) < n:
            assert time.monotonic() < deadline, f"{len(rows)} windows, not {n}"
            await asyncio.sleep(0.1)

    async def drive(stop: asyncio.Event) -> None:
        try:
            await until(4)  # three whole windows of baseline after the first
            phases["slow"] = len(rows)
            tp.set_latency(link.name, link.downstream_ms + extra_ms, link.upstream_ms,
                           link.jitter_ms)
            await until(phases["slow"] + 4)
            async with httpx.AsyncClient() as h:
                scraped["slow"] = (await h.get(f"http://127.0.0.1:{port}/metrics")).text
            phases["healed"] = len(rows)
        finally:
            tp.set_latency(link.name, link.downstream_ms, link.upstream_ms, link.jitter_ms)
        await until(phases["healed"] + 5)
        stop.set()

    async def main() -> None:
        stop = asyncio.Event()
        await asyncio.gather(watcher.run(stop), drive(stop))

    try:
        asyncio.run(main())
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    finally:
        tp.close()
        server.shutdown()
        server.server_close()
    fresh = [r.fresh_fraction for r in rows]
    base = fresh[1:phases["slow"]]
    slowed = fresh[phases["slow"] + 1:phases["healed"]]  # the first window is partly before
    healed = fresh[phases["healed"] + 2:]  # the backlog drains during the first one or two
    assert statistics.median(base) >= 0.5, fresh
    assert statistics.median(slowed) <= 0.15, fresh
    assert statistics.median(healed) >= 0.5, fresh
    # time to fresh: about the one-way link (40 ms) before, never within a write while slow
    assert statistics.median(r.ttf_p50_ms for r in rows[1:phases["slow"]]
                             if r.ttf_p50_ms is not None) < 200
    assert sum(r.never for r in rows[phases["slow"] + 1:phases["healed"]]) > 0
    # the database, the dashboard and /metrics carry the same series
    stored = [r for r in db.freshness() if r.region == "US-W"]
    assert [r.fresh for r in stored] == [r.fresh for r in rows]
    page = dashboard_data(db, "5m")
    (west,) = [f for f in page["freshness"] if f["region"] == "US-W"]
    assert [p["fresh_fraction"] for p in west["series"]] == fresh
    assert _metric(scraped["slow"], "replicalab_watch_fresh_fraction", "US-W") <= 0.15
    assert _metric(text, "replicalab_watch_fresh_fraction", "US-W") == fresh[-1]
    assert _metric(text, "replicalab_watch_judged_reads_total", "US-W") == sum(
        r.reads for r in rows)
    assert _metric(text, "replicalab_watch_stale_reads_total", "US-W") == sum(
        r.reads - r.fresh for r in rows)
    db.close()

"""The seed-001 microbenchmark suite every interval against storage backends, samples
appended to SQLite, optionally served as Prometheus metrics (:func:`watch`), and the
samples as a page on 127.0.0.1 (:func:`dashboard`). What ``replicalab watch`` and
``replicalab dashboard`` run; a front end draws the live view from the callbacks."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, INTERRUPTED, Outcome
from replicalab.api.words import fmt_s
from replicalab.watch.vehicle import direction, gauge

__all__ = ["LoadingLines", "dashboard", "direction", "fraction_text", "freshness_json",
           "freshness_text", "gauge", "ms_text", "round_text", "watch"]


async def _until_done_or_signal(watcher: Any, every: Callable[[], None] | None) -> str:
    """Run the watcher until done or SIGINT/SIGTERM (calling ``every`` twice a second, and
    once at the end); return the signal's name ("" if none)."""
    stop = asyncio.Event()
    got: list[str] = []
    loop = asyncio.get_running_loop()

    def on_signal(name: str) -> None:
        got.append(name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)
    task = asyncio.create_task(watcher.run(stop))
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=0.5)
            if every is not None:
                every()
        if every is not None:
            every()  # a backend whose loading ended with the run is told of
        task.result()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return got[0] if got else ""


def ms_text(x: float | None) -> str:
    """Return milliseconds as the watch prints them (one decimal; "–" for none)."""
    return "–" if x is None else f"{x:.1f}"


def fraction_text(x: float | None) -> str:
    """Return a fraction as the watch prints it (a percent, one decimal; "–" for none)."""
    return "–" if x is None else f"{100 * x:.1f}%"


def freshness_text(rows: Sequence[Any]) -> str:
    """Return one backend's freshness window (``on_freshness``'s rows, one per region) as a
    log line: each region's share of fresh reads (percent) and median time to fresh (ms)."""
    return f"{rows[0].backend} freshness: " + ", ".join(
        f"{r.region} {fraction_text(r.fresh_fraction)} fresh, time to fresh "
        f"{ms_text(r.ttf_p50_ms)} ms" for r in rows)


def freshness_json(rows: Sequence[Any]) -> dict[str, Any]:
    """Return one backend's freshness window as ``watch --json`` prints it: ``backend`` and
    ``freshness``, each region's row (counts; times in s and ms) with its
    ``fresh_fraction``."""
    return {"backend": rows[0].backend, "freshness": [
        {**asdict(r), "fresh_fraction": r.fresh_fraction} for r in rows]}


def round_text(samples: list[dict[str, Any]]) -> str:
    """Return one backend round (samples as ``on_round`` gets them) as a log line: each
    operation's latency (ms) or error and why, the reason said once when every operation
    failed alike."""
    from replicalab.watch.stats import Sample, round_line

    return round_line([Sample(**s) for s in samples])


def percentile_lines(samples: list[Any]) -> list[str]:
    """Return one line per backend and operation of ``samples``: p50/p99/p99.9 and count."""
    import math

    from replicalab.watch.stats import window_summary

    lines = []
    for backend, ops in window_summary(samples, math.inf, None).items():
        for op, x in ops.items():
            lines.append(f"{backend} {op}: p50 {ms_text(x['p50_ms'])} ms, p99 "
                         f"{ms_text(x['p99_ms'])} ms, p99.9 {ms_text(x['p999_ms'])} ms over "
                         f"{x['count']:,} operations ({x['errors']:,} failed)")
    return lines


class LoadingLines:
    """Piped output: what a backend does before its first round (loading its records can
    take a minute), told to ``announce`` (default: stderr): a line when loading starts,
    then every ``every_s``, and one when it stops: loaded, or why it could not load."""

    def __init__(self, every_s: float = 10.0,
                 announce: Callable[[str], None] | None = None) -> None:
        self.every_s = every_s
        self.t0 = time.monotonic()
        self.said: dict[str, float] = {}
        self.announce = announce or (lambda line: print(line, file=sys.stderr, flush=True))

    def update(self, states: list[Any]) -> None:
        """Say a line for each backend that is loading and due one, and one when a
        backend said to be loading stops: loaded, or why it could not load."""
        now = time.monotonic()
        for st in states:
            if st.status != "loading":
                if self.said.pop(st.name, None) is not None:
                    self.announce(f"watch: {st.name}: " + (
                        f"loaded in {fmt_s(now - self.t0)}; rounds begin" if st.status == "ok"
                        else f"loading stopped: {st.last_error or st.status}"))
                continue
            last = self.said.get(st.name)
            if last is None or now - last >= self.every_s:
                self.said[st.name] = now
                self.announce(f"watch: {st.name}: loading its records before the first "
                              f"round ({100 * st.load_fraction:.0f}% done, "
                              f"{fmt_s(now - self.t0)} elapsed)")


def watch(config: str | Path | None = None, db: str | Path = "samples.sqlite",
          interval: str | float = "10s",
          max_rounds: int | None = None, duration: str | float | None = None,
          records: int = 1_000_000, record_bytes: int = 1024, reads: int = 1, writes: int = 1,
          timeout: str | float = "5s", seed: int = 1, metrics_port: int | None = None,
          metrics_host: str = "127.0.0.1",
          on_round: Callable[[Any, list[dict[str, Any]], float], None] | None = None,
          every: Callable[[list[Any], Any, list[Any]], None] | None = None,
          announce: Callable[[str], None] = print, stores: Sequence[str] = (),
          staleness_write_interval: str | float = "1s", staleness_read_rate: float = 10.0,
          on_freshness: Callable[[list[Any]], None] | None = None) -> Outcome:
    """Run the suite every ``interval`` against each backend of ``config`` (a TOML file of
    ``[backends.NAME]`` tables) and of ``stores`` (URLs), appending samples to ``db`` each
    round, until
    ``max_rounds`` rounds per backend, ``duration``, or SIGINT/SIGTERM. ``metrics_port``:
    also serve the samples as Prometheus metrics on ``metrics_host`` (``announce`` is told
    where). Backends with ``staleness = true`` are also probed for freshness per region (a
    version every ``staleness_write_interval``, ``staleness_read_rate`` reads/s each),
    ``on_freshness(rows)`` told of each window. ``on_round(state, samples, steering)`` is
    called after each backend's round (samples as dicts; the store-driven vehicle's
    steering), ``every(states, vehicle, freshness)`` twice a second (for a live view).
    Returns the :class:`Outcome`: this run's percentiles per backend and operation, the
    samples in ``db`` and the signal that stopped it (INTERRUPTED for SIGINT, and for
    SIGTERM, which acts as Ctrl-C for every command)."""
    from replicalab.watch.config import backends_from_urls, load_backends
    from replicalab.watch.db import SampleDB
    from replicalab.watch.staleness import StalenessOptions
    from replicalab.watch.vehicle import Vehicle
    from replicalab.watch.watcher import SuiteOptions, Watcher

    if max_rounds is not None and duration is not None:
        raise ParameterError("max_rounds", "or {duration}: give one, not both",
                             {"duration": "duration"})
    opts = SuiteOptions(interval_s=seconds(interval, "interval"), records=records,
                        record_bytes=record_bytes, reads=reads, writes=writes,
                        timeout_s=seconds(timeout, "timeout"), seed=seed, max_rounds=max_rounds,
                        duration_s=None if duration is None else seconds(duration, "duration"),
                        staleness=StalenessOptions(
                            seconds(staleness_write_interval, "staleness_write_interval"),
                            staleness_read_rate))
    if config is None and not stores:
        raise ParameterError("config", "is missing: give a backends file "
                                       "(docs/examples/backends.toml) or {stores} URLs",
                             {"stores": "stores"})
    specs = ([*load_backends(Path(config))] if config is not None else []) + \
        backends_from_urls(list(stores))
    metrics, server = None, None
    if metrics_port is not None:  # before the database: a bad port leaves nothing behind
        from replicalab.watch.metrics import WatchMetrics, serve

        metrics = WatchMetrics([b.name for b in specs])
        server = serve(metrics, metrics_port, metrics_host)
        host, bound = server.server_address[:2]
        announce(f"metrics: http://{host}:{bound}/metrics")
    store = SampleDB(Path(db))
    started_s = time.time()
    vehicle = Vehicle()

    def observed(state: Any, samples: list[Any]) -> None:
        if metrics is not None:
            metrics.observe(samples)
        vehicle.observe(s.op for s in samples if s.ok)
        if on_round is not None:
            on_round(state, [asdict(s) for s in samples], vehicle.steer())

    def freshness(rows: list[Any]) -> None:
        if metrics is not None:
            metrics.observe_freshness(rows)
        if on_freshness is not None and rows:
            on_freshness(rows)

    try:
        watcher = Watcher(specs, store, opts, observed, freshness)
        view = None if every is None else (
            lambda: every(watcher.states, vehicle, watcher.freshness))
        if view is not None:  # the live view shows before the first round
            view()
        stopped_by = asyncio.run(_until_done_or_signal(watcher, view))
        total = store.count()
        summary = store.samples(since_s=started_s)
    finally:
        store.close()
        if server is not None:
            server.shutdown()
            server.server_close()
    return Outcome({"samples": total, "db": str(db), "stopped_by": stopped_by},
                   remarks=[*percentile_lines(summary), f"{total:,} samples in {db}"
                            + (f" (stopped by {stopped_by})" if stopped_by else "")],
                   status=INTERRUPTED if stopped_by else DONE)


def dashboard(db: str | Path = "samples.sqlite", port: int = 8765,
              announce: Callable[[str], None] = print) -> None:
    """Serve the samples of ``db`` (written by :func:`watch`) as a page on 127.0.0.1:``port``
    (0: any free port; works with no internet) until Ctrl-C; ``announce`` is told its URL."""
    from replicalab.report.dashboard import make_server

    server = make_server(Path(db), port)
    host, bound = server.server_address[:2]
    announce(f"dashboard: http://{host}:{bound}/  (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

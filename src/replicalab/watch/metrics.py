"""``replicalab watch --metrics-port``: the watch samples as Prometheus metrics on
``http://127.0.0.1:PORT/metrics`` (the official ``prometheus_client``), so the monitor's
latencies sit beside the rest of a fleet's dashboards.

Per backend and operation (labels ``backend``, ``op`` = read | write):

* ``replicalab_watch_latency_seconds`` — histogram of successful operations' latency, in
  seconds, with :data:`LATENCY_BUCKETS_S`;
* ``replicalab_watch_errors_total`` — operations that failed (timeouts included);
* ``replicalab_watch_timeouts_total`` — operations that got no answer within ``--timeout``.

Every (backend, op) series exists from the start at 0, so Prometheus's ``rate()`` sees the
first sample's increase too. Samples are observed in the order they are committed to the
samples database, one round at a time.

Per backend watching staleness and region (labels ``backend``, ``region``), one window
(``--interval``) at a time (``watch/staleness.py``):

* ``replicalab_watch_fresh_fraction`` — gauge: the last window's fresh reads over its reads;
* ``replicalab_watch_stale_reads_total`` / ``replicalab_watch_judged_reads_total`` —
  counters, so ``1 - rate(stale) / rate(judged)`` is the fresh fraction over any range;
* ``replicalab_watch_time_to_fresh_seconds`` — gauge with ``stat`` = ``p50`` | ``max``: how
  long after a write the region's reads became and stayed fresh, over the last window's
  writes (absent when no write was judged);
* ``replicalab_watch_never_fresh_writes_total`` — writes the region never saw before the next.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from replicalab.errors import ParameterError
from replicalab.watch.staleness import FreshnessRow
from replicalab.watch.stats import Sample

LATENCY_BUCKETS_S = (0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.125,
                     0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
"""Histogram bucket upper bounds in seconds (+Inf is added). Seed 001's p99 latencies run
from about 10 ms to 2 s: the buckets are dense there (each at most 1.5x the one below, so a
p99 read from them is within half its value) and have edges at the seed's goals, 50 ms for
reads and 500 ms for writes, so ``le="0.05"`` / ``le="0.5"`` count the operations that
met them; 5 ms below and 3 s, 5 s above catch a fast cache and the default 5 s timeout."""

TIMEOUT = "timeout"
"""The error text of a sample that timed out (``watch/watcher.py``)."""


class WatchMetrics:
    """The watch metrics in their own registry (nothing else of the process is exported)."""

    def __init__(self, backends: Sequence[str], ops: Sequence[str] = ("read", "write")) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram("replicalab_watch_latency_seconds",
                                 "Latency of successful watch operations (seconds)",
                                 ("backend", "op"), buckets=LATENCY_BUCKETS_S,
                                 registry=self.registry)
        self.errors = Counter("replicalab_watch_errors", "Watch operations that failed "
                              "(timeouts included)", ("backend", "op"), registry=self.registry)
        self.timeouts = Counter("replicalab_watch_timeouts", "Watch operations that got no "
                                "answer within --timeout", ("backend", "op"),
                                registry=self.registry)
        for b in backends:
            for op in ops:
                self.latency.labels(b, op)
                self.errors.labels(b, op)
                self.timeouts.labels(b, op)
        where = ("backend", "region")
        self.fresh = Gauge("replicalab_watch_fresh_fraction", "Fresh reads over reads in the "
                           "last staleness window", where, registry=self.registry)
        self.judged = Counter("replicalab_watch_judged_reads", "Staleness reads judged",
                              where, registry=self.registry)
        self.stale = Counter("replicalab_watch_stale_reads", "Staleness reads that were "
                             "stale", where, registry=self.registry)
        self.ttf = Gauge("replicalab_watch_time_to_fresh_seconds", "Time from a write until "
                         "the region's reads were fresh and stayed so (last window)",
                         (*where, "stat"), registry=self.registry)
        self._ttf_set: set[tuple[str, str, str]] = set()
        self.never = Counter("replicalab_watch_never_fresh_writes", "Writes a region never "
                             "read before the next write", where, registry=self.registry)

    def observe(self, samples: Iterable[Sample]) -> None:
        """Count ``samples``: a latency for each success, an error (and a timeout) else."""
        for s in samples:
            if s.ok and s.latency_ms is not None:
                self.latency.labels(s.backend, s.op).observe(s.latency_ms / 1000.0)
            else:
                self.errors.labels(s.backend, s.op).inc()
                if s.error == TIMEOUT:
                    self.timeouts.labels(s.backend, s.op).inc()


    def observe_freshness(self, rows: Iterable[FreshnessRow]) -> None:
        """Set and count one staleness window per region (a region's series appear with
        its first window)."""
        for r in rows:
            key = (r.backend, r.region)
            if r.fresh_fraction is not None:
                self.fresh.labels(*key).set(r.fresh_fraction)
            self.judged.labels(*key).inc(r.reads)
            self.stale.labels(*key).inc(r.reads - r.fresh)
            self.never.labels(*key).inc(r.never)
            for stat, ms in (("p50", r.ttf_p50_ms), ("max", r.ttf_max_ms)):
                series = (*key, stat)
                if ms is not None:
                    self.ttf.labels(*series).set(ms / 1000.0)
                    self._ttf_set.add(series)
                elif series in self._ttf_set:  # no write judged: no figure, not an old one
                    self.ttf.remove(*series)
                    self._ttf_set.discard(series)


def check_port(port: int) -> None:
    """Raise ParameterError naming ``metrics_port`` and the fix if ``port`` is not a TCP
    port (0 = any free one)."""
    if not 0 <= port <= 65535:
        raise ParameterError("metrics_port", f"{port} is not a TCP port; give 1-65535, or 0 "
                                             "for any free port")


def serve(metrics: WatchMetrics, port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``/metrics`` on ``host:port`` in a daemon thread; return the server (its
    ``server_address`` holds the port bound, ``shutdown()`` stops it). ValueError naming
    the fix for a port out of range, in use or not allowed."""
    check_port(port)
    try:
        server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise ParameterError("metrics_port", f"{port}: the port is in use on {host} "
                                                 "(another process listens there); pick "
                                                 "another, or 0 for any free port") from None
        if err.errno == errno.EACCES:
            raise ParameterError("metrics_port", f"{port}: not allowed to listen there (ports "
                                                 "below 1024 need privileges); pick one above "
                                                 "1023") from None
        raise ParameterError("metrics_host", f"{host}: cannot listen there ({err.strerror}); "
                                             "give an address of this machine, e.g. 127.0.0.1 "
                                             "or 0.0.0.0") from None
    return server

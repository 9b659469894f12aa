"""``replicalab watch --metrics-port`` scraped by a real Prometheus (Debian's package, installed
by scripts/install-servers.sh): the p99 Prometheus computes from the histogram agrees with the
monitor's own p99 of the same samples within the bucket width; errors and timeouts are
counted; a bad port or a port in use is one line and exit 2."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from replicalab.cluster.ports import allocate
from replicalab.report.dashboard import dashboard_data
from replicalab.watch.db import SampleDB
from replicalab.watch.metrics import LATENCY_BUCKETS_S
from replicalab.watch.stats import percentile
from servers import server_missing

CLI = [sys.executable, "-m", "replicalab.cli.main"]
WAIT_S = 90.0


def _until(what: str, probe: Callable[[], Any], limit_s: float = WAIT_S,
           alive: subprocess.Popen[str] | None = None) -> Any:
    """Return ``probe()``'s first truthy answer, polling; AssertionError after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if alive is not None and alive.poll() is not None:
            raise AssertionError(f"{what}: the process exited ({alive.returncode})")
        try:
            got = probe()
        except (httpx.HTTPError, sqlite3.OperationalError):
            got = None
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {limit_s:g} s")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[int], str]]:
    """Yield a function that starts a real Prometheus on loopback scraping
    127.0.0.1:PORT every second (its own data directory) and returns its base URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        server_missing("prometheus", "no prometheus binary; scripts/install-servers.sh "
                                     "installs Debian's package")
    started: list[subprocess.Popen[str]] = []

    def start(target_port: int) -> str:
        (port,) = allocate(1, avoid=(target_port,))
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: replicalab-watch\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n")
        log = (tmp_path / "prometheus.log").open("w")
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, text=True)
        started.append(proc)
        url = f"http://127.0.0.1:{port}"
        try:
            _until("prometheus ready", lambda: httpx.get(f"{url}/-/ready", timeout=2)
                   .status_code == 200, alive=proc)
        except AssertionError as err:
            server_missing("prometheus", f"{err}: "
                           f"{(tmp_path / 'prometheus.log').read_text()[-500:]}")
        return url

    yield start
    for proc in started:
        _stop(proc)


def _query(url: str, promql: str, at_s: float | None = None) -> list[dict[str, Any]]:
    params = {"query": promql}
    if at_s is not None:
        params["time"] = f"{at_s:.3f}"
    doc = httpx.get(f"{url}/api/v1/query", params=params, timeout=10).json()
    assert doc["status"] == "success", doc
    return list(doc["data"]["result"])


def _scrapes(url: str, series: str) -> list[tuple[float, float]]:
    """Return (time s, value) of every scrape of ``series`` in the last 10 minutes."""
    got = _query(url, f"{series}[10m]")
    return [(float(t), float(v)) for t, v in got[0]["values"]] if got else []


def _latencies(db: Path, backend: str, op: str) -> list[float]:
    """Return the monitor's own successful latencies (ms) of ``backend``/``op``, in the order
    it committed them."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        return [r[0] for r in conn.execute(
            "SELECT latency_ms FROM samples WHERE backend=? AND op=? AND error IS NULL "
            "ORDER BY id", (backend, op))]
    finally:
        conn.close()


def _bucket(value_s: float) -> tuple[float, float]:
    """Return the (lower, upper] bounds in s of the histogram bucket holding ``value_s``."""
    lower = 0.0
    for upper in LATENCY_BUCKETS_S:
        if value_s <= upper:
            return lower, upper
        lower = upper
    return lower, float("inf")


@pytest.mark.integration
def test_prometheus_p99_agrees_with_the_monitors_own(tmp_path: Path, prometheus) -> None:
    (dead,) = allocate(1)  # nothing listens there: every operation of that backend fails
    config = tmp_path / "backends.toml"
    config.write_text('[backends.sdb]\nurl = "sim://simpledb"\n'
                      '[backends.quorum]\nurl = "sim://quorum?n=3&r=1&w=1"\n'
                      f'[backends.gone]\nurl = "redis://127.0.0.1:{dead}"\n')
    db = tmp_path / "samples.sqlite"
    (metrics_port,) = allocate(1, avoid=(dead,))
    watch = subprocess.Popen(
        [*CLI, "watch", "--config", str(config), "--db", str(db), "--interval", "0.05s",
         "--timeout", "100ms", "--records", "300", "--duration", "10m", "--json",
         "--metrics-port", str(metrics_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        _until("watch serves /metrics", lambda: httpx.get(metrics_url, timeout=2)
               .status_code == 200, alive=watch)
        url = prometheus(metrics_port)
        reads = 'replicalab_watch_latency_seconds_count{backend="sdb",op="read"}'

        def enough() -> list[tuple[float, float]] | None:
            # two scrapes at least, and 150 reads between the first and the last
            s = _scrapes(url, reads)
            return s if len(s) >= 2 and s[-1][1] - s[0][1] >= 150 else None

        scrapes = _until("two scrapes and 150 reads", enough, alive=watch)
        (t0, c0), (t1, c1) = scrapes[0], scrapes[-1]
        # the range spans exactly the first to the last scrape: rate() extrapolates nothing
        span_ms = round((t1 - t0) * 1000)
        bucket = 'replicalab_watch_latency_seconds_bucket{backend="sdb",op="read"}'
        got = _query(url, f"histogram_quantile(0.99, sum by (le) "
                          f"(rate({bucket}[{span_ms}ms])))", at_s=t1)
        prom_p99_s = float(got[0]["value"][1])
        own = _latencies(db, "sdb", "read")[int(c0):int(c1)]
        assert len(own) == c1 - c0
        own_p99_s = percentile(sorted(own), 99.0) / 1000  # the monitor's own percentile
        lo, hi = _bucket(own_p99_s)
        print(f"sdb reads {int(c1 - c0)} between scrapes {t1 - t0:.1f} s apart: Prometheus "
              f"p99 {1000 * prom_p99_s:.2f} ms, the monitor's own p99 {1000 * own_p99_s:.2f} "
              f"ms, bucket ({1000 * lo:g}, {1000 * hi:g}] ms")
        assert abs(prom_p99_s - own_p99_s) <= hi - lo, (prom_p99_s, own_p99_s, (lo, hi))
        # seed 000's SimpleDB reads, ~22 ms at the median (the p99 is no check of that: 1 %
        # of the simulated reads hit a slow server, up to the 100 ms timeout; 101.8 ms once)
        own_p50_s = percentile(sorted(own), 50.0) / 1000
        assert 0.015 < own_p50_s < 0.05, own_p50_s
        # errors and timeouts: the unreachable backend fails every op, a SimpleDB write
        # (~110 ms) often outlasts --timeout 100ms
        at = _query(url, 'replicalab_watch_errors_total{backend="gone",op="read"}', at_s=t1)
        assert float(at[0]["value"][1]) >= 1
        timeouts = _query(url, 'sum(replicalab_watch_timeouts_total{backend="sdb"})', at_s=t1)
        assert float(timeouts[0]["value"][1]) >= 1
        # the dashboard keeps working on the same samples while watch runs
        data = dashboard_data(SampleDB(db, readonly=True), "1h")
        assert data["backends"], data
    finally:
        _stop(watch)
    # stopped by SIGTERM, as a service manager stops it: 130, what it recorded kept
    assert watch.returncode == 130, watch.stderr.read() if watch.stderr else ""


def _watch_error(tmp_path: Path, port: str, *extra: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "b.toml"
    config.write_text('[backends.sdb]\nurl = "sim://simpledb"\n')
    return subprocess.run([*CLI, "watch", "--config", str(config), "--db",
                           str(tmp_path / "s.sqlite"), "--metrics-port", port,
                           "--max-rounds", "1", *extra], capture_output=True, text=True,
                          timeout=60, check=False)


def test_a_bad_metrics_port_or_one_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = _watch_error(tmp_path, "70000")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "error: --metrics-port 70000 is not a TCP port; give 1-65535, or 0 for any free port"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = _watch_error(tmp_path, str(port))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith(f"error: --metrics-port {port}: the port is in use")
    res = _watch_error(tmp_path, "0", "--metrics-host", "nohost.invalid")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith("error: --metrics-host nohost.invalid: cannot listen there")
    assert not (tmp_path / "s.sqlite").exists()  # bad input leaves nothing behind

"""replicalab watch / dashboard: samples survive kills and restarts, unreachable backends are
recorded as errors and shown unavailable, bad backends exit 2, percentiles per window."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.cluster import base
from replicalab.cluster.ports import allocate
from replicalab.report.dashboard import dashboard_data, make_server
from replicalab.watch.config import load_backends, parse_backends, real_time_url
from replicalab.watch.db import SampleDB
from replicalab.watch.stats import (
    Sample,
    histogram,
    histogram_edges_ms,
    percentile,
    time_series,
    window_summary,
)
from replicalab.watch.vehicle import Vehicle, gauge, steering
from replicalab.watch.watcher import SuiteOptions, Watcher, record_key

CLI = [sys.executable, "-m", "replicalab.cli.main"]
FAST = "sim://quorum?n=3&r=1&w=1"


def _toml(path: Path, backends: dict[str, dict[str, object]]) -> Path:
    lines = []
    for name, table in backends.items():
        lines.append(f"[backends.{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _rows(db: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT id, backend, round, t_s, op, latency_ms, error "
                            "FROM samples ORDER BY id").fetchall()
    finally:
        conn.close()


def _wait_rows(db: Path, at_least: int, proc: subprocess.Popen[str], limit_s: float = 30.0
               ) -> list[tuple[object, ...]]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "watcher exited"
        if db.exists():
            try:
                rows = _rows(db)
            except sqlite3.OperationalError:  # schema not created yet
                rows = []
            if len(rows) >= at_least:
                return rows
        time.sleep(0.1)
    raise AssertionError(f"fewer than {at_least} samples after {limit_s} s")


def _run_watcher(specs_path: Path, db_path: Path, **opts: object) -> SampleDB:
    db = SampleDB(db_path)
    options = SuiteOptions(**{"interval_s": 0.2, "timeout_s": 1.0, "records": 300, **opts})
    asyncio.run(Watcher(load_backends(specs_path), db, options).run())
    return db


# --- durability across kill and restart -------------------------------------------------

def _start(config: Path, db: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, "watch", "--config", str(config), "--db", str(db),
                             "--interval", "0.2s", "--timeout", "1s", "--records", "200",
                             "--json", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_killed_watcher_loses_no_committed_sample_and_restart_appends(tmp_path: Path) -> None:
    config = _toml(tmp_path / "b.toml", {"fast": {"url": FAST},
                                         "sdb": {"url": "sim://simpledb"}})
    db = tmp_path / "samples.sqlite"
    proc = _start(config, db)
    try:
        committed = _wait_rows(db, 12, proc)
        proc.send_signal(signal.SIGKILL)  # no chance to flush or clean up
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    after_kill = _rows(db)
    assert after_kill[:len(committed)] == committed  # every committed sample, unchanged
    last_round = {b: max(r[2] for r in after_kill if r[1] == b) for b in ("fast", "sdb")}

    restart = subprocess.run([*CLI, "watch", "--config", str(config), "--db", str(db),
                              "--interval", "0.2s", "--timeout", "1s", "--records", "200",
                              "--max-rounds", "3", "--json"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert restart.returncode == 0, restart.stderr
    final = _rows(db)
    assert final[:len(after_kill)] == after_kill
    new = final[len(after_kill):]
    assert len(new) == 3 * 2 * 2  # 3 rounds x (1 read + 1 write) x 2 backends
    for b in ("fast", "sdb"):
        rounds = sorted({r[2] for r in new if r[1] == b})
        assert rounds == [last_round[b] + 1, last_round[b] + 2, last_round[b] + 3]
    assert all(r[6] is None and r[5] > 0 for r in new)


def test_sigterm_stops_after_committing(tmp_path: Path) -> None:
    config = _toml(tmp_path / "b.toml", {"fast": {"url": FAST}})
    db = tmp_path / "samples.sqlite"
    proc = _start(config, db)
    try:
        _wait_rows(db, 4, proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    # SIGTERM acts as Ctrl-C, as for every command (issue 40: it exited 0)
    assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
    rows = _rows(db)
    per_round: dict[object, int] = {}
    for r in rows:
        per_round[r[2]] = per_round.get(r[2], 0) + 1
    assert per_round and set(per_round.values()) == {2}  # only whole rounds are stored


# --- bad and unreachable backends --------------------------------------------------------

def test_unknown_backend_scheme_exits_2_with_one_line(tmp_path: Path) -> None:
    config = _toml(tmp_path / "b.toml", {"ok": {"url": FAST},
                                         "cloud": {"url": "simpledb://us-east-1"}})
    proc = subprocess.run([*CLI, "watch", "--config", str(config), "--db",
                           str(tmp_path / "s.sqlite"), "--max-rounds", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "cloud" in lines[0] and "simpledb" in lines[0] and "sim://" in lines[0]
    assert "Traceback" not in proc.stderr


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="unknown URL scheme 'mongodb'"):
        parse_backends({"backends": {"m": {"url": "mongodb://x:1"}}})
    with pytest.raises(ValueError, match="unknown key"):
        parse_backends({"backends": {"m": {"url": FAST, "colour": "red"}}})
    with pytest.raises(ValueError, match="lists no backends"):
        parse_backends({})
    with pytest.raises(ValueError, match="clock=real"):
        real_time_url("sim://simpledb?clock=virtual")
    assert real_time_url("sim://simpledb") == "sim://simpledb?clock=real"
    assert real_time_url(FAST).endswith("&clock=real")
    assert real_time_url("redis://127.0.0.1:6379") == "redis://127.0.0.1:6379"
    (spec,) = parse_backends({"backends": {"x": {"url": "sim://simpledb", "geo": "none",
                                                 "records": 10, "read": "eventual"}}})
    assert (spec.geo, spec.records, spec.read) == ("none", 10, "eventual")


def test_unreachable_backend_is_recorded_as_errors_and_shown_unavailable(tmp_path: Path
                                                                          ) -> None:
    (dead_port,) = allocate(1)  # free a moment ago: nothing listens there
    config = _toml(tmp_path / "b.toml", {
        "dead": {"url": f"redis://127.0.0.1:{dead_port}?timeout_ms=300"},
        "fast": {"url": FAST, "durability": "none"}})
    db = _run_watcher(config, tmp_path / "s.sqlite", max_rounds=3)
    samples = db.samples()
    dead = [s for s in samples if s.backend == "dead"]
    fast = [s for s in samples if s.backend == "fast"]
    assert len(dead) == 6 and all(not s.ok and s.latency_ms is None and s.error
                                  for s in dead)
    assert len(fast) == 6 and all(s.ok for s in fast)
    data = {b["name"]: b for b in dashboard_data(db, "5m")["backends"]}
    assert data["dead"]["status"] == "unavailable"
    assert data["dead"]["ops"]["read"]["errors"] == 3
    assert data["dead"]["ops"]["read"]["p99_ms"] is None
    assert data["fast"]["status"] == "available"
    assert data["fast"]["durability"] == "none"
    assert data["fast"]["ops"]["write"]["p99_ms"] > 0
    db.close()


def test_sim_keyspace_is_reloaded_when_missing_but_remembered(tmp_path: Path) -> None:
    config = _toml(tmp_path / "b.toml", {"fast": {"url": FAST, "records": 250}})
    db = _run_watcher(config, tmp_path / "s.sqlite", max_rounds=1)
    assert db.loaded("fast", real_time_url(FAST), 250, 1024)
    first = db.conn.execute("SELECT loaded_s FROM loads").fetchone()[0]
    db.close()
    # A new process has a fresh simulated store: the spot check finds the last record
    # missing and loads again, rather than measuring reads of absent records.
    db = _run_watcher(config, tmp_path / "s.sqlite", max_rounds=1)
    assert db.conn.execute("SELECT loaded_s FROM loads").fetchone()[0] > first
    assert [s.round for s in db.samples()] == [1, 1, 2, 2]
    db.close()


@pytest.mark.integration
def test_redis_keyspace_is_loaded_once_across_restarts(tmp_path: Path) -> None:
    c = base.up("redis", 1, "lan", name="it-watch-redis", root=tmp_path / "clusters")
    try:
        config = _toml(tmp_path / "b.toml", {"redis": {"url": c.url, "records": 1000}})
        db = _run_watcher(config, tmp_path / "s.sqlite", max_rounds=1, record_bytes=64)
        loaded = db.conn.execute("SELECT loaded_s FROM loads").fetchone()[0]
        db.close()
        db = _run_watcher(config, tmp_path / "s.sqlite", max_rounds=2, record_bytes=64)
        assert db.conn.execute("SELECT loaded_s FROM loads").fetchone()[0] == loaded
        assert all(s.ok for s in db.samples()) and len(db.samples()) == 6
        db.close()

        async def last_record() -> str | None:
            from replicalab.stores import open_store
            store = open_store(c.url)
            client = await store.connect()
            got = await client.read([record_key(999)], consistent=True)
            await store.close()
            return got.values[0]

        value = asyncio.run(last_record())
        assert value is not None and len(value) == 64
    finally:
        base.down("it-watch-redis", root=tmp_path / "clusters")


# --- percentiles, windows, series, histograms --------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.001, 1e5, allow_nan=False), min_size=1, max_size=300),
       st.sampled_from([50.0, 90.0, 99.0, 99.9, 100.0]))
def test_percentile_is_nearest_rank(values: list[float], q: float) -> None:
    v = sorted(values)
    p = percentile(v, q)
    assert p in v
    n = len(v)
    assert sum(x <= p for x in v) >= q / 100 * n - 1e-9  # at least q % at or below
    assert sum(x < p for x in v) < q / 100 * n  # and fewer than q % strictly below


def test_percentiles_per_window_are_exact(tmp_path: Path) -> None:
    now = 1_800_000_000.0
    db = SampleDB(tmp_path / "s.sqlite")
    samples = []
    # 100 recent reads 1..100 ms; 100 older ones (2 h ago) of 1001..1100 ms; one error
    samples += [Sample("a", i, now - 60 - i, "read", float(i)) for i in range(1, 101)]
    samples += [Sample("a", 200 + i, now - 7200 - i, "read", 1000.0 + i)
                for i in range(1, 101)]
    samples.append(Sample("a", 400, now - 30, "write", None, "timeout"))
    db.append(samples)
    five = dashboard_data(db, "5m", now)["backends"][0]["ops"]
    assert five["read"]["count"] == 100
    assert (five["read"]["p50_ms"], five["read"]["p99_ms"], five["read"]["p999_ms"]) == (
        50.0, 99.0, 100.0)
    assert five["write"]["errors"] == 1 and five["write"]["p99_ms"] is None
    # nearest ranks 100, 198 and 200 of the 200 samples
    day = dashboard_data(db, "1d", now)["backends"][0]["ops"]["read"]
    assert day["count"] == 200
    assert (day["p50_ms"], day["p99_ms"], day["p999_ms"]) == (100.0, 1098.0, 1100.0)
    hour = window_summary(db.samples(), now, 3600.0)["a"]["read"]
    assert hour["count"] == 100 and hour["max_ms"] == 100.0
    assert dashboard_data(db, "all", now)["samples"] == 201
    with pytest.raises(ValueError, match="window"):
        dashboard_data(db, "2m", now)
    db.close()


@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0.01, 500)), max_size=200),
       st.integers(1, 50))
def test_time_series_buckets_partition_the_samples(points: list[tuple[float, float]],
                                                    buckets: int) -> None:
    samples = [Sample("a", 1, t, "read", ms) for t, ms in points]
    series = time_series(samples, 0.0, 1000.0, buckets)
    assert sum(b["count"] for b in series) == len(samples)
    assert len(series) <= buckets
    assert all(b["p50_ms"] <= b["p99_ms"] for b in series)


def test_histogram_bins() -> None:
    edges = histogram_edges_ms()
    counts = histogram([edges[5], (edges[5] + edges[6]) / 2, 1e-9, 1e9, 1.0])
    assert sum(counts) == 5
    assert counts[5] == 2 and counts[0] == 1 and counts[-1] == 1
    assert counts[edges.index(1.0)] == 1


# --- the vehicle ------------------------------------------------------------------------

@given(st.integers(0, 1000), st.integers(0, 1000))
def test_steering_laws(reads: int, writes: int) -> None:
    s = steering(reads, writes)
    assert -1.0 <= s <= 1.0
    assert steering(writes, reads) == -s  # swapping reads and writes mirrors the turn
    assert (s == 0) == (reads == writes or reads + writes == 0)
    assert (s < 0) == (reads > writes)  # more reads: left


def test_vehicle_follows_the_ratio() -> None:
    car = Vehicle(window=10)
    assert car.observe(["read", "write"] * 5) == 0.0 and car.heading_deg == 0.0
    assert car.observe(["read"] * 10) == -1.0 and car.heading_deg < 0
    assert car.observe(["write"] * 5) == 0.0  # the window now holds 5 reads, 5 writes
    assert gauge(-1.0, 11).startswith("L ^") and gauge(1.0, 11).endswith("^ R")
    assert gauge(0.0, 11) == "L -----^----- R"


# --- the dashboard server ----------------------------------------------------------------

@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    db = SampleDB(tmp_path / "s.sqlite")
    db.append([Sample("a", 1, time.time(), "read", 3.0), Sample("a", 1, time.time(),
                                                                "write", 9.0)])
    db.close()
    server = make_server(tmp_path / "s.sqlite", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_dashboard_serves_page_assets_and_json(served: str) -> None:
    code, headers, page = _get(served + "/")
    assert code == 200 and b"<table id=\"compare\">" in page
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    for ref in (b'href="/static/dashboard.css"', b'src="/static/dashboard.js"'):
        assert ref in page
    assert b"http://" not in page and b"https://" not in page
    for name in ("dashboard.js", "dashboard.css"):
        code, _, body = _get(f"{served}/static/{name}")
        assert code == 200 and len(body) > 500
    code, _, body = _get(served + "/api/stats?window=5m")
    data = json.loads(body)
    assert code == 200 and data["backends"][0]["ops"]["write"]["p99_ms"] == 9.0
    assert _get(served + "/api/stats?window=3w")[0] == 400
    assert _get(served + "/static/../dashboard.py")[0] == 404


def test_dashboard_refuses_missing_db(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        make_server(tmp_path / "nope.sqlite", 0)
    assert not (tmp_path / "nope.sqlite").exists()


def test_watch_and_dashboard_help_have_examples() -> None:
    for cmd in ("watch", "dashboard"):
        proc = subprocess.run([*CLI, cmd, "--help"], capture_output=True, text=True,
                              timeout=60, check=False, env={**os.environ, "COLUMNS": "200"})
        assert proc.returncode == 0 and f"Example: replicalab {cmd}" in proc.stdout


def test_a_piped_round_says_why_a_backend_failed() -> None:
    """Issue 40: piped, a dead backend's round read "read error, write error"."""
    from replicalab.watch.stats import Sample, round_line

    why = "cannot reach Redis at 127.0.0.1:1 (connection refused)"
    dead = [Sample("dead", 1, 0.0, "read", None, why), Sample("dead", 1, 0.0, "write", None, why)]
    assert round_line(dead) == f"dead round 1: unavailable: {why}"
    mixed = [Sample("m", 2, 0.0, "read", 3.25), Sample("m", 2, 0.0, "write", None, "timeout")]
    assert round_line(mixed) == "m round 2: read 3.2 ms, write error (timeout)"


def test_piped_loading_lines_end_with_what_became_of_the_loading(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40: a backend whose loading failed left its last line at "0% done"."""
    from replicalab.cli.watch import LoadingLines
    from replicalab.watch.watcher import BackendState

    lines = LoadingLines(every_s=3600)
    a, b = BackendState("a", "redis://127.0.0.1:1"), BackendState("b", "sim://simpledb")
    a.status = b.status = "loading"
    lines.update([a, b])
    a.status, a.last_error = "unavailable", "cannot reach Redis at 127.0.0.1:1"
    b.status = "ok"
    lines.update([a, b])
    lines.update([a, b])  # said once
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4, err
    assert err[2] == "watch: a: loading stopped: cannot reach Redis at 127.0.0.1:1"
    assert err[3].startswith("watch: b: loaded in ") and err[3].endswith("; rounds begin")

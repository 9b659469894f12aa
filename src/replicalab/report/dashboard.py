"""``replicalab dashboard``: the watch samples as a live page served on 127.0.0.1.

``dashboard_data`` turns the samples database into the JSON the page draws (per-backend
p50/p99/p99.9 over a window, time series, histograms, the seed-001 comparison table, and the
freshness series of backends watching staleness); ``serve``
answers ``/`` (the page), ``/static/*`` (its script and style, shipped in the package) and
``/api/stats?window=5m|1h|1d|7d|all`` with the standard library's ThreadingHTTPServer.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replicalab.errors import ParameterError
from replicalab.history.rundir import finite_or_null
from replicalab.watch.db import SampleDB
from replicalab.watch.staleness import FreshnessRow
from replicalab.watch.stats import (
    histogram,
    histogram_edges_ms,
    summarize,
    time_series,
    window_summary,
)

SCHEMA_VERSION = 1
WINDOWS: dict[str, float | None] = {"5m": 300.0, "1h": 3600.0, "1d": 86400.0,
                                    "7d": 7 * 86400.0, "all": None}
OPS = ("read", "write")
_STATIC = {"index.html": "text/html; charset=utf-8",
           "dashboard.js": "text/javascript; charset=utf-8",
           "dashboard.css": "text/css; charset=utf-8"}
# Only our own origin: the page cannot load anything from the network even by mistake.
_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'"


def _status(last: dict[str, Any] | None) -> str:
    if last is None:
        return "no data"
    return "unavailable" if last["errors"] >= last["ops"] else "available"


def freshness_data(rows: list[FreshnessRow]) -> list[dict[str, Any]]:
    """Return per (backend, region), in name order, the window's totals (reads, fresh,
    fresh fraction, writes judged, never fresh, the largest time to fresh in ms) and its
    series: one point per staleness window (end time, fresh fraction, reads, time to fresh
    p50 and max in ms, writes never fresh)."""
    by: dict[tuple[str, str], list[FreshnessRow]] = {}
    for r in rows:
        by.setdefault((r.backend, r.region), []).append(r)
    out = []
    for (backend, region), mine in sorted(by.items()):
        reads = sum(r.reads for r in mine)
        fresh = sum(r.fresh for r in mine)
        worst = [r.ttf_max_ms for r in mine if r.ttf_max_ms is not None]
        out.append({
            "backend": backend, "region": region, "reads": reads, "fresh": fresh,
            "fresh_fraction": fresh / reads if reads else None,
            "writes": sum(r.writes for r in mine), "never": sum(r.never for r in mine),
            "ttf_max_ms": max(worst) if worst else None,
            "series": [{"t_s": r.t_s, "fresh_fraction": r.fresh_fraction, "reads": r.reads,
                        "ttf_p50_ms": r.ttf_p50_ms, "ttf_max_ms": r.ttf_max_ms,
                        "never": r.never} for r in mine]})
    return out


def dashboard_data(db: SampleDB, window: str = "1h", now_s: float | None = None
                   ) -> dict[str, Any]:
    """Return the page's data for one window: per backend its declared properties, status
    (from its last round), and per operation count, errors, ok fraction, mean/p50/p99/p99.9
    /max in ms, a time series of p50/p99 per slice, and histogram counts over ``edges_ms``;
    and ``freshness`` (:func:`freshness_data`) of the backends watching staleness."""
    if window not in WINDOWS:
        raise ValueError(f"window {window!r} is not one of {', '.join(WINDOWS)}")
    now_s = time.time() if now_s is None else now_s
    window_s = WINDOWS[window]
    samples = db.samples(None if window_s is None else now_s - window_s)
    # The time axis starts at the first sample inside the window, so a watcher started a
    # minute ago fills the chart instead of sitting in its last slice.
    lo_s = samples[0].t_s if samples else now_s - (window_s or 1.0)
    if window_s is not None:
        lo_s = max(lo_s, now_s - window_s)
    summary = window_summary(samples, now_s, window_s)
    declared = {d["name"]: d for d in db.backends()}
    last = db.last_rounds()
    out = []
    for name in sorted(set(declared) | set(last)):
        d = declared.get(name, {})
        mine = [s for s in samples if s.backend == name and s.t_s <= now_s]
        ops: dict[str, Any] = {}
        for op in OPS:
            theirs = [s for s in mine if s.op == op]
            ok_ms = [s.latency_ms for s in theirs if s.ok and s.latency_ms is not None]
            ops[op] = {**summary.get(name, {}).get(op, summarize([])),
                       "series": time_series(theirs, lo_s, now_s),
                       "hist": histogram(ok_ms)}
        info = last.get(name)
        out.append({
            "name": name, "url": d.get("url", ""), "durability": d.get("durability", ""),
            "availability": d.get("availability", ""),
            "transactional": d.get("transactional", ""), "geo": d.get("geo", ""),
            "records": d.get("records"), "record_bytes": d.get("record_bytes"),
            "status": _status(info), "last_round": info, "ops": ops})
    fresh = [r for r in db.freshness(None if window_s is None else now_s - window_s)
             if r.t_s <= now_s]
    return {"schema": SCHEMA_VERSION, "generated_s": now_s, "window": window,
            "window_s": window_s, "from_s": lo_s, "edges_ms": histogram_edges_ms(),
            "windows": list(WINDOWS), "samples": len(samples), "backends": out,
            "freshness": freshness_data(fresh)}


def static_file(name: str) -> bytes:
    """Return the bytes of one of the page's files shipped in the package."""
    return resources.files("replicalab.report").joinpath("dashboard", name).read_bytes()


def _json_default(x: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def to_json(data: dict[str, Any]) -> bytes:
    """Return ``data`` as JSON bytes; non-finite floats become null (JSON has no NaN)."""
    return json.dumps(finite_or_null(data), default=_json_default, separators=(",", ":")).encode()


def make_handler(db_path: Path) -> type[BaseHTTPRequestHandler]:
    """Return a request handler class serving the dashboard of ``db_path``."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "replicalab-dashboard"

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Security-Policy", _CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            path = url.path
            if path in ("/", "/index.html"):
                self._send(200, static_file("index.html"), _STATIC["index.html"])
            elif path.startswith("/static/") and path[8:] in _STATIC:
                self._send(200, static_file(path[8:]), _STATIC[path[8:]])
            elif path == "/api/stats":
                window = parse_qs(url.query).get("window", ["1h"])[-1]
                try:
                    db = SampleDB(db_path, readonly=True)
                    try:
                        body = to_json(dashboard_data(db, window))
                    finally:
                        db.close()
                except ValueError as err:
                    self._send(400, to_json({"error": str(err)}), "application/json")
                    return
                self._send(200, body, "application/json")
            else:
                self._send(404, b"not found", "text/plain; charset=utf-8")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown the terminal every 10 s refresh

    return Handler


def make_server(db_path: Path, port: int = 8765) -> ThreadingHTTPServer:
    """Return a server on 127.0.0.1:``port`` (0 = any free port) for ``db_path``
    (ValueError if the database is missing or the port is taken)."""
    SampleDB(db_path, readonly=True).close()
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(db_path))
    except OSError as err:
        raise ParameterError("port", f"{port}: cannot listen on 127.0.0.1 ({err.strerror}); "
                                     "pass another, or 0 for any free port") from None
    server.daemon_threads = True
    return server

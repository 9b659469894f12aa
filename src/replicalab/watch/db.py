"""The samples database of ``replicalab watch``: SQLite in WAL mode, one commit per round.

A committed round survives the watcher being killed at any instant (WAL + synchronous=FULL);
the dashboard reads the same file concurrently through a read-only connection. URLs are stored
with any password redacted.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from replicalab.errors import ParameterError
from replicalab.stores.base import redact_url
from replicalab.watch.config import BackendSpec
from replicalab.watch.staleness import FreshnessRow
from replicalab.watch.stats import Sample

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS backends(
  name TEXT PRIMARY KEY, url TEXT NOT NULL, durability TEXT, availability TEXT,
  transactional TEXT, geo TEXT, records INTEGER, record_bytes INTEGER, read TEXT,
  updated_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS loads(
  backend TEXT NOT NULL, url TEXT NOT NULL, records INTEGER NOT NULL,
  record_bytes INTEGER NOT NULL, loaded_s REAL NOT NULL, took_s REAL NOT NULL,
  PRIMARY KEY(backend, url, records, record_bytes));
CREATE TABLE IF NOT EXISTS samples(
  id INTEGER PRIMARY KEY, backend TEXT NOT NULL, round INTEGER NOT NULL,
  t_s REAL NOT NULL, op TEXT NOT NULL, latency_ms REAL, error TEXT);
CREATE INDEX IF NOT EXISTS samples_t ON samples(t_s);
CREATE TABLE IF NOT EXISTS freshness(
  id INTEGER PRIMARY KEY, backend TEXT NOT NULL, region TEXT NOT NULL, t_s REAL NOT NULL,
  window_s REAL NOT NULL, reads INTEGER NOT NULL, fresh INTEGER NOT NULL,
  errors INTEGER NOT NULL, writes INTEGER NOT NULL, never INTEGER NOT NULL,
  ttf_p50_ms REAL, ttf_max_ms REAL);
CREATE INDEX IF NOT EXISTS freshness_t ON freshness(t_s);
CREATE INDEX IF NOT EXISTS samples_backend_round ON samples(backend, round);
"""


class SampleDB:
    """Append-only store of samples plus the backends' declared properties and loads."""

    def __init__(self, path: Path, readonly: bool = False) -> None:
        self.path = path
        if readonly:
            if not path.is_file():
                raise ValueError(f"samples database {str(path)!r} does not exist; start "
                                 "`replicalab watch --db` with it first")
            self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                        timeout=10.0, check_same_thread=False)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, timeout=10.0)
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.DatabaseError as err:
                raise ParameterError("db", f"{path} is not a samples database ({err}); pass "
                                           "a new file name to {db}", {"db": "db"}) from None
            # FULL: a committed round also survives power loss, at one fsync per round.
            self.conn.execute("PRAGMA synchronous=FULL")
            with self.conn:
                self.conn.executescript(_SCHEMA)
                self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                                  (str(SCHEMA_VERSION),))
        self.conn.row_factory = sqlite3.Row

    def close(self) -> None:
        """Close the connection (everything committed is already on disk)."""
        self.conn.close()

    def declare(self, specs: Iterable[BackendSpec], record_bytes: int, records: int) -> None:
        """Record each backend's URL (redacted), declared properties and keyspace."""
        now = time.time()
        with self.conn:
            for b in specs:
                d = asdict(b)
                self.conn.execute(
                    "INSERT OR REPLACE INTO backends VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (b.name, redact_url(b.url), d["durability"], d["availability"],
                     d["transactional"], d["geo"], b.records or records, record_bytes, b.read,
                     now))

    def append(self, samples: Sequence[Sample]) -> None:
        """Append ``samples`` in one transaction (the round is durable when this returns)."""
        with self.conn:
            self.conn.executemany(
                "INSERT INTO samples(backend, round, t_s, op, latency_ms, error) "
                "VALUES (?,?,?,?,?,?)",
                [(s.backend, s.round, s.t_s, s.op, s.latency_ms, s.error) for s in samples])

    def append_freshness(self, rows: Sequence[FreshnessRow]) -> None:
        """Append one window's freshness rows in one transaction."""
        with self.conn:
            self.conn.executemany(
                "INSERT INTO freshness(backend, region, t_s, window_s, reads, fresh, errors, "
                "writes, never, ttf_p50_ms, ttf_max_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [(r.backend, r.region, r.t_s, r.window_s, r.reads, r.fresh, r.errors,
                  r.writes, r.never, r.ttf_p50_ms, r.ttf_max_ms) for r in rows])

    def freshness(self, since_s: float | None = None) -> list[FreshnessRow]:
        """Return the freshness rows of windows ending at or after ``since_s`` (all if
        None), oldest first (none from a database written before freshness existed)."""
        sql = ("SELECT backend, region, t_s, window_s, reads, fresh, errors, writes, never, "
               "ttf_p50_ms, ttf_max_ms FROM freshness")
        args: tuple[Any, ...] = ()
        if since_s is not None:
            sql += " WHERE t_s >= ?"
            args = (since_s,)
        try:
            rows = self.conn.execute(sql + " ORDER BY t_s, id", args).fetchall()
        except sqlite3.OperationalError:  # an older database opened read-only: no table
            return []
        return [FreshnessRow(*row) for row in rows]

    def next_round(self, backend: str) -> int:
        """Return the round number after the last one stored for ``backend`` (1 if none)."""
        row = self.conn.execute("SELECT MAX(round) FROM samples WHERE backend = ?",
                                (backend,)).fetchone()
        return int(row[0] or 0) + 1

    def loaded(self, backend: str, url: str, records: int, record_bytes: int) -> bool:
        """Return True if this keyspace was fully loaded into this backend before."""
        row = self.conn.execute(
            "SELECT 1 FROM loads WHERE backend=? AND url=? AND records=? AND record_bytes=?",
            (backend, redact_url(url), records, record_bytes)).fetchone()
        return row is not None

    def mark_loaded(self, backend: str, url: str, records: int, record_bytes: int,
                    took_s: float) -> None:
        """Remember that the keyspace is loaded, so a restart does not load it again."""
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO loads VALUES (?,?,?,?,?,?)",
                              (backend, redact_url(url), records, record_bytes, time.time(),
                               took_s))

    def backends(self) -> list[dict[str, Any]]:
        """Return every declared backend as a dict, in name order."""
        return [dict(r) for r in self.conn.execute("SELECT * FROM backends ORDER BY name")]

    def samples(self, since_s: float | None = None) -> list[Sample]:
        """Return the samples started at or after ``since_s`` (all if None), oldest first."""
        sql = "SELECT backend, round, t_s, op, latency_ms, error FROM samples"
        args: tuple[Any, ...] = ()
        if since_s is not None:
            sql += " WHERE t_s >= ?"
            args = (since_s,)
        return [Sample(*row) for row in self.conn.execute(sql + " ORDER BY t_s, id", args)]

    def last_rounds(self) -> dict[str, dict[str, Any]]:
        """Return per backend its last round: number, start time, ops and errors."""
        rows = self.conn.execute(
            "SELECT s.backend, s.round, MIN(s.t_s), COUNT(*), SUM(s.error IS NOT NULL), "
            "MAX(s.error) FROM samples s JOIN (SELECT backend, MAX(round) AS r FROM samples "
            "GROUP BY backend) m ON s.backend = m.backend AND s.round = m.r "
            "GROUP BY s.backend")
        return {b: {"round": r, "t_s": t, "ops": n, "errors": e, "error": msg}
                for b, r, t, n, e, msg in rows}

    def count(self) -> int:
        """Return the number of stored samples."""
        return int(self.conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0])

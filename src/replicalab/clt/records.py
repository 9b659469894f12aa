"""CLT observations, columnar: one row per ping, saved as UNH-CLT CSV and as Parquet.

A row is (node, round, remote, start_us, end_us, lag_us): ``node`` pinged ``remote`` in
``round``; ``start_us`` is the *intended* send time on ``node``'s clock (open loop, so a late
send keeps its slot and the delay shows in its latency), ``end_us`` the echo's arrival on the
same clock, or :data:`TIMEOUT` (-1) when no echo came within the ping timeout — a censored
observation, known only to exceed the timeout. ``lag_us`` is actual minus intended send time.
The CSV has exactly UNH-CLT's columns (a timeout leaves end_us empty); Parquet adds lag_us.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TIMEOUT = -1
CSV_COLUMNS = ("node", "round", "remote", "start_us", "end_us")


@dataclass(frozen=True)
class Records:
    """Columns of equal length; times in µs on the pinging node's clock."""

    node: np.ndarray      # str
    round: np.ndarray     # int64
    remote: np.ndarray    # str
    start_us: np.ndarray  # int64, intended send time
    end_us: np.ndarray    # int64, TIMEOUT when censored
    lag_us: np.ndarray    # int64, actual - intended send time

    def __len__(self) -> int:
        return len(self.round)

    @property
    def timed_out(self) -> np.ndarray:
        """Return a bool mask of censored rows."""
        return self.end_us == TIMEOUT

    @property
    def rtt_us(self) -> np.ndarray:
        """Return RTT in µs as float, +inf for a timeout (censored above the timeout)."""
        rtt = (self.end_us - self.start_us).astype(float)
        rtt[self.timed_out] = np.inf
        return rtt

    def select(self, mask: np.ndarray) -> Records:
        """Return the rows where ``mask`` is true."""
        return Records(self.node[mask], self.round[mask], self.remote[mask],
                       self.start_us[mask], self.end_us[mask], self.lag_us[mask])


def make(node: list[str] | np.ndarray, round_: list[int] | np.ndarray,
         remote: list[str] | np.ndarray, start_us: list[int] | np.ndarray,
         end_us: list[int] | np.ndarray, lag_us: list[int] | np.ndarray | None = None
         ) -> Records:
    """Return Records from column sequences (lag 0 when not given)."""
    n = len(round_)
    return Records(np.asarray(node, dtype=str).reshape(n), np.asarray(round_, dtype=np.int64),
                   np.asarray(remote, dtype=str).reshape(n),
                   np.asarray(start_us, dtype=np.int64), np.asarray(end_us, dtype=np.int64),
                   np.zeros(n, np.int64) if lag_us is None else np.asarray(lag_us, np.int64))


def concat(parts: list[Records]) -> Records:
    """Return the rows of every part in order."""
    if not parts:
        return make([], [], [], [], [], [])
    return Records(*(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("node", "round", "remote", "start_us", "end_us", "lag_us")))


def write_csv(rec: Records, path: Path) -> None:
    """Write UNH-CLT's CSV (node, round, remote, start_us, end_us; empty end_us = timeout)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for node, r, remote, s, e in zip(rec.node.tolist(), rec.round.tolist(),
                                         rec.remote.tolist(), rec.start_us.tolist(),
                                         rec.end_us.tolist(), strict=True):
            w.writerow((node, r, remote, s, "" if e == TIMEOUT else e))


def read_csv(path: Path) -> Records:
    """Return the Records of a UNH-CLT CSV (ValueError naming file:line on a bad row)."""
    cols: dict[str, list] = {c: [] for c in CSV_COLUMNS}
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header[:5]) != CSV_COLUMNS:
            raise ValueError(f"{path}:1: expected the header {','.join(CSV_COLUMNS)}")
        for lineno, row in enumerate(reader, start=2):
            try:
                cols["node"].append(row[0])
                cols["round"].append(int(row[1]))
                cols["remote"].append(row[2])
                cols["start_us"].append(int(row[3]))
                cols["end_us"].append(int(row[4]) if row[4].strip() else TIMEOUT)
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{lineno}: expected node,round,remote,start_us,end_us "
                                 f"with integer times, got {','.join(row)!r}") from None
    return make(cols["node"], cols["round"], cols["remote"], cols["start_us"], cols["end_us"])


def write_parquet(rec: Records, path: Path) -> None:
    """Write all columns to Parquet; a timeout's end_us is null."""
    table = pa.table({
        "node": pa.array(rec.node.tolist(), pa.string()),
        "round": pa.array(rec.round, pa.int64()),
        "remote": pa.array(rec.remote.tolist(), pa.string()),
        "start_us": pa.array(rec.start_us, pa.int64()),
        "end_us": pa.array(rec.end_us, pa.int64(), mask=rec.timed_out),
        "lag_us": pa.array(rec.lag_us, pa.int64()),
    })
    pq.write_table(table, path)


def read_parquet(path: Path) -> Records:
    """Return the Records saved by :func:`write_parquet`."""
    t = pq.read_table(path)
    end = t.column("end_us").fill_null(TIMEOUT).to_numpy()
    return make(t.column("node").to_pylist(), t.column("round").to_numpy(),
                t.column("remote").to_pylist(), t.column("start_us").to_numpy(), end,
                t.column("lag_us").to_numpy())


def to_bytes(rec: Records) -> tuple[list[str], bytes]:
    """Return (remote names, packed int64 columns) for the wire; ``node`` is sent apart."""
    names = sorted(set(rec.remote.tolist()))
    index = {n: i for i, n in enumerate(names)}
    code = np.array([index[r] for r in rec.remote.tolist()], dtype=np.int64)
    packed = np.stack([rec.round, code, rec.start_us, rec.end_us, rec.lag_us]).astype("<i8")
    return names, packed.tobytes()


def from_bytes(node: str, names: list[str], data: bytes) -> Records:
    """Return the Records of ``node`` packed by :func:`to_bytes` (ValueError if malformed)."""
    arr = np.frombuffer(data, dtype="<i8")
    if arr.size % 5:
        raise ValueError(f"results of {node}: {len(data)} bytes is not a whole number of rows")
    arr = arr.reshape(5, -1)
    if arr.shape[1] and (arr[1].min() < 0 or arr[1].max() >= len(names)):
        raise ValueError(f"results of {node}: remote index out of range")
    remote = np.asarray(names, dtype=str)[arr[1]] if arr.shape[1] else np.array([], str)
    return make(np.full(arr.shape[1], node), arr[0], remote, arr[2], arr[3], arr[4])

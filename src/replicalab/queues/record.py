"""The queue workload's record: one row per operation, kept in columns, saved as Parquet.

Rows are created at invoke time and closed at completion, as in the History, so a run that
is interrupted or a consumer that crashes keeps every operation (open ones become ``info``).
Kinds:

* queue operations: ``send``, ``receive`` (one call; ``count`` = messages returned),
  ``deliver`` (one per message a receive returned: id, receipt, receive count; ``lease_ns``
  = the visibility timeout asked), ``delete``, ``change_visibility`` (``lease_ns`` = the new
  timeout), ``depth``;
* processing: ``process`` (the work on one delivery), ``commit`` (its result written: ``ok``
  it happened; with ``central``, a conditional write that may be ``fail``, refused because
  its fencing token was superseded, or ``info``, outcome unknown), ``skip`` (a strategy
  decided not to process this delivery: ``note`` says why);
* central store: ``claim``, ``claim_read``, ``claim_takeover``, ``heartbeat``, ``claim_done``;
* effect store (``effects.py``): ``effect_write`` and ``effect_read``, the operations of a
  commit's append; ``effect`` (process :data:`OBSERVER`), one per message read back from
  the store at the end of the run: ``count`` = the effects found, ``note`` = their entries
  (``info``: the list could not be read);
* faults, each a row spanning its window: ``crash`` (a consumer stopped without deleting;
  ``complete_ns`` = its restart), ``pause`` (a consumer stopped dead, then resumed),
  ``skew`` (a consumer's clock off by the ms in ``note``), ``store_fault`` (the central
  store's operations failing; process :data:`CENTRAL_STORE`).

Outcomes: ``ok``, ``fail`` (certainly did not happen), ``info`` (unknown), ``stale`` (a
delete or visibility change refused for a stale receipt), ``invoke`` while open.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

KINDS = ("send", "receive", "deliver", "delete", "change_visibility", "depth", "process",
         "commit", "skip", "claim", "claim_read", "claim_takeover", "heartbeat", "claim_done",
         "crash", "pause", "skew", "store_fault", "effect_write", "effect_read", "effect")
STORE_KINDS = ("claim", "claim_read", "claim_takeover", "heartbeat", "claim_done")
EFFECT_KINDS = ("effect_write", "effect_read")
QUEUE_KINDS = ("send", "receive", "delete", "change_visibility", "depth")
OUTCOMES = ("invoke", "ok", "fail", "info", "stale")
PRODUCER = -1
"""Process id of the producers' rows (consumers are 0..C-1)."""
CENTRAL_STORE = -2
"""Process id of the rows of central-store faults."""
OBSERVER = -3
"""Process id of the ``effect`` rows: the effect store read back after the run."""

COLUMNS = ("kind", "process", "tag", "msg_id", "receipt", "count", "lease_ns", "invoke_ns",
           "complete_ns", "outcome", "note")


class QueueLog:
    """Append-only columns of operations (plain lists: a run has at most a few 10^5 rows).

    ``sink``, when given, is called with (row index, row as a dict) every time a row is
    opened or closed: a consumer process streams its record to a file that way, so a SIGKILL
    leaves every operation it began (see :func:`read_jsonl`).
    """

    def __init__(self, sink: Callable[[int, dict[str, Any]], None] | None = None) -> None:
        self.cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        self.sink = sink
        self.open_commits: set[int] = set()  # commit rows not closed yet
        self.open_processes: dict[int, str] = {}  # process rows not closed yet: message id

    def row(self, index: int) -> dict[str, Any]:
        """Return row ``index`` as a dict."""
        return {c: self.cols[c][index] for c in COLUMNS}

    def __len__(self) -> int:
        return len(self.cols["kind"])

    def invoke(self, kind: str, process: int, now_ns: int, *, tag: str = "",
               msg_id: str = "", receipt: str = "", count: int = 0, lease_ns: int = 0,
               note: str = "") -> int:
        """Open a row; return its index (pass it to :meth:`done`)."""
        if kind not in KINDS:
            raise ValueError(f"unknown queue operation {kind!r}")
        c = self.cols
        for name, value in (("kind", kind), ("process", process), ("tag", tag),
                            ("msg_id", msg_id), ("receipt", receipt), ("count", count),
                            ("lease_ns", lease_ns), ("invoke_ns", now_ns),
                            ("complete_ns", -1), ("outcome", "invoke"), ("note", note)):
            c[name].append(value)
        i = len(c["kind"]) - 1
        if kind == "commit":
            self.open_commits.add(i)
        elif kind == "process":
            self.open_processes[i] = msg_id
        if self.sink is not None:
            self.sink(i, self.row(i))
        return i

    def done(self, index: int, now_ns: int, outcome: str = "ok", **fields: Any) -> None:
        """Close row ``index`` with ``outcome`` at ``now_ns``, updating any other ``fields``."""
        c = self.cols
        c["complete_ns"][index] = now_ns
        c["outcome"][index] = outcome
        self.open_commits.discard(index)
        self.open_processes.pop(index, None)
        for name, value in fields.items():
            c[name][index] = value
        if self.sink is not None:
            self.sink(index, self.row(index))

    def record(self, kind: str, process: int, invoke_ns: int, complete_ns: int,
               outcome: str = "ok", **fields: Any) -> int:
        """Append a closed row; return its index."""
        i = self.invoke(kind, process, invoke_ns, **fields)
        self.done(i, complete_ns, outcome)
        return i

    def close_open(self, now_ns: int, note: str, process: int | None = None) -> int:
        """Mark open rows (of ``process``, or all) ``info`` with ``note``; return how many."""
        c = self.cols
        n = 0
        for i, outcome in enumerate(c["outcome"]):
            if outcome == "invoke" and (process is None or c["process"][i] == process):
                c["outcome"][i], c["complete_ns"][i], c["note"][i] = "info", now_ns, note
                self.open_commits.discard(i)
                self.open_processes.pop(i, None)
                n += 1
                if self.sink is not None:
                    self.sink(i, self.row(i))
        return n

    def columns(self) -> dict[str, list[Any]]:
        """Return the columns (what the checker reads)."""
        return self.cols


def save_log(log: QueueLog | dict[str, list[Any]], run_dir: Path) -> Path:
    """Write ``queue.parquet`` into ``run_dir`` (atomically); return its path."""
    cols = log.columns() if isinstance(log, QueueLog) else log
    types = {"process": pa.int32(), "count": pa.int32(), "lease_ns": pa.int64(),
             "invoke_ns": pa.int64(), "complete_ns": pa.int64()}
    table = pa.table({c: pa.array(cols[c], types.get(c, pa.string())) for c in COLUMNS})
    path = run_dir / "queue.parquet"
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)
    return path


def load_log(run_dir: Path) -> dict[str, list[Any]]:
    """Return the columns saved by :func:`save_log` in ``run_dir``."""
    table = pq.read_table(run_dir / "queue.parquet")
    return {c: table.column(c).to_pylist() for c in COLUMNS}


def jsonl_sink(path: Path) -> Callable[[int, dict[str, Any]], None]:
    """Return a QueueLog sink appending each opened or closed row to ``path`` as one JSON
    line, flushed at once (what a SIGKILL leaves is every line written before it)."""
    f = path.open("a", encoding="utf-8")

    def write(index: int, row: dict[str, Any]) -> None:
        f.write(json.dumps({"i": index, **row}) + "\n")
        f.flush()

    return write


def read_jsonl(path: Path, note: str = "killed") -> dict[str, list[Any]]:
    """Return the columns of a record streamed by :func:`jsonl_sink`: the last line of each
    row wins; a row never closed (its process died) becomes ``info`` with ``note``; a torn
    last line is ignored."""
    rows: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # the process died mid-line
        rows[doc.pop("i")] = doc
    cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for i in sorted(rows):
        row = rows[i]
        if row["outcome"] == "invoke":
            row = {**row, "outcome": "info", "note": note}
        for c in COLUMNS:
            cols[c].append(row[c])
    return cols


def merge(*records: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Return the rows of several records (producers', consumer processes') as one."""
    return {c: [v for r in records for v in r[c]] for c in COLUMNS}

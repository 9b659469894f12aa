"""A run's history as data: an Arrow table and a pandas DataFrame, one row per operation.

Columns (also :data:`COLUMNS`, which the docs list):

=================  ==================================================================
``index``          the operation's number in the history (0, 1, ...)
``process``        the client that issued it (>= 0); -1 the fault injector (nemesis),
                   -2 the final reads after the run
``type``           ``ok`` (it happened), ``fail`` (it certainly did not), ``info``
                   (unknown: timeout, crash), ``invoke`` (never completed)
``f``              what it did: read, write, cas, delete; crash, pause, partition, heal,
                   slow, power-loss for the nemesis
``keys``           the elements (``domain/item/attribute``) it addressed, a list
``values``         the values written, or read (None: the element was absent), a list
``expects``        for a cas, the value each key had to hold (None: absent); else empty
``consistency``    ``eventual`` or ``consistent`` for reads; ``none`` otherwise
``invoke_ns``      when it was invoked, ns on the run's clock (virtual time starts at 0;
                   real time is ``time.monotonic_ns``)
``complete_ns``    when it completed, ns on the same clock (-1: never)
``node``           the node or replica that served it, where known
``error``          why it failed or is unknown ("" when ok)
``latency_ns``     complete_ns - invoke_ns (missing for an operation never completed)
``invoke_time``    invoke_ns as a UTC timestamp (ns): the run's clock placed at the wall
                   clock when the run started (virtual time is laid out from that moment)
``complete_time``  complete_ns likewise (missing for an operation never completed)
=================  ==================================================================
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

COLUMNS: dict[str, str] = {
    "index": "the operation's number in the history (0, 1, ...)",
    "process": "the client that issued it (>= 0); -1 the nemesis, -2 the final reads",
    "type": "ok | fail (certainly did not happen) | info (unknown) | invoke (never completed)",
    "f": "read, write, cas, delete (or the nemesis' crash, pause, partition, heal, ...)",
    "keys": "the elements addressed (domain/item/attribute), a list",
    "values": "values written or read (None: absent), a list",
    "expects": "a cas's expected value per key (None: absent); empty otherwise",
    "consistency": "eventual | consistent (reads); none otherwise",
    "invoke_ns": "invocation time, ns on the run's clock",
    "complete_ns": "completion time, ns on the run's clock (-1: never)",
    "node": "node or replica that served it, where known",
    "error": "why it failed or is unknown ('' when ok)",
    "latency_ns": "complete_ns - invoke_ns (null if never completed)",
    "invoke_time": "invoke_ns as a UTC timestamp, the run's clock placed at its wall start",
    "complete_time": "complete_ns as a UTC timestamp (null if never completed)",
}
"""Every column of :meth:`HistoryTable.to_arrow` with what it holds."""


def _run_dir_start_ns(run_dir: Path) -> int:
    """Return the wall-clock start of a run saved before config.json carried it: the UTC
    second its directory is named after (0 if its name does not start with one)."""
    try:
        stamp = datetime.strptime(run_dir.name[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return 0
    return int(stamp.timestamp()) * 1_000_000_000


class HistoryTable:
    """The history of one run (``history.parquet`` of its directory), read on first use."""

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        self.run_dir = Path(run_dir)
        self._config = config
        self._table: pa.Table | None = None

    def _anchors(self, invoke: pa.ChunkedArray) -> tuple[int, int]:
        """Return (runtime ns, unix ns) of the same instant: the run's start."""
        if "started_unix_ns" in self._config and self._config.get("started_unix_ns"):
            return int(self._config["started_runtime_ns"]), int(self._config["started_unix_ns"])
        import pyarrow.compute as pc

        first = pc.min(invoke).as_py()
        return (0 if first is None else int(first)), _run_dir_start_ns(self.run_dir)

    def to_arrow(self) -> pa.Table:
        """Return the history as an Arrow table, one row per operation, with the columns
        of :data:`COLUMNS` (times in ns, and as UTC timestamps)."""
        if self._table is None:
            # loaded here: every probe command imports this module, few read a table back
            # (pyarrow.compute: 209 M instructions)
            import pyarrow.compute as pc

            path = self.run_dir / "history.parquet"
            try:
                t = pq.read_table(path)
            except FileNotFoundError:
                raise ValueError(f"{self.run_dir} has no history.parquet; pass a probe run "
                                 "directory") from None
            invoke, complete = t["invoke_ns"], t["complete_ns"]
            done = pc.greater_equal(complete, 0)
            latency = pc.if_else(done, pc.subtract(complete, invoke), pa.scalar(None, pa.int64()))
            runtime0, unix0 = self._anchors(invoke)
            shift = unix0 - runtime0

            def stamp(col: Any) -> pa.Array:
                return pc.cast(pc.add(col, shift), pa.timestamp("ns", tz="UTC"))

            t = t.append_column("latency_ns", latency)
            t = t.append_column("invoke_time", stamp(invoke))
            t = t.append_column("complete_time", pc.if_else(
                done, stamp(complete), pa.scalar(None, pa.timestamp("ns", tz="UTC"))))
            self._table = t
        return self._table

    def to_pandas(self) -> Any:
        """Return the history as a pandas DataFrame, one row per operation, the columns of
        :data:`COLUMNS`: ``type``, ``f``, ``consistency`` as categories, times in ns
        (pandas' nullable ``Int64``: ``latency_ns`` is missing for an operation never
        completed) and as ``datetime64[ns, UTC]`` timestamps."""
        import pandas as pd

        return self.to_arrow().to_pandas(
            types_mapper=lambda t: pd.Int64Dtype() if t == pa.int64() else None)

    def __len__(self) -> int:
        return self.to_arrow().num_rows

    def __repr__(self) -> str:
        return f"HistoryTable({self.run_dir}, {len(self):,} operations)"


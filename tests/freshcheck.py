"""Shared check for real-store staleness tests: the reads that cannot have seen a write."""

from __future__ import annotations

from pathlib import Path

from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import judge
from replicalab.history import load_history
from replicalab.workloads.staleness import KEY


def done_before_ms(run_dir: Path, within_ms: float) -> tuple[int, int]:
    """Return (reads, stale reads) among the reads that *completed* within ``within_ms`` of
    the start of the latest write that started before them.

    A read answered that soon after the write began cannot have seen it if replication
    takes longer, however busy the machine (a late read only moves out of the set), and
    unlike the last stale read's time it is not shortened by the gaps between reads."""
    h, _ = load_history(run_dir)
    writes, reads = element_ops(h, KEY)
    j = judge(writes, reads)
    done_ns = h.column("complete_ns")[reads.index[j.read]]
    early = (done_ns - writes.invoke_ns[j.write]) / 1e6 < within_ms
    return int(early.sum()), int((~j.fresh[early]).sum())

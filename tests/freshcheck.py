"""Shared checks for real-store staleness tests, each judged from what a busy machine cannot
move: the reads that cannot have seen a write, the reads begun after a write's
acknowledgement, and each write's visibility counted from its ack (a write the machine held
up leaves reads begun long after its *start* stale, rightly: it was still in flight)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import judge, since_ack
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


def fresh_after_ack(run_dir: str | Path) -> tuple[int, int]:
    """Return (fresh, reads) over the reads begun after some write was acknowledged, each
    judged against the latest write acknowledged before it began (the linearizable view)."""
    h, _ = load_history(Path(run_dir))
    r = since_ack(*element_ops(h, KEY))
    return sum(r["fresh"]), sum(r["total"])


def visible_within(run_dir: str | Path, hi_ms: float) -> Any:
    """Return each write of a staleness run judged against [0, ``hi_ms``] ms after its ack
    (``checkers/visibility.judge_window``), a miss excused only where the run's noise floor
    measured the machine adding as much; its ``verdict`` is "exact" when none is left."""
    from replicalab.checkers import visibility
    from replicalab.runtime.noise import NoiseFloor

    run_dir = Path(run_dir)
    h, _ = load_history(run_dir)
    floor = NoiseFloor.from_json(json.loads((run_dir / "results.json").read_text())["noise"])
    return visibility.judge_window(visibility.of_element(*element_ops(h, KEY)), 0.0, hi_ms,
                                   floor)

"""Clock offsets recovered from the agents' HLC trace logs, beside the injected skews.

The agents' physical clocks were offset on purpose (``--skew-ms``); ``hlc.align`` estimates,
from the HLC logs alone, how far each node's clock is behind the node that drives HLC time.
The true value of that offset is ``skew(driver) - skew(node)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from replicalab.hlc import align as hlc_align
from replicalab.hlc.trace import LogError, read_log


def recovered_offsets(traces: Mapping[str, Path], skews_ms: Mapping[str, float]) -> dict:
    """Return the alignment of the trace logs: per node the recovered and true offsets (ms),
    the error, the message-derived bounds; ``{"error": ...}`` when the logs cannot be read or
    aligned."""
    try:
        logs = {node: read_log(path) for node, path in sorted(traces.items())}
        logs = {k: v for k, v in logs.items() if v}
        if len(logs) < 2:
            return {"error": "fewer than two non-empty trace logs"}
        result = hlc_align.align(logs)
    except (LogError, hlc_align.AlignError) as err:
        return {"error": str(err)}
    drv = result.driver
    rows = []
    for node in sorted(result.nodes):
        n = result.nodes[node]
        true_ms = skews_ms.get(drv, 0.0) - skews_ms.get(node, 0.0)
        est_ms = n.offset_us / 1000.0
        rows.append({"node": node, "skew_ms": skews_ms.get(node, 0.0),
                     "true_offset_ms": round(true_ms, 3), "recovered_offset_ms": round(est_ms, 3),
                     "error_ms": round(est_ms - true_ms, 3),
                     "low_ms": None if n.low_us is None else n.low_us / 1000.0,
                     "high_ms": None if n.high_us is None else n.high_us / 1000.0,
                     "evidence": n.evidence, "events": n.events})
    return {"driver": drv, "messages": result.messages, "driver_candidates":
            list(result.driver_candidates), "violations_pt": result.violations_pt,
            "violations_aligned": result.violations_aligned, "nodes": rows}

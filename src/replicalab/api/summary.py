"""The headline figures of one probe run as (measure, value) rows of text: what
``replicalab probe`` prints as its summary table and what a notebook shows for a run."""

from __future__ import annotations

from typing import Any

from replicalab.workloads import registry
from replicalab.workloads.base import duration_text


def _pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def fault_window_availability(avail: dict[str, Any], start_ms: float, end_ms: float
                              ) -> float | None:
    """Return the fraction of client time covered by ok operations in the availability
    windows that overlap [start_ms, end_ms) (None if no client time fell there)."""
    t_s, frac, client_s = avail.get("t_s", []), avail.get("ok_fraction", []), avail.get(
        "client_s", [])
    width_s = avail.get("window_s") or 1.0
    ok = total = 0.0
    for t, f, c in zip(t_s, frac, client_s, strict=False):
        if t + width_s > start_ms / 1000 and t < end_ms / 1000 and f is not None and c:
            ok += f * c
            total += c
    return ok / total if total else None


def fault_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the (measure, value) rows of a fault run's summary: each fault with its window
    and the availability inside it, then availability overall, indeterminate operations and
    lost acknowledged writes. Empty for a run without faults."""
    faults = results.get("faults") or []
    if not faults:
        return []
    avail = results.get("availability", {})
    rows = []
    for f in faults:
        inside = fault_window_availability(avail, f["start_ms"], f["end_ms"])
        rows.append((f"fault: {f['label']}, {f['start_ms'] / 1000:g}s-{f['end_ms'] / 1000:g}s",
                     f"available {_pct(inside)} of client time during it"))
    rows.append(("availability (client time / ops ok)",
                 f"{_pct(avail.get('overall'))} / {_pct(avail.get('overall_ops'))} of "
                 f"{avail.get('count', 0):,} op{'' if avail.get('count', 0) == 1 else 's'}"))
    ops = results.get("ops") or results.get("transactions") or {}  # a transactional run's
    rows.append(("indeterminate operations (info)", f"{ops.get('info', 0):,}"))
    lost = results.get("lost_writes", {})
    rows.append(("lost acknowledged writes",
                 f"{lost.get('lost', 0):,} of {lost.get('acknowledged', 0):,}"
                 if lost.get("checked", True) else "not checked (the store did not answer)"))
    return rows


def summary_title(results: dict[str, Any]) -> str:
    """Return the caption of a run's summary: workload, store, the reads' consistency (a
    transactional run: the isolation asked for, else promised), cut short."""
    iso = results.get("isolation")
    how = (results["consistency"] if not isinstance(iso, dict) else
           f"isolation {iso.get('requested') or iso.get('promised', 'none')}")
    return (f"{results['workload']} on {results['store']} ({how})"
            + (" - PARTIAL: the run was cut short" if results.get("partial") else ""))


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the headline figures of one probe's results as (measure, value) rows: how long
    it ran, reads and writes (a transactional run counts transactions instead, in its own
    rows), the rows its workload declares, latency per operation (ms), then faults."""
    rows = [("duration", duration_text(results))]
    if "transactions" not in results:
        ops = results["ops"]
        rows.append(("reads / writes", f"{ops['reads']:,} / {ops['writes']:,}"))
    wl = registry.get(results["workload"])
    rows += list(wl.summary_rows(results))
    if wl.per_op_latency_rows:
        for name, lat in results["latency"].items():
            rows.append((f"latency {name.removesuffix('/none')} p50/p99/p99.9",
                         f"{lat['p50_ms']:.1f} / {lat['p99_ms']:.1f} / {lat['p999_ms']:.1f} ms"))
    return rows + fault_rows(results)

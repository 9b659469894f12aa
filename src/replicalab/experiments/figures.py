"""The figures a staleness probe's results give, computed in one place for every experiment
that shows them (``compare``'s rows, the scorecard's consistency and availability cells), so
the two agree by construction on the same history."""

from __future__ import annotations

from typing import Any


def staleness(results: dict[str, Any]) -> dict[str, Any]:
    """Return a staleness probe's reads counted, the fraction stale (None without reads)
    and the stale window: the median over writes of the last stale read's ms after the
    write started (per write, so one slow write, a first write creating parents, does not
    stand for all)."""
    f = results["freshness"]
    total, fresh = sum(f["total"]), sum(f["fresh"])
    return {"reads": total, "stale_fraction": 1 - fresh / total if total else None,
            "stale_window_ms": results["periods"]["last_lt_100_median_ms"]}


def availability(results: dict[str, Any], f: str) -> dict[str, Any]:
    """Return the availability by time of a probe's ``f`` ops ("read" or "write"): while
    the faults lasted (``during``), over the whole run (``run``), by op count (``ops``) and
    how many there were (``count``); None where there were none. A client blocked by a
    partition counts for as long as it waited, not for its few timed-out ops."""
    x = results["availability"].get("by_f", {}).get(f, {})
    return {"during": x.get("during_faults"), "run": x.get("overall"),
            "ops": x.get("overall_ops"), "count": x.get("count", 0)}


def latency(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Return a latency probe's figures per variant (eventual read, consistent read, put,
    conditional put): operations counted and p50/p99/p99.9 in ms."""
    return {v: {k: x[k] for k in ("count", "p50_ms", "p99_ms", "p999_ms")}
            for v, x in results["variants"].items()}

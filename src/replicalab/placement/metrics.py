"""Pure functions from a policy's Trace to its metrics, overall and over time.

Latency is the requester's round trip to the object's owner at the time of the access (ms).
Over time the run is cut into equal buckets: mean and p99 latency of the accesses in each,
migrations and ping-pong migrations per 1,000 accesses, and ownership balance at each
bucket's end (imbalance: objects owned by the most loaded region minus the least loaded;
max share: the largest share of all objects one region owns).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replicalab.placement.kernel import Trace

STEADY_FROM = 0.8  # the steady state is the last 20 % of the run's time


def loads_over_time(trace: Trace, owner0: np.ndarray, n_regions: int,
                    bucket_of_request: np.ndarray, n_buckets: int) -> np.ndarray:
    """Return int64 buckets × regions: objects each region owns at the end of each bucket."""
    delta = np.zeros((n_buckets, n_regions), np.int64)
    b = bucket_of_request[trace.mig_index]
    np.add.at(delta, (b, trace.mig_to), 1)
    np.add.at(delta, (b, trace.mig_from), -1)
    start = np.bincount(np.asarray(owner0, np.int64), minlength=n_regions)
    return start[None, :] + np.cumsum(delta, axis=0)


def summarize(trace: Trace, t_ms: np.ndarray, duration_ms: float, owner0: np.ndarray,
              n_regions: int, n_buckets: int = 50) -> dict[str, Any]:
    """Return the overall metrics (latencies in ms, rates per 1,000 accesses, shares of all
    objects) and a ``series`` of per-bucket values with bucket ends in s."""
    m = int(t_ms.shape[0])
    n_objects = int(owner0.shape[0])
    lat = trace.latency_ms
    edges_ms = np.linspace(0.0, duration_ms, n_buckets + 1)
    bounds = np.searchsorted(t_ms, edges_ms[1:-1], side="left")
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [m]])
    bucket = np.repeat(np.arange(n_buckets), ends - starts)
    loads = loads_over_time(trace, owner0, n_regions, bucket, n_buckets)
    migs = np.bincount(bucket[trace.mig_index], minlength=n_buckets)
    pps = np.bincount(bucket[trace.mig_index[trace.mig_pingpong]], minlength=n_buckets)
    counts = ends - starts
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_b = np.array([lat[s:e].mean() if e > s else np.nan for s, e in zip(
            starts, ends, strict=True)])
        p99_b = np.array([np.percentile(lat[s:e], 99) if e > s else np.nan for s, e in zip(
            starts, ends, strict=True)])
        mig_b = np.where(counts > 0, migs * 1000.0 / np.maximum(counts, 1), np.nan)
        pp_b = np.where(counts > 0, pps * 1000.0 / np.maximum(counts, 1), np.nan)
    steady = lat[int(np.searchsorted(t_ms, STEADY_FROM * duration_ms)):]
    final = np.bincount(trace.final_owner, minlength=n_regions)
    n_mig = int(trace.mig_index.shape[0])
    n_pp = int(trace.mig_pingpong.sum())
    return {
        "requests": m,
        "mean_latency_ms": float(lat.mean()) if m else float("nan"),
        "p99_latency_ms": float(np.percentile(lat, 99)) if m else float("nan"),
        "steady_latency_ms": float(steady.mean()) if steady.size else float("nan"),
        "migrations": n_mig,
        "migrations_per_1k": n_mig * 1000.0 / m if m else 0.0,
        "pingpong_migrations": n_pp,
        "pingpong_per_1k": n_pp * 1000.0 / m if m else 0.0,
        "max_share": float(final.max() / n_objects),
        "imbalance_objects": int(final.max() - final.min()),
        "final_loads": final.tolist(),
        "series": {
            "t_s": (edges_ms[1:] / 1000.0).tolist(),
            "mean_latency_ms": mean_b.tolist(),
            "p99_latency_ms": p99_b.tolist(),
            "migrations_per_1k": mig_b.tolist(),
            "pingpong_per_1k": pp_b.tolist(),
            "imbalance_objects": (loads.max(axis=1) - loads.min(axis=1)).tolist(),
            "max_share": (loads.max(axis=1) / n_objects).tolist(),
        },
    }


def on_sharers(final_owner: np.ndarray, sharers: np.ndarray) -> float:
    """Return the share of objects with 2 or more sharing regions that end owned by one of
    them (1.0: the policy locked every shared object into one sharer)."""
    multi = (sharers >= 0).sum(axis=1) >= 2
    if not multi.any():
        return float("nan")
    hit = (sharers[multi] == final_owner[multi, None]).any(axis=1)
    return float(hit.mean())

"""Freshness of reads vs time since the write started (seed 003 §2): curves, ranges, periods.

A read is fresh when it returns the value of the latest write that started at or before
the read started (or a newer one). Reads are bucketed by the time elapsed from that write's
start to the read's start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replicalab.checkers.extract import ReadLog, WriteLog, latest_write_before
from replicalab.checkers.stats import median_cv, wilson
from replicalab.runtime.base import NS_PER_MS


@dataclass(frozen=True)
class Judged:
    """Reads that follow some write: elapsed ms since that write started, fresh, k behind."""

    read: np.ndarray       # positions into the ReadLog
    write: np.ndarray      # index of the write each read is judged against
    elapsed_ms: np.ndarray
    fresh: np.ndarray      # bool
    k: np.ndarray          # versions behind (0 = fresh)


def judge(writes: WriteLog, reads: ReadLog) -> Judged:
    """Return each read's freshness relative to the latest write started before it."""
    w = latest_write_before(writes, reads.invoke_ns)
    has = w >= 0
    pos = np.flatnonzero(has)
    w = w[has]
    elapsed = (reads.invoke_ns[has] - writes.invoke_ns[w]) / NS_PER_MS
    # version order = write order: position of the version read among the writes
    order = np.argsort(writes.version, kind="stable")
    seen_pos = np.searchsorted(writes.version[order], reads.version[has], side="left")
    seen_pos = np.where(seen_pos < len(order), seen_pos, len(order) - 1)
    exists = writes.version[order][seen_pos] == reads.version[has]
    seen_write = np.where(exists, order[seen_pos], -1)
    k = np.clip(w - seen_write, 0, None)
    return Judged(pos, w, elapsed, k == 0, k)


def curve(j: Judged, bucket_ms: float = 1.0, sel: np.ndarray | None = None) -> dict[str, list]:
    """Return the freshness-vs-elapsed curve: bucket starts, counts, probability, Wilson band."""
    elapsed, fresh = (j.elapsed_ms, j.fresh) if sel is None else (j.elapsed_ms[sel], j.fresh[sel])
    if len(elapsed) == 0:
        return {"bucket_ms": bucket_ms, "t_ms": [], "fresh": [], "total": [], "p": [],
                "lo": [], "hi": []}
    b = (elapsed // bucket_ms).astype(np.int64)
    total = np.bincount(b)
    good = np.bincount(b, weights=fresh.astype(float), minlength=len(total)).astype(np.int64)
    keep = np.flatnonzero(total)
    lo, hi = wilson(good[keep], total[keep])
    return {
        "bucket_ms": bucket_ms,
        "t_ms": (keep * bucket_ms).astype(float).tolist(),
        "fresh": good[keep].tolist(),
        "total": total[keep].tolist(),
        "p": np.round(good[keep] / total[keep], 6).tolist(),
        "lo": np.round(lo, 6).tolist(),
        "hi": np.round(hi, 6).tolist(),
    }


def by_range(j: Judged, ranges: list[tuple[float, float]]) -> list[dict[str, float]]:
    """Return fresh/total, probability and Wilson band for each [from, to) ms range."""
    out = []
    for a, b in ranges:
        sel = (j.elapsed_ms >= a) & (j.elapsed_ms < b)
        n, k = int(sel.sum()), int(j.fresh[sel].sum())
        lo, hi = wilson(np.array([k]), np.array([n]))
        out.append({"from_ms": a, "to_ms": b, "fresh": k, "total": n,
                    "p": round(k / n, 6) if n else None,
                    "lo": None if n == 0 else round(float(lo[0]), 6),
                    "hi": None if n == 0 else round(float(hi[0]), 6)})
    return out


def first_settled_ms(t_ms: np.ndarray, p: np.ndarray, level: float, hold_ms: float
                     ) -> float | None:
    """Return the first bucket time from which p >= level holds for ``hold_ms`` (or to the end).

    One 1 ms bucket of one period holds only a handful of reads, so a single bucket can be
    all-fresh by chance long before the store settles; asking the level to hold for
    ``hold_ms`` makes the figure measure the store, not the dice.
    """
    bad = t_ms[p < level]
    for t in t_ms[p >= level]:
        later_bad = bad[(bad > t) & (bad < t + hold_ms)]
        if len(later_bad) == 0:
            return float(t)
    return None


def periods(j: Judged, writes: WriteLog, period_s: float, hold_ms: float = 50.0
            ) -> dict[str, object]:
    """Return per measurement period the first time >= 99% (held) and last time < 100%."""
    if len(j.write) == 0:
        return {"period_s": period_s, "hold_ms": hold_ms, "start_s": [], "first_ge_99_ms": [],
                "last_lt_100_ms": [], "first_ge_99_median_ms": None, "first_ge_99_cv": None,
                "last_lt_100_median_ms": None, "last_lt_100_cv": None}
    t0 = writes.invoke_ns[0]
    pid = ((writes.invoke_ns[j.write] - t0) // int(period_s * 1e9)).astype(np.int64)
    starts, firsts, lasts = [], [], []
    for k in np.unique(pid).tolist():
        c = curve(j, 1.0, pid == k)
        t = np.array(c["t_ms"])
        p = np.array(c["p"])
        starts.append(round(k * period_s, 3))
        firsts.append(first_settled_ms(t, p, 0.99, hold_ms))
        lt = t[p < 1.0]
        lasts.append(float(lt.max()) if len(lt) else None)
    fm, fcv = median_cv(firsts)
    lm, lcv = median_cv(lasts)
    return {"period_s": period_s, "hold_ms": hold_ms, "start_s": starts,
            "first_ge_99_ms": firsts, "last_lt_100_ms": lasts,
            "first_ge_99_median_ms": fm, "first_ge_99_cv": fcv,
            "last_lt_100_median_ms": lm, "last_lt_100_cv": lcv}


def k_staleness(j: Judged) -> dict[str, list[int]]:
    """Return the distribution of how many versions behind each read was."""
    if len(j.k) == 0:
        return {"k": [], "count": []}
    counts = np.bincount(j.k)
    ks = np.flatnonzero(counts)
    return {"k": ks.tolist(), "count": counts[ks].tolist()}


def since_ack(writes: WriteLog, reads: ReadLog, bucket_ms: float = 1.0) -> dict[str, list]:
    """Return freshness vs ms since the latest write was acknowledged (PBS's t-visibility).

    Each read is judged against the latest write completed before the read started;
    reads with no such write are left out. ``t_mean_ms`` is the mean t of each bucket's
    reads (the point to compare a model at: reads crowd at the start of a bucket).
    """
    order = np.argsort(writes.complete_ns, kind="stable")
    done = writes.complete_ns[order]
    last = np.searchsorted(done, reads.invoke_ns, side="right") - 1
    has = last >= 0
    w = order[last[has]]
    t_ms = (reads.invoke_ns[has] - writes.complete_ns[w]) / NS_PER_MS
    fresh = reads.version[has] >= writes.version[w]
    if len(t_ms) == 0:
        return {"bucket_ms": bucket_ms, "t_ms": [], "t_mean_ms": [], "fresh": [], "total": [],
                "p": []}
    b = (t_ms // bucket_ms).astype(np.int64)
    total = np.bincount(b)
    good = np.bincount(b, weights=fresh.astype(float), minlength=len(total)).astype(np.int64)
    t_sum = np.bincount(b, weights=t_ms, minlength=len(total))
    keep = np.flatnonzero(total)
    return {"bucket_ms": bucket_ms, "t_ms": (keep * bucket_ms).astype(float).tolist(),
            "t_mean_ms": np.round(t_sum[keep] / total[keep], 6).tolist(),
            "fresh": good[keep].tolist(), "total": total[keep].tolist(),
            "p": np.round(good[keep] / total[keep], 6).tolist()}

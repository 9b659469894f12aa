"""The numba-compiled loop of ``kernel.py`` (see there): every policy and the filter over
whole request arrays, and ``run_fast``, its entry. Kept apart so numba is imported only when
a simulation runs (``simulate.run_policy`` imports this module on first use)."""

from __future__ import annotations

import numba
import numpy as np

from replicalab.placement.kernel import (
    COG_CONTINUOUS,
    COG_PERIODIC,
    CONSECUTIVE,
    EMA,
    MAJORITY,
    ORACLE,
    Trace,
)
from replicalab.placement.matrix import nearest_order


@numba.njit(cache=True)
def _rank_and_pick(scores, target, own, loads, cap, use_scores, near):  # pragma: no cover
    """Return the first region, walking ``target`` then the rest best first, that is the
    owner (-1: stay) or has room; -1 if none has."""
    if use_scores:
        order = np.argsort(scores, kind="mergesort")
        if target == own:
            return -1
        if loads[target] < cap:
            return target
        for k in range(order.shape[0]):
            c = order[k]
            if c == target:
                continue
            if c == own:
                return -1
            if loads[c] < cap:
                return c
        return -1
    row = near[target]
    for k in range(row.shape[0]):
        c = row[k]
        if c == own:
            return -1
        if loads[c] < cap:
            return c
    return -1


@numba.njit(cache=True)
def run(code, n_consecutive, window_ms, alpha, rtt, near, obj, region, t_ms, owner, cap,
         plan, pingpong_ms, latency, mig_index, mig_from, mig_to, mig_pp):  # pragma: no cover
    n_objects = owner.shape[0]
    n_regions = rtt.shape[0]
    m = obj.shape[0]
    last = np.full(n_objects, -1, np.int64)
    run = np.zeros(n_objects, np.int64)
    period = np.full(n_objects, -1, np.int64)
    counts = np.zeros((n_objects, n_regions if code in (MAJORITY, COG_PERIODIC) else 1),
                      np.int64)
    scores = np.zeros((n_objects, n_regions if code == COG_CONTINUOUS else 1), np.float64)
    if code == COG_CONTINUOUS:
        for o in range(n_objects):
            for c in range(n_regions):
                scores[o, c] = rtt[owner[o], c]
    ema = np.zeros(n_objects, np.float64)
    for o in range(n_objects):
        ema[o] = float(owner[o])
    loads = np.zeros(n_regions, np.int64)
    for o in range(n_objects):
        loads[owner[o]] += 1
    left_at = np.full((n_objects, n_regions), -np.inf, np.float64)
    cur = np.zeros(n_regions, np.float64)
    beta = 1.0 - alpha
    n_mig = 0
    for i in range(m):
        o = obj[i]
        r = region[i]
        t = t_ms[i]
        own = owner[o]
        latency[i] = rtt[r, own]
        target = -1
        use_scores = False
        if code == CONSECUTIVE:
            if last[o] == r:
                run[o] += 1
            else:
                last[o] = r
                run[o] = 1
            if run[o] >= n_consecutive and r != own:
                target = r
        elif code in (MAJORITY, COG_PERIODIC):
            p = np.int64(np.floor(t / window_ms))
            if p != period[o]:
                if period[o] >= 0:
                    if code == MAJORITY:
                        best = counts[o, 0]
                        arg = 0
                        for c in range(1, n_regions):
                            if counts[o, c] > best:
                                best = counts[o, c]
                                arg = c
                        if counts[o, own] != best:
                            target = arg
                    else:
                        for c in range(n_regions):
                            cur[c] = 0.0
                        for q in range(n_regions):
                            k = counts[o, q]
                            if k != 0:
                                for c in range(n_regions):
                                    cur[c] = cur[c] + k * rtt[q, c]
                        best_s = cur[0]
                        arg = 0
                        for c in range(1, n_regions):
                            if cur[c] < best_s:
                                best_s = cur[c]
                                arg = c
                        if cur[own] != best_s:
                            target = arg
                            use_scores = True
                for c in range(n_regions):
                    counts[o, c] = 0
                period[o] = p
            counts[o, r] += 1
        elif code == EMA:
            e = alpha * r + beta * ema[o]
            ema[o] = e
            want = np.int64(np.floor(e + 0.5))
            if want > own:
                target = own + 1
            elif want < own:
                target = own - 1
        elif code == COG_CONTINUOUS:
            for c in range(n_regions):
                scores[o, c] = scores[o, c] * beta + alpha * rtt[r, c]
            best_s = scores[o, 0]
            arg = 0
            for c in range(1, n_regions):
                if scores[o, c] < best_s:
                    best_s = scores[o, c]
                    arg = c
            if scores[o, own] != best_s:
                target = arg
                use_scores = True
            if use_scores:
                for c in range(n_regions):
                    cur[c] = scores[o, c]
        elif code == ORACLE and plan[i] >= 0 and plan[i] != own:
            target = plan[i]
        if target >= 0 and cap >= 0:
            target = _rank_and_pick(cur, target, own, loads, cap, use_scores, near)
        if target >= 0:
            mig_index[n_mig] = i
            mig_from[n_mig] = own
            mig_to[n_mig] = target
            mig_pp[n_mig] = t - left_at[o, target] <= pingpong_ms
            n_mig += 1
            left_at[o, own] = t
            owner[o] = target
            loads[own] -= 1
            loads[target] += 1
    return n_mig


def run_fast(code: int, rtt_ms: np.ndarray, obj: np.ndarray, region: np.ndarray,
             t_ms: np.ndarray, owner0: np.ndarray, *, n_consecutive: int = 3,
             window_ms: float = 1.0, alpha: float = 0.1, capacity: int = -1,
             plan: np.ndarray | None = None, pingpong_ms: float = 0.0) -> Trace:
    """Return the Trace of the policy of branch ``code`` over the stream, starting from owners
    ``owner0``; ``capacity`` objects per region for the filter (-1: no filter); ``plan`` the
    oracle's per-request targets (``policies.oracle_plan``)."""
    m = int(obj.shape[0])
    owner = np.array(owner0, dtype=np.int64)
    rtt = np.ascontiguousarray(rtt_ms, dtype=np.float64)
    latency = np.empty(m, np.float64)
    mig_index = np.empty(m, np.int64)
    mig_from = np.empty(m, np.int64)
    mig_to = np.empty(m, np.int64)
    mig_pp = np.empty(m, np.bool_)
    n = run(code, int(n_consecutive), float(window_ms), float(alpha), rtt,
             nearest_order(rtt), np.ascontiguousarray(obj, dtype=np.int64),
             np.ascontiguousarray(region, dtype=np.int64),
             np.ascontiguousarray(t_ms, dtype=np.float64), owner, int(capacity),
             np.zeros(0, np.int64) if plan is None else np.ascontiguousarray(plan, np.int64),
             float(pingpong_ms), latency, mig_index, mig_from, mig_to, mig_pp)
    return Trace(latency, mig_index[:n].copy(), mig_from[:n].copy(), mig_to[:n].copy(),
                 mig_pp[:n].copy(), owner)

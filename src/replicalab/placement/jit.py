"""The numba-compiled loop of ``kernel.py`` (see there): every policy and the filter over
whole request arrays. Kept apart so numba is imported only when a simulation runs."""

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
)


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

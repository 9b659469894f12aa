"""The fast path: every policy of ``policies.py`` and the filter in one compiled loop.

``policies.py`` is the reference: small objects fed one access at a time. A Python loop over
``hit()`` runs a few hundred thousand requests per second; the seed's experiments (four
workloads, six policies, a million requests each) want millions. This module replays the same
rules over whole request arrays in one numba-compiled function, with per-object state in
arrays, the same arithmetic in the same order (so floating-point results are bit-identical)
and the same tie-breaking. ``tests/test_placement_fast.py`` checks that both paths give the
same latencies and migrations on random streams.

numba (PyPI, maintained by Anaconda and the NumPy community, compiles on every release of
NumPy we use) is chosen over numpy vectorisation because the load-balancing filter couples
all objects through the regions' loads: each decision depends on every earlier one, so the
loop is inherently sequential. Its one-off compile (~2 s) is cached on disk (``cache=True``).
The compiled code lives in ``jit.py``, imported on the first run so that importing the
simulator (and starting the CLI) does not load numba.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replicalab.placement.matrix import nearest_order

STATIC, CONSECUTIVE, MAJORITY, EMA, COG_PERIODIC, COG_CONTINUOUS, ORACLE = range(7)
"""The branches of the compiled loop (``jit.run``); a policy class names its branch as its
``kernel_code`` and hands the loop's arguments over in ``fast_args()``."""


@dataclass(frozen=True)
class Trace:
    """What one policy did to a request stream: the latency of every access (ms), and every
    migration (the request index after which it happened, from and to region, and whether it
    went back to a region the object left within the ping-pong window)."""

    latency_ms: np.ndarray
    mig_index: np.ndarray
    mig_from: np.ndarray
    mig_to: np.ndarray
    mig_pingpong: np.ndarray
    final_owner: np.ndarray


def run_fast(code: int, rtt_ms: np.ndarray, obj: np.ndarray, region: np.ndarray,
             t_ms: np.ndarray, owner0: np.ndarray, *, n_consecutive: int = 3,
             window_ms: float = 1.0, alpha: float = 0.1, capacity: int = -1,
             plan: np.ndarray | None = None, pingpong_ms: float = 0.0) -> Trace:
    """Return the Trace of the policy of branch ``code`` over the stream, starting from owners
    ``owner0``; ``capacity`` objects per region for the filter (-1: no filter); ``plan`` the
    oracle's per-request targets (``policies.oracle_plan``)."""
    from replicalab.placement import jit  # numba loads on first use, not at import

    m = int(obj.shape[0])
    owner = np.array(owner0, dtype=np.int64)
    rtt = np.ascontiguousarray(rtt_ms, dtype=np.float64)
    latency = np.empty(m, np.float64)
    mig_index = np.empty(m, np.int64)
    mig_from = np.empty(m, np.int64)
    mig_to = np.empty(m, np.int64)
    mig_pp = np.empty(m, np.bool_)
    n = jit.run(code, int(n_consecutive), float(window_ms), float(alpha), rtt,
             nearest_order(rtt), np.ascontiguousarray(obj, dtype=np.int64),
             np.ascontiguousarray(region, dtype=np.int64),
             np.ascontiguousarray(t_ms, dtype=np.float64), owner, int(capacity),
             np.zeros(0, np.int64) if plan is None else np.ascontiguousarray(plan, np.int64),
             float(pingpong_ms), latency, mig_index, mig_from, mig_to, mig_pp)
    return Trace(latency, mig_index[:n].copy(), mig_from[:n].copy(), mig_to[:n].copy(),
                 mig_pp[:n].copy(), owner)

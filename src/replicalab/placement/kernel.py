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
The compiled loop and ``run_fast``, its entry, live in ``jit.py``, imported on the first run
so that importing the simulator (and starting the CLI) does not load numba; this module
holds what the reference side needs without numba: the loop's branch codes and ``Trace``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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

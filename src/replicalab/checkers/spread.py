"""Figures of many runs: each run's headline figures, their spread across runs with a 95 %
confidence interval of the mean, and pooled fractions (pure functions of results).

A run's figure is a number (a latency, the first time a period is 99 % fresh), None when
the run has none, or a (count, total) pair (fresh reads of all reads in a range): pairs are
pooled over the runs (their counts summed, with a Wilson interval) as well as spread as
per-run fractions. Everything here depends only on the runs' results, so a batch of runs
and the same runs made one by one merge to the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from replicalab.checkers.stats import wilson

# Student t quantiles t(0.975, df) for df = 1..30; beyond, a Cornish-Fisher expansion
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959963984540054

Figure = float | tuple[int, int] | None


def t975(df: int) -> float:
    """Return the 97.5 % quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError("t975 needs at least one degree of freedom")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Return the spread of per-run values (None: the run has none): count, mean, standard
    deviation, the mean's 95 % confidence interval (Student t), min, median, max, and the
    coefficient of variation (sd / mean)."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    n = len(v)
    out: dict[str, Any] = {"n": n, "mean": None, "sd": None, "ci95": None, "min": None,
                           "median": None, "max": None, "cv": None}
    if n == 0:
        return out
    mean = float(v.mean())
    out.update(mean=round(mean, 6), min=round(float(v.min()), 6),
               median=round(float(np.median(v)), 6), max=round(float(v.max()), 6))
    if n > 1:
        sd = float(v.std(ddof=1))
        half = t975(n - 1) * sd / math.sqrt(n)
        out.update(sd=round(sd, 6), ci95=[round(mean - half, 6), round(mean + half, 6)],
                   cv=round(sd / mean, 6) if mean else None)
    return out


def pooled(pairs: Sequence[tuple[int, int] | None]) -> dict[str, Any]:
    """Return (count, total) pairs pooled over runs: the sums, the fraction and its 95 %
    Wilson interval."""
    k = sum(p[0] for p in pairs if p is not None)
    n = sum(p[1] for p in pairs if p is not None)
    if n == 0:
        return {"count": k, "total": n, "p": None, "ci95": None}
    lo, hi = wilson(np.array([k]), np.array([n]))
    return {"count": int(k), "total": int(n), "p": round(k / n, 6),
            "ci95": [round(float(lo[0]), 6), round(float(hi[0]), 6)]}


def as_value(figure: Figure) -> float | None:
    """Return a figure as one number: a (count, total) pair as its fraction."""
    if isinstance(figure, tuple):
        return figure[0] / figure[1] if figure[1] else None
    return figure


def merge_figures(runs: Sequence[Mapping[str, Figure]]) -> dict[str, dict[str, Any]]:
    """Return, per figure name (in first-seen order), the spread of its per-run values and,
    for (count, total) figures, the pooled fraction."""
    names: dict[str, None] = {}
    for r in runs:
        names.update(dict.fromkeys(r))
    out = {}
    for name in names:
        figs = [r.get(name) for r in runs]
        entry = {"spread": spread([as_value(f) for f in figs])}
        if any(isinstance(f, tuple) for f in figs):
            entry["pooled"] = pooled([f if isinstance(f, tuple) else None for f in figs])
        out[name] = entry
    return out


def common_figures(results: Mapping[str, Any]) -> dict[str, Figure]:
    """Return the figures every probe has: operations (reads and writes; a transactional
    run counts transactions in its own figures instead), latency per operation kind (p50,
    p99, mean in ms) and, for a run with faults, availability."""
    ops = results.get("ops")
    out: dict[str, Figure] = {} if ops is None else {"reads": float(ops.get("reads", 0)),
                                                     "writes": float(ops.get("writes", 0))}
    for name, lat in sorted(results.get("latency", {}).items()):
        for stat in ("p50", "p99", "mean"):
            out[f"latency {name} {stat} (ms)"] = lat.get(f"{stat}_ms")
    if results.get("faults"):
        out["availability (client time)"] = results.get("availability", {}).get("overall")
    return out

"""The PBS prediction's own sampling error (``against.PbsPrediction.spread``), checked
against brute force: the spread that bootstrap resamples of one calibration give must match
how far the predictions of many independent calibrations of the same links scatter. The
verdict of ``model pbs --against`` widens its band by it (``checkers/visibility.judge``)."""

from __future__ import annotations

import numpy as np

from replicalab.checkers import visibility as V
from replicalab.experiments import against

BASE_MS = (0.5, 40.0, 60.0)  # one-way delay to each replica, dc3-like
JITTER_MS = 20.0
SAMPLES = 400  # round trips per series, as a calibration takes


def _calibration(rng: np.random.Generator) -> tuple[list[list[float]], list[list[float]]]:
    """Round trips to each replica (two independent jittered one-way legs), from the
    writer's coordinator and from the reader's."""
    def series(base: float) -> list[float]:
        legs = base + rng.uniform(-1, 1, (SAMPLES, 2)) * min(JITTER_MS, base)
        return (legs.sum(axis=1) + 0.3).tolist()
    return [series(b) for b in BASE_MS], [series(b) for b in BASE_MS[::-1]]


def test_the_bootstrap_spread_matches_the_scatter_of_independent_calibrations():
    rng = np.random.default_rng(2026)
    ts = np.arange(0.0, 90.0, 2.0)
    brute = np.array([against.pbs_prediction(*_calibration(rng), 1.0, None, trials=20_000,
                                             resamples=0)(ts) for _ in range(40)])
    truth_sd = brute.std(axis=0, ddof=1)
    mean = brute.mean(axis=0)
    got = against.pbs_prediction(*_calibration(rng), 1.0, None).spread(ts)
    moving = (mean > 0.1) & (mean < 0.9)  # the transition, where the scatter is
    assert moving.sum() >= 8, mean
    ratio = np.median(got[moving] / truth_sd[moving])
    # 30 resamples know a standard deviation to ~13 %, 40 calibrations to ~11 %
    assert 0.6 < ratio < 1.6, (ratio, got[moving], truth_sd[moving])
    assert np.all(got[mean >= 0.999] < 0.01)  # no scatter where every trial is visible


def test_a_prediction_judged_exact_when_it_has_no_spread():
    # half the writes visible by 5 ms, half stale until 15: at 11 ms, 50 of 100
    v = V.Visibility(tuple([3.0] * 50 + [15.0] * 50), tuple([5.0] * 50 + [20.0] * 50))
    exact = V.judge(lambda ts: np.full(len(ts), 0.5), v, [11.0]).points[0]
    assert (exact.tol_lo, exact.tol_hi) == (exact.lo, exact.hi) and exact.spread == 0.0

    class Spread:
        def __call__(self, ts):
            return np.full(len(ts), 0.5)

        def spread(self, ts):
            return np.full(len(ts), 0.05)

    wide = V.judge(Spread(), v, [11.0]).points[0]
    assert wide.tol_lo < exact.lo and wide.tol_hi > exact.hi
    # in quadrature: the half-width grows to sqrt(half^2 + (z sd)^2)
    m = wide.measured
    assert np.isclose(m - wide.tol_lo, np.hypot(m - wide.lo, wide.z * 0.05))

"""PBS against a measured curve: the whole t-visibility curve is sampled and judged, so a
prediction that is only right at the ends fails (the comparison has power)."""

from __future__ import annotations

import numpy as np
import pytest

from replicalab.models import pbs
from replicalab.workloads import pbs_real
from replicalab.workloads.pbs_real import CurveComparison, Measured, compare_curve

ONE_WAY_MS, JITTER_MS = 40.0, 20.0
TOLERANCE = 0.15


def _measured(tau_ms: np.ndarray, seed: int = 2, reads_per_write: int = 400,
              span_ms: float = 100.0) -> Measured:
    """Return the curve a reader sees when write k becomes visible ``tau_ms[k]`` after its
    ack: reads at uniform times in [0, span) after each ack, fresh from tau on, kept in
    BUCKET_MS buckets as ``pbs_real.measure`` keeps them."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, span_ms, (len(tau_ms), reads_per_write))
    fresh = t >= tau_ms[:, None]
    b = (t.ravel() // pbs_real.BUCKET_MS).astype(np.int64)
    total = np.bincount(b)
    good = np.bincount(b, weights=fresh.ravel().astype(float), minlength=len(total))
    t_sum = np.bincount(b, weights=t.ravel(), minlength=len(total))
    keep = np.flatnonzero(total)
    return Measured(1, 1, tuple(t_sum[keep] / total[keep]), tuple(good[keep] / total[keep]),
                    tuple(int(x) for x in total[keep]), "", int(total.sum()), len(tau_ms))


def _jittered_link(rng: np.random.Generator, n: int) -> np.ndarray:
    """One-way delays of a Toxiproxy latency toxic: integers uniform in [d - J, d + J)."""
    return ONE_WAY_MS + rng.integers(-JITTER_MS, JITTER_MS, n)


def _legs_from_round_trips(rng: np.random.Generator, samples: int = 200) -> pbs.Wars:
    """WARS legs calibrated as ``pbs_real.calibrate`` does: from round trips alone, the
    writer's coordinator at replica 0 and the reader's at replica 1 (its own replica ~0,
    the other the sum of two jittered one-way delays)."""
    local = np.abs(rng.normal(0.0, 0.05, samples))
    remote = _jittered_link(rng, samples) + _jittered_link(rng, samples)
    return pbs.wars_from_round_trips([local, remote], [remote, local])


@pytest.fixture(scope="module")
def measured() -> Measured:
    rng = np.random.default_rng(1)
    return _measured(_jittered_link(rng, 300).astype(float))


def test_prediction_from_round_trips_follows_the_whole_curve(measured):
    wars = _legs_from_round_trips(np.random.default_rng(5))
    got = compare_curve(lambda ts: pbs.t_visibility(wars, 1, 1, ts, 40_000, 1), measured,
                        TOLERANCE)
    assert got.has_power and got.transition_points >= pbs_real.MIN_TRANSITION_POINTS
    assert got.within_tolerance, (got.largest_gap, got.largest_gap_t_ms)
    inside = [x for x in got.points if x["measured"] is not None
              and pbs_real.LOW < float(x["measured"]) < pbs_real.HIGH]
    assert len(inside) >= 10
    # both ends are sampled too
    ts = [float(x["t_ms"]) for x in got.points]
    assert min(ts) == 0.0 and max(ts) >= 90.0


def test_a_step_at_the_one_way_delay_fails_the_comparison(measured):
    def step(ts):
        return (np.asarray(ts, dtype=float) >= ONE_WAY_MS).astype(float)

    got = compare_curve(step, measured, TOLERANCE)
    assert got.has_power
    assert not got.within_tolerance
    assert got.largest_gap is not None and got.largest_gap > 0.3
    assert abs(got.largest_gap_t_ms - ONE_WAY_MS) <= JITTER_MS


def test_a_step_shaped_curve_has_no_power():
    rng = np.random.default_rng(3)
    steep = ONE_WAY_MS + rng.uniform(-0.5, 0.5, 300)  # dc3's own 2 ms spread, or less
    got = compare_curve(lambda ts: (np.asarray(ts) >= ONE_WAY_MS).astype(float),
                        _measured(steep), TOLERANCE)
    assert got.transition_points < pbs_real.MIN_TRANSITION_POINTS
    assert not got.has_power


def test_half_round_trips_would_make_the_curve_too_steep():
    """The legs keep a one-way leg's variance (deviation / sqrt 2), not half of it."""
    rng = np.random.default_rng(7)
    wars = _legs_from_round_trips(rng, 2000)
    w = wars.w[1][0].sample(np.random.default_rng(1), (50_000,))
    one_way = _jittered_link(np.random.default_rng(2), 50_000)
    assert abs(w.std() - one_way.std()) < 0.08 * one_way.std()
    assert abs(w.mean() - one_way.mean()) < 1.0


def test_the_clients_hops_shift_the_prediction_earlier():
    wars = _legs_from_round_trips(np.random.default_rng(5))
    ts = np.array([30.0, 40.0, 50.0])
    plain = pbs.t_visibility(wars, 1, 1, ts, 20_000, 1)
    later = pbs.t_visibility_after_ack(wars, 1, 1, ts, 3.0, 20_000, 1)
    assert np.allclose(later, pbs.t_visibility(wars, 1, 1, ts + 3.0, 20_000, 1))
    assert (later >= plain).all() and (later > plain).any()


def test_comparison_as_json_carries_every_sampled_t(measured):
    wars = _legs_from_round_trips(np.random.default_rng(5))
    got = compare_curve(lambda ts: pbs.t_visibility(wars, 1, 1, ts, 20_000, 1), measured,
                        TOLERANCE)
    doc = got.to_json()
    assert isinstance(got, CurveComparison)
    assert len(doc["points"]) == len(got.points) >= 20
    assert {"t_ms", "predicted", "measured", "difference", "reads"} <= set(doc["points"][0])
    assert doc["largest_gap"] == got.largest_gap and doc["has_power"] is True


def test_model_pbs_refuses_a_jitter_it_cannot_use_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from replicalab.cli.main import app

    alone = CliRunner().invoke(app, ["model", "pbs", "--jitter", "5ms", "--out",
                                     str(tmp_path)])
    assert alone.exit_code == 2 and "--against" in alone.output
    # refused before a cluster starts: dc3's shortest one-way delay is 40 ms
    big = CliRunner().invoke(app, ["model", "pbs", "--against", "cassandra", "--jitter",
                                   "50ms", "--out", str(tmp_path)])
    assert big.exit_code == 2 and "at most the shortest one-way delay" in big.output
    assert "Traceback" not in big.output and not any(tmp_path.iterdir())

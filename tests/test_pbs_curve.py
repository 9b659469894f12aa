"""PBS against a measured curve (``checkers/visibility.py``): each write is one draw of when it
became visible, bracketed by its reads; the prediction must lie in the binomial band of the
writes visible by t at every sampled t. On curves generated from known arrival times the
truth passes, and a prediction shifted by 5 ms, a step at the one-way delay and a constant
1.0 fail; the band itself is checked against published Clopper-Pearson values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from replicalab.checkers import visibility as V
from replicalab.models import pbs
from replicalab.runtime.noise import NoiseFloor

ONE_WAY_MS, JITTER_MS = 40.0, 20.0


def _reads_of(tau_ms: np.ndarray, seed: int = 2, every_ms: float = 1.25,
              span_ms: float = 98.0) -> V.Visibility:
    """Return the visibility a reader measures when write k becomes visible ``tau_ms[k]``
    after its ack: reads every ``every_ms`` from a random phase, fresh from tau on."""
    rng = np.random.default_rng(seed)
    w, t, f = [], [], []
    for k, tau in enumerate(tau_ms):
        ts = rng.uniform(0.0, every_ms) + np.arange(0.0, span_ms, every_ms)
        w.append(np.full(len(ts), k))
        t.append(ts)
        f.append(ts >= tau)
    return V.visibility(np.concatenate(w), np.concatenate(t), np.concatenate(f))


def _jittered_link(rng: np.random.Generator, n: int) -> np.ndarray:
    """One-way delays of a Toxiproxy latency toxic: integers uniform in [d - J, d + J)."""
    return ONE_WAY_MS + rng.integers(-JITTER_MS, JITTER_MS, n).astype(float)


def _truth(t_ms) -> np.ndarray:
    """P(tau <= t) of the jittered link: the CDF of integers uniform in [20, 60)."""
    t = np.asarray(t_ms, dtype=float)
    return np.clip(np.floor(t - (ONE_WAY_MS - JITTER_MS)) + 1, 0, 2 * JITTER_MS) / (2 * JITTER_MS)


@pytest.fixture(scope="module")
def measured() -> V.Visibility:
    return _reads_of(_jittered_link(np.random.default_rng(1), 1000))


def test_the_truth_is_inside_the_band_everywhere_with_power(measured):
    got = V.judge(_truth, measured)
    assert got.within and got.has_power, got.line()
    assert got.transition_points >= V.MIN_TRANSITION_POINTS
    ts = [p.t_ms for p in got.judged]
    assert min(ts) == 0.0 and max(ts) == V.END_MS and len(ts) == len(V.sample_times())


@pytest.mark.parametrize(("name", "wrong"), [
    ("5 ms late", lambda t: _truth(np.asarray(t) - 5.0)),
    ("5 ms early", lambda t: _truth(np.asarray(t) + 5.0)),
    ("a step at the one-way delay", lambda t: (np.asarray(t) >= ONE_WAY_MS).astype(float)),
    ("a constant 1.0", lambda t: np.ones(len(t))),
])
def test_wrong_predictions_fall_outside_the_band(measured, name, wrong):
    got = V.judge(wrong, measured)
    assert got.has_power and not got.within, (name, got.line())


def test_a_step_shaped_curve_has_no_power():
    steep = ONE_WAY_MS + np.random.default_rng(3).uniform(-0.5, 0.5, 1000)  # dc3's own
    got = V.judge(lambda t: (np.asarray(t) >= ONE_WAY_MS).astype(float), _reads_of(steep))
    assert got.transition_points < V.MIN_TRANSITION_POINTS and not got.has_power


def test_clopper_pearson_matches_published_values():
    # exact 95 % intervals, the reference values of scipy.stats.binomtest(k, n).proportion_ci
    # (method="exact"), i.e. beta quantiles: 0 of 10 -> [0, 0.3085]; 5 of 10 ->
    # [0.1871, 0.8129]; 1 of 20 -> [0.00127, 0.2487]; 30 of 100 -> [0.2124, 0.3998]
    lo = V.clopper_pearson([0, 5, 1, 30], 10, 0.05, upper=False)
    hi = V.clopper_pearson([0, 5, 1, 30], 10, 0.05, upper=True)
    assert lo[0] == 0.0 and hi[0] == pytest.approx(0.3085, abs=1e-4)
    assert (lo[1], hi[1]) == (pytest.approx(0.1871, abs=1e-4), pytest.approx(0.8129, abs=1e-4))
    got = V.clopper_pearson([1], 20, 0.05, upper=False)[0], V.clopper_pearson(
        [1], 20, 0.05, upper=True)[0]
    assert got == (pytest.approx(0.00127, abs=1e-5), pytest.approx(0.2487, abs=1e-4))
    got = V.clopper_pearson([30], 100, 0.05, upper=False)[0], V.clopper_pearson(
        [30], 100, 0.05, upper=True)[0]
    assert got == (pytest.approx(0.2124, abs=1e-4), pytest.approx(0.3998, abs=1e-4))


def test_each_write_is_bracketed_by_its_reads():
    # write 0: stale at 1, 2, fresh at 3, 4; write 1: fresh at once; write 2: never fresh;
    # write 3: fresh at 1, stale at 2 (another replica answered), fresh at 5
    w = np.array([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3])
    t = np.array([1, 2, 3, 4, 1, 2, 1, 2, 1, 2, 5], dtype=float)
    f = np.array([0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 1], dtype=bool)
    v = V.visibility(w, t, f)
    assert v.last_stale_ms == (2.0, -math.inf, 2.0, 2.0)
    assert v.first_fresh_ms == (3.0, 1.0, math.inf, 5.0)
    assert (v.reads, v.out_of_order, v.writes) == (11, 1, 4)
    assert V.Visibility.from_json(v.to_json()) == v
    # at t = 2.5: write 1 visible; 0 and 3 undecided, and 2 (never read after 2 ms)
    p = V.judge(lambda ts: np.full(len(ts), 0.5), v, [2.5]).points[0]
    assert (p.visible, p.undecided, p.writes) == (1, 3, 4)


def test_half_round_trips_would_make_the_curve_too_steep():
    """The legs keep a one-way leg's variance (deviation / sqrt 2), not half of it."""
    rng = np.random.default_rng(7)
    local = np.abs(rng.normal(0.0, 0.05, 2000))
    remote = _jittered_link(rng, 2000) + _jittered_link(rng, 2000)
    wars = pbs.wars_from_round_trips([local, remote], [remote, local])
    w = wars.w[1][0].sample(np.random.default_rng(1), (50_000,))
    one_way = _jittered_link(np.random.default_rng(2), 50_000)
    assert abs(w.std() - one_way.std()) < 0.08 * one_way.std()
    assert abs(w.mean() - one_way.mean()) < 1.0


def test_the_clients_hops_shift_the_prediction_earlier():
    rng = np.random.default_rng(5)
    local, remote = np.abs(rng.normal(0, 0.05, 200)), 80.0 + rng.normal(0, 10, 200)
    wars = pbs.wars_from_round_trips([local, remote], [remote, local])
    ts = np.array([30.0, 40.0, 50.0])
    plain = pbs.t_visibility(wars, 1, 1, ts, 20_000, 1)
    later = pbs.t_visibility_after_ack(wars, 1, 1, ts, 3.0, 20_000, 1)
    assert np.allclose(later, pbs.t_visibility(wars, 1, 1, ts + 3.0, 20_000, 1))
    assert (later >= plain).all() and (later > plain).any()


def test_the_machines_added_delay_delays_each_write_by_one_draw():
    """``added`` puts one draw of the machine's delay on every write's threshold: a
    constant 5 ms moves the whole curve 5 ms later; none leaves it as it was."""
    rng = np.random.default_rng(5)
    local, remote = np.abs(rng.normal(0, 0.05, 200)), 80.0 + rng.normal(0, 10, 200)
    wars = pbs.wars_from_round_trips([local, remote], [remote, local])
    ts = np.array([30.0, 40.0, 50.0])
    plain = pbs.t_visibility_after_ack(wars, 1, 1, ts, 3.0, 20_000, 1)
    late = pbs.t_visibility_after_ack(wars, 1, 1, ts, 3.0, 20_000, 1,
                                      added=lambda g, n: np.full(n, 5.0))
    assert np.allclose(late, pbs.t_visibility_after_ack(wars, 1, 1, ts - 5.0, 3.0, 20_000, 1))
    assert np.allclose(plain, pbs.t_visibility_after_ack(wars, 1, 1, ts, 3.0, 20_000, 1,
                                                         added=lambda g, n: np.zeros(n)))


def test_the_noise_floors_draws_weigh_its_events_over_all_its_samples():
    """Of 1,000 samples (800 stalls, 200 echoes), 20 were events of 10 or 30 ms: a draw is
    one of them 2 % of the time and 0 otherwise, never anything else."""
    floor = NoiseFloor(0.5, 2.0, 30.0, 800, "toxiproxy", 0.1, 0.5, 2.0, 30.0, 200, 1.0, 1.0,
                       2, events=tuple((i, 10.0 if i % 2 else 30.0) for i in range(20)))
    d = floor.draw_added(np.random.default_rng(3), 200_000)
    assert set(np.unique(d)) == {0.0, 10.0, 30.0}
    assert abs(np.mean(d > 0) - 0.02) < 0.002
    assert abs(np.mean(d == 30.0) - np.mean(d == 10.0)) < 0.002
    none = NoiseFloor(0.5, 2.0, 3.0, 800, "loopback", 0.1, 0.5, 2.0, 3.0, 200, 1.0, 1.0, 2)
    assert not none.draw_added(np.random.default_rng(3), 1000).any()


def test_the_legs_leave_the_warm_up_out():
    """``warmup`` leaves the first round trips of every list out: slow first ones then
    change nothing; a warm-up longer than a list is refused."""
    rng = np.random.default_rng(5)
    local, remote = np.abs(rng.normal(0, 0.05, 200)), 80.0 + rng.normal(0, 10, 200)
    slow = [np.r_[np.full(10, 1.0), local], np.r_[np.full(10, 300.0), remote]]
    a = pbs.wars_from_round_trips(slow, slow[::-1], warmup=10)
    b = pbs.wars_from_round_trips([local, remote], [remote, local])
    ts = np.array([30.0, 40.0, 50.0])
    assert np.allclose(pbs.t_visibility(a, 1, 1, ts, 20_000, 1),
                       pbs.t_visibility(b, 1, 1, ts, 20_000, 1))
    with pytest.raises(ValueError, match="warmup"):
        pbs.wars_from_round_trips([local[:5]], [local[:5]], warmup=5)


def test_judgement_as_json_carries_every_sampled_t(measured):
    doc = V.judge(_truth, measured).to_json()
    assert len(doc["points"]) == len(V.sample_times())
    assert {"t_ms", "writes", "visible", "undecided", "band_lo", "band_hi", "predicted",
            "inside"} <= set(doc["points"][0])
    assert doc["within"] is True and doc["has_power"] is True


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


def _floor(p99_ms: float) -> NoiseFloor:
    """A noise floor whose client stalls reached ``p99_ms`` at p99 (nothing else added)."""
    return NoiseFloor(0.1, p99_ms, p99_ms, 800, "toxiproxy", 0.1, 0.1, 0.1, 0.2, 200, 1.0,
                      1.0, 2)


def test_a_miss_within_the_machines_noise_is_inconclusive_beyond_it_disagrees(measured):
    """The truth moved 3 ms later misses the band of 1,000 writes; a machine that added 4 ms
    at p99 could have moved it so ("inconclusive", with the move that fits), one that added
    1 ms could not ("disagrees"). A prediction that fits only once moved beyond the noise
    is never excused, and a miss is never excused without a floor."""
    from replicalab.experiments import against

    late = against.Shifted(_truth, 3.0)
    assert not V.judge(late, measured).within
    busy = against.judge_pbs(late, measured, _floor(4.0))
    assert busy.verdict == "inconclusive" and busy.fit_ms is not None
    assert -4.0 <= busy.fit_ms < 0  # moved back, earlier, by at most the noise
    line = against.verdict_line(busy.verdict, _floor(4.0), against.PBS_NOISE_TOLERANCE_MS,
                                fit_ms=busy.fit_ms)
    assert "earlier" in line and "4.0 ms the machine added at p99" in line
    assert against.judge_pbs(late, measured, _floor(1.0)).verdict == "disagrees"
    assert against.judge_pbs(late, measured, None).verdict == "disagrees"
    assert against.judge_pbs(_truth, measured, _floor(1.0)).verdict == "agrees"


def test_a_write_seen_early_because_its_ack_was_held_up_is_excused_only_by_a_measured_stall(
        measured):
    """A writer that sees its ack late counts t from after the commit: write 0 here looks
    visible 1 ms after its ack, where the links allow 20 ms, and the truth misses the band.
    A stall of 25 ms the floor measured while that write was in flight makes it undecided
    over the stall: "inconclusive", naming the write. Without that stall, or with the stall
    at another write, the miss stands ("disagrees"); and the allowance never makes a wrong
    prediction agree."""
    from replicalab.experiments import against

    acks = tuple(1_000_000_000 + k * 100_000_000 for k in range(measured.writes))
    early = V.Visibility((-math.inf, *measured.last_stale_ms[1:]),
                         (1.0, *measured.first_fresh_ms[1:]), measured.reads, 0, acks,
                         tuple([2.0] * measured.writes))
    assert not V.judge(_truth, early).within

    def floor(at_ns: int) -> NoiseFloor:
        return NoiseFloor(0.1, 1.0, 25.0, 800, "toxiproxy", 0.1, 0.1, 0.1, 0.2, 200, 1.0,
                          1.0, 2, events=((at_ns, 25.0),))

    held = against.judge_pbs(_truth, early, floor(acks[0] - 1_000_000))
    assert held.verdict == "inconclusive" and held.late_acks == 1 and held.fit_ms == 0.0
    assert "1 writes whose acks the machine held up" in against.verdict_line(
        held.verdict, floor(acks[0]), against.PBS_NOISE_TOLERANCE_MS, fit_ms=held.fit_ms,
        late_acks=held.late_acks)
    assert against.judge_pbs(_truth, early, floor(acks[500])).verdict == "disagrees"
    assert against.judge_pbs(_truth, early, _floor(1.0)).verdict == "disagrees"
    # a stall at every write: the wrong prediction still does not agree
    everywhere = NoiseFloor(0.1, 1.0, 25.0, 800, "toxiproxy", 0.1, 0.1, 0.1, 0.2, 200, 1.0,
                            1.0, 2, events=tuple((a - 1_000_000, 25.0) for a in acks))
    assert against.judge_pbs(against.Shifted(_truth, 10.0), early,
                             everywhere).verdict != "agrees"

"""The one-way legs PBS makes from measured round trips (``pbs.one_way_from_round_trips``):
the leg L whose sum with an independent copy, L + L', is the round trip. Expected answers
are the distributions' own: a round trip of two uniform legs on [20, 60] ms has legs that
never leave [20, 60]; of two normal legs N(40, 5), a normal leg with half the round trip's
variance; of two exponential legs 15 + Exp(10), legs never under 15 with an exponential's
quantiles; of a constant 80 ms, a constant 40 ms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from replicalab.models import pbs

Z = {1: -2.3263, 5: -1.6449, 25: -0.6745, 50: 0.0, 75: 0.6745, 95: 1.6449, 99: 2.3263}
"""Standard normal quantiles at these percentiles."""


def _uniform_round_trips(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(20.0, 60.0, n) + rng.uniform(20.0, 60.0, n)


def test_uniform_legs_stop_at_the_links_bounds():
    """Toxiproxy's jitter: each direction uniform in 40 +- 20 ms. A round trip spreads
    +-40 ms as a triangle; a leg keeping that shape (halved around the mean, deviations
    over sqrt 2) reaches 40 +- 28 ms, with about 4 % of its draws over 60 ms."""
    for n, seed, outside in ((20_000, 1, 0.005), (400, 2, 0.01)):  # 400: as calibrated
        leg = pbs.one_way_from_round_trips(_uniform_round_trips(n, seed))
        assert (leg > 60.0).mean() <= outside and (leg < 20.0).mean() <= outside, n
        assert abs(float(np.std(leg)) - 40.0 / math.sqrt(12)) < 0.06 * 40.0 / math.sqrt(12)
    # and it reaches them: a uniform's 0.5th and 99.5th percentiles are 20.2 and 59.8 ms
    # (400 round trips fall ~1.4 ms short of a leg's bound: their extremes are that far in)
    assert np.percentile(leg, 0.5) < 23.0 and np.percentile(leg, 99.5) > 57.0
    leg = pbs.one_way_from_round_trips(_uniform_round_trips(20_000, 1))
    assert np.percentile(leg, 0.5) < 21.0 and np.percentile(leg, 99.5) > 59.0


def test_normal_legs_are_normal_with_half_the_variance():
    rng = np.random.default_rng(3)
    rt = rng.normal(40.0, 5.0, 20_000) + rng.normal(40.0, 5.0, 20_000)
    leg = pbs.one_way_from_round_trips(rt)
    assert abs(float(np.mean(leg)) - 40.0) < 0.3
    assert abs(float(np.std(leg)) - 5.0) < 0.25  # sqrt(var(RT) / 2) = 5
    for q, z in Z.items():
        assert abs(float(np.percentile(leg, q)) - (40.0 + 5.0 * z)) < 0.6, q


def test_skewed_legs_keep_their_own_shape():
    """A round trip of two 15 + Exp(10) legs is 30 + Gamma(2, 10): its leg is exponential
    again, never under 15 ms, not the gamma's shape shrunk."""
    rng = np.random.default_rng(4)
    rt = 30.0 + rng.exponential(10.0, 20_000) + rng.exponential(10.0, 20_000)
    leg = pbs.one_way_from_round_trips(rt)
    assert (leg < 14.5).mean() <= 0.005
    for q in (10, 25, 50, 75, 90):
        assert abs(float(np.percentile(leg, q)) - (15.0 - 10.0 * math.log(1 - q / 100))) \
            < 1.0, q


def test_a_constant_round_trip_gives_a_constant_leg_of_half():
    leg = pbs.one_way_from_round_trips(np.full(400, 80.0))
    assert np.all(leg == 40.0)
    wars = pbs.wars_from_round_trips([[80.0] * 10, [0.0] * 10], [[0.0] * 10, [80.0] * 10])
    assert set(wars.w[0][0].samples) == {40.0} and set(wars.r[0][0].samples) == {0.0}


def test_the_legs_add_up_to_the_round_trips():
    """Two independent draws of the leg are distributed as the round trips they came from
    (two-sample Kolmogorov-Smirnov distance), whatever the legs' shape."""
    rt = _uniform_round_trips(4000, 5)
    leg = pbs.one_way_from_round_trips(rt)
    rng = np.random.default_rng(6)
    again = np.sort(rng.choice(leg, 20_000) + rng.choice(leg, 20_000))
    grid = np.linspace(40.0, 120.0, 161)
    ks = np.abs(np.searchsorted(np.sort(rt), grid) / len(rt)
                - np.searchsorted(again, grid) / len(again)).max()
    assert ks < 0.03, ks


def test_a_calibration_round_trip_that_times_out_is_taken_again_not_fatal(monkeypatch):
    """Beside a CPU hog one write of 2,400 outlasted the client's timeout and ended the
    command: a timed-out round trip is taken again (it measured the machine), up to 5 % of
    the samples; a store that keeps failing still ends the calibration."""
    import asyncio

    from replicalab.stores.base import Unavailable
    from replicalab.workloads import pbs_real

    class Flaky:
        def __init__(self, fail_at: set[int]) -> None:
            self.calls, self.fail_at = 0, fail_at

        async def connect(self):
            return self

        async def close(self) -> None:
            pass

        async def write(self, values) -> None:
            self.calls += 1
            if self.calls in self.fail_at:
                raise Unavailable("n0: OperationTimedOut")

    once = Flaky({5})
    monkeypatch.setattr(pbs_real, "open_store", lambda url, seed: once)
    got = asyncio.run(pbs_real._round_trips("cassandra://x", "write", 100))
    assert len(got) == 100 and once.calls == 103  # two warm-ups, one taken again
    always = Flaky(set(range(1, 1000)))
    monkeypatch.setattr(pbs_real, "open_store", lambda url, seed: always)
    with pytest.raises(Unavailable):
        asyncio.run(pbs_real._round_trips("cassandra://x", "write", 100))
    assert always.calls == 6  # 5 % of 100 taken again, then the sixth failure ends it

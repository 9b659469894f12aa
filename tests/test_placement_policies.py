"""Each migration policy's rule on hand-made access sequences, and the load-balancing filter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.placement.matrix import RegionMatrix, nearest_order, region_matrix
from replicalab.placement.policies import (
    Requests,
    capacity_objects,
    l_scores,
    make_policy,
    oracle_plan,
    parse_spec,
)

# A line of 4 regions 0-1-2-3, 10 ms per hop, 1 ms inside a region.
LINE = RegionMatrix.of([[1 if a == b else 10 * abs(a - b) for b in range(4)] for a in range(4)])

# The shape of seed 002's L-score example: Australia makes the most accesses (40 %), Japan 24 %,
# three far regions 15, 13 and 8 %; RTTs to Japan 128, 165, 318, 165 ms as in the seed's sum
# L_jp = 0.4*128 + 0.15*165 + 0.13*318 + 0.08*165 = 130.49. Order: AU, JP, A, B, C.
AU, JP = 0, 1
SEED_EXAMPLE = RegionMatrix.of([
    [1, 128, 300, 320, 300],
    [128, 1, 165, 318, 165],
    [300, 165, 1, 200, 150],
    [330, 318, 200, 1, 250],
    [300, 165, 150, 250, 1],
])
SEED_WEIGHTS = [0.40, 0.24, 0.15, 0.13, 0.08]


def feed(policy, accesses, move=True):
    """Feed (obj, region, t_ms) accesses; apply every migration; return the targets."""
    out = []
    for obj, region, t in accesses:
        target = policy.hit(obj, region, t)
        out.append(target)
        if move and target is not None:
            policy.moved(obj, target)
    return out


def test_seed_l_score_example():
    scores = l_scores(SEED_WEIGHTS, SEED_EXAMPLE.rtt_ms)
    # the seed's own sum, plus Japan's own 24 % at its 1 ms intra-region RTT
    assert scores[JP] == pytest.approx(130.49 + 0.24 * 1)
    assert int(np.argmin(scores)) == JP
    assert max(range(5), key=lambda r: SEED_WEIGHTS[r]) == AU  # Australia has most accesses


def test_cog_periodic_picks_japan_majority_picks_australia():
    counts = [40, 24, 15, 13, 8]
    accesses = [(0, r, 5.0) for r, c in enumerate(counts) for _ in range(c)]
    cog = make_policy("cog", SEED_EXAMPLE, [2], window_ms=1000)
    maj = make_policy("majority", SEED_EXAMPLE, [2], window_ms=1000)
    # nothing moves inside the period; the next period's first access decides
    assert set(feed(cog, accesses)) == {None} and set(feed(maj, accesses)) == {None}
    assert cog.hit(0, 3, 1500.0) == JP
    assert maj.hit(0, 3, 1500.0) == AU
    # ranked: the filter's next best after Japan follows the L-scores
    assert list(cog.ranked(0, JP))[:2] == [JP, AU]


def test_consecutive_needs_n_in_a_row():
    p = make_policy("consecutive", LINE, [0], n=3)
    assert feed(p, [(0, 2, 0), (0, 2, 1), (0, 1, 2), (0, 2, 3), (0, 2, 4)]) == [None] * 5
    assert feed(p, [(0, 2, 5)]) == [2]
    assert feed(p, [(0, 2, 6), (0, 3, 7), (0, 3, 8), (0, 3, 9)]) == [None, None, None, 3]


def test_consecutive_ping_pongs_on_alternating_runs():
    p = make_policy("consecutive", LINE, [0], n=2)
    seq = [(0, r, float(i)) for i, r in enumerate([1, 1, 2, 2, 1, 1, 2, 2])]
    assert feed(p, seq) == [None, 1, None, 2, None, 1, None, 2]


def test_majority_keeps_owner_on_a_tie_and_decides_per_period():
    p = make_policy("majority", LINE, [0], window_ms=100)
    feed(p, [(0, 0, 10), (0, 2, 20), (0, 2, 30), (0, 0, 40)])
    assert p.hit(0, 3, 150) is None  # 2 against 2: the owner stays
    feed(p, [(0, 3, 160), (0, 3, 170)])  # period 1: region 3 made 3 accesses
    assert p.hit(0, 1, 450) == 3  # decided at the first access of a later period


def test_ema_moves_one_id_at_a_time_towards_the_rounded_average():
    p = make_policy("ema", LINE, [0], alpha=0.5)
    # e: 0 -> 1.5 -> 2.25 -> 2.625: rounds to 2, 2, 3 -> one hop per access
    assert feed(p, [(0, 3, 0), (0, 3, 1), (0, 3, 2)]) == [1, 2, 3]
    q = make_policy("ema", LINE, [1], alpha=0.2)
    assert q.hit(0, 3, 0) is None  # e = 1.4 rounds to the owner 1
    assert q.hit(0, 3, 1) == 2  # e = 1.72 rounds to 2


def test_ema_is_fooled_by_ids_that_do_not_follow_geography():
    # regions 0 and 2 are next to each other, 1 is far away: EMA of an object shared by
    # 0 and 2 settles on id 1, the worst place; CoG sits in 0 or 2.
    m = RegionMatrix.of([[1, 200, 5], [200, 1, 200], [5, 200, 1]])
    seq = [(0, r, float(i)) for i, r in enumerate([0, 2] * 50)]
    ema = make_policy("ema", m, [0], alpha=0.1)
    feed(ema, seq)
    assert ema.owner[0] == 1
    cog = make_policy("cog", m, [0], mode="continuous", alpha=0.1)
    feed(cog, seq)
    assert cog.owner[0] in (0, 2)


def test_cog_continuous_moves_when_the_weights_shift():
    p = make_policy("cog", LINE, [0], mode="continuous", alpha=0.5)
    # weights start all on the owner 0: L = row 0 = [1, 10, 20, 30]; one access from 3 at
    # alpha 0.5 makes L = [15.5, 15, 15, 15.5]: regions 1 and 2 tie, the lower id wins
    assert p.hit(0, 3, 0.0) == 1
    p.moved(0, 1)
    assert p.scores[0].tolist() == [15.5, 15, 15, 15.5]
    assert p.hit(0, 3, 1.0) == 3  # L = [22.75, 17.5, 12.5, 8.25]
def test_static_never_moves():
    p = make_policy("static", LINE, [0, 1])
    assert feed(p, [(0, 3, float(i)) for i in range(20)]) == [None] * 20


def test_oracle_moves_ahead_of_each_period():
    reqs = Requests(np.array([0, 0, 0, 0, 0, 0]), np.array([3, 3, 3, 1, 1, 1]),
                    np.array([0.0, 10, 20, 110, 120, 130]))
    plan = oracle_plan(reqs, LINE.rtt_ms, 100.0)
    # after the first access: to 3 for the rest of period 0; after its last: to 1
    assert plan.tolist() == [3, -1, 1, -1, -1, -1]
    p = make_policy("oracle", LINE, [0], requests=reqs, window_ms=100)
    assert feed(p, zip(reqs.obj.tolist(), reqs.region.tolist(), reqs.t_ms.tolist(),
                       strict=True)) == [3, None, 1, None, None, None]


def test_filter_sends_to_the_next_best_region_with_room():
    # 4 objects, capacity 0.5 -> 2 per region; region 3 already holds 2
    owner = [3, 3, 0, 0]
    p = make_policy("consecutive", LINE, owner, n=1, balance=0.5)
    assert p.hit(2, 3, 0.0) == 2  # 3 is full: its nearest with room is 2
    p.moved(2, 2)
    assert p.hit(3, 3, 1.0) == 2  # 2 has room for one more
    p.moved(3, 2)
    assert p.hit(2, 3, 2.0) is None  # owner 2 comes before any region with room
    assert p.params == {"n": 1, "balance": 0.5}


def test_bad_names_and_parameters_are_one_line_value_errors():
    for name, params, word in [
        ("nearest", {}, "unknown policy"),
        ("consecutive", {"window_ms": 5}, "no parameter"),
        ("consecutive", {"n": 0}, "at least 1"),
        ("majority", {"window_ms": -1}, "window_ms"),
        ("ema", {"alpha": 2}, "alpha"),
        ("cog", {"mode": "sometimes"}, "mode"),
        ("cog", {"alpha": 0.1}, "continuous"),
        ("cog", {"balance": 0}, "balance"),
        ("cog", {"balance": 1.5}, "balance"),
        ("oracle", {}, "requests"),
        ("majority", {"window_ms": "soon"}, "valid float"),
    ]:
        with pytest.raises(ValueError, match=word) as e:
            make_policy(name, LINE, [0, 1, 2, 3], **params)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="at least"):
        capacity_objects(0.2, 10, 4)  # 4 regions x 2 objects cannot hold 10


def test_parse_spec():
    assert parse_spec("cog:mode=continuous:alpha=0.05") == (
        "cog", {"mode": "continuous", "alpha": "0.05"})
    assert parse_spec(" static ") == ("static", {})
    with pytest.raises(ValueError, match="key=value"):
        parse_spec("cog:0.25")
    with pytest.raises(ValueError, match="unknown policy"):
        parse_spec("gravity")


def test_region_matrix_subsets_and_missing_regions():
    m = region_matrix("aws15")
    assert m.size == 15 and m.rtt_ms[0, 0] == 4 and m.rtt_ms[0, 1] == 13
    sub = region_matrix("aws15:eu-west-1,us-east-1")
    assert sub.regions == ("eu-west-1", "us-east-1") and sub.rtt_ms[0, 1] == 69
    with pytest.raises(ValueError, match="not in the aws15 matrix"):
        region_matrix("aws15:us-east-1,mars-north-1")
    assert region_matrix("aws5").rtt_ms[0, 0] == pytest.approx(0.427)  # intra-region RTT
    assert nearest_order(LINE.rtt_ms)[2].tolist() == [2, 1, 3, 0]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_filter_never_lets_a_region_exceed_its_capacity(data):
    n_regions = data.draw(st.integers(2, 5))
    n_objects = data.draw(st.integers(1, 12))
    # the smallest share that still lets the regions hold every object, up to all of them
    share = data.draw(st.floats(-(-n_objects // n_regions) / n_objects, 1.0))
    cap = capacity_objects(share, n_objects, n_regions)
    # a start within capacity: fill regions in a random order up to the cap
    slots = [r for r in range(n_regions) for _ in range(cap)]
    owner = data.draw(st.permutations(slots))[:n_objects]
    rtt = data.draw(st.lists(st.lists(st.integers(1, 300), min_size=n_regions,
                                      max_size=n_regions), min_size=n_regions,
                             max_size=n_regions))
    m = RegionMatrix.of(rtt)
    name, params = data.draw(st.sampled_from([
        ("consecutive", {"n": 1}), ("consecutive", {"n": 2}), ("majority", {"window_ms": 3}),
        ("ema", {"alpha": 0.5}), ("cog", {"window_ms": 3}),
        ("cog", {"mode": "continuous", "alpha": 0.5})]))
    p = make_policy(name, m, owner, balance=share, **params)
    seq = data.draw(st.lists(st.tuples(st.integers(0, n_objects - 1),
                                       st.integers(0, n_regions - 1)), max_size=80))
    owners = list(owner)
    for i, (obj, region) in enumerate(seq):
        target = p.hit(obj, region, float(i))
        if target is not None:
            assert target != owners[obj]
            owners[obj] = target
            p.moved(obj, target)
        assert max(np.bincount(owners, minlength=n_regions)) <= cap

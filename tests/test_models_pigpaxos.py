"""PigPaxos: analytic model, Paxos baseline and discrete-event twin (seed 002)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.models import pigpaxos as pp
from replicalab.models.base import from_dict
from replicalab.models.twins import pigpaxos as twin

# Parameters of every golden check below unless stated: LAN RTT 0.427 ms (sd 0.0476),
# m_s = m_d = 0.01 ms (sd 0.002, seed 002 part 1), one pipeline, 3 relay groups with one
# relay each, relays wait for all their members, inter-arrival sd = 2 x mean.
BASE = pp.PigPaxosParams()


@pytest.mark.golden
def test_pigpaxos_25_nodes_exceeds_3x_paxos():
    # Seed/paper: "more than 3 folds improved throughput over Paxos" at 25 nodes.
    p = pp.PigPaxosParams(n=25)
    pig = pp.max_throughput_rps(p)
    pax = pp.paxos_max_throughput_rps(25)
    assert pax == pytest.approx(1000 / (25 * 0.01 + 2 * 0.01))  # R_max = n_p/(N m_d + 2 m_s)
    assert pig == pytest.approx(1000 / (4 * 0.01 + 2 * 0.01))  # leader: (1 + r) m_d + 2 m_s
    assert pp.bottleneck(p) == "leader"
    assert pig > 3 * pax


@pytest.mark.golden
@pytest.mark.parametrize("mu_ms, mu_md", [(0.03, 0.04), (0.002, 0.025)])
def test_3x_holds_for_other_message_costs(mu_ms, mu_md):
    # The seed's Paxi costs are unpublished; the claim must not hinge on our choice
    # (these are the defaults of models/paxos_lan.py and models/paxos_wan.py).
    p = pp.PigPaxosParams(n=25, mu_ms_ms=mu_ms, mu_md_ms=mu_md)
    assert pp.max_throughput_rps(p) > 3 * pp.paxos_max_throughput_rps(25, mu_ms, mu_md)


def test_gain_is_on_deserialization_only():
    # Both leaders serialize twice per round; PigPaxos only cuts the N - r deserializations.
    # So when serializing dominates (m_s = 10 m_d) the 25-node gain falls below 3x.
    p = pp.PigPaxosParams(n=25, mu_ms_ms=0.05, mu_md_ms=0.005)
    ratio = pp.max_throughput_rps(p) / pp.paxos_max_throughput_rps(25, 0.05, 0.005)
    assert ratio == pytest.approx((25 * 0.005 + 0.1) / (4 * 0.005 + 0.1))
    assert 1.5 < ratio < 3


@pytest.mark.golden
def test_advantage_grows_with_cluster_size():
    rows = pp.scaling_table(list(range(5, 100, 2)))
    ratios = [r["ratio"] for r in rows]
    assert all(b > a for a, b in itertools.pairwise(ratios))
    assert ratios[0] < 1.5 and ratios[-1] > 10
    # Paxos falls like 1/N; PigPaxos is held by the leader's (1 + r) messages, flat in n.
    assert rows[-1]["paxos_rps"] < rows[0]["paxos_rps"] / 5
    assert rows[-1]["pigpaxos_rps"] == pytest.approx(rows[0]["pigpaxos_rps"])


@pytest.mark.golden
@pytest.mark.parametrize("p", [pp.PigPaxosParams(n=9), pp.PigPaxosParams(n=25),
                               pp.PigPaxosParams(n=49),
                               pp.PigPaxosParams(n=15, regions="aws5")],
                         ids=["n9", "n25", "n49", "aws5-n15"])
def test_model_matches_twin_below_80_percent(p, request):
    """The model, computed now, against the twin's recorded curve (see _recorded_twin)."""
    cap = pp.max_throughput_rps(p)
    loads = [0.25 * cap, 0.5 * cap, 0.7 * cap]
    model = pp.curve(p, loads, seed=0)
    sim = _recorded_twin(request.node.callspec.id, p, loads, 6000)
    for m, s in zip(model.points, sim["points"], strict=True):
        assert s["utilisation"] < 0.8 and not s["saturated"]
        assert m.latency_ms == pytest.approx(s["latency_ms"], rel=0.10), m.offered_rps
        assert m.utilisation == pytest.approx(s["utilisation"], rel=0.05)


# The twin's curves behind the golden checks (3 loads of 6,000 rounds, up to 49 nodes: 3-23 s
# each) are recorded by `python benchmarks/pigpaxos_twins.py`; tied to this code by re-running
# each twin's pilot and first load, which must equal the file's.
RECORDED = Path(__file__).resolve().parent.parent / "docs" / "data" / \
    "pigpaxos-twins-2026-11-29.json"


def _recorded_twin(name: str, p: pp.PigPaxosParams, loads: list[float], rounds: int
                   ) -> dict:
    """Return the recorded twin curve of case ``name`` (``Curve.to_json()``), after checking
    it is this twin's on these parameters: the same loads, and its pilot trial and first
    point re-run here equal the file's (a load's run is seeded by its position)."""
    rec = json.loads(RECORDED.read_text())["cases"][name]
    assert rec["loads_rps"] == loads and rec["rounds"] == rounds and rec["seed"] == 3
    first = twin.simulate(p, loads[:1], seed=3, rounds=rounds, capacity="estimate").to_json()
    assert first["points"] == rec["twin"]["points"][:1]
    assert first["extra"]["capacity"] == rec["twin"]["extra"]["capacity"]
    return rec["twin"]


def test_latency_grows_with_load_and_size():
    loads = [2000.0, 8000.0, 14000.0]
    small = pp.curve(pp.PigPaxosParams(n=9), loads)
    big = pp.curve(pp.PigPaxosParams(n=99), loads)
    for c in (small, big):
        lat = [pt.latency_ms for pt in c.points]
        assert lat == sorted(lat)
    # Bigger groups: longer reply bursts at the relays.
    assert all(b.latency_ms > s.latency_ms for s, b in zip(small.points, big.points,
                                                           strict=True))


def test_wan_one_relay_group_per_region_one_message_per_region():
    for n in (5, 15, 25):
        p = pp.PigPaxosParams(n=n, regions="aws5")
        lay = pp.layout(p)
        remote = [g for g in lay.groups if g[0] != lay.leader_region]
        assert len(remote) == 4
        sim = twin.simulate(p, [2000.0], seed=1, rounds=300, capacity="estimate")
        x = sim.points[0].extra
        # Leader -> region: one message per remote region per round, whatever n is;
        # Paxos would send one per remote node.
        assert x["cross_region_out_per_round"] == 4
        assert x["cross_region_in_per_round"] == 4
        assert x["cross_region_msgs_per_round"] == 8
        paxos_out = sum(size for region, size in lay.groups if region != lay.leader_region)
        assert paxos_out == n - math.ceil(n / 5)
        if n > 5:
            assert paxos_out > 4


def test_wan_latency_is_the_quorum_region_rtt():
    # aws5, 15 nodes, leader in VA: majority 8 = leader + VA (2) + CA (3) + IR (3): VA-IR 80 ms.
    p = pp.PigPaxosParams(n=15, regions="aws5")
    c = pp.curve(p, [1000.0])
    assert 80.5 < c.points[0].latency_ms < 82.5


def test_relay_wait_fraction_tolerates_stragglers():
    loads = [3000.0]
    full = pp.curve(pp.PigPaxosParams(n=49), loads).points[0].latency_ms
    half = pp.curve(pp.PigPaxosParams(n=49, relay_wait_fraction=0.5), loads).points[0]
    count = pp.curve(pp.PigPaxosParams(n=49, relay_wait=8), loads).points[0]
    assert half.latency_ms < full
    assert count.latency_ms == pytest.approx(half.latency_ms, rel=1e-9)  # ceil(0.5*15) = 8
    assert pp.layout(pp.PigPaxosParams(n=49, relay_wait=8)).units[0].wait == 8


def test_relays_per_group_split_the_group():
    p = pp.PigPaxosParams(n=25, relays_per_group=2)
    lay = pp.layout(p)
    assert len(lay.units) == 6
    assert sorted(u.members for u in lay.units) == [3, 3, 3, 3, 3, 3]
    assert pp.leader_work_ms(p) == pytest.approx(7 * 0.01 + 2 * 0.01)


@pytest.mark.parametrize("kwargs, word", [
    ({"n": 25, "relay_groups": 25}, "relay_groups"),
    ({"n": 25, "relay_groups": 0}, "relay_groups"),
    ({"relays_per_group": 0}, "relays_per_group"),
    ({"relays_per_group": 9}, "relays_per_group"),
    ({"mu_ms_ms": -0.01}, "mu_ms_ms"),
    ({"mu_md_ms": 0.0}, "mu_md_ms"),
    ({"sigma_md_ms": -1.0}, "sigma_md_ms"),
    ({"mu_l_ms": -0.4}, "mu_l_ms"),
    ({"sigma_r_factor": -2.0}, "sigma_r_factor"),
    ({"pipelines": 0}, "pipelines"),
    ({"relay_wait": 8}, "relay_wait"),
    ({"relay_wait": -1}, "relay_wait"),
    ({"relay_wait_fraction": 1.5}, "relay_wait_fraction"),
    ({"relay_wait": 2, "relay_wait_fraction": 0.5}, "relay_wait"),
    ({"relay_wait": 0}, "majority"),
    ({"n": 2}, "n=2"),
    ({"n": 4, "regions": "aws5"}, "n=4"),
    ({"n": 15, "regions": "aws5", "relay_groups": 3}, "relay_groups"),
    ({"regions": "mars"}, "mars"),
    ({"n": 15, "regions": "aws5", "leader": "XX"}, "XX"),
    ({"leader": "VA"}, "leader"),
])
def test_bad_input_one_line_error(kwargs, word):
    with pytest.raises(ValueError) as e:
        pp.PigPaxosParams(**kwargs)
    msg = str(e.value)
    assert "\n" not in msg and word in msg


def test_bad_loads_and_unknown_keys():
    with pytest.raises(ValueError, match="requests/s"):
        pp.curve(BASE, [-5.0])
    with pytest.raises(ValueError, match="requests/s"):
        twin.simulate(BASE, [float("nan")], rounds=20)
    with pytest.raises(ValueError, match="unknown parameter 'groups'"):
        from_dict(pp.PigPaxosParams, {"groups": 3}, "pigpaxos")
    p = from_dict(pp.PigPaxosParams, {"n": 15, "regions": "aws5"}, "pigpaxos")
    assert p.wan and p.regions.name == "aws5"


def test_saturated_points_never_nan():
    cap = pp.max_throughput_rps(BASE)
    loads = [0.5 * cap, cap, 3 * cap]
    c = pp.curve(BASE, loads)
    assert not c.points[0].saturated and c.points[0].latency_ms > 0
    for pt in c.points[1:]:
        assert pt.saturated and pt.latency_ms is None and pt.utilisation >= 1
    s = twin.simulate(BASE, [1.5 * cap], rounds=400, capacity="estimate")
    assert s.points[0].saturated and s.points[0].latency_ms is None
    text = json.dumps(c.to_json(), allow_nan=False) + json.dumps(s.to_json(), allow_nan=False)
    assert "NaN" not in text
    base = pp.paxos_curve(25, [1000.0, 10_000.0])
    assert not base.points[0].saturated and base.points[1].saturated


def test_same_seed_same_curve():
    loads = [4000.0, 9000.0]
    assert pp.curve(BASE, loads, seed=7) == pp.curve(BASE, loads, seed=7)
    a = twin.simulate(BASE, loads, seed=7, rounds=500, capacity="estimate")
    assert a == twin.simulate(BASE, loads, seed=7, rounds=500, capacity="estimate")
    assert a != twin.simulate(BASE, loads, seed=8, rounds=500, capacity="estimate")


def test_paxos_baseline_latency_matches_seed_formula_at_low_load():
    # L = 2 m_s + 2 m_d + r_(q-1) + w + mu_l; at tiny load w ~ 0 and r_(q-1) ~ mu_l + m_s + m_d
    c = pp.paxos_curve(5, [1.0])
    assert c.points[0].latency_ms == pytest.approx(3 * 0.02 + 2 * 0.427, abs=0.02)
    assert c.max_throughput_rps == pytest.approx(1000 / 0.07)


def test_validation_grid():
    grid = pp.validation_grid()
    labels = [label for label, _, _ in grid]
    assert len(set(labels)) == len(grid) == 5
    assert any(p.wan for _, p, _ in grid)
    assert any(p.failed_group is not None for _, p, _ in grid)  # the seed's failure
    for _, p, loads in grid:
        assert max(loads) < pp.max_throughput_rps(p)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(3, 120), r=st.integers(1, 12), k=st.integers(1, 3),
       wan=st.booleans())
def test_work_is_conserved_and_every_follower_is_in_one_unit(n, r, k, wan):
    kw = {"regions": "aws5"} if wan else {"relay_groups": min(r, n - 1)}
    try:
        p = pp.PigPaxosParams(n=max(n, 5) if wan else n, relays_per_group=k, **kw)
    except ValueError:
        return  # k larger than the smallest group
    lay = pp.layout(p)
    assert sum(1 + u.members for u in lay.units) == p.n - 1
    assert sum(size for _, size in lay.groups) == p.n - 1
    # Every message of a round is serialized once by its sender and deserialized once by its
    # receiver; the nodes' expected work must add up to exactly that.
    d, s = p.mu_md_ms, p.mu_ms_ms
    units = len(lay.units)
    forwards = sum(1 for u in lay.units if u.members)
    members = sum(u.members for u in lay.units)
    total = (d + s  # client request in, broadcast out
             + units * d + forwards * s  # relays: leader's message in, forward out
             + members * (d + s)  # members: forward in, vote out
             + members * d + units * s  # relays: votes in, aggregate out
             + units * d + s)  # leader: aggregates in, client reply out
    nodes = pp.leader_work_ms(p) + sum(
        size * w for (_, size), w in zip(lay.groups, pp.follower_work_ms(p), strict=True))
    assert nodes == pytest.approx(total)
    assert pp.max_throughput_rps(p) == pytest.approx(
        1000 * p.pipelines / max(pp.leader_work_ms(p), *pp.follower_work_ms(p)))


def test_replace_keeps_validation():
    with pytest.raises(ValueError):
        dataclasses.replace(BASE, n=3, relay_groups=3)


# -- a failed relay group (seed 002: "one relay group experiencing a failure on every
#    operation for 10 seconds without much detriment to overall performance") -------------

SEED_FAILURE = pp.PigPaxosParams(n=25, failed_group=0)  # a whole group of 8 down
ONE_GROUP = pp.PigPaxosParams(n=25, relay_groups=1)  # 24 followers, one relay per round


@pytest.mark.golden
@pytest.mark.parametrize("p", [SEED_FAILURE,
                               dataclasses.replace(ONE_GROUP, failed_group=0, failed_nodes=1),
                               dataclasses.replace(ONE_GROUP, failed_group=0, failed_nodes=1,
                                                   relay_wait_fraction=0.5)],
                         ids=["group-down", "one-group-waits-all", "one-group-waits-half"])
def test_model_matches_twin_with_a_failed_relay_group(p, request):
    """Within the 10 % the healthy models are held to, below 80 % utilisation; both the
    capacity and the latency are the twin's own measurements (recorded, see
    _recorded_twin)."""
    cap = pp.max_throughput_rps(p)
    loads = [0.1 * cap, 0.4 * cap]
    model = pp.curve(p, loads, seed=0)
    sim = _recorded_twin(request.node.callspec.id, p, loads, 4000)
    assert sim["max_throughput_rps"] == pytest.approx(cap, rel=0.05)
    for m, s in zip(model.points, sim["points"], strict=True):
        assert s["utilisation"] < 0.8 and not s["saturated"]
        assert m.latency_ms == pytest.approx(s["latency_ms"], rel=0.10), m.offered_rps


@pytest.mark.golden
def test_the_seeds_failed_group_is_masked_by_the_other_two():
    """Three groups of 8: losing one leaves 16 follower votes for the 12 a majority needs,
    so no round waits for a time-out: the latency barely moves (seed: "without much
    detriment") and the leader, with one aggregate less per round, gets faster."""
    healthy = pp.PigPaxosParams(n=25)
    for load in (2000.0, 8000.0):
        ok = pp.curve(healthy, [load]).points[0].latency_ms
        failed = pp.curve(SEED_FAILURE, [load]).points[0].latency_ms
        assert abs(failed - ok) / ok < 0.05, (load, ok, failed)
    # the leader deserializes 3 aggregates a round instead of 4: (3 m_d + 2 m_s)
    assert pp.max_throughput_rps(SEED_FAILURE) == pytest.approx(1000 / (3 * 0.01 + 2 * 0.01))
    assert pp.failure_counts(SEED_FAILURE) == (0.0, 0.0)  # never heard of, never re-sent


def test_rerouting_costs_one_relay_timeout_when_the_first_relay_is_down():
    """One group of 24, one node down, relays waiting for half their members (no member
    time-out): a round pays the leader's relay time-out exactly when its first relay is the
    down node, with probability 1/24; the closed form, against the twin's own runs."""
    half = dataclasses.replace(ONE_GROUP, relay_wait_fraction=0.5)
    failed = dataclasses.replace(half, failed_group=0, failed_nodes=1, relay_timeout_ms=10.0)
    a = twin.simulate(half, [1000.0], seed=5, rounds=8000, capacity="estimate").points[0]
    b = twin.simulate(failed, [1000.0], seed=5, rounds=8000, capacity="estimate").points[0]
    expected = 10.0 / 24
    assert b.latency_ms - a.latency_ms == pytest.approx(expected, rel=0.15)


def test_a_down_member_costs_the_member_timeout_when_the_relay_waits_for_all():
    """Seed: "Crash of a non-relay node causes timeout which may add to the operation
    latency"; waiting for half the members instead masks it."""
    slow = dataclasses.replace(ONE_GROUP, failed_group=0, failed_nodes=1, member_timeout_ms=5)
    lat = pp.curve(slow, [1000.0]).points[0].latency_ms
    base = pp.curve(ONE_GROUP, [1000.0]).points[0].latency_ms
    # the relay's 5 ms time-out replaces its wait for the last reply (part of the healthy
    # round), and 1 round in 24 the leader first waits 10 ms for the down relay
    assert 5 + 10 / 24 - base <= lat - base <= 5 + 10 / 24
    masked = dataclasses.replace(slow, relay_wait_fraction=0.5)
    assert pp.curve(masked, [1000.0]).points[0].latency_ms < base + 1


def test_timeline_shows_the_failure_window_as_the_model_predicts():
    p = dataclasses.replace(ONE_GROUP, failed_group=0, failed_nodes=1)
    tl = twin.timeline(p, 3000.0, duration_s=4.0, fail_from_s=1.5, fail_to_s=3.0, seed=2,
                       bin_s=0.25)
    inside, outside = tl.phase_mean_ms(True, 0.25), tl.phase_mean_ms(False, 0.25)
    assert inside == pytest.approx(pp.curve(p, [3000.0]).points[0].latency_ms, rel=0.10)
    assert outside == pytest.approx(pp.curve(ONE_GROUP, [3000.0]).points[0].latency_ms,
                                     rel=0.10)
    assert tl.reroutes > 0 and tl.lost_to_down > 0
    # the throughput follows the offered load through the failure: nothing is lost
    assert min(tl.commits_rps[2:-2]) > 0.7 * 3000


@pytest.mark.parametrize("kwargs, word", [
    ({"failed_nodes": 2}, "needs failed_group"),
    ({"failed_group": 3}, "failed_group=3"),
    ({"failed_group": 0, "failed_nodes": 9}, "failed_nodes=9"),
    ({"failed_group": 0, "failed_nodes": 0}, "failed_nodes=0"),
    ({"failed_group": 0, "relays_per_group": 2}, "relays_per_group=2"),
    ({"relay_timeout_ms": 0}, "relay_timeout_ms"),
    ({"member_timeout_ms": -1}, "member_timeout_ms"),
    ({"relay_groups": 1, "failed_group": 0}, "majority"),
    ({"relay_groups": 1, "failed_group": 0, "failed_nodes": 13}, "majority"),
])
def test_bad_failures_one_line_error(kwargs, word):
    with pytest.raises(ValueError) as e:
        pp.PigPaxosParams(n=25, **kwargs)
    assert "\n" not in str(e.value) and word in str(e.value)

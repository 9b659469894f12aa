"""The network kernel: multi-worker processing queues and validated region matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest

from replicalab.regions import REGION_SETS, RegionSet, region_set
from replicalab.runtime import VirtualRuntime
from replicalab.sim.network import Delay, Network
from replicalab.sim.random import Stream


def _net() -> Network:
    return Network(VirtualRuntime(), Stream(np.random.default_rng(1)), region_set("lan"))


def test_single_worker_queues_fifo():
    net = _net()
    node = net.add_node("n", "local", Delay.ms(1.0))
    assert [net.process(node, 10) for _ in range(3)] == [10, 20, 30]


def test_parallel_workers_share_the_queue():
    net = _net()
    node = net.add_node("n", "local", Delay.ms(1.0), pipelines=2)
    assert [net.process(node, 10) for _ in range(5)] == [10, 10, 20, 20, 30]
    with pytest.raises(ValueError, match="pipelines=0"):
        net.add_node("m", "local", Delay.ms(1.0), pipelines=0)


def test_pause_holds_queued_and_new_work_like_sigstop():
    net = _net()
    node = net.add_node("n", "local", Delay.ms(1.0), pipelines=2)
    assert net.process(node, 10) == 10  # one worker busy for 10 ns, the other idle
    net.pause(node, 1000)
    # queued work waits the pause out; new work starts after it on the first free worker
    assert [net.process(node, 10) for _ in range(3)] == [1010, 1020, 1020]


def test_region_matrices_are_square_and_one_way_is_half_rtt():
    for rs in REGION_SETS.values():
        n = len(rs.regions)
        assert len(rs.rtt_ms) == n and all(len(r) == n for r in rs.rtt_ms)
    dc3 = region_set("dc3")
    sd = 2.0 / math.sqrt(2)  # two one-way legs add up to the stated RTT deviation
    assert dc3.one_way_ms("US-W", "EU") == (163 / 2, sd)
    assert dc3.one_way_ms("EU", "US-W") == (161 / 2, sd)
    assert region_set("aws5").one_way_ms("VA", "VA") == (0.427 / 2, 0.0476 / math.sqrt(2))


@pytest.mark.parametrize(("rtt", "message"), [
    ([[0, 1], [1]], "must be 2x2"),
    ([[0, -1], [1, 0]], "non-negative"),
    ([[0, float("nan")], [1, 0]], "non-negative"),
])
def test_from_matrix_rejects_bad_input(rtt, message):
    with pytest.raises(ValueError, match=message):
        RegionSet.from_matrix("x", ["a", "b"], rtt)


def test_from_matrix_custom_lan():
    rs = RegionSet.from_matrix("lab", ["a", "b"], [[0, 10], [12, 0]], sd_ms=1,
                               intra_rtt_ms=0.2, intra_sd_ms=0.01)
    assert rs.one_way_ms("a", "b") == (5.0, 1 / math.sqrt(2))
    assert rs.one_way_ms("b", "b") == (0.1, 0.01 / math.sqrt(2))

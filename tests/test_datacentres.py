"""Data centres on one machine: a call to another DC's store pays the dc3 round trip."""

from __future__ import annotations

import asyncio
import time

import pytest

from replicalab.cluster import datacentres as topology

KEY = "counters/k/state"


async def _round_trip_ms(store, tries: int = 3) -> tuple[tuple, float]:
    """Values read back and the fastest write+read of `tries`, in ms.

    The fastest, because a shared 2-core CI machine only ever adds delay: the
    minimum is the one that shows the emulated WAN and not the scheduler."""
    c = await store.connect()
    try:
        best = float("inf")
        for _ in range(tries):
            t0 = time.monotonic()
            await c.write({KEY: "x1"})
            r = await c.read([KEY], consistent=True)
            best = min(best, (time.monotonic() - t0) * 1000)
        return r.values, best
    finally:
        await c.close()


def _check(t: topology.DataCentres) -> None:
    async def main():
        local = await _round_trip_ms(t.store("US-E"))
        remote = await _round_trip_ms(t.store("US-E", "EU"))
        return local, remote

    (v1, local_ms), (v2, remote_ms) = asyncio.run(main())
    assert v1 == v2 == ("x1",)
    two_rtts = 2 * (t.one_way_ms("EU", "US-E") + t.one_way_ms("US-E", "EU"))  # 2 x 93 ms
    assert local_ms < 20
    assert two_rtts - 10 <= remote_ms <= two_rtts + 60


def test_simulated_data_centres_pay_the_wan_delay(tmp_path):
    with topology.start("sim", tmp_path, "topo-sim") as t:
        assert t.dcs == ("US-E", "US-W", "EU")
        _check(t)
        with pytest.raises(ValueError, match="not one of"):
            t.store("Mars")


def test_unknown_kind_is_refused(tmp_path):
    # "cassandra" was the unknown kind here until it became one: then this started a
    # Cassandra cluster (28 s) that nothing stopped, beside the session's own
    with pytest.raises(ValueError, match="store kind 'mongo': use one of redis, "):
        topology.start("mongo", tmp_path, "topo-x")
    assert not any(tmp_path.iterdir())


@pytest.mark.integration
def test_redis_data_centres_reach_each_other_through_wan_links(tmp_path):
    with topology.start("redis", tmp_path, "topo-redis") as t:
        _check(t)
        assert t.url("US-E", "EU") != t.url("US-E")
    assert not (tmp_path / "clusters" / "topo-redis-us-e").exists()

"""The conformance suite's client-region check: a store in several regions must place a
client where ``connect(region)`` says, so that a call to a node of another region pays the
WAN. The simulator does (in virtual time, so the figures are exact); two deliberately wrong
adapters over it do not: one accepts any region and ignores it, one checks the name and
still places every client in the first region. (tests/test_plugins.py runs the same check
on a store kind of an installed package, on real processes behind Toxiproxy.)"""

from __future__ import annotations

from typing import Any

import pytest

from replicalab.stores.registry import open_store
from replicalab.testing import run_conformance

URL = "sim://primary?regions=dc3"  # n0 (the primary) in US-E, replicas in US-W and EU


class IgnoresRegion:
    """The simulated store behind an adapter that drops the client's region: every client
    is the first region's; ``checks_name`` still refuses a region the store lacks."""

    def __init__(self, url: str, seed: int, checks_name: bool) -> None:
        self.inner = open_store(url, seed)
        self.info, self.runtime = self.inner.info, self.inner.runtime
        self.checks_name = checks_name

    async def connect(self, region: str | None = None) -> Any:
        if self.checks_name and region is not None and region not in self.info.regions:
            raise ValueError(f"region {region!r} is not one of {self.info.regions}")
        return await self.inner.connect(None)

    async def close(self) -> None:
        await self.inner.close()


def opener(checks_name: bool) -> Any:
    return lambda url, seed: IgnoresRegion(url, seed, checks_name)


def test_the_simulator_places_its_clients_and_passes():
    (r,) = run_conformance(URL, only=["client-region"]).results
    assert r.status == "passed", r.detail
    # US-W and EU clients write to the primary in US-E across the WAN (dc3: 81.5, 94.5 ms)
    assert "writes US-W->US-E" in r.detail and "writes EU->US-E" in r.detail


def test_an_adapter_that_accepts_any_region_fails():
    (r,) = run_conformance(URL, only=["client-region"], opener=opener(False)).results
    assert r.status == "failed"
    assert "connect(region='no-such-region') returned a client" in r.detail


def test_an_adapter_that_checks_the_name_but_ignores_the_region_fails():
    (r,) = run_conformance(URL, only=["client-region"], opener=opener(True)).results
    assert r.status == "failed"
    # every client is in US-E: a "US-W" client's write to n0 takes a local round trip
    assert "a client placed in US-W had its writes served by n0 (in US-E)" in r.detail
    assert "under half the 82 ms round trip" in r.detail


@pytest.mark.parametrize("url", ["sim://simpledb", "sim://primary"])
def test_a_store_in_one_region_skips_it(url: str):
    (r,) = run_conformance(url, only=["client-region"]).results
    assert r.status == "skipped" and "one region" in r.detail

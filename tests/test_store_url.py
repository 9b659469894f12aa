"""Replicated-store URLs: parsing, validation and which node a client uses."""

from __future__ import annotations

import random

import pytest

from replicalab.stores.url import parse_store_url

URL = ("redis://127.0.0.1:7000?replicas=127.0.0.1:7001,127.0.0.1:7002&regions=dc3"
       "&node_regions=US-E,US-W,EU&wait=1")


def test_parse_nodes_regions_and_extras():
    u = parse_store_url(URL, "replicas", ("wait",))
    assert [(n.name, n.port, n.region) for n in u.nodes] == [
        ("n0", 7000, "US-E"), ("n1", 7001, "US-W"), ("n2", 7002, "EU")]
    assert u.read == "nearest" and u.timeout_s == 2.0 and u.number("wait", 0) == 1
    assert u.region_names() == ("US-E", "US-W", "EU")


def test_pick_nearest_then_lowest_rtt_then_random():
    u = parse_store_url(URL, "replicas", ("wait",))
    rng = random.Random(1)
    assert u.pick(u.nodes[1:], "EU", rng).name == "n2"
    # no replica in US-E: US-E -> US-W is 40 ms one way, US-E -> EU 48 ms
    assert u.pick(u.nodes[1:], "US-E", rng).name == "n1"
    r = parse_store_url(URL + "&read=random", "replicas", ("wait",))
    assert {r.pick(r.nodes, None, rng).name for _ in range(50)} == {"n0", "n1", "n2"}


@pytest.mark.parametrize(("url", "message"), [
    ("redis://127.0.0.1?replicas=", "needs a port"),
    ("redis://127.0.0.1:1?colour=red", "unknown parameter 'colour'"),
    ("redis://127.0.0.1:1?replicas=127.0.0.1:x", "is not HOST:PORT"),
    ("redis://127.0.0.1:1?replicas=127.0.0.1:2&node_regions=US-E", "lists 1 regions for 2"),
    ("redis://127.0.0.1:1?node_regions=Mars&regions=dc3", "unknown region 'Mars'"),
    ("redis://127.0.0.1:1?read=closest", "must be nearest or random"),
    ("redis://127.0.0.1:1?timeout_ms=0", "must be positive"),
    ("redis://127.0.0.1:1?timeout_ms=soon", "must be a number"),
])
def test_bad_urls(url, message):
    with pytest.raises(ValueError, match=message):
        parse_store_url(url, "replicas")


def test_password_never_in_errors():
    with pytest.raises(ValueError) as err:
        parse_store_url("postgresql://u:secret@127.0.0.1:5/db?standbys=h:x", "standbys")
    assert "secret" not in str(err.value) and "***" in str(err.value)

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


def test_a_client_in_a_region_reaches_other_regions_through_its_client_links():
    u = parse_store_url(URL + "&client_links=US-W:0:9100,US-W:2:9102,EU:0:9200,EU:1:9201",
                        "replicas", ("wait",))
    west = [u.via(n, "US-W") for n in u.nodes]
    assert [(n.name, n.host, n.port, n.region) for n in west] == [
        ("n0", "127.0.0.1", 9100, "US-E"),  # the US-E primary: over the WAN
        ("n1", "127.0.0.1", 7001, "US-W"),  # its own region's node: directly
        ("n2", "127.0.0.1", 9102, "EU")]
    assert u.via(u.nodes[0], None) == u.nodes[0]  # no region: every node directly
    assert u.via(u.nodes[2], "US-E") == u.nodes[2]  # no link named for US-E: directly


@pytest.mark.parametrize(("url", "message"), [
    ("redis://127.0.0.1:1?client_links=US-W:x:9", "give REGION:NODE:PORT"),
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


def test_credentials_database_and_tls_come_from_the_url():
    u = parse_store_url("rediss://alice:p%40ss@127.0.0.1:7000/2?tls_ca=/x/ca.pem", "replicas",
                        tls_scheme="rediss")
    assert (u.credentials.user, u.credentials.password, u.credentials.database) == (
        "alice", "p@ss", "2")
    assert "p@ss" not in repr(u) and u.tls is not None and u.tls.ca == "/x/ca.pem"
    plain = parse_store_url("redis://127.0.0.1:7000?tls=1", "replicas", tls_scheme="rediss")
    assert plain.tls is not None and plain.tls.ca is None
    assert parse_store_url("redis://127.0.0.1:7000", "replicas", tls_scheme="rediss").tls is None


@pytest.mark.parametrize(("url", "message"), [
    ("redis://127.0.0.1:1?tls_ca=/x", "tls_ca needs TLS: add tls=1"),
    ("redis://127.0.0.1:1?tls=maybe", "must be 1 or 0"),
    ("etcd://127.0.0.1:1?tls=1&tls_ca=/nonexistent/ca.pem", "no such file"),
])
def test_bad_tls_parameters(url, message):
    from replicalab.stores import open_store

    with pytest.raises(ValueError, match=message):
        open_store(url)


@pytest.mark.parametrize(("url", "message"), [
    ("redis://:pw@127.0.0.1:1/zero", "database 'zero' in the redis:// URL must be a number"),
    ("redis://bob@127.0.0.1:1", "names user 'bob' without a password"),
    ("etcd://bob@127.0.0.1:1", "names user 'bob' without a password"),
    ("zk://bob@127.0.0.1:1", "names user 'bob' without a password"),
])
def test_credentials_that_cannot_log_in_are_refused_before_connecting(url, message,
                                                                        monkeypatch):
    from replicalab.stores import open_store

    for var in ("REDISCLI_AUTH", "ETCDCTL_USER", "ETCDCTL_PASSWORD", "REPLICALAB_ZK_DIGEST"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match=message):
        open_store(url)


def test_passwords_from_the_environment_and_never_in_the_store_description(monkeypatch):
    from replicalab.stores import open_store

    monkeypatch.setenv("ETCDCTL_USER", "root:from-env")
    etcd = open_store("etcd://127.0.0.1:1")
    assert (etcd.credentials.user, etcd.credentials.password) == ("root", "from-env")
    url = open_store("etcd://me:in-url@127.0.0.1:1")
    assert url.credentials.password == "in-url"  # the URL wins
    for store in (url, open_store("redis://:pw1@127.0.0.1:1/3"),
                  open_store("zk://u:pw2@127.0.0.1:1/chroot"),
                  open_store("postgresql://u:pw3@127.0.0.1:1/db?sslmode=require")):
        shown = str(store.info.to_json())
        assert "in-url" not in shown and "pw1" not in shown and "pw2" not in shown
        assert "pw3" not in shown and ":***@" in shown


def test_a_key_prefix_becomes_part_of_the_domain():
    from replicalab.stores import parse_element

    e = parse_element("replicalab/run-1/probe/item/value")
    assert (e.domain, e.item, e.attribute) == ("replicalab/run-1/probe", "item", "value")
    for bad in ("a/b", "a//b/c", "/a/b/c", "a/b/"):
        with pytest.raises(ValueError, match="domain/item/attribute"):
            parse_element(bad)

"""Cassandra pieces that need no server: the handshake parser of the internode demultiplexer,
loopback block claims, tokens and configuration, the adapter's URL."""

from __future__ import annotations

import fcntl
import itertools
import os
import socket
import struct
from pathlib import Path

import pytest

from replicalab.cluster import loopback
from replicalab.cluster.cassandra import config_yaml, tokens
from replicalab.cluster.cassandra_node import PROTOCOL_MAGIC, initiator_address
from replicalab.cluster.state import Cluster, Node
from replicalab.stores.cassandra import Levels, parse_levels
from replicalab.stores.url import parse_store_url


def _initiate(address: str, port: int = 7000, version: int = 12) -> bytes:
    """An internode Initiate message as Cassandra 4.0+ writes it (CRC not checked here)."""
    flags = 1 | (version << 8) | (10 << 16) | (version << 24)
    body = struct.pack(">II", PROTOCOL_MAGIC, flags)
    body += bytes([6]) + socket.inet_aton(address) + struct.pack(">H", port)
    return body + b"\0\0\0\0"


def test_initiator_address_names_the_sender():
    msg = _initiate("127.42.7.3")
    assert initiator_address(msg) == "127.42.7.3"
    assert initiator_address(msg[:12]) is False  # address cut: more bytes needed
    assert initiator_address(msg[:5]) is False


def test_initiator_address_refuses_what_names_no_sender():
    assert initiator_address(b"GET / HTTP/1.1\r\n\r\n") is None  # not the magic
    assert initiator_address(_initiate("127.0.0.1", version=10)) is None  # pre-4.0 format


def test_tokens_are_distinct_and_spread():
    t = tokens(3)
    assert t[0] == -(2 ** 63) and len(set(t)) == 3
    assert all(b - a == 2 ** 64 // 3 for a, b in itertools.pairwise(t))


def test_config_names_own_addresses_and_every_seed(tmp_path: Path):
    nodes = [Node(i, r, "", 9042, str(tmp_path / f"n{i}"),
                  extra={"address": f"127.42.9.{1 + i}", "listen": f"127.42.9.{101 + i}",
                         "token": str(t)})
             for i, (r, t) in enumerate(zip(["US-E", "US-W", "EU"], tokens(3), strict=True))]
    c = Cluster("cassandra", "t", "dc3", nodes)
    text = config_yaml(c, nodes[1])
    assert 'listen_address: "127.42.9.102"' in text
    assert 'broadcast_address: "127.42.9.2"' in text
    assert "127.42.9.1:7000,127.42.9.2:7000,127.42.9.3:7000" in text


def test_claims_never_share_a_block(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("REPLICALAB_LOCK_DIR", str(tmp_path))
    a = loopback.claim(hosts=[1], ports=[7000], first=200, last=202)
    b = loopback.claim(hosts=[1], ports=[7000], first=200, last=202)
    assert a.k != b.k
    # a node wrapper holds a shared lock on a's block: a's claimant may go, the block stays
    held = loopback.hold_shared(a.lock_path)
    a.release()
    c = loopback.claim(hosts=[1], ports=[7000], first=200, last=202)
    assert c.k not in (a.k, b.k)
    with pytest.raises(ValueError, match="every loopback block"):
        loopback.claim(hosts=[1], ports=[7000], first=200, last=202)
    os.close(held)  # the cluster's processes are gone: its block is free again
    d = loopback.claim(hosts=[1], ports=[7000], first=200, last=202)
    assert d.k == a.k
    for blk in (b, c, d):
        blk.release()


def test_a_claimed_block_is_locked_exclusively_against_others(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("REPLICALAB_LOCK_DIR", str(tmp_path))
    a = loopback.claim(hosts=[1], ports=[7000], first=210, last=210)
    fd = os.open(a.lock_path, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
        a.release()


def test_consistency_levels_from_the_url():
    u = parse_store_url("cassandra://127.0.0.1:9042?eventual_cl=local_one&write_cl=ONE",
                        "hosts", ("eventual_cl", "consistent_cl", "write_cl", "serial_cl"))
    assert parse_levels(u) == Levels(eventual="LOCAL_ONE", consistent="QUORUM", write="ONE",
                                     serial="SERIAL")
    bad = parse_store_url("cassandra://127.0.0.1:9042?write_cl=SERIAL", "hosts",
                          ("write_cl",))
    with pytest.raises(ValueError, match="write_cl"):
        parse_levels(bad)


def test_open_refuses_a_bad_level_without_a_server():
    from replicalab.stores import open_store

    with pytest.raises(ValueError, match="eventual_cl"):
        open_store("cassandra://127.0.0.1:9042?eventual_cl=SOMETIMES")
    with pytest.raises(ValueError, match="keyspace"):
        open_store("cassandra://127.0.0.1:9042?keyspace=1bad")


# The probe keyspace of heldout-2 and heldout-6 (docs/models/pbs.md) had no replica in
# US-W: it was created by a client whose URL named one node, from that node's view of a
# ring not yet whole. Recorded on a fresh cluster started as benchmarks/pbs_cassandra.py
# starts it (benchmarks/cassandra_read_path.py, docs/data/cassandra-read-path-*.jsonl).
WITHOUT_US_W = {"EU": "1", "US-E": "1",
                "class": "org.apache.cassandra.locator.NetworkTopologyStrategy"}


def test_a_ring_with_a_member_not_yet_whole_is_not_a_view_to_make_a_keyspace_from():
    from replicalab.stores.cassandra import data_centres_of

    whole = [("US-E", "NORMAL"), ("US-W", "NORMAL"), ("EU", "NORMAL")]
    assert data_centres_of(whole) == {"US-E": 1, "US-W": 1, "EU": 1}
    # gossip knows US-W's node, but not yet its status (still starting) or its data centre
    assert data_centres_of([("US-E", "NORMAL"), ("US-W", None), ("EU", "NORMAL")]) is None
    assert data_centres_of([("US-E", "NORMAL"), (None, "NORMAL"), ("EU", "NORMAL")]) is None
    assert data_centres_of([("US-E", "NORMAL"), ("US-E", "shutdown")]) == {"US-E": 2}


def test_a_keyspace_without_a_replica_in_a_nodes_data_centre_is_named():
    from replicalab.stores.cassandra import missing_replicas

    assert missing_replicas(WITHOUT_US_W, ["US-E", "US-W", "EU"]) == ["US-W"]
    assert missing_replicas({**WITHOUT_US_W, "US-W": "1"}, ["US-E", "US-W", "EU"]) == []
    assert missing_replicas({**WITHOUT_US_W, "US-W": "0"}, ["US-W", "US-W"]) == ["US-W"]


def test_a_traced_read_served_elsewhere_makes_a_pbs_verdict_inconclusive():
    from replicalab.experiments import against

    local = {"intended": "n1", "coordinator": "n1", "replicas": ["n1"], "local": True,
             "replication": {**WITHOUT_US_W, "US-W": "1"}}
    elsewhere = {"intended": "n1", "coordinator": "n1", "replicas": ["n2"], "local": False,
                 "replication": WITHOUT_US_W}
    why = against.misread(1, None, 2.9, traced=[local, elsewhere])
    assert why is not None and "served by n2" in why and "'US-W'" not in why, why
    # a trace that says so is enough: the reads' median need not show it
    assert against.misread(1, 2.9, 2.9, traced=[elsewhere]) is not None
    assert against.misread(1, 2.9, 2.9, traced=[local, local]) is None
    assert against.misread(2, 168.0, 2.9, traced=[elsewhere]) is None  # R = 2 reads remote


# A read at ONE through the US-W node (127.42.1.2) of a keyspace without a US-W replica, as
# Cassandra 5.0.6 traced it (tests/test_integration_cassandra.py, printed by its -s run).
TRACE_ELSEWHERE = ("127.42.1.2", [
    ("127.42.1.2", "Parsing SELECT value FROM no_replica_in_us_w.elements WHERE domain = "
                   "'probe' AND item = 'item' AND attribute = 'value'"),
    ("127.42.1.2", "Preparing statement"),
    ("127.42.1.2", "reading data from /127.42.1.1:7000"),
    ("127.42.1.2", "Sending READ_REQ message to /127.42.1.1:7000 message size 108 bytes"),
    ("127.42.1.1", "READ_REQ message received from /127.42.1.2:7000"),
    ("127.42.1.1", "Executing single-partition query on elements"),
    ("127.42.1.1", "Acquiring sstable references"),
    ("127.42.1.1", "Merging memtable contents"),
    ("127.42.1.1", "Read 0 live rows and 0 tombstone cells"),
    ("127.42.1.1", "Enqueuing response to /127.42.1.2:7000"),
    ("127.42.1.1", "Sending READ_RSP message to /127.42.1.2:7000 message size 38 bytes"),
    ("127.42.1.2", "READ_RSP message received from /127.42.1.1:7000"),
    ("127.42.1.2", "Processing response from /127.42.1.1:7000")])


def test_the_replica_a_traced_read_went_to_is_read_from_its_trace():
    from replicalab.stores import open_store
    from replicalab.stores.cassandra import replicas_read

    store = open_store("cassandra://127.42.1.1:9042?hosts=127.42.1.2:9042,127.42.1.3:9042"
                       "&regions=dc3&node_regions=US-E,US-W,EU")
    assert replicas_read(store, TRACE_ELSEWHERE) == ("n0",)
    # the replica writes its own events to system_traces later: fetched before they are
    # there, the trace holds the coordinator's alone (a first cut of read_path read the
    # replica from its events and found none, on the first cluster that read elsewhere)
    coordinator_only = ("127.42.1.2", [x for x in TRACE_ELSEWHERE[1] if x[0] == "127.42.1.2"])
    assert replicas_read(store, coordinator_only) == ("n0",)
    # the same read where US-W holds a replica: its coordinator runs the query itself
    local = ("127.42.1.2", [(src, text) for src, text in TRACE_ELSEWHERE[1]
                            if src == "127.42.1.2" and "/127.42.1.1" not in text]
             + [("127.42.1.2", "Executing single-partition query on elements")])
    assert replicas_read(store, local) == ("n1",)

"""How long a Cassandra node that missed a schema change takes to learn of it: on a running
cluster (``replicalab cluster up cassandra --regions dc3 --name NAME``), cut the EU node's
peer links, make a keyspace and a table through the US-E node (the driver told not to wait
for agreement), heal the links 2 s later, and poll the EU node once a second until it can
prepare a statement on the table. Prints one line per poll: seconds since the heal, whether
the node has the keyspace and table, its schema version and its peers'.

    python benchmarks/cassandra_schema_lag.py NAME KEYSPACE

Run it on a cluster up for more than 60 s: a node younger than that pulls a schema it
lacks at once whatever ``cassandra.migration_delay_ms`` says.
"""

from __future__ import annotations

import sys
import time

from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.cluster import Cluster as Driver
from cassandra.policies import WhiteListRoundRobinPolicy

from replicalab.cluster import base
from replicalab.cluster.cassandra import CQL_PORT, advertised
from replicalab.cluster.toxiproxy import Toxiproxy


def session(host: str):
    """Return (driver, session) whose every query goes to ``host`` alone."""
    only = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]))
    d = Driver([host], port=CQL_PORT, protocol_version=5, max_schema_agreement_wait=0,
               execution_profiles={EXEC_PROFILE_DEFAULT: only},
               schema_metadata_enabled=False, token_metadata_enabled=False)
    return d, d.connect()


def main() -> None:
    name, ks = sys.argv[1], sys.argv[2]
    c, _ = base.status(name)
    eu = next(n for n in c.nodes if n.region == "EU")
    d0, s0 = session(advertised(c.nodes[0]))
    d2, s2 = session(advertised(eu))
    cut = [x.name for x in c.links if x.name.startswith("peer-")
           and "EU" in (x.src_region, x.dst_region)]
    tp = Toxiproxy(c.toxiproxy_port)
    try:
        for link in cut:
            tp.add_timeout(link)
        s0.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': "
                   "'NetworkTopologyStrategy', 'US-E': 1, 'US-W': 1, 'EU': 1}", timeout=60)
        s0.execute(f"CREATE TABLE {ks}.elements (domain text, item text, attribute text, "
                   "value text, PRIMARY KEY ((domain, item), attribute))", timeout=60)
        time.sleep(2.0)  # the partition's length: what the node misses is the point
    finally:
        for link in cut:
            tp.remove_timeout(link)
    healed = time.monotonic()
    for _ in range(120):
        has_ks = bool(list(s2.execute("SELECT keyspace_name FROM system_schema.keyspaces "
                                      "WHERE keyspace_name = %s", (ks,))))
        version = s2.execute("SELECT schema_version FROM system.local").one()[0]
        peers = [(str(p), str(v)[:8]) for p, v in
                 s2.execute("SELECT peer, schema_version FROM system.peers")]
        try:
            s2.prepare(f"SELECT value FROM {ks}.elements WHERE domain = ? AND item = ? "
                       "AND attribute = ?")
            ok = True
        except Exception as err:  # InvalidRequest: the node does not serve the table yet
            ok = type(err).__name__
        print(f"{time.monotonic() - healed:5.1f} s after the heal: keyspace {has_ks}, "
              f"version {str(version)[:8]}, peers {peers}, prepare {ok}")
        if ok is True:
            break
        time.sleep(1.0)
    s0.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=60)
    d0.shutdown()
    d2.shutdown()
    tp.close()


if __name__ == "__main__":
    main()

"""Which replica serves a ONE read at the reader's coordinator, on fresh clusters started as
``pbs_cassandra.py`` starts them: the keyspace's replication and a traced read, per cluster.

    python benchmarks/cassandra_read_path.py --clusters 6      # ~1 min per cluster

Each cluster: 3 Cassandra nodes on dc3 (one per region, replication links jittering), the
calibration's set-up done the way ``pbs_real.calibrate`` does it (a store opened on the
writer's node alone, which creates the probe keyspace), then one ONE read of the probe's key
at the US-W node, traced (``trace=True``): the coordinator the driver used, and the replica
the trace shows the coordinator reading. Written to ``--out`` as JSON lines, one per cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path

from replicalab.runtime.noise import load_1m
from replicalab.stores import open_store
from replicalab.stores.cassandra import read_path
from replicalab.workloads import pbs_real
from replicalab.workloads.staleness import KEY


def _peers_seen(address: str) -> list[list[str | None]]:
    """Return [peer, data centre, tokens] per row of the node's system.peers_v2, as it is."""
    from cassandra.cluster import Cluster

    cluster = Cluster([address], protocol_version=5)
    try:
        session = cluster.connect()
        return [[str(r.peer), r.data_center, None if r.tokens is None else len(r.tokens)]
                for r in session.execute("SELECT peer, data_center, tokens FROM "
                                         "system.peers_v2")]
    finally:
        cluster.shutdown()


async def _inspect(c: object, calibrate: bool, peek: bool) -> dict:
    # looking delays the keyspace's creation, which can hide what it would have seen
    seen = _peers_seen(pbs_real._node_in(c, "US-E")) if peek else None  # type: ignore[arg-type]
    if calibrate:
        await pbs_real._calibrate(c, "US-E", "US-W", 3)  # type: ignore[arg-type]
    store = open_store(f"{c.url}&eventual_cl=ONE", 1)  # type: ignore[attr-defined]
    try:
        writer = await store.connect("US-E")
        await writer.write({KEY: "x"})
        reader = await store.connect("US-W")
        path = await asyncio.to_thread(read_path, reader, KEY)
        return {"writer_node_peers_at_start": seen, **path.to_json()}
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=int, default=6)
    ap.add_argument("--no-calibrate", action="store_true",
                    help="open the full URL first (the keyspace made from every node)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--logs", type=Path, help="keep the nodes' logs here")
    ap.add_argument("--peek", action="store_true",
                    help="record the writer node's system.peers_v2 before the calibration")
    args = ap.parse_args()
    for i in range(args.clusters):
        t0 = time.monotonic()
        load = load_1m()
        with pbs_real.cassandra_cluster(3, "dc3", jitter_ms=pbs_real.DEFAULT_JITTER_MS) as c:
            got = asyncio.run(_inspect(c, not args.no_calibrate, args.peek))
            if args.logs:
                for n in c.nodes:
                    dest = args.logs / f"{c.name}-{i}-n{n.index}.log"
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes((Path(n.data_dir) / "server.log").read_bytes())
        row = {"cluster": i, "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "load_1m_start": load, "wall_s": round(time.monotonic() - t0, 1), **got}
        print(json.dumps(row), flush=True)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

"""Which replica serves a ONE read at the reader's coordinator, on fresh clusters started as
``pbs_cassandra.py`` starts them: the keyspace's replication and a traced read, per cluster.

    python benchmarks/cassandra_read_path.py --clusters 6 --out x.jsonl   # ~45 s a cluster

Each cluster: 3 Cassandra nodes on dc3 (one per region, replication links jittering), the
calibration's set-up done as ``pbs_real._calibrate`` does it (the first client, which
creates the probe keyspace), a write of the probe's key at US-E, then one ONE read of it at
the US-W node, traced (``stores.cassandra.read_path``): the coordinator that answered, the
replicas its trace shows it reading, the keyspace's replication. One JSON line per cluster
to ``--out``; a store that refuses the keyspace (no replica in a region of its URL) is
recorded as ``refused`` with its message.

docs/data/cassandra-read-path-2026-11-29-before.jsonl is this script run on the product of
fb89fd3 (the calibration's first client's URL named the writer's node alone; ``read_path``
added to it), -after.jsonl on the product of the commit that added it here."""

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


async def _inspect(c: object, calibrate: bool) -> dict:
    if calibrate:
        await pbs_real._calibrate(c, "US-E", "US-W", 3)  # type: ignore[arg-type]
    store = open_store(f"{c.url}&eventual_cl=ONE", 1)  # type: ignore[attr-defined]
    try:
        try:
            writer = await store.connect("US-E")
        except ValueError as err:
            return {"refused": str(err), "local": False}
        await writer.write({KEY: "x"})
        reader = await store.connect("US-W")
        path = await asyncio.to_thread(read_path, reader, KEY)
        return path.to_json()
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=int, default=6)
    ap.add_argument("--no-calibrate", action="store_true",
                    help="open the full URL first (the keyspace made from every node)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--logs", type=Path, help="keep the nodes' logs here")
    args = ap.parse_args()
    for i in range(args.clusters):
        t0 = time.monotonic()
        load = load_1m()
        with pbs_real.cassandra_cluster(3, "dc3", jitter_ms=pbs_real.DEFAULT_JITTER_MS) as c:
            got = asyncio.run(_inspect(c, not args.no_calibrate))
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

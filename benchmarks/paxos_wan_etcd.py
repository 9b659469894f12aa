"""Record the paxos-wan model's evidence on a real etcd for the deterministic test: every
write's latency per leader and client region, the calibration the store delays are fitted
from, the noise floor of every point, the machine's load, the date and this command.

    python benchmarks/paxos_wan_etcd.py        # ~2 min: 3 members on dc3

It starts a 3-member etcd on dc3 (one member per region, peer links through Toxiproxy with
the region matrix's one-way delays), calibrates with every link's delay removed (10 s), then
writes open loop at 30 writes/s over the three client regions for 20 s with the leader in
each region in turn (about 200 writes per leader and client region), each client at its
region's own member. It writes docs/data/paxos-wan-etcd-DATE.json;
tests/test_model_against_etcd.py fits the store delays from the file's calibration and
judges the model against the file's medians, from the data alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pbs_cassandra import LoadSampler
from replicalab.cluster import base
from replicalab.workloads.consensus_latency import Point, run_writes


def _point(x: Point) -> dict:
    return {"leader": x.leader, "offered_rps": x.offered_rps, "duration_s": x.duration_s,
            "latencies_ms": {r: [round(v, 3) for v in lat] for r, lat in x.latencies_ms.items()},
            "errors": x.errors, "dropped": x.dropped, "leader_held": x.leader_held,
            "noise": None if x.noise is None else x.noise.to_json()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=20.0, help="per leader (s)")
    ap.add_argument("--calibration-s", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=30.0, help="writes/s over all regions")
    ap.add_argument("--out", type=Path, default=Path("docs/data"))
    args = ap.parse_args()
    started = datetime.now(UTC)
    t0 = time.monotonic()
    load = LoadSampler()
    root = Path(tempfile.mkdtemp(prefix="paxos-wan-etcd-"))
    name = f"paxos-wan-etcd-{os.getpid()}"
    c = base.up("etcd", 3, "dc3", name=name, root=root)
    try:
        leaders = [n.region for n in c.nodes]
        run = run_writes(c, leaders, [args.rate], duration_s=args.duration_s, seed=5,
                         calibration_s=args.calibration_s)
    finally:
        base.down(name, root)
    doc = {
        "schema": "replicalab.paxos-wan-recording/1",
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "date_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_s": round(time.monotonic() - t0, 1),
        "machine": {"cores": os.cpu_count(), "load_1m": load.stop(),
                    "shared": "yes: other engineers' test suites ran on the same cores"},
        "kind": "etcd", "regions": "dc3", "fsync_ms": run.fsync_ms,
        "calibration": _point(run.calibration), "points": [_point(x) for x in run.points],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"paxos-wan-etcd-{started:%Y-%m-%d}.json"
    path.write_text(json.dumps(doc) + "\n")
    worst = max((x.noise.added_p99_ms for x in run.points if x.noise), default=None)
    print(f"{path}: {sum(len(v) for x in run.points for v in x.latencies_ms.values())} "
          f"writes; noise up to {worst} ms at p99; load {doc['machine']['load_1m']}")


if __name__ == "__main__":
    main()

"""Record how long after its ack each write stays invisible at a remote replica of a real
Redis, PostgreSQL or ZooKeeper cluster on dc3, for the deterministic test of the staleness
windows the docs quote (tests/test_staleness_evidence.py).

    python benchmarks/staleness_windows.py --kind redis        # ~1.5 min each
    python benchmarks/staleness_windows.py --kind postgres
    python benchmarks/staleness_windows.py --kind zookeeper

It starts a 3-node cluster on dc3 (one node per region, replication links through Toxiproxy
carrying the region matrix's one-way delays), runs the staleness probe for 60 s with the
writer at US-E (the primary's region) and one reader at the US-W replica reading at 200
reads/s, and writes docs/data/staleness-<kind>-DATE.json: every write's visibility to the
reader bracketed by its last stale and first fresh read (ms after the writer saw the ack,
``checkers/visibility.py``) with the ack's time, the run's noise floor with every stall and
echo excess and its time, the replication links as configured, ZooKeeper's leader, the
machine's load, the date and this command. The test judges each write against the window the
links allow, from the file alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from pbs_cassandra import LoadSampler
from replicalab.checkers import visibility
from replicalab.checkers.extract import element_ops
from replicalab.cluster import base
from replicalab.experiments import windows
from replicalab.history import load_history
from replicalab.runtime.noise import NoiseFloor
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig


def judged(doc: dict) -> dict:
    """Return the recording's judgement against the window its links allow (what the
    deterministic test recomputes from the data)."""
    leader = next((n["region"] for n in doc["nodes"] if n["index"] == doc["leader"]), None)
    lo, hi = windows.window_ms(doc["kind"], doc["links"], doc["writer_region"],
                               doc["reader_region"], leader)
    floor = NoiseFloor.from_json(doc["noise"]) if doc.get("noise") else None
    path = windows.write_path_ms(doc["kind"], doc["links"], doc["writer_region"], leader)
    return visibility.judge_window(visibility.Visibility.from_json(doc["visibility"]), lo, hi,
                                   floor, windows.SLACK_MS[doc["kind"]], path).to_json()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rejudge", type=Path, help="judge a recording again (its data kept)")
    ap.add_argument("--kind", choices=("redis", "postgres", "zookeeper"))
    ap.add_argument("--duration-s", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=Path("docs/data"))
    args = ap.parse_args()
    if args.rejudge:
        doc = json.loads(args.rejudge.read_text())
        doc["judged"] = judged(doc)
        args.rejudge.write_text(json.dumps(doc) + "\n")
        print(f"{args.rejudge}: {doc['judged']['line']}")
        return
    if args.kind is None:
        ap.error("--kind is required (redis, postgres or zookeeper)")
    started = datetime.now(UTC)
    t0 = time.monotonic()
    load = LoadSampler()
    root = Path(tempfile.mkdtemp(prefix="staleness-windows-"))
    root.chmod(0o755)  # PostgreSQL runs as its own user and must reach its data directory
    name = f"windows-{args.kind}-{os.getpid()}"
    c = base.up(args.kind, 3, "dc3", name=name, root=root)
    try:
        _, rows = base.status(c.name, root)
        leader = next((i for i, r in enumerate(rows) if r["role"] == "leader"), None)
        spec = ProbeSpec(store=c.url, workload="staleness", cluster=c.name,
                         cluster_root=str(root),
                         options=ProbeOptions(duration_s=args.duration_s, write_interval_s=0.5,
                                              read_rate=200.0),
                         config=StalenessConfig(placement="separate-clients",
                                                writer_region="US-E", reader_region="US-W"))
        run = run_probe(spec, root / "runs")
        if run.error:
            raise SystemExit(f"the probe failed: {run.error}")
        h, _ = load_history(Path(run.run_dir))
        vis = visibility.of_element(*element_ops(h, KEY))
    finally:
        base.down(name, root)
    doc = {
        "schema": "replicalab.staleness-recording/1",
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "date_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_s": round(time.monotonic() - t0, 1),
        "machine": {"cores": os.cpu_count(), "load_1m": load.stop(),
                    "shared": "yes: other engineers' test suites ran on the same cores"},
        "kind": args.kind, "regions": "dc3", "writer_region": "US-E", "reader_region": "US-W",
        "nodes": [{"index": n.index, "region": n.region} for n in c.nodes],
        "leader": leader,
        "links": [asdict(x) for x in c.links if x.kind == "replication"],
        "probe": {"duration_s": args.duration_s, "write_interval_s": 0.5, "read_rate": 200.0},
        "noise": run.results.get("noise"),
        "visibility": vis.to_json(),
    }
    doc["judged"] = judged(doc)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"staleness-{args.kind}-{started:%Y-%m-%d}.json"
    path.write_text(json.dumps(doc) + "\n")
    print(f"{path}: {doc['judged']['line']}; {vis.writes} writes, {vis.reads} reads; noise "
          f"{(doc['noise'] or {}).get('added_p99_ms')} ms at p99; load {doc['machine']}")


if __name__ == "__main__":
    main()

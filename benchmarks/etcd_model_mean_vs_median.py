"""How far are the measured mean and median write latencies from the fitted paxos-wan model
on a real 3-member etcd on dc3, measured as ``tests/test_model_against_etcd.py`` measures
(a 3 s calibration with the links' delays removed, then 6 s at 30 writes/s with the leader
in each region)? The test judges the median: this prints both, per leader and client region,
for ``--attempts`` measurements on one cluster this script starts and stops.

    python benchmarks/etcd_model_mean_vs_median.py --attempts 2

Run it beside CPU-bound processes (``python3 -c "while True: pass" &``) to see what a busy
machine does to each figure.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from replicalab.cluster import base
from replicalab.models import paxos_wan_fit as F
from replicalab.models.paxos_wan import WanParams
from replicalab.workloads.consensus_latency import run_writes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attempts", type=int, default=1, help="measurements (default 1)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="replicalab-bench-"))
    c = base.up("etcd", 3, "dc3", name="bench-etcd-model", root=root)
    try:
        leaders = [n.region for n in c.nodes]
        for i in range(args.attempts):
            run = run_writes(c, leaders, [30.0], duration_s=6.0, seed=5, calibration_s=3.0)
            p = WanParams(regions=c.regions)
            fit = F.fit(p, run.calibration.leader, run.calibration.latencies_ms)
            rows = F.side_by_side(F.fitted(p, fit), [
                F.MeasuredPoint(x.leader, x.offered_rps, x.latencies_ms) for x in run.points],
                with_twin=False)
            print(f"attempt {i + 1}: fitted persist {fit.persist_ms:.1f} ms, forward "
                  f"{fit.forward_ms:.1f} ms")
            print("  leader  clients  model ms  mean ms (dev)    p50 ms (dev)   writes")
            for r in rows:
                if r.model_ms is None or r.real_ms is None or r.real_p50_ms is None:
                    print(f"  {r.leader:<7} {r.region:<8} no answered write")
                    continue
                print(f"  {r.leader:<7} {r.region:<8} {r.model_ms:8.1f}  {r.real_ms:7.1f} "
                      f"({r.real_ms / r.model_ms - 1:+4.0%})  {r.real_p50_ms:7.1f} "
                      f"({r.real_p50_ms / r.model_ms - 1:+4.0%})  {r.samples:5d}")
    finally:
        base.down("bench-etcd-model", root)


if __name__ == "__main__":
    main()

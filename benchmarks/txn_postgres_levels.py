"""PostgreSQL's isolation levels told apart by their anomalies: ``--runs`` runs of ``--txns``
list-append transactions per level on a hot key set, each checked for Adya's anomalies.

Expected (the PostgreSQL documentation): SERIALIZABLE no anomaly; REPEATABLE READ (snapshot
isolation) write skew (G2-item) and nothing in G0, G1 or G-single; READ COMMITTED G-single
or worse. Starts a one-node PostgreSQL on lan (``replicalab cluster up``) unless ``--store``
names one, and prints one Markdown row per run with its wall time.

    python benchmarks/txn_postgres_levels.py --runs 3 --txns 20000
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from replicalab.cluster import base
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.txn import TxnConfig

LEVELS = ("serializable", "repeatable-read", "read-committed")


def one_run(url: str, level: str, txns: int, seed: int, out: Path, keys: int,
            clients: int) -> dict[str, Any]:
    """Return one run's row: level, seed, counts, anomaly types, wall seconds."""
    spec = ProbeSpec(store=f"{url}&isolation={level}&lock_timeout_ms=20",
                     workload="list-append", options=ProbeOptions(duration_s=3600, seed=seed),
                     config=TxnConfig(keys=keys, clients=clients, min_length=1, max_length=4,
                                      txns=txns))
    t0 = time.perf_counter()
    run = run_probe(spec, out)
    wall = time.perf_counter() - t0
    res = run.results
    return {"level": level, "seed": seed, "wall_s": wall, "error": run.error,
            **res["transactions"], "valid": res["txn"]["valid"],
            "types": sorted(res["txn"]["anomaly_types"]),
            "check_s": res["txn"].get("elapsed_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--txns", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=6)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--levels", default=",".join(LEVELS))
    ap.add_argument("--store", default=None, help="a postgresql:// URL (default: start one)")
    ap.add_argument("--out", type=Path, default=Path("runs/txn-postgres-levels"))
    args = ap.parse_args()
    root = None
    url = args.store
    if url is None:
        root = Path(tempfile.mkdtemp(prefix="replicalab-bench-pg-"))
        root.chmod(0o755)
        url = base.up("postgres", 1, "lan", name="bench-pg-txn", root=root).url
    try:
        print(f"{args.runs} runs x {args.txns:,} list-append txns per level, {args.keys} keys, "
              f"{args.clients} clients")
        print("| level | seed | ok | fail | info | valid | anomaly types | run (s) |")
        print("|---|---|---|---|---|---|---|---|")
        for level in args.levels.split(","):
            for seed in range(1, args.runs + 1):
                r = one_run(url, level, args.txns, seed, args.out, args.keys, args.clients)
                print(f"| {level} | {seed} | {r['ok']:,} | {r['fail']:,} | {r['info']:,} | "
                      f"{r['valid']} | {', '.join(r['types']) or '-'} | {r['wall_s']:.1f} |",
                      flush=True)
    finally:
        if root is not None:
            base.down("bench-pg-txn", root)
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""PostgreSQL's isolation levels told apart by their anomalies: ``--runs`` runs of ``--txns``
list-append transactions per level on a hot key set, each checked for Adya's anomalies.

Expected (the PostgreSQL documentation): SERIALIZABLE no anomaly; REPEATABLE READ (snapshot
isolation) write skew (G2-item) and nothing in G0, G1 or G-single, snapshot isolation
still possible; READ COMMITTED read committed still possible (its statement-level
snapshots show as Elle's ``internal``, a read skew and worse). Starts a one-node PostgreSQL
on lan (``replicalab cluster up``) unless ``--store`` names one, and prints one Markdown row
per run with its wall time and the weakest models its anomalies rule out.

    python benchmarks/txn_postgres_levels.py --runs 3 --txns 20000

The hunt for a G2-item at SERIALIZABLE (seen once, in a test run): ``--hunt 500`` runs
SERIALIZABLE until a run shows an anomaly or 500 runs pass (``--txns`` each, new seeds),
saving a failing run's history (its run directory stays) and the server's log beside it.

    python benchmarks/txn_postgres_levels.py --hunt 500 --txns 1500 --nodes 3 --regions dc3

(the shape of the scorecard's run where it was seen: a 3-node cluster on dc3, about 1,300
committed per run).
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
            "types": sorted(res["txn"]["anomaly_types"]), "not": res["txn"]["not"],
            "possible": res["txn"]["possible"], "unfinished": res["txn"]["unfinished"],
            "check_s": res["txn"].get("check_s"), "run_dir": str(run.run_dir)}


EXPECTED = {"serializable": "serializable", "repeatable-read": "snapshot-isolation",
            "read-committed": "read-committed"}
"""The model each level must leave possible."""


def hunt(url: str, runs: int, txns: int, out: Path, keys: int, clients: int,
         root: Path | None) -> None:
    """Run SERIALIZABLE until a run shows an anomaly or ``runs`` runs pass; keep a failing
    run's directory and copy the server's log into it."""
    print(f"hunting an anomaly at SERIALIZABLE: up to {runs} runs of {txns:,} txns")
    committed = 0
    for i in range(1, runs + 1):
        r = one_run(url, "serializable", txns, 1000 + i, out, keys, clients)
        committed += r["ok"]
        if r["types"] or r["valid"] is not True:
            print(f"run {i}: {', '.join(r['types'])} (valid {r['valid']}), history in "
                  f"{r['run_dir']}")
            if root is not None:
                for log in root.rglob("*.log"):
                    shutil.copy(log, Path(r["run_dir"]) / f"server-{log.name}")
            return
        if i % 10 == 0:
            print(f"{i} runs, {committed:,} committed, no anomaly", flush=True)
    print(f"{runs} runs, {committed:,} committed: no anomaly")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--txns", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=6)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--levels", default=",".join(LEVELS))
    ap.add_argument("--store", default=None, help="a postgresql:// URL (default: start one)")
    ap.add_argument("--out", type=Path, default=Path("runs/txn-postgres-levels"))
    ap.add_argument("--hunt", type=int, default=0,
                    help="run SERIALIZABLE until an anomaly or this many runs")
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--regions", default="lan")
    args = ap.parse_args()
    root = None
    url = args.store
    if url is None:
        root = Path(tempfile.mkdtemp(prefix="replicalab-bench-pg-"))
        root.chmod(0o755)
        url = base.up("postgres", args.nodes, args.regions, name="bench-pg-txn",
                      root=root).url
    try:
        if args.hunt:
            hunt(url, args.hunt, args.txns, args.out, args.keys, args.clients, root)
            return
        print(f"{args.runs} runs x {args.txns:,} list-append txns per level, {args.keys} keys, "
              f"{args.clients} clients")
        print("| level | seed | ok | fail | info | valid | anomaly types | ruled out | "
              "level's model possible | run (s) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for level in args.levels.split(","):
            for seed in range(1, args.runs + 1):
                r = one_run(url, level, args.txns, seed, args.out, args.keys, args.clients)
                ok = EXPECTED[level] in r["possible"]
                print(f"| {level} | {seed} | {r['ok']:,} | {r['fail']:,} | {r['info']:,} | "
                      f"{r['valid']} | {', '.join(r['types']) or '-'} | "
                      f"{', '.join(r['not']) or '-'} | {EXPECTED[level]}: "
                      f"{'yes' if ok else 'NO'} | {r['wall_s']:.1f} |", flush=True)
    finally:
        if root is not None:
            base.down("bench-pg-txn", root)
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

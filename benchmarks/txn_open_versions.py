"""How often the rw-register version-order search (checkers/txn/versions.py) decides a
serial history whose version orders the reads leave open, and how long it takes: serial
histories (``synth.serial``: each interval holds its commit point, intervals overlapping
by up to 80 commit slots), checked with ``--wfr-keys``. Every one is serializable, so an
answer is valid or, where the search ran out of budget, unknown; never invalid.

Run: .venv/bin/python benchmarks/txn_open_versions.py [--sizes 100,1000] [--histories 10]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,300,1000,5000")
    ap.add_argument("--histories", type=int, default=10)
    ap.add_argument("--keys", type=int, default=5)
    ap.add_argument("--engine", default="auto")
    args = ap.parse_args()
    from replicalab.checkers.txn import Options, check
    from replicalab.checkers.txn.synth import serial

    print(f"{'txns':>6} {'valid':>6} {'unknown':>8} {'invalid':>8} {'median s':>9}")
    bad = 0
    for n in (int(x) for x in args.sizes.split(",")):
        verdicts, secs = [], []
        for seed in range(args.histories):
            txns = serial(random.Random(seed), n, args.keys, 4, model="rw-register")
            t0 = time.monotonic()
            r = check(txns, "rw-register", Options(wfr_keys=True), engine=args.engine)
            secs.append(time.monotonic() - t0)
            verdicts.append(r.valid)
        bad += verdicts.count(False)
        print(f"{n:6} {verdicts.count(True):6} {verdicts.count('unknown'):8} "
              f"{verdicts.count(False):8} {statistics.median(secs):9.2f}", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

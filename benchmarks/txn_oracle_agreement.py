"""The transaction checker against the brute-force oracle (tests/txn_oracle.py) on many
random small histories: how often "serializable / strict serializable / snapshot
isolation possible" differ, per data model and engine. The suite runs a few hundred
(tests/test_txn_oracle.py); this runs 20,000 per model.

Run: .venv/bin/python benchmarks/txn_oracle_agreement.py [--n 20000] [--engines python,native]
     [--families list-append,rw-register-known,rw-register]

Families, each both ways: list-append (every random history); rw-register where version
orders can be known (read-modify-write writes, --wfr-keys, unknown transactions only
read); rw-register on every random history (the checker searches the open version
orders). "unsound" counts histories where the oracle allows a model the checker rules
out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_txn_oracle import MODELS, agree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--engines", default="python,native")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default="list-append,rw-register-known,rw-register",
                    help="comma-separated: list-append, rw-register-known, rw-register")
    args = ap.parse_args()
    from replicalab.checkers.txn.run import native_core

    engines = [e for e in args.engines.split(",") if e != "native" or native_core()]
    named = {"list-append": ("list-append", True), "rw-register-known": ("rw-register", True),
             "rw-register": ("rw-register", False)}
    families = [named[f] for f in args.families.split(",")]
    print(f"{'engine':8} {'family':32} {'histories':>9} {'disagree':>9} {'unsound':>8} "
          f"{'oracle true':>24} {'s':>6}")
    total_bad = 0
    for engine in engines:
        for model, exact in families:
            t0 = time.monotonic()
            disagree = unsound = 0
            yes = dict.fromkeys(MODELS, 0)
            for seed in range(args.seed, args.seed + args.n):
                o, c = agree(seed, model, engine, exact)
                for k in MODELS:
                    yes[k] += o[k]
                    if o[k] and not c[k]:
                        unsound += 1
                    if o[k] != c[k]:
                        disagree += 1
            which = "known versions" if exact and model == "rw-register" else "all"
            name = f"{model} ({which})"
            ys = "/".join(str(yes[k]) for k in MODELS)
            print(f"{engine:8} {name:32} {args.n:9,} {disagree:9,} {unsound:8,} {ys:>24} "
                  f"{time.monotonic() - t0:6.1f}", flush=True)
            total_bad += disagree
    print("oracle true = histories the oracle finds serializable / strict / SI; "
          f"machine shared with other engineers; {'OK' if total_bad == 0 else 'FAILED'}")
    sys.exit(1 if total_bad else 0)


if __name__ == "__main__":
    main()

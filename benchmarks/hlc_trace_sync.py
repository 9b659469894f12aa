"""Record seed 002's two trace-sync experiments (``replicalab hlc bench --reps 100``'s grid)
with every repetition's error, for the golden test that judges them from the file.

    python benchmarks/hlc_trace_sync.py        # ~2-4 min on one core: 6,400 traces

It runs ``hlc.bench.run_bench`` on the default grid (5 logs; error vs log length for message
chances 0.01-0.1, skew 50 ticks, latency 3-10; error vs a fixed latency for skews 10, 20
and 50 ticks) with 100 repetitions per point from seed 1, and writes
docs/data/hlc-trace-sync-DATE.json: every point's summary and its 100 errors in repetition
order, the date, this command and the machine's load. tests/test_hlc_align.py judges the
seed's figures on the file and re-runs the first repetitions of a few points: repetition r
of every point uses the same seed whatever the number of repetitions (common random
numbers), so a short run of this code gives the file's first errors exactly.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from replicalab.hlc.bench import BenchConfig, run_bench
from replicalab.runtime.noise import load_1m

REPO = Path(__file__).resolve().parent.parent
CONFIG = BenchConfig(reps=100, seed=1)  # ``replicalab hlc bench --reps 100``, the docs' figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="file to write (default "
                    "docs/data/hlc-trace-sync-DATE.json)")
    args = ap.parse_args()
    now = datetime.now(UTC)
    out = args.out or REPO / "docs" / "data" / f"hlc-trace-sync-{now:%Y-%m-%d}.json"
    load_before = load_1m()
    t0 = time.perf_counter()
    results = run_bench(CONFIG, errors=True)
    doc = {"what": "seed 002 trace-sync figures: alignment error vs log length and vs latency",
           "command": shlex.join(["python", "benchmarks/hlc_trace_sync.py", *sys.argv[1:]]),
           "date": now.isoformat(timespec="seconds"),
           "wall_s": round(time.perf_counter() - t0, 1),
           "machine_load_1m": {"before": load_before, "after": load_1m()},
           **results}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out} ({doc['wall_s']} s)")


if __name__ == "__main__":
    main()

"""How many calibration round trips the PBS model needs, from the recordings: each conclusive
recording's 400 round trips per series cut into subsets (the first 200 with the warm-up
left out, the last 200, all 400), the shipped model predicted from each, beside the share of
the recording's 1,000 writes visible at the early t where the legs' lower edge decides.

    python benchmarks/pbs_calibration_size.py [--t 20 22 24 26]

In sample, on the recordings the model was chosen on and heldout-10: it says how much the
calibration's size moves the prediction, not whether the model is right.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from replicalab.checkers import visibility as V
from replicalab.experiments import against
from replicalab.models import pbs
from replicalab.runtime.noise import NoiseFloor

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
RECORDINGS = ("2026-11-29-heldout-3", "2026-11-29-heldout-8", "2026-11-29-heldout-9",
              "2026-11-30-heldout-10")
SUBSETS = ((0, 200), (200, 400), (0, 400))
"""Round trips [start, end) of every series; the warm-up is left out of those from 0."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--t", type=float, nargs="+", default=[20.0, 22.0, 24.0, 26.0],
                    help="ms after the ack")
    args = ap.parse_args()
    ts = np.array(args.t)
    print(f"| recording | round trips | {' | '.join(f'{t:g} ms' for t in ts)} |")
    print(f"|---|---|{'---:|' * len(ts)}")
    for name in RECORDINGS:
        doc = json.loads((DATA / f"pbs-cassandra-{name}.json").read_text())
        cal = doc["calibration"]
        floor = NoiseFloor.from_json(doc["noise"])
        seen = np.array(V.Visibility.from_json(doc["visibility"]).first_fresh_ms)
        measured = [float(np.mean(seen <= t)) for t in ts]
        print(f"| {name} | measured ({len(seen)} writes) | "
              f"{' | '.join(f'{100 * m:.1f} %' for m in measured)} |")
        for start, end in SUBSETS:
            warmup = against.PBS_WARMUP_ROUND_TRIPS if start == 0 else 0
            wars = pbs.wars_from_round_trips([s[start:end] for s in cal["write_rt_ms"]],
                                             [s[start:end] for s in cal["read_rt_ms"]],
                                             warmup=warmup)
            p = pbs.t_visibility_after_ack(wars, 1, 1, ts, cal["hop_ms"], 40_000, 1,
                                           added=floor.draw_added)
            print(f"| {name} | {start}–{end} (first {warmup} left out) | "
                  f"{' | '.join(f'{100 * float(x):.1f} %' for x in p)} |")


if __name__ == "__main__":
    main()

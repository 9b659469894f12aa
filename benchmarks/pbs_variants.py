"""In-sample look at one variant of the PBS legs: the calibration's first K round trips of
every series left out (a warm-up), judged on every recording in ``docs/data/pbs-cassandra-*``
exactly as ``tests/test_pbs_evidence.py`` judges the shipped model. Prints, per recording, the
noise floor and the judgement line, and where the calibration's round trips between US-E and
US-W exceed what the links allow (``LINK_MAX_MS``).

    python benchmarks/pbs_variants.py [--drop K ...]

In sample only: a variant chosen on these recordings must be scored on a recording made after
it (``benchmarks/pbs_cassandra.py --label heldout-N``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from replicalab.checkers import visibility as V
from replicalab.models import pbs

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
TRIALS = 100_000
LINK_MAX_MS = 40 + 41.5 + 2 * 20
"""The longest round trip the US-E <-> US-W links allow: 40 ms one way and 41.5 back, each
message delayed uniformly within +-20 ms (the client's local share comes on top)."""


def judge(doc: dict, drop: int) -> V.Judgement:
    """Return the judgement of the legs made without the first ``drop`` round trips."""
    cal = doc["calibration"]
    wars = pbs.wars_from_round_trips([s[drop:] for s in cal["write_rt_ms"]],
                                     [s[drop:] for s in cal["read_rt_ms"]])
    return V.judge(lambda ts: pbs.t_visibility_after_ack(wars, 1, 1, ts, cal["hop_ms"],
                                                          TRIALS, 1),
                   V.Visibility.from_json(doc["visibility"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drop", type=int, nargs="*", default=[0, 10, 20, 40])
    a = ap.parse_args()
    for path in sorted(DATA.glob("pbs-cassandra-*.json")):
        doc = json.loads(path.read_text())
        cal = doc["calibration"]
        late = {"writes to US-W": [(i, round(x)) for i, x in enumerate(cal["write_rt_ms"][1])
                                   if x > LINK_MAX_MS],
                "reads at US-W from US-E": [(i, round(x)) for i, x in
                                            enumerate(cal["read_rt_ms"][0]) if x > LINK_MAX_MS]}
        print(f"{path.name}: noise {doc['noise']['added_p99_ms']} ms at p99; calibration "
              f"round trips over {LINK_MAX_MS:g} ms (position, ms): {late}")
        for k in a.drop:
            print(f"  first {k:>2} dropped: {judge(doc, k).line()}")


if __name__ == "__main__":
    main()

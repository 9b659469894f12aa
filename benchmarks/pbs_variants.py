"""In-sample look at variants of the PBS model, judged on every recording in
``docs/data/pbs-cassandra-*`` exactly as ``tests/test_pbs_evidence.py`` judges the shipped
model: the calibration's first K round trips of every series left out (a warm-up), and each
write's visibility delayed by one draw of what the machine added while the probe ran (none;
``all``: the noise floor's stall and echo samples, as ``NoiseFloor.draw_added``; ``echo``:
its echo samples alone). Prints, per recording, the noise floor, where the calibration's
round trips between US-E and US-W exceed what the links allow (``LINK_MAX_MS``), and one
judgement line per variant.

    python benchmarks/pbs_variants.py [--drop K ...] [--machine none all echo] [--hop-ms X]
                                      [--only heldout-9]

In sample only: a variant chosen on these recordings must be scored on a recording made after
it (``benchmarks/pbs_cassandra.py --label heldout-N``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from replicalab.checkers import visibility as V
from replicalab.models import pbs
from replicalab.runtime.noise import NoiseFloor

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
TRIALS = 100_000
LINK_MAX_MS = 40 + 41.5 + 2 * 20
"""The longest round trip the US-E <-> US-W links allow: 40 ms one way and 41.5 back, each
message delayed uniformly within +-20 ms (the client's local share comes on top)."""


def echo_draws(noise: dict):
    """Return draws of the machine's delay from the echo's samples alone: the events over the
    echo's sample count (the events are not told apart from the stalls': an upper bound)."""
    events = np.array([ms for _, ms in noise.get("events", ())])

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        out = np.zeros(n)
        if len(events) and noise["echo_samples"]:
            hit = rng.random(n) < min(len(events) / noise["echo_samples"], 1.0)
            out[hit] = rng.choice(events, int(hit.sum()))
        return out
    return draw


def judge(doc: dict, drop: int, machine: str = "none", hop_ms: float | None = None
          ) -> V.Judgement:
    """Return the judgement of the legs made without the first ``drop`` round trips, each
    write delayed by the machine's delay drawn as ``machine`` says (``hop_ms``: instead of
    the recording's own)."""
    cal = doc["calibration"]
    hop = cal["hop_ms"] if hop_ms is None else hop_ms
    wars = pbs.wars_from_round_trips(cal["write_rt_ms"], cal["read_rt_ms"], warmup=drop)
    added = None
    if machine == "all" and doc.get("noise"):
        added = NoiseFloor.from_json(doc["noise"]).draw_added
    elif machine == "echo" and doc.get("noise"):
        added = echo_draws(doc["noise"])
    return V.judge(lambda ts: pbs.t_visibility_after_ack(wars, 1, 1, ts, hop, TRIALS, 1,
                                                          added=added),
                   V.Visibility.from_json(doc["visibility"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drop", type=int, nargs="*", default=[0, 10, 20])
    ap.add_argument("--machine", nargs="*", default=["none", "all", "echo"],
                    choices=["none", "all", "echo"])
    ap.add_argument("--hop-ms", type=float, help="the hop constant instead of each "
                    "recording's own (ms)")
    ap.add_argument("--only", help="recordings whose name contains this")
    a = ap.parse_args()
    for path in sorted(DATA.glob("pbs-cassandra-*.json")):
        if a.only and a.only not in path.name:
            continue
        doc = json.loads(path.read_text())
        cal = doc["calibration"]
        late = {"writes to US-W": [(i, round(x)) for i, x in enumerate(cal["write_rt_ms"][1])
                                   if x > LINK_MAX_MS],
                "reads at US-W from US-E": [(i, round(x)) for i, x in
                                            enumerate(cal["read_rt_ms"][0]) if x > LINK_MAX_MS]}
        print(f"{path.name}: noise {doc['noise']['added_p99_ms']} ms at p99; calibration "
              f"round trips over {LINK_MAX_MS:g} ms (position, ms): {late}")
        for k in a.drop:
            for m in a.machine:
                j = judge(doc, k, m, a.hop_ms)
                print(f"  first {k:>2} dropped, machine's delay {m:>4}: {j.line()}")


if __name__ == "__main__":
    main()

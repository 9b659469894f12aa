"""Record the PigPaxos twin's latency curves that tests/test_models_pigpaxos.py compares the
model with (healthy clusters, and a relay group or member down), for the test to judge them
from the file.

    python benchmarks/pigpaxos_twins.py        # ~1-2 min on one core

For N = 9, 25, 49 and 15 on aws5 it runs the twin at 25, 50 and 70 % of the model's maximum
throughput (6,000 rounds per load); for the seed's failure (a group of 8 down) and one relay
group of 24 with a member down (relay waiting for all, or for half) at 10 and 40 % (4,000
rounds); seed 3, capacity by the utilisation law on a pilot run, as the test did. It writes
docs/data/pigpaxos-twins-DATE.json: each curve (every point's latency, p99, utilisation; the
pilot trial), the date, this command and the machine's load. The test computes the model
now, judges it against the recorded twin, and re-runs each twin's pilot and first load
(a load's run is seeded by its position), which must equal the file's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from replicalab.models import pigpaxos as pp
from replicalab.models.twins import pigpaxos as twin
from replicalab.runtime.noise import load_1m

REPO = Path(__file__).resolve().parent.parent
SEED = 3
ONE_GROUP = pp.PigPaxosParams(n=25, relay_groups=1)  # 24 followers, one relay per round
# (id, params, load fractions of the model's maximum, rounds per load): as the test's
CASES = [
    ("n9", pp.PigPaxosParams(n=9), (0.25, 0.5, 0.7), 6000),
    ("n25", pp.PigPaxosParams(n=25), (0.25, 0.5, 0.7), 6000),
    ("n49", pp.PigPaxosParams(n=49), (0.25, 0.5, 0.7), 6000),
    ("aws5-n15", pp.PigPaxosParams(n=15, regions="aws5"), (0.25, 0.5, 0.7), 6000),
    ("group-down", pp.PigPaxosParams(n=25, failed_group=0), (0.1, 0.4), 4000),
    ("one-group-waits-all", dataclasses.replace(ONE_GROUP, failed_group=0, failed_nodes=1),
     (0.1, 0.4), 4000),
    ("one-group-waits-half", dataclasses.replace(ONE_GROUP, failed_group=0, failed_nodes=1,
                                                 relay_wait_fraction=0.5), (0.1, 0.4), 4000),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="file to write (default "
                    "docs/data/pigpaxos-twins-DATE.json)")
    args = ap.parse_args()
    now = datetime.now(UTC)
    out = args.out or REPO / "docs" / "data" / f"pigpaxos-twins-{now:%Y-%m-%d}.json"
    load_before = load_1m()
    t0 = time.perf_counter()
    cases = {}
    for name, p, fractions, rounds in CASES:
        cap = pp.max_throughput_rps(p)
        loads = [f * cap for f in fractions]
        sim = twin.simulate(p, loads, seed=SEED, rounds=rounds, capacity="estimate")
        cases[name] = {"params": dataclasses.asdict(p), "loads_rps": loads, "seed": SEED,
                       "rounds": rounds, "twin": sim.to_json()}
        print(f"{name}: {[round(x.latency_ms or 0, 4) for x in sim.points]} ms", flush=True)
    doc = {"what": "PigPaxos twin curves the model is judged against (capacity by estimate)",
           "command": shlex.join(["python", "benchmarks/pigpaxos_twins.py", *sys.argv[1:]]),
           "date": now.isoformat(timespec="seconds"),
           "wall_s": round(time.perf_counter() - t0, 1),
           "machine_load_1m": {"before": load_before, "after": load_1m()},
           "cases": cases}
    out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(f"wrote {out} ({doc['wall_s']} s)")


if __name__ == "__main__":
    main()

"""Record the WAN and PigPaxos twins' own capacity searches, at their service draw and 1.5x
slower, for tests/test_models_twin_capacity.py (which judges them from the file).

    python benchmarks/twin_capacity.py        # ~1-2 min on one core: 8 capacity searches

For PigPaxos N=9, and Paxos WAN, EPaxos (30 % conflict) and WPaxos (one leader per zone) on
three regions 10-20 ms apart, it runs each twin at 30 % of the model's maximum throughput
(seed 2, 5,000 rounds; WPaxos 10,000) once with its service-time draw and once with every
draw 1.5x longer, and writes docs/data/twin-capacity-DATE.json: both curves with every
trial of their capacity searches (load, sustained, backlog growth, busiest node,
utilisation, work per request), the model's maximum, the date, this command and the
machine's load. The test re-runs each twin's pilot trial and its load point (capacity
"estimate": the search's first run, deterministic), which must equal the file's first.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from replicalab.models import epaxos, paxos_wan, pigpaxos, wpaxos
from replicalab.models.twins import pigpaxos as pig_twin
from replicalab.models.twins import wan as wan_twin
from replicalab.runtime.noise import load_1m
from replicalab.sim.network import Delay
from replicalab.sim.random import Stream

REPO = Path(__file__).resolve().parent.parent
# as tests/test_models_twin_capacity.py: three regions 10-20 ms apart, Poisson-like clients
SMALL = {"name": "tri", "regions": ["A", "B", "C"],
         "rtt_ms": [[0, 10, 20], [10, 0, 15], [20, 15, 0]], "sd_ms": 1.0}
WAN = paxos_wan.WanParams(regions=SMALL, sigma_r_factor=1.0)
CASES = {
    "pigpaxos": (pigpaxos.PigPaxosParams(n=9), pigpaxos.max_throughput_rps, pig_twin.simulate),
    "paxos-wan": (WAN, paxos_wan.max_throughput_rps, wan_twin.simulate_paxos_wan),
    "epaxos": (epaxos.EPaxosParams(wan=WAN, conflict=0.3), epaxos.max_throughput_rps,
               wan_twin.simulate_epaxos),
    "wpaxos": (wpaxos.WPaxosParams(wan=WAN, leaders_per_zone=1), wpaxos.max_throughput_rps,
               wan_twin.simulate_wpaxos),
}
ROUNDS = 5000
SEED = 2
SLOWER = 1.5


def rounds_of(name: str) -> int:
    """Return the rounds per load of case ``name`` (WPaxos: 9 nodes share the requests)."""
    return 2 * ROUNDS if name == "wpaxos" else ROUNDS


def slower(delay: Delay, stream: Stream) -> int:
    """Return one service time in ns: the twin's own draw, SLOWER times longer."""
    return int(SLOWER * delay.draw(stream))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="file to write (default "
                    "docs/data/twin-capacity-DATE.json)")
    args = ap.parse_args()
    now = datetime.now(UTC)
    out = args.out or REPO / "docs" / "data" / f"twin-capacity-{now:%Y-%m-%d}.json"
    load_before = load_1m()
    t0 = time.perf_counter()
    cases = {}
    for name, (p, model_cap, simulate) in CASES.items():
        before = model_cap(p)
        load = [0.3 * before]
        base = simulate(p, load, SEED, rounds_of(name))
        slow = simulate(p, load, SEED, rounds_of(name), service=slower)
        cases[name] = {"model_max_throughput_rps": before, "loads_rps": load,
                       "rounds": rounds_of(name), "seed": SEED, "slower": SLOWER,
                       "base": base.to_json(), "slow": slow.to_json()}
        print(f"{name}: model {before:,.0f}, twin {base.max_throughput_rps:,.0f}, "
              f"slowed {slow.max_throughput_rps:,.0f} req/s", flush=True)
    doc = {"what": "twins' own capacity searches, service draw as is and 1.5x slower",
           "command": shlex.join(["python", "benchmarks/twin_capacity.py", *sys.argv[1:]]),
           "date": now.isoformat(timespec="seconds"),
           "wall_s": round(time.perf_counter() - t0, 1),
           "machine_load_1m": {"before": load_before, "after": load_1m()},
           "cases": cases}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out} ({doc['wall_s']} s)")


if __name__ == "__main__":
    main()

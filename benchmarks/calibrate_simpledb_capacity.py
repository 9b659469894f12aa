"""Calibrate ``sim://simpledb``'s admission control to seed 000's jam.

Seed 000 ("Throughput"): "to jam SimpleDB, we run 100 threads of GetAttribute and 100
threads of PutAttribute simultaneously on each map task, where each map task runs on a
separate m1.small EC2 instance. With 4 m1.small EC2 instances running in parallel, we can
consistently overload SimpleDB [503 ServiceUnavailable] ... With 2 or 3 EC2 instances, we
occasionally trigger the error message."

This runs that jam on the simulator: K client machines (``clients_per_machine=200``, each
its own m1.small core as the simulator models it, ``client_cpu_ms``), each with 100
closed-loop GetAttribute and 100 PutAttribute threads over 1,000 items of one domain.
First with admission control off, to measure what one instance offers in units of work per
second (a read one unit, a write ``write_cost``); the capacity is then set to what three
instances offer, so that three sit at the edge ("occasionally"), two below and four 33 %
above it ("consistently"). Second, K = 1..5 with the default capacity, printing the share of
calls refused.

    .venv/bin/python benchmarks/calibrate_simpledb_capacity.py [--seconds 60]
"""

from __future__ import annotations

import argparse

import numpy as np

from replicalab.sim.simpledb import CAPACITY_PER_S, WRITE_COST
from replicalab.stores import Overloaded, open_store

THREADS = 100  # of each kind per instance (seed 000)
ITEMS = 1000
EDGE_INSTANCES = 3  # the capacity is what this many instances offer


def jam(instances: int, seconds: float, capacity_per_s: float, seed: int = 1
        ) -> dict[str, float]:
    """Return reads/s, writes/s, units/s offered and the share refused of ``instances``
    jamming instances for ``seconds`` of virtual time at ``capacity_per_s`` (0: off)."""
    url = (f"sim://simpledb?clients_per_machine={2 * THREADS}"
           f"&capacity_per_s={capacity_per_s:g}")
    store = open_store(url, seed)
    rt = store.runtime
    rng = np.random.default_rng(seed)
    stop_ns = int(seconds * 1e9)
    counts = {"read": 0, "write": 0, "refused": 0}

    async def thread(client, write: bool) -> None:
        n = 0
        while rt.now_ns() < stop_ns:
            key = f"jam/i{int(rng.integers(ITEMS))}/a"
            try:
                if write:
                    n += 1
                    await client.write({key: f"{id(client)}.{n}"})
                else:
                    await client.read((key,), consistent=False)
            except Overloaded:
                counts["refused"] += 1
            counts["write" if write else "read"] += 1

    async def main() -> None:
        jobs = []
        for _ in range(instances):  # connections in order: 200 per machine
            for kind in (False, True):
                for _ in range(THREADS):
                    jobs.append(thread(await store.connect(), kind))
        await rt.gather(*jobs)

    rt.run(main())
    reads, writes = counts["read"] / seconds, counts["write"] / seconds
    return {"reads_per_s": reads, "writes_per_s": writes,
            "units_per_s": reads + WRITE_COST * writes,
            "refused": counts["refused"] / max(counts["read"] + counts["write"], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="virtual seconds per jam")
    args = ap.parse_args()
    one = jam(1, args.seconds, 0)
    print(f"one instance, no admission control: {one['reads_per_s']:.0f} reads/s + "
          f"{one['writes_per_s']:.0f} writes/s = {one['units_per_s']:.0f} units/s "
          f"(a write = {WRITE_COST} units)")
    print(f"capacity at {EDGE_INSTANCES} instances' offer: "
          f"{EDGE_INSTANCES * one['units_per_s']:.0f} units/s; the default is "
          f"{CAPACITY_PER_S:g}")
    for k in range(1, 6):
        r = jam(k, args.seconds, CAPACITY_PER_S)
        print(f"{k} instance{'s' if k > 1 else ' '}: {r['units_per_s']:6.0f} units/s offered, "
              f"{100 * r['refused']:5.2f} % refused (ServiceUnavailable)")


if __name__ == "__main__":
    main()

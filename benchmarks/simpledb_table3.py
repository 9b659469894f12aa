"""Record seed 003's Table 3 on sim://simpledb (the inter-element probe, one simulated hour,
seed 1), for the golden test that judges it from the file.

    python benchmarks/simpledb_table3.py        # ~30-60 s on one core

It runs ``replicalab probe --workload inter-element --duration 1h`` (every placement x write
x read combination side by side, writes every 3 s, reads at 50/s) and writes
docs/data/simpledb-table3-DATE.json: the run's Table 3 (A/B/C/D counts and fractions per
combination), the same table over the run's first SLICE_S simulated seconds (its history
cut at that time and classified again), the date, this command and the machine's load.
tests/test_golden_seed003.py judges the seed's patterns on the hour and runs a SLICE_S-long
probe with the same seed: the simulation is deterministic and a shorter run is the start of
a longer one, so its table equals the recorded first-seconds table count for count.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from replicalab.history import History, load_history
from replicalab.runtime.base import NS_PER_S
from replicalab.runtime.noise import load_1m
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.inter_element import InterElementConfig, classify
from replicalab.workloads.runner import ProbeSpec, run_probe

REPO = Path(__file__).resolve().parent.parent
DURATION_S = 3600.0
SLICE_S = 60.0
SEED = 1


def first_ops(h: History, before_ns: int) -> History:
    """Return the operations of ``h`` invoked before ``before_ns`` (a prefix: rows are
    recorded in invocation order, in virtual time)."""
    k = next((i for i, t in enumerate(h.invoke_ns) if t >= before_ns), len(h))
    out = History()
    for name in ("process", "type", "f", "consistency", "invoke_ns", "complete_ns", "keys",
                 "values", "expects", "node", "error"):
        setattr(out, name, getattr(h, name)[:k])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="file to write (default "
                    "docs/data/simpledb-table3-DATE.json)")
    args = ap.parse_args()
    now = datetime.now(UTC)
    out = args.out or REPO / "docs" / "data" / f"simpledb-table3-{now:%Y-%m-%d}.json"
    load_before = load_1m()
    t0 = time.perf_counter()
    cfg = InterElementConfig()
    with tempfile.TemporaryDirectory(prefix="replicalab-table3-") as tmp:
        run = run_probe(ProbeSpec(store="sim://simpledb", workload="inter-element",
                                  options=ProbeOptions(duration_s=DURATION_S, seed=SEED),
                                  config=cfg), Path(tmp))
        h, _config = load_history(run.run_dir)
    client = [t for t, p in zip(h.invoke_ns, h.process, strict=True) if p >= 0]
    start_ns = min(client)
    head = first_ops(h, start_ns + int(SLICE_S * NS_PER_S))
    slice_table = []
    for i, (combo, whole) in enumerate(zip(cfg.combinations(), run.results["table3"],
                                           strict=True)):
        entry = {"placement": combo.placement, "write": combo.write, "read": combo.read}
        # a combination the store cannot run (N/A) stays N/A, as the probe reports it
        entry.update(classify(head, combo, i) if whole["counts"] is not None else
                     {"counts": None, "abcd": None})
        slice_table.append(entry)
    doc = {"what": "seed 003 Table 3 on sim://simpledb: A/B/C/D per combination",
           "command": shlex.join(["python", "benchmarks/simpledb_table3.py", *sys.argv[1:]]),
           "probe": f"replicalab probe --workload inter-element --duration {DURATION_S:g}s "
                    f"--seed {SEED}",
           "date": now.isoformat(timespec="seconds"),
           "wall_s": round(time.perf_counter() - t0, 1),
           "machine_load_1m": {"before": load_before, "after": load_1m()},
           "duration_s": DURATION_S, "seed": SEED, "first_op_ns": start_ns,
           "table3": run.results["table3"],
           "slice_s": SLICE_S, "slice_table3": slice_table}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out} ({doc['wall_s']} s)")


if __name__ == "__main__":
    main()

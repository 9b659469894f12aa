"""How small an error of the PBS prediction the judgement can see, on the recorded evidence
(``docs/data/pbs-cassandra-*.json``): for each recording whose reads took the calibrated
path, the smallest move of the shipped prediction (0.5 ms steps, either way) that falls
outside the band (``checkers/visibility.judge``, the prediction's bootstrap spread
included), from all its writes and from 10 random subsets of 300 writes (what
``model pbs --against`` probes in its default 30 s); and the smallest move the verdict
calls "disagrees" both ways, the recording's own noise floor allowed for
(``against.judge_pbs``). Writes OUT (JSON) and prints one line per recording.

    python benchmarks/pbs_resolution.py docs/data/pbs-resolution-2026-11-30.json
"""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from replicalab.checkers import visibility as V
from replicalab.experiments import against
from replicalab.runtime.noise import NoiseFloor

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
STEP_MS, MOST_MS = 0.5, 20.0
SUBSETS, SUBSET_WRITES = 10, 300


def smallest(ok) -> float | None:
    """Return the smallest move (ms) for which ``ok(+m)`` and ``ok(-m)`` both hold."""
    for m in np.arange(STEP_MS, MOST_MS + 1e-9, STEP_MS):
        if ok(float(m)) and ok(-float(m)):
            return float(m)
    return None


def subset(v: V.Visibility, rng: np.random.Generator, n: int) -> V.Visibility:
    """Return ``n`` of the writes of ``v``, drawn without replacement."""
    keep = np.sort(rng.choice(v.writes, n, replace=False))
    return V.Visibility(tuple(np.asarray(v.last_stale_ms)[keep]),
                        tuple(np.asarray(v.first_fresh_ms)[keep]))


def main() -> None:
    out = Path(sys.argv[1])
    rows = []
    for path in sorted(DATA.glob("pbs-cassandra-*.json")):
        doc = json.loads(path.read_text())
        cal = doc["calibration"]
        if against.misread(1, doc.get("read_p50_ms"), cal["read_overhead_ms"],
                           traced=doc.get("read_paths", ())):
            continue
        floor = NoiseFloor.from_json(doc["noise"])
        p = against.pbs_prediction(cal["write_rt_ms"], cal["read_rt_ms"], cal["hop_ms"], floor)
        v = V.Visibility.from_json(doc["visibility"])

        def outside(m: float, v: V.Visibility = v, p: against.PbsPrediction = p) -> bool:
            return not V.judge(against.Shifted(p, m), v).within

        def refuted(m: float, p: against.PbsPrediction = p, v: V.Visibility = v,
                    floor: NoiseFloor = floor) -> bool:
            got = against.judge_pbs(against.Shifted(p, m), v, floor)
            return got.verdict == "disagrees"

        rng = np.random.default_rng(1)
        subsets = [subset(v, rng, SUBSET_WRITES) for _ in range(SUBSETS)]
        few = [smallest(lambda m, s=s: outside(m, s)) for s in subsets]
        row = {"recording": path.name, "writes": v.writes,
               "added_p99_ms": floor.added_p99_ms,
               "outside_all_writes_ms": smallest(outside),
               "outside_300_writes_ms": few,
               "outside_300_writes_median_ms": float(np.median([x for x in few if x])),
               "disagrees_all_writes_ms": smallest(refuted)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    out.write_text(json.dumps({
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "judge": against.PBS_JUDGE, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()

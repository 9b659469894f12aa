"""Record PBS's t-visibility on a real Cassandra cluster for the deterministic test: the legs
(calibration round trips), every write's visibility to the reader, the noise floor, the
machine's load, the date and this command, in one data file under docs/data/.

    python benchmarks/pbs_cassandra.py --label heldout      # ~4 min: 100 s of probing

It starts a 3-node Cassandra 5.0 cluster on dc3 (one node per region, every replication link
jittering +-20 ms around its delay, as ``model pbs --against cassandra``), measures the legs
from the writer's (US-E) and the reader's (US-W) coordinators, then writes at ONE through
US-E every 100 ms while two readers read at ONE through US-W at 400 reads/s each. Each read
is judged against the latest write acknowledged before it started; each write's visibility
is bracketed by its last stale and first fresh read (``checkers/visibility.py``). The file
also carries the shipped model's judgement on it, for the docs;
``tests/test_pbs_evidence.py`` judges the model on the file again, from the data alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from replicalab.checkers import visibility
from replicalab.experiments import against
from replicalab.runtime.noise import NoiseFloor, load_1m
from replicalab.workloads import pbs_real

TRIALS = 100_000


class LoadSampler:
    """Samples the 1-minute load average every ``every_s`` in a thread until stopped."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._every_s = every_s
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(load_1m())
            self._stop.wait(self._every_s)

    def stop(self) -> dict[str, float | int]:
        """Stop and return min/median/max/samples of the load average."""
        self._stop.set()
        self._thread.join(timeout=self._every_s + 1)
        x = self.samples or [0.0]
        return {"min": min(x), "median": float(np.median(x)), "max": max(x),
                "samples": len(self.samples), "every_s": self._every_s}


MODEL = against.PBS_MODEL
"""The shipped model, as each file's ``shipped_model.model`` names it."""
EARLIER_MODEL = ("one-way legs of half the round trips' mean, deviations over sqrt 2, chosen "
                 "2026-11-27")
"""The model a recording judged before ``model`` was written into its files."""
JUDGE = against.PBS_JUDGE
"""How the shipped model is judged, as each file's ``shipped_model.judge`` names it."""
EARLIER_JUDGE = ("each sampled t inside the writes' binomial band (Clopper-Pearson, "
                 "Bonferroni over the t), the prediction taken as exact")
"""The judge before ``judge`` was written into the files (until 2026-11-30)."""


def shipped_prediction(cal: dict, floor: NoiseFloor | None) -> object:
    """Return the shipped model's P(consistent) at t ms after the ack, from a file's legs
    and noise floor."""
    return against.pbs_prediction(cal["write_rt_ms"], cal["read_rt_ms"], cal["hop_ms"], floor,
                                  trials=TRIALS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", help="names the file: pbs-cassandra-DATE-LABEL")
    ap.add_argument("--rejudge", type=Path, help="judge a recording again (its data kept; "
                    "an earlier model's judgement moved to 'superseded')")
    ap.add_argument("--duration-s", type=float, default=100.0, help="probing (s)")
    ap.add_argument("--jitter-ms", type=float, default=pbs_real.DEFAULT_JITTER_MS)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--calibration-samples", type=int, default=400,
                    help="round trips per replica and coordinator: the legs' mean to ~1 ms")
    ap.add_argument("--out", type=Path, default=Path("docs/data"))
    args = ap.parse_args()
    if args.rejudge:
        doc = json.loads(args.rejudge.read_text())
        vis = visibility.Visibility.from_json(doc["visibility"])
        floor = NoiseFloor.from_json(doc["noise"]) if doc.get("noise") else None
        cal = doc["calibration"]
        why = against.misread(1, doc.get("read_p50_ms"), cal["read_overhead_ms"],
                              traced=doc.get("read_paths", ()))
        pair = against.judge_pbs(shipped_prediction(cal, floor), vis, floor, why)
        judged = pair.judgement
        was = doc["shipped_model"]
        if (was.get("model", EARLIER_MODEL), was.get("judge", EARLIER_JUDGE)) != (MODEL, JUDGE):
            # keep what an earlier model, or an earlier judge, said
            doc["superseded"] = [*doc.get("superseded", []),
                                 {**was, "model": was.get("model", EARLIER_MODEL),
                                  "judge": was.get("judge", EARLIER_JUDGE)}]
        doc["shipped_model"] = {**judged.to_json(), "model": MODEL, "judge": JUDGE,
                                "noise_fit_ms": pair.fit_ms, "verdict": pair.verdict}
        args.rejudge.write_text(json.dumps(doc) + "\n")
        print(f"{args.rejudge}: {doc['shipped_model']['verdict']}; {judged.line()}")
        return
    if not args.label:
        ap.error("--label is required to record")
    started = datetime.now(UTC)
    t0 = time.monotonic()
    load = LoadSampler()
    work = Path(tempfile.mkdtemp(prefix="pbs-cassandra-"))
    writer, reader = "US-E", "US-W"
    with pbs_real.cassandra_cluster(3, "dc3", jitter_ms=args.jitter_ms) as c:
        one_way_ms = next(x.upstream_ms for x in c.links
                          if x.src_region == writer and x.dst_region == reader
                          and x.kind == "replication")
        cal = pbs_real.calibrate(c, writer, reader, args.calibration_samples)
        # where the reader's reads go, traced, before and after the probe (its history
        # names the coordinator a reader is pinned to, never the replica that served)
        paths = [pbs_real.read_path_of(c, 1, 1, reader).to_json()]
        m = pbs_real.measure(c, 1, 1, writer, reader, args.duration_s, work / "probes",
                             readers=args.readers)
        paths.append(pbs_real.read_path_of(c, 1, 1, reader).to_json())
    run_dir = Path(m.run_dir)
    print(f"probe run: {run_dir}")
    # judged from what the file holds (its rounded times), as the test judges it again
    vis = visibility.Visibility.from_json(pbs_real.visibility_of_run(run_dir).to_json())
    floor = pbs_real.noise_of_run(run_dir)
    read_p50_ms = pbs_real.read_p50_ms_of_run(run_dir)
    calibration = {"write_rt_ms": [list(x) for x in cal.write_rt_ms],
                   "read_rt_ms": [list(x) for x in cal.read_rt_ms],
                   "write_overhead_ms": cal.write_overhead_ms,
                   "read_overhead_ms": cal.read_overhead_ms, "hop_ms": round(cal.hop_ms, 4)}
    # judged from the file's own (rounded) figures, as the test judges it again
    why = against.misread(1, read_p50_ms, calibration["read_overhead_ms"], traced=paths)
    pair = against.judge_pbs(shipped_prediction(calibration, floor), vis, floor, why)
    judged, verdict = pair.judgement, pair.verdict
    doc = {
        "schema": "replicalab.pbs-recording/1",
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "date_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_s": round(time.monotonic() - t0, 1),
        "machine": {"cores": os.cpu_count(), "load_1m": load.stop(),
                    "shared": "yes: other engineers' test suites ran on the same cores"},
        "params": {"calibration_samples": args.calibration_samples, "n": 3, "r": 1, "w": 1,
                   "regions": "dc3", "writer_region": writer,
                   "reader_region": reader, "jitter_ms": args.jitter_ms,
                   "duration_s": args.duration_s, "readers": args.readers,
                   "read_rate_per_reader": 400.0,
                   "write_interval_s": pbs_real.WRITE_INTERVAL_R1_S},
        "one_way_ms": one_way_ms,
        "calibration": calibration,
        "noise": None if floor is None else floor.to_json(),
        "noise_tolerance_ms": against.PBS_NOISE_TOLERANCE_MS,
        "read_p50_ms": read_p50_ms,
        "read_paths": paths,
        "visibility": vis.to_json(),
        "shipped_model": {**judged.to_json(), "model": MODEL, "judge": JUDGE,
                          "noise_fit_ms": pair.fit_ms, "verdict": verdict},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"pbs-cassandra-{started:%Y-%m-%d}-{args.label}.json"
    path.write_text(json.dumps(doc) + "\n")
    said = against.verdict_line(verdict, floor, against.PBS_NOISE_TOLERANCE_MS, why, pair.fit_ms)
    print(f"{path}: {vis.writes} writes, {vis.reads} reads, {vis.out_of_order} out of order; "
          f"shipped model {judged.line()}; {judged.transition_points} sampled t in the "
          f"transition; verdict: {said}; "
          f"load {doc['machine']['load_1m']}")


if __name__ == "__main__":
    main()

"""`replicalab model pbs --n 3 --r 1 --w 1 --against cassandra --json` beside N CPU hogs
(`python3 -c 'while True: pass'`, stopped after each run), ROUNDS times: each run's
verdict, the noise it was reached under, the clients' hop the model is read later by
(``hop_ms``, half the local round trips' overhead measured at calibration) and, at
50-58 ms, the predicted and measured P(consistent) — what issue 38's "beside two CPU hogs"
item asks, with what moves under load. Writes the rows to OUT (JSON) and prints them.

    python benchmarks/pbs_against_beside_hogs.py OUT [ROUNDS] [HOGS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPLICALAB = Path(sys.executable).with_name("replicalab")


def one(hogs: int) -> dict[str, object]:
    """Run the command once beside ``hogs`` busy loops; return its summary row."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([str(REPLICALAB), "model", "pbs", "--n", "3", "--r", "1",
                                "--w", "1", "--against", "cassandra", "--json"],
                               cwd=d, capture_output=True, text=True, timeout=900)
    finally:
        for h in procs:
            h.kill()
            h.wait()
    doc = json.loads(p.stdout)
    noise = doc["noise"] or {}
    pair = doc["pairs"][0]
    return {"started": time.strftime("%H:%M", time.gmtime(time.time() - (time.monotonic() - t0))),
            "hogs": hogs, "exit": p.returncode, "seconds": round(time.monotonic() - t0),
            "load_1m_start": round(load0, 2), "verdict": doc["verdict"],
            "verdict_line": doc["verdict_line"], "pair": pair["line"],
            "added_p99_ms": noise.get("added_p99_ms"), "cause": noise.get("cause"),
            "noise_fit_ms": doc.get("noise_fit_ms"), "late_acks": doc.get("late_acks"),
            "outside_t_ms": [x["t_ms"] for x in pair["points"]
                             if x["judged"] and not x["inside"]],
            "hop_ms": doc["params"]["hop_ms"],
            "write_overhead_ms": doc["params"]["write_overhead_ms"],
            "at_50_58_ms": [[x["t_ms"], x["predicted"], round(x["measured"], 4),
                             x["band_lo"], x["band_hi"]]
                            for x in pair["points"] if 50 <= x["t_ms"] <= 58]}


def main(out: Path, rounds: int, hogs: int) -> None:
    rows = []
    for _ in range(rounds):
        row = one(hogs)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out.write_text(json.dumps({"command": "python benchmarks/pbs_against_beside_hogs.py "
                                          + " ".join(sys.argv[1:]),
                               "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
                               "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3,
         int(sys.argv[3]) if len(sys.argv) > 3 else 2)

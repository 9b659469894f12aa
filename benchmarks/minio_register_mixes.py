"""The register workload at MinIO's home site, by operation mix: which mixes are linearizable?

    python benchmarks/minio_register_mixes.py [--runs 6] [--out FILE]

Starts ``replicalab cluster up minio --regions dc3`` (three sites, asynchronous site
replication, so every bucket is versioned) and runs, for each mix, ``--runs`` register
probes of 7 s (6 clients, 3 keys, 25 operations/s each, every client writing and reading at
the home site US-E with consistent reads), then ``replicalab export --format edn`` and
``replicalab check --model kv`` on each, exactly as a user would. One more mix reads at US-W
(eventual reads at the reader's own site), which must not be linearizable. The file keeps
each run's verdict, its operation counts and the checker's explanation, with the date, the
command and the machine's load, so docs/object-stores.md quotes it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from replicalab.runtime.noise import load_1m

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "replicalab.cli.main"]
MIXES = (  # (label, mix, consistency, reader region)
    ("conditional writes, home site", "read=50,cas=50", "consistent", "US-E"),
    ("plain and conditional writes, home site", "read=50,write=25,cas=25", "consistent", "US-E"),
    ("plain writes, home site", "read=50,write=50", "consistent", "US-E"),
    ("conditional writes, reads at US-W", "read=50,cas=50", "eventual", "US-W"),
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, check=False,
                          cwd=ROOT, timeout=600)


def _one(url: str, mix: str, consistency: str, reader: str, out: Path) -> dict[str, Any]:
    """Return one probe's verdict (True: linearizable) and its operation counts."""
    p = _cli("probe", "--store", url, "--workload", "register", "--consistency", consistency,
             "--keys", "3", "--clients", "6", "--op-rate", "25", "--mix", mix,
             "--writer-region", "US-E", "--reader-region", reader, "--duration", "7s",
             "--out", str(out))
    if p.returncode != 0:
        raise SystemExit(f"probe failed: {p.stderr.strip().splitlines()[-1:]}")
    run = next(d for d in out.iterdir() if d.is_dir())
    edn = out / "history.edn"
    p = _cli("export", str(run), "--format", "edn", "--output", str(edn))
    if p.returncode != 0:
        raise SystemExit(f"export failed: {p.stderr.strip()}")
    p = _cli("check", str(edn), "--model", "kv", "--json")
    verdict = json.loads(p.stdout)["results"][0]
    results = json.loads((run / "results.json").read_text())
    counts = {k: v["count"] for k, v in results["latency"].items()}
    bad = [c["explanation"] for c in verdict.get("counterexample") or []]
    return {"linearizable": verdict["valid"], "check_exit": p.returncode,
            "ops_by_kind": counts, "failed_ops": results["ops"]["failed"],
            "explanations": bad[:1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--out", type=Path,
                    default=ROOT / "docs" / "data" / f"minio-register-mixes-{dt.date.today()}.json")
    a = ap.parse_args()
    load_start = load_1m()
    up = _cli("cluster", "up", "minio", "--regions", "dc3", "--json")
    if up.returncode != 0:
        raise SystemExit(f"cluster up failed: {up.stderr.strip()}")
    try:
        status = json.loads(_cli("cluster", "status", "minio-dc3", "--json").stdout)
        url = status["urls"]["minio-dc3"]
        mixes = []
        with TemporaryDirectory() as tmp:
            for i, (label, mix, consistency, reader) in enumerate(MIXES):
                runs = []
                for r in range(a.runs):
                    runs.append(_one(url, mix, consistency, reader, Path(tmp) / f"{i}-{r}"))
                    print(f"{label}: run {r + 1} of {a.runs}: linearizable "
                          f"{runs[-1]['linearizable']}", file=sys.stderr)
                mixes.append({"label": label, "mix": mix, "consistency": consistency,
                              "reader_region": reader, "runs": runs,
                              "linearizable": sum(bool(x["linearizable"]) for x in runs)})
    finally:
        _cli("cluster", "down", "minio-dc3")
    doc = {"command": "python benchmarks/minio_register_mixes.py " + " ".join(sys.argv[1:]),
           "date_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "load_1m_start": load_start, "load_1m_end": load_1m(), "cpus": os.cpu_count(),
           "cluster": "replicalab cluster up minio --regions dc3", "mixes": mixes}
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    for m in mixes:
        print(f"{m['label']} ({m['mix']}): {m['linearizable']} of {len(m['runs'])} "
              "linearizable")


if __name__ == "__main__":
    main()

"""MinIO's conditional PUT racing a plain PUT to the same object: is the compare-and-set atomic?

    python benchmarks/minio_cas_race.py [--races 200] [--out docs/data/minio-cas-race-DATE.json]

One MinIO server, started by replicalab (``cluster up minio --nodes 1 --regions lan``), its
bucket first without versioning, then with it (site replication turns versioning on, so
every ``cluster up minio`` bucket of more than one site has it). Each race, on a fresh key
holding ``v0``:

* **U** PUTs ``v1`` (1,002 bytes) with no condition;
* **C**, started at the same moment, GETs the object and, if it still holds ``v0``, PUTs
  ``v2`` with ``If-Match`` the ETag it read (how ``s3://`` makes a cas);
* after both, **R** GETs the object.

If U and C both succeed and R reads ``v2``, no order of the three is possible for one
register: U before C leaves ``v1`` for C's condition to refuse; C before U leaves ``v1`` for
R. That is a lost update: U was acknowledged, and C replaced it while its condition named
the version before U. The file keeps every race (outcomes, times in ns from the race's
start, and for a lost update the object's versions as ``mc ls --versions`` lists them) so
``tests/test_minio_cas_race_evidence.py`` can judge each one again with the checker.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
from obstore.store import S3Store

from replicalab.cluster import base
from replicalab.cluster.minio import BUCKET, binary
from replicalab.runtime.noise import load_1m

ROOT = Path(__file__).resolve().parent.parent
U_BYTES = 1000
"""Padding after U's value: a body of a thousand bytes, as the probes' objects are."""


def _store(port: int, secret: str) -> S3Store:
    return S3Store(BUCKET, config={"endpoint": f"http://127.0.0.1:{port}", "region": "us-east-1",
                                   "access_key_id": "replicalab", "secret_access_key": secret,
                                   "conditional_put": "etag"},
                   client_options={"allow_http": True},
                   retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=10)})


async def _race(store: S3Store, key: str) -> dict[str, Any]:
    """Return one race's outcomes and times (ns from its start)."""
    await obstore.put_async(store, key, b"v0")
    t0 = time.monotonic_ns()
    ops: list[dict[str, Any]] = []

    async def u() -> None:
        start = time.monotonic_ns() - t0
        await obstore.put_async(store, key, b"v1" + b"\0" * U_BYTES)
        ops.append({"p": "U", "f": "write", "value": "v1", "outcome": "ok",
                    "invoke_ns": start, "complete_ns": time.monotonic_ns() - t0})

    async def c() -> None:
        start = time.monotonic_ns() - t0
        got = await obstore.get_async(store, key)
        body = bytes(await got.bytes_async())[:2].decode()
        if body != "v0":
            ops.append({"p": "C", "f": "cas", "value": ["v0", "v2"], "outcome": "fail",
                        "why": f"read {body}", "invoke_ns": start,
                        "complete_ns": time.monotonic_ns() - t0})
            return
        try:
            await obstore.put_async(store, key, b"v2", mode={"e_tag": got.meta["e_tag"]})
            outcome = "ok"
        except obstore.exceptions.PreconditionError:
            outcome = "fail"
        ops.append({"p": "C", "f": "cas", "value": ["v0", "v2"], "outcome": outcome,
                    "invoke_ns": start, "complete_ns": time.monotonic_ns() - t0})

    await asyncio.gather(u(), c())
    start = time.monotonic_ns() - t0
    final = bytes(await (await obstore.get_async(store, key)).bytes_async())[:2].decode()
    ops.append({"p": "R", "f": "read", "value": final, "outcome": "ok", "invoke_ns": start,
                "complete_ns": time.monotonic_ns() - t0})
    return {"key": key, "ops": ops}


def lost_update(race: dict[str, Any]) -> bool:
    """Return True when U and C both succeeded and R read C's value."""
    by = {o["p"]: o for o in race["ops"]}
    return by["U"]["outcome"] == "ok" and by["C"]["outcome"] == "ok" and by["R"]["value"] == "v2"


def _versions(driver: Any, c: Any, key: str) -> list[dict[str, Any]]:
    out = driver.mc(c, "ls", "--versions", "--json", f"n0/{BUCKET}/{key}")
    return [{k: d.get(k) for k in ("lastModified", "size", "etag", "versionId", "versionOrdinal")}
            for d in map(json.loads, out.splitlines()) if d.get("status") == "success"]


async def _mode(store: S3Store, races: int, label: str) -> list[dict[str, Any]]:
    out = []
    for i in range(races):
        out.append(await _race(store, f"cas-race/{label}/{time.time_ns()}-{i}"))
        if (i + 1) % 50 == 0:
            print(f"  {label}: {i + 1} races, {sum(map(lost_update, out))} lost updates",
                  file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--races", type=int, default=200, help="races per bucket mode")
    ap.add_argument("--out", type=Path, help="write the recording here")
    a = ap.parse_args()
    if not 1 <= a.races <= 5000:
        ap.error("--races: give 1 to 5,000")
    name = f"minio-cas-race-{os.getpid()}"
    driver = base.driver("minio")
    c = base.up("minio", 1, "lan", name)
    started = dt.datetime.now(dt.UTC)
    doc: dict[str, Any] = {
        "command": "python benchmarks/minio_cas_race.py " + " ".join(sys.argv[1:]),
        "date_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "load_1m_start": load_1m(),
        "server": subprocess.run([str(binary("minio")), "--version"], capture_output=True,
                                 text=True).stdout.split("\n")[0],
        "u_body_bytes": U_BYTES + 2, "modes": {}}
    try:
        store = _store(c.nodes[0].port, c.extra["secret"])
        for label in ("unversioned", "versioned"):
            if label == "versioned":
                driver.mc(c, "version", "enable", f"n0/{BUCKET}")
            races = asyncio.run(_mode(store, a.races, label))
            for r in races:
                if lost_update(r):
                    r["versions"] = _versions(driver, c, r["key"])
            doc["modes"][label] = {
                "races": len(races),
                "c_succeeded_after_reading_v0": sum(
                    1 for r in races for o in r["ops"] if o["p"] == "C" and o["outcome"] == "ok"),
                "lost_updates": sum(map(lost_update, races)), "all": races}
    finally:
        base.down(name)
    doc["load_1m_end"] = load_1m()
    for label, m in doc["modes"].items():
        print(f"{label}: {m['races']} races, C's conditional PUT succeeded in "
              f"{m['c_succeeded_after_reading_v0']}, lost updates {m['lost_updates']}")
    if a.out:
        a.out.write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

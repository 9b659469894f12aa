"""Latency of each S3 operation by object size, and list-after-write across sites, through the
s3:// adapter, against any S3 endpoint (the MinIO sites of ``replicalab cluster up minio``).

For each object size (``object_bytes``, the adapter's knob) a client placed in ``--region``
times ``--ops`` sequential calls of each operation: PUT (at the home site), GET and HEAD at
the home site (consistent) and at its own site (eventual), LIST of a prefix (up to 11 objects),
DELETE; p50/p99 in ms. Then list-after-write: a writer in ``--writer-region`` creates a new
object and a reader in ``--reader-region`` lists the prefix at its own site until the key is
there, ``--ops`` times; the median and p99 of the time from the PUT's acknowledgement to
the first listing that shows it. Every object is written under a fresh prefix and deleted at
the end. Requests made: about (7 x ops + 10) per size, plus 2 per listing.

    python benchmarks/s3_object_sizes.py --store "$URL" [--ops 100] [--region US-E]
        [--sizes 1024,65536,1048576] [--json docs/data/minio-object-sizes.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.stores import open_store
from replicalab.stores.base import redact_url
from replicalab.stores.s3 import S3Client


def _with(url: str, param: str) -> str:
    return url + ("&" if "?" in url else "?") + param


def _stats(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"count": len(ms), "p50_ms": round(float(np.percentile(a, 50)), 2),
            "p99_ms": round(float(np.percentile(a, 99)), 2)}


async def _timed(fn: Any) -> float:
    t0 = time.perf_counter_ns()
    await fn
    return (time.perf_counter_ns() - t0) / 1e6


async def by_size(url: str, size: int, region: str, ops: int, prefix: str
                  ) -> dict[str, dict[str, float]]:
    """Return per operation the latency of ``ops`` calls with objects of ``size`` bytes."""
    store = open_store(_with(url, f"object_bytes={size}"))
    try:
        c = await store.connect(region)
        assert isinstance(c, S3Client)
        keys = [f"{prefix}/s{size}/k{i}/v" for i in range(ops)]
        out: dict[str, list[float]] = {k: [] for k in (
            "PUT", "GET (home)", "GET (own site)", "HEAD (home)", "LIST (home)", "DELETE")}
        for k in keys:
            out["PUT"].append(await _timed(c.write({k: "v"})))
        for k in keys:
            out["GET (home)"].append(await _timed(c.read([k], consistent=True)))
            out["GET (own site)"].append(await _timed(c.read([k], consistent=False)))
            out["HEAD (home)"].append(await _timed(c.head(k)))
        for i in range(ops):
            out["LIST (home)"].append(await _timed(c.list(f"{prefix}/s{size}/k{i % 10}")))
        for k in keys:
            out["DELETE"].append(await _timed(c.delete([k])))
        return {op: _stats(v) for op, v in out.items()}
    finally:
        await store.close()


async def list_after_write(url: str, writer_region: str, reader_region: str, ops: int,
                           prefix: str) -> dict[str, Any]:
    """Return how long after a PUT is acknowledged a LIST at the reader's site shows it."""
    store = open_store(url)
    try:
        w, r = await store.connect(writer_region), await store.connect(reader_region)
        assert isinstance(w, S3Client) and isinstance(r, S3Client)
        waits, lists = [], 0
        for i in range(ops):
            key = f"{prefix}/law/{i:05d}"
            await w.write({key: "v"})
            acked = time.perf_counter_ns()
            deadline = acked + 10_000_000_000
            while True:
                lists += 1
                if key in await r.list(f"{prefix}/law/", consistent=False):
                    waits.append((time.perf_counter_ns() - acked) / 1e6)
                    break
                if time.perf_counter_ns() > deadline:
                    raise RuntimeError(f"{key} not listed at {reader_region} after 10 s")
        await w.delete([f"{prefix}/law/{i:05d}" for i in range(ops)])
        return {**_stats(waits), "lists": lists, "writer": writer_region,
                "reader": reader_region}
    finally:
        await store.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store", required=True, help="s3:// URL (cluster up minio prints it)")
    p.add_argument("--ops", type=int, default=100)
    p.add_argument("--region", default="US-E")
    p.add_argument("--writer-region", default="US-E")
    p.add_argument("--reader-region", default="US-W")
    p.add_argument("--sizes", default="1024,65536,1048576")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args()
    prefix = f"replicalab/bench-{os.getpid():x}{time.time_ns() % 10**8:x}"
    sizes = [int(s) for s in args.sizes.split(",")]
    result: dict[str, Any] = {"store": redact_url(args.store), "region": args.region,
                              "ops": args.ops, "sizes": {}}
    for size in sizes:
        result["sizes"][str(size)] = asyncio.run(by_size(args.store, size, args.region,
                                                         args.ops, prefix))
    result["list_after_write"] = asyncio.run(list_after_write(
        args.store, args.writer_region, args.reader_region, args.ops, prefix))
    print(f"latency from {args.region}, {args.ops} sequential calls each (ms, p50 / p99):")
    ops = list(next(iter(result["sizes"].values())))
    print(f"  {'object':>9} " + " ".join(f"{op:>18}" for op in ops))
    for size, row in result["sizes"].items():
        print(f"  {int(size):>8}B " + " ".join(
            f"{row[op]['p50_ms']:>8.1f} / {row[op]['p99_ms']:<7.1f}" for op in ops))
    law = result["list_after_write"]
    print(f"list-after-write, writer {law['writer']}, LIST at {law['reader']}: p50 "
          f"{law['p50_ms']} ms, p99 {law['p99_ms']} ms after the PUT's acknowledgement "
          f"({law['count']} objects, {law['lists']} listings)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Which S3 client the s3:// adapter uses: throughput of obstore, aiobotocore and boto3 (in a
thread pool) side by side, against one MinIO site started here, in one run.

Each client does what a probe does: PUT then GET of a small object, ``--ops`` pairs with
``--concurrency`` in flight from one asyncio loop, after a warm-up; three rounds each,
interleaved, and the median round is reported with its ratio to obstore. The machine may be
shared: run it when it is quiet, or read the ratios (all clients share the same noise).

    python benchmarks/s3_clients.py [--ops 2000] [--concurrency 8] [--object-bytes 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from replicalab.cluster import base
from replicalab.cluster.minio import ACCESS_KEY, BUCKET


def _endpoint(c: Any) -> tuple[str, str]:
    return f"http://127.0.0.1:{c.nodes[0].port}", str(c.extra["secret"])


async def _run(pairs: int, concurrency: int, one: Any) -> float:
    """Return PUT+GET pairs per second of ``one(i)`` with ``concurrency`` in flight."""
    todo = iter(range(pairs))

    async def worker() -> None:
        for i in todo:
            await one(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return pairs / (time.perf_counter() - t0)


async def obstore_rate(url: str, secret: str, pairs: int, conc: int, body: bytes) -> float:
    import obstore
    from obstore.store import S3Store

    store = S3Store(BUCKET, endpoint=url, access_key_id=ACCESS_KEY, secret_access_key=secret,
                    region="us-east-1", client_options={"allow_http": True})

    async def one(i: int) -> None:
        key = f"bench/obstore/{i % 100}"
        await obstore.put_async(store, key, body)
        got = await obstore.get_async(store, key)
        await got.bytes_async()

    await one(0)
    return await _run(pairs, conc, one)


async def aiobotocore_rate(url: str, secret: str, pairs: int, conc: int, body: bytes) -> float:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    session = get_session()
    async with session.create_client(
            "s3", endpoint_url=url, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=secret,
            region_name="us-east-1",
            config=AioConfig(max_pool_connections=conc, retries={"max_attempts": 1})) as s3:
        async def one(i: int) -> None:
            key = f"bench/aiobotocore/{i % 100}"
            await s3.put_object(Bucket=BUCKET, Key=key, Body=body)
            got = await s3.get_object(Bucket=BUCKET, Key=key)
            async with got["Body"] as stream:
                await stream.read()

        await one(0)
        return await _run(pairs, conc, one)


async def boto3_rate(url: str, secret: str, pairs: int, conc: int, body: bytes) -> float:
    import boto3
    from botocore.config import Config

    s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=secret, region_name="us-east-1",
                      config=Config(max_pool_connections=conc, retries={"max_attempts": 1}))
    pool = ThreadPoolExecutor(conc)
    loop = asyncio.get_running_loop()

    def pair(key: str) -> None:
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    async def one(i: int) -> None:
        await loop.run_in_executor(pool, pair, f"bench/boto3/{i % 100}")

    try:
        await one(0)
        return await _run(pairs, conc, one)
    finally:
        pool.shutdown()


CLIENTS = {"obstore": obstore_rate, "aiobotocore": aiobotocore_rate,
           "boto3 (thread pool)": boto3_rate}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", type=int, default=2000, help="PUT+GET pairs per round")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--object-bytes", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="replicalab-s3bench-"))
    c = base.up("minio", 1, "lan", name="s3bench", root=root)
    try:
        url, secret = _endpoint(c)
        body = b"x" * args.object_bytes
        rates: dict[str, list[float]] = {n: [] for n in CLIENTS}
        for _ in range(args.rounds):  # interleaved: a busy spell hits every client alike
            for name, fn in CLIENTS.items():
                rates[name].append(asyncio.run(fn(url, secret, args.ops, args.concurrency,
                                                  body)))
        ref = statistics.median(rates["obstore"])
        print(f"PUT+GET pairs/s of {args.object_bytes} B objects, {args.concurrency} in "
              f"flight, median of {args.rounds} rounds of {args.ops} (one MinIO site):")
        for name, r in rates.items():
            med = statistics.median(r)
            print(f"  {name:22s} {med:8.0f} pairs/s  ({med / ref:.2f}x obstore; rounds "
                  f"{', '.join(f'{x:.0f}' for x in r)})")
    finally:
        base.down("s3bench", root)


if __name__ == "__main__":
    main()

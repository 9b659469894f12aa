"""Benchmark: send + receive + delete messages/s on the real queue backends, side by side.

One single-node Redis and one single-node PostgreSQL, started by replicalab (``cluster``
code, 127.0.0.1), each measured with the lab settings ``cluster up`` uses (Redis: no
persistence; PostgreSQL: ``fsync = off``, ``synchronous_commit = local``) and with the
settings that make an acknowledged send survive a power loss (Redis ``appendonly yes`` +
``appendfsync always``; PostgreSQL ``fsync = on``), switched on the same servers between
points. For each of 1, 4, 16 consumers: ``--messages`` are sent by as many producers as
consumers (each on its own connection), then received (batches of ``--batch``, 30 s
leases) and deleted one by one by the consumers; the point's rate is messages / (send time
+ drain time). Every message must be delivered once and deleted (checked). The order of the
configurations alternates over ``--rounds``; medians over rounds are printed with each
configuration's ratio to lab Redis at the same consumer count.

All clients run in this one Python process (asyncio), so on a small machine the client's
CPU is part of what is measured; the ratios between backends are the point.

Run: .venv/bin/python benchmarks/bench_queues_real.py [--messages 2000 --rounds 3]
Other benchmarks may import :func:`measure_point` (e.g. bench_queues.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg
import redis

from replicalab.cluster import base, process
from replicalab.queues.base import Queue
from replicalab.queues.postgres import open_postgres_queue
from replicalab.queues.redis import open_redis_queue

CONSUMERS = (1, 4, 16)


@dataclass
class Point:
    """One measured point: rates in messages per second, times in seconds."""

    config: str
    consumers: int
    messages: int
    send_s: float
    drain_s: float
    messages_per_s: float


async def measure_point(q: Any, config: str, consumers: int, messages: int,
                        batch: int = 10) -> Point:
    """Send ``messages`` with ``consumers`` producers, then receive and delete them with
    ``consumers`` consumers; return the rates (ValueError if a message was lost or
    delivered twice). ``q`` is an opened queue with a ``purge`` method (empty at start)."""
    await q.purge()
    producers = [await q.connect() for _ in range(consumers)]

    async def produce(k: int) -> None:
        for i in range(k, messages, consumers):
            await producers[k].send(f"m{i}")

    t0 = time.perf_counter()
    await asyncio.gather(*(produce(k) for k in range(consumers)))
    t1 = time.perf_counter()
    clients = [await q.connect() for _ in range(consumers)]
    seen: list[str] = []

    async def drain(k: int) -> None:
        for _ in range(messages + 1):  # bounded: every round takes one or more, or stops
            got = await clients[k].receive(batch, 30.0)
            if not got:
                return
            for d in got:
                seen.append(d.body)
                await clients[k].delete(d.receipt)

    await asyncio.gather(*(drain(k) for k in range(consumers)))
    t2 = time.perf_counter()
    for c in producers + clients:
        await c.close()
    if len(seen) != messages or len(set(seen)) != messages:
        raise ValueError(f"{config}: {len(seen)} deliveries of {len(set(seen))} distinct "
                         f"messages for {messages} sent")
    if await q.depth() != (0, 0):
        raise ValueError(f"{config}: messages left after the drain: {await q.depth()}")
    return Point(config, consumers, messages, t1 - t0, t2 - t1, messages / (t2 - t0))


def _redis_config(port: int, durable: bool) -> None:
    r = redis.Redis(port=port)
    if durable:
        r.config_set("appendonly", "yes")
        deadline = time.monotonic() + 30
        # switching AOF on rewrites the file in the background; wait for it
        while time.monotonic() < deadline:
            info = r.info("persistence")
            if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                break
            time.sleep(0.05)
        r.config_set("appendfsync", "always")
    else:
        r.config_set("appendonly", "no")
    r.close()


def _postgres_config(port: int, durable: bool) -> None:
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                         autocommit=True) as conn:
        want = "on" if durable else "off"
        conn.execute(f"ALTER SYSTEM SET fsync = {want}")
        conn.execute("SELECT pg_reload_conf()")
    # the reload is a signal the postmaster handles later: wait until new sessions see it
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            row = conn.execute("SHOW fsync").fetchone()
        if row and row[0] == want:
            return
        time.sleep(0.05)
    raise ValueError(f"PostgreSQL on port {port} did not take fsync = {want} within 10 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--consumers", default=",".join(map(str, CONSUMERS)))
    ap.add_argument("--json", action="store_true", help="print the points as JSON too")
    args = ap.parse_args()
    counts = [int(x) for x in args.consumers.split(",")]
    process.install_signal_handlers()  # SIGTERM stops the servers too, as Ctrl-C does
    root = Path(tempfile.mkdtemp(prefix="replicalab-bench-queues-"))
    root.chmod(0o755)  # PostgreSQL runs as `postgres` and must reach its data directory
    names = []
    try:
        rc = base.up("redis", 1, "dc3", name="bq-redis", root=root)
        names.append(rc.name)
        pc = base.up("postgres", 1, "dc3", name="bq-postgres", root=root)
        names.append(pc.name)
        rport, pport = rc.nodes[0].port, pc.nodes[0].port
        configs: dict[str, tuple[Callable[[], None], Callable[[], Queue]]] = {
            "redis": (lambda: _redis_config(rport, False),
                      lambda: open_redis_queue(rc.url + "&queue=bench", 1)),
            "redis aof-always": (lambda: _redis_config(rport, True),
                                 lambda: open_redis_queue(rc.url + "&queue=bench", 1)),
            "postgresql": (lambda: _postgres_config(pport, False),
                           lambda: open_postgres_queue(pc.url + "&queue=bench", 1)),
            "postgresql fsync": (lambda: _postgres_config(pport, True),
                                 lambda: open_postgres_queue(pc.url + "&queue=bench", 1)),
        }
        points: list[Point] = []
        order = list(configs)
        for r in range(args.rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                setup, opener = configs[name]
                setup()
                for n in counts:
                    p = asyncio.run(_one(opener, name, n, args.messages, args.batch))
                    points.append(p)
                    print(f"  round {r + 1} {name:<18} {n:>3} consumers "
                          f"{p.messages_per_s:8.0f} msg/s (send {p.send_s:.2f} s, "
                          f"drain {p.drain_s:.2f} s)", flush=True)
        _table(points, order, counts)
        if args.json:
            print(json.dumps([asdict(p) for p in points]))
    finally:
        if names:
            base.down_many(names, root)
        shutil.rmtree(root, ignore_errors=True)


async def _one(opener: Callable[[], Any], name: str, consumers: int, messages: int,
               batch: int) -> Point:
    q = opener()
    try:
        return await measure_point(q, name, consumers, messages, batch)
    finally:
        await q.close()


def _table(points: list[Point], order: list[str], counts: list[int]) -> None:
    med = {(c, n): statistics.median(p.messages_per_s for p in points
                                     if p.config == c and p.consumers == n)
           for c in order for n in counts}
    print("\nmedian messages/s (send + receive + delete), ratio to lab redis:")
    print(f"{'configuration':<20}" + "".join(f"{f'{n} consumers':>22}" for n in counts))
    for c in order:
        cells = "".join(f"{med[c, n]:>12.0f} ({med[c, n] / med['redis', n]:.2f}x)"
                        .rjust(22) for n in counts)
        print(f"{c:<20}{cells}")


if __name__ == "__main__":
    main()

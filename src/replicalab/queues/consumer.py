"""One consumer process of the queue workload, for crashes that are real: SIGKILL it.

``python -m replicalab.queues.consumer --queue URL --strategy central --central URL
--record consumer.jsonl [--threads 4] [--idle-s 5] ...`` runs the workload's consumer
threads (``queues/worker.py`` Worker, any strategy) in one process against a real queue
until SIGTERM (a clean stop), ``--max-duration-s``, or ``--idle-s`` without a delivery. Every
operation is streamed to ``--record`` as it opens and closes (one JSON line each, flushed),
so a SIGKILL leaves the record of everything the process began; ``queues/record.py``
``read_jsonl`` reads it back (rows never closed become ``info``: killed) and ``merge`` joins
the records of several processes for the delivery checker. Consumers of several processes
sharing ``--claims`` (the central store's claim domain) resolve each message between them.
``--fault-plan`` (written by the runner, ``queues/nemesis.py``) gives the skews of its
threads' clocks and the central-store faults, on the machine's monotonic clock; a pause is
the runner's SIGSTOP. With ``--go-file`` the process connects, says it is ready
(``RECORD.ready``) and waits for the runner to write the plan there, so that every
consumer starts together and a fault's ``at=`` counts from that start, not from Python's.

Simulated queues run in one process's virtual time and are refused here. Bad input exits 2
with one line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path

from replicalab.queues.backends import open_backends
from replicalab.queues.nemesis import FaultPlan
from replicalab.queues.record import QueueLog, jsonl_sink
from replicalab.queues.spec import QueueSpec
from replicalab.queues.strategies import STRATEGIES, make_strategy
from replicalab.queues.worker import Ctx, Reader, Worker, settle_commits
from replicalab.runtime.base import NS_PER_S


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m replicalab.queues.consumer",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--queue", required=True, help="real queue URL (redis://, postgresql://)")
    ap.add_argument("--strategy", default="none", choices=STRATEGIES)
    ap.add_argument("--central", default=None, help="central store URL (central strategies)")
    ap.add_argument("--claims", default="claims-shared",
                    help="claim domain shared by the consumer processes of one run")
    ap.add_argument("--record", type=Path, required=True, help="JSON-lines record to append")
    ap.add_argument("--index", type=int, default=0, help="number of this process's first "
                    "thread (process ids in the record)")
    ap.add_argument("--gen", type=int, default=0, help="restart generation of this process")
    ap.add_argument("--threads", type=int, default=1, help="consumer threads (one reader)")
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--visibility-s", type=float, default=30.0)
    ap.add_argument("--process-ms", type=float, default=1000.0)
    ap.add_argument("--process-sigma", type=float, default=0.5)
    ap.add_argument("--slow-fraction", type=float, default=0.0)
    ap.add_argument("--slow-s", type=float, default=45.0)
    ap.add_argument("--empty-poll-ms", type=float, default=100.0)
    ap.add_argument("--idle-s", type=float, default=0.0,
                    help="stop after this long without a delivery (0: never)")
    ap.add_argument("--max-duration-s", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--settle-s", type=float, default=5.0,
                    help="on SIGTERM, wait up to this long for commits in flight")
    ap.add_argument("--fault-plan", default="[]",
                    help="skews and central-store faults as the runner writes them (JSON)")
    ap.add_argument("--go-file", type=Path, default=None,
                    help="once connected, touch RECORD.ready and wait for this file: the "
                    "fault plan the runner writes when every consumer is up")
    return ap.parse_args(argv)


async def consume(a: argparse.Namespace) -> int:
    """Run the consumer threads until stopped; return how many messages they deleted."""
    spec = QueueSpec(queue=a.queue, consumers=a.threads, strategy=a.strategy,
                     central=a.central, readers=1, batch=a.batch, visibility_s=a.visibility_s,
                     process_ms=a.process_ms, process_sigma=a.process_sigma,
                     slow_fraction=a.slow_fraction, slow_s=a.slow_s,
                     empty_poll_ms=a.empty_poll_ms, max_duration_s=a.max_duration_s,
                     seed=a.seed)
    spec.check()
    plan = FaultPlan.from_json(a.fault_plan)
    queue, store = open_backends(spec)
    if queue.runtime.virtual:
        raise ValueError("a simulated queue lives in one process's virtual time; give a "
                         "real queue URL (redis://, postgresql://)")
    rt = queue.runtime
    clients = [(await queue.connect(), await store.connect() if store is not None else None)
               for _ in range(a.threads)]
    stop = [False]
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: stop.__setitem__(0, True))
    if a.go_file is not None:  # the runner starts every consumer at once, with the plan
        Path(f"{a.record}.ready").touch()
        plan = await _wait_for_go(a.go_file, a.max_duration_s, stop)
    log = QueueLog(jsonl_sink(a.record))
    ctx = Ctx(spec, rt, queue, log, make_strategy(a.strategy, a.visibility_s), store,
              a.claims, f"p{a.index}", plan, stopping=stop[0])
    loop.add_signal_handler(signal.SIGTERM, lambda: setattr(ctx, "stopping", True))
    reader = Reader(0)
    workers = [Worker(ctx, a.index + k, a.gen, reader, qc, sc)
               for k, (qc, sc) in enumerate(clients)]
    tasks = [asyncio.ensure_future(w.run()) for w in workers]
    start = last_seen = time.monotonic()
    seen = 0
    try:
        while not ctx.stopping and not all(t.done() for t in tasks):
            await asyncio.sleep(0.05)
            now = time.monotonic()
            delivered = log.cols["kind"].count("deliver")
            if delivered != seen:
                seen, last_seen = delivered, now
            if now - start > a.max_duration_s or (a.idle_s and now - last_seen > a.idle_s):
                break
    finally:
        ctx.stopping = True
        # a clean stop lets a commit in flight learn its outcome first (bounded)
        await settle_commits(rt, log, NS_PER_S // 20, int(a.settle_s * NS_PER_S))
        for t in tasks:  # the batch in hand is abandoned, its rows closed
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        log.close_open(rt.now_ns(), "stopped")
        for w in workers:
            for c in (w.client, *w.stores):
                if c is not None:
                    with contextlib.suppress(Exception):
                        await c.close()
        await queue.close()
        if store is not None:
            await store.close()
    return len(ctx.deleted)


async def _wait_for_go(path: Path, limit_s: float, stop: list[bool]) -> FaultPlan:
    """Return the fault plan in ``path`` once the runner has written it (an empty plan if
    stopped or ``limit_s`` passes first)."""
    deadline = time.monotonic() + limit_s
    while not stop[0] and time.monotonic() < deadline:
        if path.exists():
            return FaultPlan.from_json(path.read_text())
        await asyncio.sleep(0.02)
    return FaultPlan()


def main(argv: list[str] | None = None) -> int:
    """Entry point: run, print one summary line; 2 with one line for bad input."""
    a = _args(argv)
    try:
        deleted = asyncio.run(consume(a))
    except ValueError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"consumer {a.index}: deleted {deleted} messages; record in {a.record}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

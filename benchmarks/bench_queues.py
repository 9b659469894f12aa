"""Benchmark: the queue workload's throughput per backend at 1, 4 and 16 consumers, and each
strategy's throughput as a ratio of ``none`` on the same backend in the same run.

A message counts when its whole cycle is done (send, receive, process, commit, delete; the
commit is a store write for every strategy, ``queues/effects.py``); the
throughput is distinct messages processed per second from the first send to the last
commit (the delivery checker's ``throughput_per_s``): virtual seconds on ``sim://sqs``
(what the model predicts for SQS with a SimpleDB central store), wall seconds on real
backends. Two processing regimes: the workload's default (median 1 s, lognormal sigma 0.5,
no slow outliers) and none at all (the strategies' overhead laid bare). The simulator's own
speed (wall seconds per run) is printed too. Each figure is the median of ``--repeats``
seeds; ratios are taken per seed, then the median.

Target (issue 11): ``central`` keeps at least half of ``none``'s throughput on the
simulated store.

Run: .venv/bin/python benchmarks/bench_queues.py [--messages 2000] [--repeats 3]
     [--queue redis://127.0.0.1:P --central redis://127.0.0.1:P --regime "process 0"]
(a real queue URL without ``queue=``: every run gets a fresh queue name)
"""

from __future__ import annotations

import argparse
import statistics
import time

from replicalab.checkers.deliveries import check_deliveries
from replicalab.queues.runner import run_workload
from replicalab.queues.spec import QueueSpec
from replicalab.queues.strategies import STRATEGIES

REGIMES = {"process 1 s": 1000.0, "process 0": 0.0}


def one(queue: str, strategy: str, consumers: int, process_ms: float, messages: int,
        seed: int, central: str | None) -> tuple[float, float, float, float]:
    """Return (messages/s, central-store ops per message, wall s, effect-store ops per
    message) of one run."""
    if not queue.startswith("sim://"):
        # a fresh queue per run: nothing a previous run left behind is delivered to this one
        queue += ("&" if "?" in queue else "?") + f"queue=bench{time.time_ns() % 10**12:x}"
    spec = QueueSpec(queue=queue, consumers=consumers, strategy=strategy,
                     central=central if strategy.startswith("central") else None,
                     messages=messages, producers=16, process_ms=process_ms,
                     slow_fraction=0.0, seed=seed,
                     visibility_s=30.0 if queue.startswith("sim://") else 10.0)
    t0 = time.perf_counter()
    o = run_workload(spec)
    wall = time.perf_counter() - t0
    s = check_deliveries(o.log.columns(), o.dead_letters)["summary"]
    if s["lost"] or (strategy != "none" and s["duplicate_processing"]):
        raise AssertionError(f"{queue} {strategy} c={consumers}: lost {s['lost']}, "
                             f"duplicate processing {s['duplicate_processing']}")
    return (s["throughput_per_s"], s["store_ops_per_message"], wall,
            s["effect_store_ops_per_message"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--consumers", default="1,4,16")
    ap.add_argument("--queue", action="append", default=None,
                    help="queue URL (repeatable); default sim://sqs")
    ap.add_argument("--regime", action="append", choices=list(REGIMES), default=None,
                    help="processing regime (repeatable); default both")
    ap.add_argument("--central", default=None,
                    help="central store for real queues (sim://sqs uses sim://simpledb)")
    args = ap.parse_args()
    counts = [int(x) for x in args.consumers.split(",")]
    queues = args.queue or ["sim://sqs"]
    print(f"messages={args.messages} repeats={args.repeats} (median of seeds 1..{args.repeats})")
    print(f"{'queue':<12} {'regime':<12} {'cons':>4} {'strategy':<15} {'msgs/s':>9} "
          f"{'vs none':>8} {'store ops/msg':>13} {'effect ops/msg':>14} {'wall s':>7}")
    worst: dict[str, float] = {}
    for queue in queues:
        central = None if queue.startswith("sim://") else args.central
        for regime in args.regime or list(REGIMES):
            process_ms = REGIMES[regime]
            for c in counts:
                runs = {st: [one(queue, st, c, process_ms, args.messages, seed, central)
                             for seed in range(1, args.repeats + 1)] for st in STRATEGIES}
                for st in STRATEGIES:
                    rate = statistics.median(r[0] for r in runs[st])
                    ratio = statistics.median(r[0] / n[0] for r, n in zip(
                        runs[st], runs["none"], strict=True))
                    ops = statistics.median(r[1] for r in runs[st])
                    effect_ops = statistics.median(r[3] for r in runs[st])
                    wall = statistics.median(r[2] for r in runs[st])
                    key = f"{queue.split('?')[0]} {regime} {st}"
                    worst[key] = min(worst.get(key, ratio), ratio)
                    print(f"{queue.split('?')[0]:<12} {regime:<12} {c:>4} {st:<15} "
                          f"{rate:>9.1f} {ratio:>8.2f} {ops:>13.2f} {effect_ops:>14.2f} "
                          f"{wall:>7.2f}")
    print()
    for key, ratio in worst.items():
        if key.endswith(" central"):
            verdict = "meets" if ratio >= 0.5 else "misses"
            print(f"{key}: lowest ratio to none {ratio:.2f} ({verdict} the >= 0.5 target)")


if __name__ == "__main__":
    main()

"""Benchmark: duplicate effects under consumer and central-store faults, ``central-lease``
(today's lease) against ``central`` (fenced), side by side on ``sim://sqs`` in virtual time.

Two parts, every count read by the delivery checker from the recorded history, results from
the effect lists read back from the central store (each run also checks that the consumers'
own record agrees and that the five categories of messages add up):

* **scenarios** — issue 22's three faults at its example's size (8 consumers, 2000 messages,
  4 s visibility, 500 ms processing), each over seeds 1..N: a consumer paused past its lease,
  a consumer whose clock is 5 s ahead (the lease is 2 s), and 1 s of central-store errors
  during renewals (processing of 3 s, so the lease is renewed and the visibility runs out).
  Printed: in how many seeds each strategy committed some message twice, and the totals of
  duplicate results, duplicate processing, commits refused by the fence and losses;
* **random schedules** — N schedules of 1-5 pauses, skews, crashes, store errors and
  timeouts (seeded, the shape of tests/test_queues_nemesis.py's Hypothesis test), the same
  schedule under both strategies.

Run: .venv/bin/python benchmarks/bench_queue_faults.py [--seeds 10] [--schedules 300]
     [--strategies none,tag,central-detect]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from typing import Any

from replicalab.checkers.deliveries import check_deliveries
from replicalab.faults.schedule import parse_fault
from replicalab.queues.runner import run_workload
from replicalab.queues.spec import QueueSpec

STRATEGIES = ("central-lease", "central")
BASE = dict(queue="sim://sqs", consumers=8, central="sim://simpledb", messages=2000,
            visibility_s=4.0, process_ms=500.0)
SCENARIOS: dict[str, tuple[str, dict[str, Any]]] = {
    "pause consumer 1 for 10 s": ("at=3s pause consumer=1 for=10s", {}),
    "clock of consumer 2 +5 s": ("skew consumer=2 ms=5000", {}),
    "store errors 1 s, 3 s work": ("at=5s errors store=central for=1s",
                                   dict(process_ms=3000.0, process_sigma=0.2,
                                        slow_fraction=0.0)),
}
KEYS = ("duplicate_results", "duplicate_processing", "fenced_commits", "lost",
        "uncertain_results", "dead_lettered", "dead_lettered_without_commit")
HEADS = ("dup res", "dup proc", "fenced", "lost", "unknown", "dead", "dead, no commit")
CATEGORIES = ("committed_once", "committed_more_than_once", "dead_lettered_without_commit",
              "lost", "not_reached")


def summary(strategy: str, faults: tuple[str, ...], seed: int, **kw: Any) -> dict[str, Any]:
    """Return the checker's summary of one run (its notes must be empty: it finished)."""
    if not strategy.startswith("central"):
        kw = {k: v for k, v in kw.items() if k != "central"}
    spec = QueueSpec(strategy=strategy, faults=tuple(parse_fault(f) for f in faults),
                     seed=seed, **kw)
    o = run_workload(spec)
    if o.notes:
        raise AssertionError(f"{strategy} {faults} seed {seed}: {o.notes}")
    s = check_deliveries(o.log.columns(), o.dead_letters)["summary"]
    # results are the effects read back from the store; the consumers' record must agree,
    # and every message is in exactly one of the five categories
    if s["results_from"] != "effect store" or not s["effects_agree_with_log"]:
        raise AssertionError(f"{strategy} {faults} seed {seed}: the effect store and the "
                             "consumers' record disagree")
    if sum(s[k] for k in CATEGORIES) != s["messages"]:
        raise AssertionError(f"{strategy} {faults} seed {seed}: the accounting does not close")
    return s


def schedule(rnd: random.Random, consumers: int) -> tuple[str, ...]:
    """Return 1-5 random faults on ``consumers`` consumers and the central store."""
    out = []
    for _ in range(rnd.randint(1, 5)):
        action = rnd.choice(["pause", "skew", "crash", "errors", "timeouts"])
        at, dur, k = rnd.randint(0, 80) / 10, rnd.randint(1, 150) / 10, rnd.randrange(consumers)
        if action == "skew":
            ms = rnd.choice([-5000, -1500, 800, 5000])
            out.append(f"at={at}s skew consumer={k} ms={ms} for={dur}s")
        elif action == "errors":
            out.append(f"at={at}s errors store=central for={dur}s")
        elif action == "timeouts":
            out.append(f"at={at}s timeouts store=central for={dur}s ms={rnd.randint(50, 1500)}")
        else:
            out.append(f"at={at}s {action} consumer={k} for={dur}s")
    return tuple(out)


def row(name: str, strategy: str, runs: list[dict[str, Any]]) -> str:
    """Return one printed line: runs with a duplicate result, then the totals."""
    total = Counter({k: sum(r[k] for r in runs) for k in KEYS})
    hit = sum(1 for r in runs if r["duplicate_results"])
    return (f"{name:<28} {strategy:<14} {hit:>3}/{len(runs):<3} "
            + " ".join(f"{total[k]:>{max(8, len(h))}}" for k, h in zip(KEYS, HEADS,
                                                                       strict=True)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1..N per scenario")
    ap.add_argument("--schedules", type=int, default=300, help="random schedules")
    ap.add_argument("--strategies", default=",".join(STRATEGIES),
                    help="strategies, comma-separated (a store fault needs a central one)")
    args = ap.parse_args()
    strategies = [x for x in args.strategies.split(",") if x]
    t0 = time.perf_counter()
    print(f"{'':<28} {'strategy':<14} {'dup runs':<7} " + " ".join(f"{h:>8}" for h in HEADS))
    for name, (fault, extra) in SCENARIOS.items():
        for strategy in strategies:
            if "store=" in fault and not strategy.startswith("central"):
                continue
            runs = [summary(strategy, (fault,), seed, **{**BASE, **extra})
                    for seed in range(1, args.seeds + 1)]
            print(row(name, strategy, runs), flush=True)
    rnd = random.Random(22)
    plans = [(schedule(rnd, 4), rnd.randint(1, 10**6)) for _ in range(args.schedules)]
    small = dict(queue="sim://sqs?max_receives=100", consumers=4, central="sim://simpledb",
                 messages=60, visibility_s=2.0, process_ms=300.0, slow_fraction=0.05,
                 slow_s=3.0, batch=3, max_duration_s=300.0)
    for strategy in strategies:
        if not strategy.startswith("central"):  # the schedules fail the central store too
            continue
        runs = [summary(strategy, faults, seed, **small) for faults, seed in plans]
        print(row(f"{args.schedules} random schedules", strategy, runs), flush=True)
    print(f"wall {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

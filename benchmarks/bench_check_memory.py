"""Benchmark: time and peak memory of checking a 101,000-operation history (100 keys of
1,010 operations, sequential-register histories with ~3 operations in flight and 2 % info
writes), the figures of docs/linearizability.md's memory table and BENCHMARKS.md.

Each measure runs in a fresh interpreter (``ru_maxrss`` is a process's high-water mark):
the operations are recorded as a replicalab History (``History.invoke`` / ``ok`` /
``info``) and the generator's LinOps dropped, then the high-water mark is read, the check
runs, and the mark is read again. Cases:

* ``history``: ``check_history(h)`` — what ``replicalab check RUN_DIR`` and the register
  workload run (the History's columns encoded natively, no LinOp per row);
* ``linops``: ``check(ops_from_history(h))`` on the same History;
* ``hopeless``: 99 such keys and one whose search cannot end (24 concurrent writes read
  in every order, then two reads of different values), ``check_history`` with an 8 s
  timeout and a 16 MB memo bound: ``unknown``, 99 keys decided.

Run: .venv/bin/python benchmarks/bench_check_memory.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r'''
import gc, json, random, resource, sys, time
from replicalab.checkers.linearizability.from_history import check_history, ops_from_history
from replicalab.checkers.linearizability.checker import check
from replicalab.history import History

def key_history(rnd, key, n, out):
    # a sequential register per key: each op takes effect at a point inside its interval;
    # about 3 ops overlap at a time, 1 in 50 writes ends info
    state, t, raw = None, 0, []
    for i in range(n):
        t += rnd.randint(0, 300)
        d = rnd.randint(100, 1000)
        raw.append((t + rnd.randint(0, d), i, t, t + d))
    raw.sort()
    for _, i, inv, comp in raw:
        f = rnd.choice(("read", "write", "cas"))
        if f == "read":
            out.append((i % 10, "read", key, state, None, "ok", inv, comp))
            continue
        new = f"{len(out)}.{key}"
        if f == "cas" and state is not None:
            out.append((i % 10, "cas", key, new, state, "ok", inv, comp))
        else:
            out.append((i % 10, "write", key, new, None,
                        "info" if rnd.random() < 0.02 else "ok", inv, comp))
        state = new

def hopeless(key, out, writers=24):
    for i in range(writers):
        out.append((i, "write", key, str(i + 1), None, "ok", 0, 10**6))
    for j in range(writers):
        out.append((100 + j, "read", key, str(j + 1), None, "ok", 5 * 10**5, 10**6))
    out.append((999, "read", key, "1", None, "ok", 2 * 10**6, 2 * 10**6 + 1))
    out.append((998, "read", key, "2", None, "ok", 2 * 10**6 + 2, 2 * 10**6 + 3))

case = sys.argv[1]
rnd = random.Random(7)
rows = []
n_hard = 1 if case == "hopeless" else 0
for k in range(100 - n_hard):
    key_history(rnd, f"k{k}", 1010, rows)
for k in range(n_hard):
    hopeless(f"hard{k}", rows)
h = History()
for p, f, key, value, expect, outcome, inv, comp in sorted(rows, key=lambda r: r[6]):
    if f == "cas":
        row = h.invoke(p, "cas", (key,), (value,), "none", inv, (expect,))
    else:
        row = h.invoke(p, f, (key,), (None if f == "read" else value,), "none", inv)
    if outcome == "ok":
        h.ok(row, comp, (value,) if f == "read" else None)
    else:
        h.info(row, comp, "timed out")
del rows
gc.collect()
base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
if case == "linops":
    r = check(ops_from_history(h), "kv")
elif case == "hopeless":
    r = check_history(h, "kv", timeout_s=8, cache_bytes=16 * 2**20)
else:
    r = check_history(h, "kv")
took = time.perf_counter() - t
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"case": case, "ops": len(h), "verdict": r.verdict.json(),
                  "decided": sum(p.verdict == 1 for p in r.parts), "keys": len(r.parts),
                  "s": took, "mb": peak_mb - base_mb}))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print("| case | ops | verdict | keys decided | check s (runs) | median s | "
          "peak memory above the History, MB (runs) |")
    print("|---|---:|---|---:|---|---:|---|")
    for case in ("history", "linops", "hopeless"):
        docs = []
        for _ in range(args.runs):
            p = subprocess.run([sys.executable, "-c", CHILD, case], capture_output=True,
                               text=True, timeout=600)
            if p.returncode != 0:
                raise SystemExit(f"{case}: {p.stderr.strip()}")
            docs.append(json.loads(p.stdout))
        d = docs[0]
        times = ", ".join(f"{x['s']:.3f}" for x in docs)
        mbs = ", ".join(f"{x['mb']:.0f}" for x in docs)
        print(f"| {case} | {d['ops']:,} | {d['verdict']} | {d['decided']} of {d['keys']} | "
              f"{times} | {statistics.median(x['s'] for x in docs):.3f} | +{mbs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: ``replicalab check --model list-append`` as a user runs it (process start,
reading the file, checking, explaining, printing --json) on generated Elle-style
histories of 10^4, 10^5 and 10^6 transactions: serializable ones (a serial execution
with overlapping timings compatible with its order) and the same with one injected
anomaly of every class (``checkers/txn/synth.py``). Reports transactions per second and
the child's peak memory (``ru_maxrss`` from ``os.wait4``), and checks every verdict.

Peer: Elle itself is published on Clojars, which this machine cannot reach (Maven Central
only; ``mvn dependency:get -Dartifact=elle:elle:0.2.1`` fails), so the peer in the same
run is our pure-Python reference (``REPLICALAB_TXN_ENGINE=python``, up to
``--python-up-to`` transactions) and the goal line: 200,000 transactions/s at 10^6 in
under 2 GB. Elle's published figure is ~100,000-160,000 transactions/s.

Run: .venv/bin/python benchmarks/bench_txn_check.py [--sizes 10000,100000,1000000]
     [--python-up-to 100000] [--run-dir] [--dir /tmp/txnbench]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from replicalab.checkers.txn.synth import EXPECTED, GADGETS, gadget, serial
from replicalab.checkers.txn.types import Txn

EXE = str(Path(sys.executable).parent / "replicalab")
GOAL_TXN_PER_S = 200_000
GOAL_MB = 2048


def _edn_mop(f: str, k: str, v: object) -> str:
    if v is None:
        val = "nil"
    elif isinstance(v, tuple | list):
        val = "[" + " ".join(map(str, v)) + "]"
    else:
        val = str(v)
    key = k if k.isdigit() else json.dumps(k)
    return f"[:{f} {key} {val}]"


def write_edn(txns: list[Txn], path: Path) -> None:
    """Write ``txns`` as Jepsen events (invoke, completion) in time order, one per line."""
    events = []
    for t in txns:
        inv = " ".join(_edn_mop(f, k, None if f == "r" else v) for f, k, v in t.mops)
        events.append((t.invoke, 0, t.process, f"{{:type :invoke, :f :txn, :value [{inv}], "
                                               f":process {t.process}, :time {t.invoke}}}"))
        if t.outcome != "info":
            done = " ".join(_edn_mop(f, k, v) for f, k, v in t.mops)
            events.append((t.complete, 1, t.process,
                           f"{{:type :{t.outcome}, :f :txn, :value [{done}], "
                           f":process {t.process}, :time {t.complete}}}"))
    events.sort(key=lambda e: (e[0], e[1]))
    with path.open("w") as out:
        for *_, line in events:
            out.write(line + "\n")


def history(n: int, anomalous: bool, seed: int) -> list[Txn]:
    """Return a serial history of ``n`` transactions (keys as integers, ~8 concurrent),
    with one gadget of every anomaly class at random points when ``anomalous``."""
    rng = random.Random(seed)
    txns = serial(rng, n, keys=100, max_len=4, fail_p=0.02, info_p=0.01)
    if anomalous:
        end = 10 * n
        procs = max(t.process for t in txns) + 1
        for i, name in enumerate(GADGETS):
            g = gadget(name, start=rng.randrange(end), process=procs + 4 * i,
                       index=len(txns), key=str(10**9 + 10 * i))
            txns += g
    return txns


def run_check(path: Path, engine: str) -> tuple[float, float, float, int, dict]:
    """Return (wall s, CPU s, peak MB, exit status, --json doc) of one ``replicalab
    check``, run under ``/usr/bin/time`` so the peak is the command's own (a child forked
    from this process would count the generator's pages in its ``ru_maxrss``). CPU is
    the command's user + system time: the machine is shared, so wall time carries other
    processes' load."""
    env = dict(os.environ, REPLICALAB_TXN_ENGINE=engine)
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        started = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-o", tf.name, "-f", "%M %U %S", EXE,
                               "check", str(path), "--model", "list-append", "--json",
                               "--timeout", "10m"], stdout=subprocess.PIPE, env=env,
                              check=False)
        wall = time.perf_counter() - started
        fields = tf.read().split()[-3:]
    kb, user, sys_s = int(fields[0]), float(fields[1]), float(fields[2])
    doc = json.loads(proc.stdout)["results"][0] if proc.stdout.strip() else {}
    return wall, user + sys_s, kb / 1024, proc.returncode, doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--python-up-to", type=int, default=100_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/txnbench"))
    ap.add_argument("--run-dir", action="store_true",
                    help="also time a run directory (history.parquet) of each history")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    expected = set().union(*(EXPECTED[g] for g in GADGETS))
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        for anomalous in (False, True):
            kind = "injected" if anomalous else "serial"
            path = args.dir / f"la-{n}-{kind}.edn"
            txns = None
            if not path.exists():
                txns = history(n, anomalous, seed=n)
                write_edn(txns, path)
            inputs = [("edn", path)]
            if args.run_dir:
                rdir = args.dir / f"la-{n}-{kind}-run"
                if not (rdir / "history.parquet").exists():
                    txns = txns or history(n, anomalous, seed=n)
                    _save_run(txns, rdir)
                inputs.append(("run-dir", rdir))
            del txns  # the generator's memory is not the checker's
            for fmt, p in inputs:
                engines = ["native"] + (["python"] if n <= args.python_up_to else [])
                for engine in engines:
                    wall, cpu, mb, code, doc = run_check(p, engine)
                    total = doc.get("txns", 0)
                    found = set(doc.get("anomaly_types", ()))
                    right = (code == 0 and doc.get("valid") is True) if not anomalous else (
                        code == 1 and expected <= found)
                    rows.append((n, kind, fmt, engine, total, wall, cpu, mb, right))
                    print(f"{n:>9,} {kind:>8} {fmt:>7} {engine:>6}: {total:>9,} txns "
                          f"{wall:7.2f} s wall ({total / wall:>10,.0f} txn/s) {cpu:7.2f} s "
                          f"CPU ({total / cpu:>10,.0f} txn/s) peak {mb:7.0f} MB verdict "
                          f"{'right' if right else 'WRONG'}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print()
    print("| transactions | history | input | engine | wall s | txn/s (wall) | CPU s | "
          "txn/s (CPU) | peak MB | verdict |")
    print("|---:|---|---|---|---:|---:|---:|---:|---:|---|")
    for _, kind, fmt, engine, total, wall, cpu, mb, right in rows:
        print(f"| {total:,} | {kind} | {fmt} | {engine} | {wall:.2f} | {total / wall:,.0f} | "
              f"{cpu:.2f} | {total / cpu:,.0f} | {mb:,.0f} | "
              f"{'right' if right else 'WRONG'} |")
    big = [r for r in rows if r[3] == "native" and r[0] == max(x[0] for x in rows)]
    for _, kind, fmt, _, total, wall, cpu, mb, _ in big:
        for what, secs in (("wall", wall), ("CPU", cpu)):
            rate = total / secs
            ok = rate >= GOAL_TXN_PER_S and mb < GOAL_MB
            print(f"goal ({GOAL_TXN_PER_S:,} txn/s, < {GOAL_MB} MB) at {total:,} {kind} {fmt} "
                  f"by {what} time: {rate / GOAL_TXN_PER_S:.2f}x of the rate, {mb:,.0f} MB: "
                  f"{'met' if ok else 'NOT met'}")
    if not all(r[8] for r in rows):
        sys.exit(1)


def _save_run(txns: list[Txn], rdir: Path) -> None:
    """Record ``txns`` as a replicalab run (a History of txn rows, saved as Parquet)."""
    from replicalab.history import History, save_history
    from replicalab.history.txn import encode_txn

    h = History()
    for t in sorted(txns, key=lambda x: x.invoke):
        blank = [(f, k, None if f == "r" else v) for f, k, v in t.mops]
        keys, values = encode_txn(blank)
        i = h.invoke(t.process, "txn", keys, values, "none", t.invoke)
        if t.outcome == "ok":
            h.ok(i, t.complete, encode_txn(t.mops)[1])
        elif t.outcome == "fail":
            h.fail(i, t.complete, "aborted")
        else:
            h.info(i, t.invoke + 1, "unknown")
    save_history(h, rdir, {"workload": "list-append", "store": "synthetic"})


if __name__ == "__main__":
    main()

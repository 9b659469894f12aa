"""Benchmark: ``replicalab check --model list-append`` as a user runs it (process start,
reading the file, checking, explaining, printing --json) on generated Elle-style
histories where the search has work to do, and on Elle's huge-scc history:

* ``serial``: a serial execution with overlapping timings compatible with its order
  (valid: no strongly connected component at all);
* ``injected``: the same with one small gadget of every anomaly class;
* ``si``: a snapshot-isolation execution over 4 hot keys by 10 concurrent clients
  (snapshot at start, first committer wins, keys retired after 64 appends): strongly
  connected components of write skew everywhere, so every class must be decided in
  them; the answer must be exactly G2-item and its real-time variant, complete;
* ``si-skew``: the same with 0.1 % of the committed transactions reading one key from a
  later state: the answer must be complete, G2-item and only what such reads can make
  (G-single, G-nonadjacent, internal; at 200,000 one makes a G-single, at 10^4 none);
* ``huge-scc``: Elle's histories/huge-scc.edn, a real Jepsen run (tests/data/elle).

Reports transactions per second (wall and CPU), the command's peak memory (``/usr/bin/time
-f %M``), whether the answer was complete (no search left unfinished) and right. Goals
(issue 36): >= 100,000 txn/s at 200,000 ``si`` transactions, complete; >= 300,000 on
``serial``; 10^6 in < 2 GB.

Peer: Elle itself is published on Clojars, which this machine cannot reach (Maven Central
only), so the peer in the same run is our pure-Python reference (``REPLICALAB_TXN_ENGINE=
python``, up to ``--python-up-to`` transactions); the ratio is printed.

Run: .venv/bin/python benchmarks/bench_txn_check.py [--sizes 10000,200000,1000000]
     [--kinds serial,injected,si,si-skew,huge-scc] [--python-up-to 10000]
     [--run-dir] [--dir /tmp/txnbench]
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

from replicalab.checkers.txn.models import implied_anomalies
from replicalab.checkers.txn.synth import GADGETS, gadget, serial, si_execution
from replicalab.checkers.txn.types import Txn

EXE = str(Path(sys.executable).parent / "replicalab")
GOALS = {"serial": 300_000, "si": 100_000}
GOAL_SI_AT = 200_000
GOAL_MB = 2048
HUGE = Path(__file__).resolve().parents[1] / "tests" / "data" / "elle" / "huge-scc.edn.gz"


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


def history(n: int, kind: str, seed: int) -> list[Txn]:
    """Return a generated history of ``n`` transactions of ``kind`` (see the module
    docstring)."""
    rng = random.Random(seed)
    if kind.startswith("si"):
        return si_execution(rng, n, keys=4, clients=10,
                            read_skew_p=0.001 if kind == "si-skew" else 0.0)
    txns = serial(rng, n, keys=100, max_len=4, fail_p=0.02, info_p=0.01)
    if kind == "injected":
        end = 10 * n
        procs = max(t.process for t in txns) + 1
        for i, name in enumerate(GADGETS):
            g = gadget(name, start=rng.randrange(end), process=procs + 4 * i,
                       index=len(txns), key=str(10**9 + 10 * i))
            txns += g
    return txns


def right(kind: str, code: int, doc: dict) -> bool:
    """Whether the verdict is the one the history was made to have, and complete."""
    found = set(doc.get("anomaly_types", ()))
    complete = not doc.get("unfinished")
    if kind == "serial":
        return code == 0 and doc.get("valid") is True
    if kind == "si":
        return code == 1 and found == {"G2-item", "G2-item-realtime"} and complete
    if kind == "si-skew":
        # a skewed read makes a cycle only when another key it read was written between
        # its snapshot and the read value's commit (or it read the key twice: internal);
        # at 10^4 none of the 5 skewed reads does, so G-single is not required
        return (code == 1 and complete and "G2-item" in found
                and found <= {"G2-item", "G2-item-realtime", "G-single-item",
                              "G-single-item-realtime", "G-nonadjacent-item",
                              "G-nonadjacent-item-realtime", "internal"})
    if kind == "huge-scc":
        return (code == 1 and doc.get("not") == ["strong-snapshot-isolation"]
                and "G2-item-realtime" in implied_anomalies(found) and complete)
    # injected: every gadget's class found, or one that implies it (a process gadget is
    # found in real-time order, Elle's default)
    implied = implied_anomalies(found) | {t.replace("-realtime", "-process") for t in found}
    wanted = set(GADGETS)  # (a lone gadget's empty-transaction-graph is not)
    return code == 1 and wanted <= implied


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
    ap.add_argument("--sizes", default="10000,200000,1000000")
    ap.add_argument("--kinds", default="serial,injected,si,si-skew,huge-scc")
    ap.add_argument("--python-up-to", type=int, default=10_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/txnbench"))
    ap.add_argument("--run-dir", action="store_true",
                    help="also time a run directory (history.parquet) of each history")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()[0]:.2f} (machine shared with other "
          "engineers)")
    kinds = args.kinds.split(",")
    jobs: list[tuple[int, str]] = []
    for n in (int(x) for x in args.sizes.split(",")):
        jobs += [(n, k) for k in kinds if k != "huge-scc"]
    if "huge-scc" in kinds:
        jobs.append((10_254, "huge-scc"))
    rows = []
    for n, kind in jobs:
        path = args.dir / f"la-{n}-{kind}.edn"
        txns = None
        if kind == "huge-scc":
            if not path.exists():
                import gzip

                path.write_bytes(gzip.decompress(HUGE.read_bytes()))
        elif not path.exists():
            txns = history(n, kind, seed=n)
            write_edn(txns, path)
        inputs = [("edn", path)]
        if args.run_dir and kind != "huge-scc":
            rdir = args.dir / f"la-{n}-{kind}-run"
            if not (rdir / "history.parquet").exists():
                txns = txns or history(n, kind, seed=n)
                _save_run(txns, rdir)
            inputs.append(("run-dir", rdir))
        del txns  # the generator's memory is not the checker's
        for fmt, p in inputs:
            engines = ["native"] + (["python"] if n <= args.python_up_to else [])
            native_wall = None
            for engine in engines:
                wall, cpu, mb, code, doc = run_check(p, engine)
                total = doc.get("txns", 0)
                ok = right(kind, code, doc)
                complete = not doc.get("unfinished")
                if engine == "native":
                    native_wall = wall
                ratio = f" ({wall / native_wall:.1f}x the native time)" if (
                    engine == "python" and native_wall) else ""
                rows.append((n, kind, fmt, engine, total, wall, cpu, mb, complete, ok,
                             doc.get("anomaly_types", [])))
                print(f"{total:>9,} {kind:>9} {fmt:>7} {engine:>6}: {wall:7.2f} s wall "
                      f"({total / wall:>9,.0f} txn/s) {cpu:7.2f} s CPU ({total / cpu:>9,.0f} "
                      f"txn/s) peak {mb:6.0f} MB {'complete' if complete else 'UNFINISHED'} "
                      f"{'right' if ok else 'WRONG'} {','.join(doc.get('anomaly_types', []))}"
                      f"{ratio}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print()
    print("| transactions | history | input | engine | wall s | txn/s (wall) | CPU s | "
          "txn/s (CPU) | peak MB | complete | verdict |")
    print("|---:|---|---|---|---:|---:|---:|---:|---:|---|---|")
    for _, kind, fmt, engine, total, wall, cpu, mb, complete, ok, _ in rows:
        print(f"| {total:,} | {kind} | {fmt} | {engine} | {wall:.2f} | {total / wall:,.0f} | "
              f"{cpu:.2f} | {total / cpu:,.0f} | {mb:,.0f} | {'yes' if complete else 'NO'} | "
              f"{'right' if ok else 'WRONG'} |")
    for n, kind, fmt, engine, total, wall, _cpu, mb, complete, _ok, _ in rows:
        if engine != "native" or fmt != "edn":
            continue
        goal = GOALS.get(kind)
        if goal and (kind != "si" or n == GOAL_SI_AT):
            rate = total / wall
            met = rate >= goal and complete
            print(f"goal {goal:,} txn/s on {kind} at {total:,}: {rate:,.0f} txn/s wall "
                  f"({rate / goal:.2f}x), {'complete' if complete else 'unfinished'}: "
                  f"{'met' if met else 'NOT met'}")
        if n >= 1_000_000:
            print(f"goal < {GOAL_MB} MB at {total:,} {kind}: {mb:,.0f} MB: "
                  f"{'met' if mb < GOAL_MB else 'NOT met'}")
    if not all(r[9] for r in rows):
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

"""Benchmark: replicalab's linearizability checker beside Porcupine, on the same histories.

Porcupine (the Go module github.com/anishathalye/porcupine) is fetched from the Go module
proxy into a temporary directory and built there with a small driver
(benchmarks/porcupine_driver: a kv model of cas registers written against Porcupine's
Model API, partitioned by key). The histories come from replicalab's ``register`` workload
on sim://primary?replication=async&regions=dc3: consistent reads at the primary
(linearizable) and eventual reads at the EU replica (not linearizable), for each size of
ops per key, keys and clients. Each history is checked by Porcupine, by replicalab's
native core (native/, when installed) and by the pure-Python pipeline. Verdicts must
agree: a disagreement is a bug and the benchmark exits 1 after printing the table.

Two modes, each compared like with like, both sides measured in the same run:

* default: every key decided, with its linearization or longest linearizable prefix.
  Porcupine's ``CheckOperationsVerbose`` (every partition, partial linearizations) beside
  replicalab's ``replicalab_native.check_kv`` (every key, its order or longest prefix
  and stuck op);
* fail-fast: a verdict only, stopping at the first key not linearizable. Porcupine's
  ``CheckOperationsTimeout`` beside ``check_kv(..., fail_fast=True)`` (what
  ``check(fail_fast=True)`` / ``replicalab check --fail-fast`` run).

Timing boundaries. Porcupine: the one call, timed inside the driver on an already built
``[]porcupine.Operation`` (process start, JSON parsing and building the operations
excluded; it partitions, sorts and searches, partitions in parallel goroutines).
replicalab "like for like" (``native_ms``, ``ff_ms``): the one ``check_kv`` call on
already encoded int64 columns (``linearizability.encode_columns``, the analogue of
building ``[]Operation``: values and keys interned, Jepsen's outcomes as codes), which
does Jepsen's preparation, the partition, event ordering and every key's search, one key
after another on one core. "End to end" (``*_e2e_ms``): the encoding from LinOps added
(turning the History into LinOps is excluded, as Porcupine's parsing is). "From the
History" (``hist_ms``, ``ff_hist_ms``): what users run, a recorded replicalab History to
a verdict - ``encode_history`` (the History's columns to int64 columns, keys and values
interned) then the ``check_kv`` call; Porcupine's side is still its one call on built
``[]Operation``, JSON parsing excluded (a History is what we have once a run is
recorded or loaded, as ``[]Operation`` is what Porcupine has). ``python_ms`` is the
pure-Python pipeline (partition, encode, search) end to end; ``check_ms`` the whole
``check()`` on LinOps and ``hist_check_ms`` the whole ``check_history()`` on the History,
both with counterexample shrinking and explanations, from the first round. Ratios are
ours / Porcupine's, of the medians over ``--repeats`` rounds of this run; a check that
hit ``--timeout`` is not repeated. In each round the timed native calls of every history
run first, one after another (as the driver runs Porcupine's checks), then the
pure-Python pipeline and the whole checks; from the LinOps and from the History
alternate which goes first. Both sides take the histories in the same order, starting
further on each round (the first history of a round meets a process gone cold while the
other side ran).

Run: .venv/bin/python benchmarks/bench_linearizability.py [--repeats 3] [--timeout 20]
     [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicalab.checkers.linearizability import checker as linearizability
from replicalab.checkers.linearizability.checker import DEFAULT_CACHE_BYTES
from replicalab.checkers.linearizability.columns import encode_columns as _encode_columns
from replicalab.checkers.linearizability.from_history import check_history, ops_from_history
from replicalab.checkers.linearizability.from_history import encode_history as _encode_history
from replicalab.checkers.linearizability.ops import UNRECORDED as UNKNOWN
from replicalab.checkers.linearizability.ops import LinOp
from replicalab.checkers.linearizability.registry import get_model
from replicalab.checkers.linearizability.search import DEFAULT_MAX_CACHE, search_part
from replicalab.history import History
from replicalab.stores import open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.register import RegisterConfig, generate

try:
    import replicalab_native
except ImportError:  # the benchmark still compares the pure-Python core
    replicalab_native = None

DRIVER = Path(__file__).parent / "porcupine_driver"


def prepare(ops: list[LinOp]) -> list[LinOp]:
    """Jepsen's drops (fail ops, reads not ok), in invoke order: the kv model's."""
    return get_model("kv").prepare(ops)


def encode_columns(ops: list[LinOp], model: str) -> Any:
    return _encode_columns(ops, get_model(model))


def encode_history(h: History, model: str) -> Any:
    return _encode_history(h, get_model(model))
STORE = "sim://primary?replication=async&regions=dc3"
F_CODE = {"read": 0, "write": 1, "cas": 2}
ANY = -1
"""A cas whose expected value was not recorded (the driver takes it as legal anywhere)."""


@dataclass(frozen=True)
class Size:
    """Operations per key, keys and clients of one register run."""

    ops_per_key: int
    keys: int
    clients: int


SIZES = (Size(100, 1, 5), Size(1_000, 1, 10), Size(1_000, 1, 50), Size(10_000, 1, 10),
         Size(10_000, 1, 50), Size(1_000, 10, 50), Size(10_000, 5, 50))
QUICK = (Size(100, 1, 5), Size(1_000, 1, 10), Size(1_000, 10, 50))


@dataclass
class Case:
    """One history and what each checker made of it (times in s, per round)."""

    name: str
    size: Size
    reads: str
    ops: list[LinOp]
    concurrency: int
    history: History
    verdicts: dict[str, Any] = field(default_factory=dict)
    times_s: dict[str, list[float]] = field(default_factory=dict)
    check_s: float | None = None
    hist_check_s: float | None = None


def register_history(size: Size, consistency: str, seed: int) -> History:
    """Return the register workload's history on the primary store: writes and cas at the
    primary (US-E), reads there when consistent, at the EU replica when eventual."""
    store = open_store(STORE, seed)
    h = History()
    cfg = RegisterConfig(keys=size.keys, clients=size.clients, ops=size.ops_per_key * size.keys,
                         rate=10, writer_region="US-E",
                         reader_region="US-E" if consistency == "consistent" else "EU")
    opts = ProbeOptions(duration_s=10 * 24 * 3600, seed=seed, consistency=consistency)
    store.runtime.run(generate(store, h, opts, cfg, Recorder(h, store.runtime)))
    return h


def max_concurrency(ops: Sequence[LinOp]) -> int:
    """Return the most ops of one key in flight at once (info ops open to the end)."""
    most = 0
    by_key: dict[Any, list[tuple[int, int]]] = {}
    for o in prepare(ops):
        end = o.complete_ns if o.outcome == "ok" else 2**62
        by_key.setdefault(o.key, []).extend([(o.invoke_ns, 1), (end, -1)])
    for evs in by_key.values():
        cur = 0
        for _, d in sorted(evs, key=lambda e: (e[0], -e[1])):
            cur += d
            most = max(most, cur)
    return most


def porcupine_ops(ops: Sequence[LinOp]) -> list[list[int]]:
    """Return the ops as the driver reads them: [process, f, key, a, b, outcome, call,
    return], fail ops and reads that were not ok left out (Jepsen's semantics, as our
    checker applies them), values interned per key (0 = nil)."""
    rows = []
    keys: dict[Any, int] = {}
    values: dict[Any, dict[Any, int]] = {}
    for o in prepare(ops):
        k = keys.setdefault(o.key, len(keys))
        ids = values.setdefault(o.key, {None: 0})

        def intern(v: Any, ids: dict[Any, int] = ids) -> int:
            return ids.setdefault(v, len(ids))

        if o.f == "cas":
            expected, new = o.value
            a, b = (ANY if expected is UNKNOWN else intern(expected)), intern(new)
        else:
            a, b = intern(o.value), 0
        rows.append([o.process, F_CODE[o.f], k, a, b, 0 if o.outcome == "ok" else 1,
                     o.invoke_ns, o.complete_ns])
    return rows


def build_porcupine(tmp: Path) -> Path:
    """Return the driver binary built in ``tmp``, Porcupine fetched into ``tmp/mod``."""
    go = shutil.which("go")
    if go is None:
        raise SystemExit("bench_linearizability: Go is not installed; install it (make servers "
                         "does) to build Porcupine")
    src = tmp / "driver"
    src.mkdir()
    for name in ("main.go", "go.mod", "go.sum"):
        shutil.copy(DRIVER / name, src / name)
    env = {**os.environ, "GOMODCACHE": str(tmp / "mod"), "GOFLAGS": "-modcacherw -mod=mod"}
    binary = tmp / "porcupine_driver"
    p = subprocess.run([go, "build", "-o", str(binary), "."], cwd=src, env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"bench_linearizability: building Porcupine failed: "
                         f"{p.stderr.strip().splitlines()[-1:]}")
    return binary


def run_porcupine(binary: Path, cases: Sequence[Case], timeout_s: float, tmp: Path,
                  verbose_first: bool = False) -> dict[str, dict[str, tuple[Any, float]]]:
    """Return name -> {"porcupine": (verdict, s) of CheckOperationsTimeout,
    "porcupine_verbose": (verdict, s) of CheckOperationsVerbose} from one driver run
    (``verbose_first``: which of the two calls runs first on each history)."""
    path = tmp / "histories.json"
    path.write_text(json.dumps({"repeats": 1, "timeout_s": timeout_s,
                                "verbose_first": verbose_first, "histories": [
        {"name": c.name, "ops": porcupine_ops(c.ops)} for c in cases]}))
    p = subprocess.run([str(binary), str(path)], capture_output=True, text=True,
                       timeout=len(cases) * (timeout_s + 60) + 60)
    if p.returncode != 0:
        raise SystemExit(f"bench_linearizability: the Porcupine driver failed: {p.stderr.strip()}")
    verdict_of = {"true": True, "false": False}
    out = {}
    for line in p.stdout.splitlines():
        r = json.loads(line)
        out[r["name"]] = {
            "porcupine": (verdict_of.get(r["valid"], "unknown"), r["check_ns"] / 1e9),
            "porcupine_verbose": (verdict_of.get(r["verbose_valid"], "unknown"),
                                  r["verbose_ns"] / 1e9)}
    return out


def python_verdict(ops: Sequence[LinOp], timeout_s: float) -> tuple[Any, float]:
    """Return (verdict, s) of the pure-Python pipeline on ``ops`` (kv model): partition,
    each part's encoding (Jepsen's semantics, interned values, events in time order) and
    its search with ``search.search_part``; every key decided, no counterexample."""
    deadline = time.monotonic() + timeout_s
    model = get_model("kv")
    t = time.perf_counter()
    verdicts = []
    for _, part in model.partition(list(ops)):
        enc = model.encode(part)
        v, _, _ = search_part(enc.kinds, enc.a, enc.b, enc.events, enc.init, deadline,
                              DEFAULT_MAX_CACHE)
        verdicts.append(v)
    took = time.perf_counter() - t
    return _verdict(verdicts), took


def _verdict(verdicts: Sequence[int]) -> Any:
    """A history's verdict from its keys' (1, 0, -1; 2 = skipped counts as neither)."""
    return False if 0 in verdicts else "unknown" if -1 in verdicts else True


def native_verdict(ops: Sequence[LinOp], timeout_s: float, fail_fast: bool
                   ) -> tuple[Any, float, float]:
    """Return (verdict, like-for-like s, end-to-end s) of the native whole-history core on
    ``ops`` (kv model): like for like is the ``check_kv`` call on columns encoded
    beforehand; end to end adds ``encode_columns`` from the LinOps."""
    t = time.perf_counter()
    cols = encode_columns(ops, "kv")
    encode_s = time.perf_counter() - t
    args = cols.args()
    deadline = time.monotonic() + timeout_s
    t = time.perf_counter()
    parts = replicalab_native.check_kv(*args, deadline_s=deadline,
                                       cache_bytes=DEFAULT_CACHE_BYTES, fail_fast=fail_fast)
    took = time.perf_counter() - t
    return _verdict([p[2] for p in parts]), took, took + encode_s


def history_verdict(h: History, timeout_s: float, fail_fast: bool) -> tuple[Any, float]:
    """Return (verdict, s) from the recorded History ``h`` (kv model): ``encode_history``
    (the History's columns to check_kv's int64 columns) and the ``check_kv`` call."""
    t = time.perf_counter()
    cols = encode_history(h, "kv")
    parts = replicalab_native.check_kv(*cols.args(), deadline_s=time.monotonic() + timeout_s,
                                       cache_bytes=DEFAULT_CACHE_BYTES, fail_fast=fail_fast)
    took = time.perf_counter() - t
    return _verdict([p[2] for p in parts]), took


def make_cases(sizes: Sequence[Size], seed: int) -> list[Case]:
    """Return a linearizable and a non-linearizable history of each size."""
    cases = []
    for size in sizes:
        for consistency, reads in (("consistent", "consistent"), ("eventual", "eventual@EU")):
            h = register_history(size, consistency, seed)
            ops = ops_from_history(h)
            name = f"{size.ops_per_key}x{size.keys}-c{size.clients}-{consistency}"
            cases.append(Case(name, size, reads, ops, max_concurrency(ops), h))
    return cases


def _fmt_s(times: list[float], verdict: Any, timeout_s: float) -> str:
    if verdict == "unknown":
        return f">{timeout_s:g}"
    return f"{statistics.median(times) * 1e3:,.2f}"


def _ratio(ours: list[float], ours_v: Any, theirs: list[float], theirs_v: Any,
           timeout_s: float) -> str:
    if ours_v == "unknown" or not ours:
        return "-"
    o = statistics.median(ours)
    if theirs_v == "unknown":
        return f"<{o / timeout_s:.3g}"
    return f"{o / statistics.median(theirs):.3g}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=20.0,
                    help="seconds each checker may spend on one history")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="three small sizes only")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.timeout <= 0:
        raise SystemExit("bench_linearizability: --repeats must be >= 1 and --timeout > 0")
    if replicalab_native is None or not hasattr(replicalab_native, "check_kv"):
        raise SystemExit("bench_linearizability: replicalab_native (with check_kv) is not "
                         "installed; make native builds it")
    t0 = time.perf_counter()
    cases = make_cases(QUICK if args.quick else SIZES, args.seed)
    print(f"generated {len(cases)} histories in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="porcupine-") as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        binary = build_porcupine(tmp)
        print(f"built Porcupine in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        for r in range(args.repeats):
            # both sides take the histories in the same order, starting further on each
            # round: the first history of a round meets a process gone cold while the
            # other side ran, and that should not always be the same history
            start = r * len(cases) // args.repeats
            rotated = cases[start:] + cases[:start]
            todo = [c for c in rotated if "unknown" not in (
                c.verdicts.get("porcupine"), c.verdicts.get("porcupine_verbose"))]
            for name, sides in run_porcupine(binary, todo, args.timeout, tmp,
                                             verbose_first=r % 2 == 1).items():
                case = next(c for c in cases if c.name == name)
                for label, (v, s) in sides.items():
                    case.verdicts[label] = v
                    case.times_s.setdefault(label, []).append(s)
            # the timed native calls of every history first, then the untimed-heavy
            # pure-Python pipeline and check()s: a timed call is not preceded by their
            # allocation churn (Porcupine's driver, too, runs only its checks in a row);
            # from the LinOps and from the History alternate which goes first
            for case in rotated:
                for label, fail_fast in (("native", False), ("ff", True)):
                    if case.verdicts.get(label) == "unknown":
                        continue
                    hist = "hist" if label == "native" else "ff_hist"
                    for side in (("ops", "history") if r % 2 == 0 else ("history", "ops")):
                        if side == "ops":
                            v, like_s, e2e_s = native_verdict(case.ops, args.timeout,
                                                              fail_fast)
                            case.verdicts[label] = v
                            case.times_s.setdefault(label, []).append(like_s)
                            case.times_s.setdefault(label + "_e2e", []).append(e2e_s)
                        else:
                            v, s = history_verdict(case.history, args.timeout, fail_fast)
                            case.verdicts[hist] = v
                            case.times_s.setdefault(hist, []).append(s)
            for case in cases:
                if case.verdicts.get("python") != "unknown" and (r == 0 or not args.quick):
                    v, s = python_verdict(case.ops, args.timeout)
                    case.verdicts["python"] = v
                    case.times_s.setdefault("python", []).append(s)
                if r == 0:
                    t = time.perf_counter()
                    linearizability.check(case.ops, "kv", timeout_s=args.timeout)
                    case.check_s = time.perf_counter() - t
                    t = time.perf_counter()
                    check_history(case.history, "kv", timeout_s=args.timeout)
                    case.hist_check_s = time.perf_counter() - t
            print(f"round {r + 1}/{args.repeats} done", file=sys.stderr)
    return report(cases, args)


COLUMNS = (
    # (header, ours, Porcupine's): a time column when Porcupine's is None, else a ratio
    ("verbose_ms", "porcupine_verbose", None),
    ("native_ms", "native", None),
    ("native/verbose", "native", "porcupine_verbose"),
    ("native_e2e_ms", "native_e2e", None),
    ("e2e/verbose", "native_e2e", "porcupine_verbose"),
    ("hist_ms", "hist", None),
    ("hist/verbose", "hist", "porcupine_verbose"),
    ("timeout_ms", "porcupine", None),
    ("ff_ms", "ff", None),
    ("ff/timeout", "ff", "porcupine"),
    ("ff_e2e_ms", "ff_e2e", None),
    ("ff_e2e/timeout", "ff_e2e", "porcupine"),
    ("ff_hist_ms", "ff_hist", None),
    ("ff_hist/timeout", "ff_hist", "porcupine"),
    ("python_ms", "python", None),
    ("python/verbose", "python", "porcupine_verbose"),
)


def report(cases: Sequence[Case], args: argparse.Namespace) -> int:
    """Print the table (times in ms, medians; ratios ours / Porcupine's) and return 1 if
    the verdicts disagree."""
    head = ["history", "ops", "keys", "clients", "conc/key", "reads", "verdict",
            *(c[0] for c in COLUMNS), "check_ms", "hist_check_ms"]
    rows, bad = [], []
    for c in cases:
        vs = c.verdicts
        definite = {v for v in vs.values() if v != "unknown"}
        if len(definite) > 1:
            bad.append(f"{c.name}: {vs}")
        verdict = ("DISAGREE" if len(definite) > 1 else
                   str(next(iter(definite))).lower() if definite else "unknown")
        row = [c.name, f"{len(c.ops):,}", str(c.size.keys), str(c.size.clients),
               str(c.concurrency), c.reads, verdict]
        for _, ours, theirs in COLUMNS:
            ov = vs[ours.removesuffix("_e2e")]
            if theirs is None:
                row.append(_fmt_s(c.times_s[ours], ov, args.timeout))
            else:
                row.append(_ratio(c.times_s[ours], ov, c.times_s[theirs], vs[theirs],
                                  args.timeout))
        row.append("-" if c.check_s is None else f"{c.check_s * 1e3:,.1f}")
        row.append("-" if c.hist_check_s is None else f"{c.hist_check_s * 1e3:,.1f}")
        rows.append(row)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(x.rjust(w) if i else x.ljust(w)
                        for i, (x, w) in enumerate(zip(r, widths, strict=True))))
    print(f"medians of {args.repeats} rounds; timeout {args.timeout:g} s per check; "
          f"'>T' = no verdict within T s; '<x' = ratio bound when Porcupine timed out; "
          f"default mode: native vs CheckOperationsVerbose; fail-fast: ff vs "
          f"CheckOperationsTimeout; hist = from the recorded History (encode_history + "
          f"check_kv)")
    if args.json:
        args.json.write_text(json.dumps({"repeats": args.repeats, "timeout_s": args.timeout,
                                         "cases": [{
                                             "name": c.name, "ops": len(c.ops),
                                             "keys": c.size.keys, "clients": c.size.clients,
                                             "concurrency": c.concurrency,
                                             "verdicts": c.verdicts, "times_s": c.times_s,
                                             "check_s": c.check_s,
                                             "hist_check_s": c.hist_check_s}
                                            for c in cases]}, indent=1))
    if bad:
        print("VERDICTS DISAGREE (a checker is wrong):\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

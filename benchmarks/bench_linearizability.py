"""Benchmark: replicalab's linearizability checker beside Porcupine, on the same histories.

Porcupine (the Go module github.com/anishathalye/porcupine) is fetched from the Go module
proxy into a temporary directory and built there with a small driver
(benchmarks/porcupine_driver: a kv model of cas registers written against Porcupine's
Model API, partitioned by key). The histories come from replicalab's ``register`` workload
on sim://primary?replication=async&regions=dc3: consistent reads at the primary
(linearizable) and eventual reads at the EU replica (not linearizable), for each size of
ops per key, keys and clients. Each history is checked by Porcupine, by replicalab with
the native search core (native/, when installed) and with the pure-Python core. Verdicts
must agree: a disagreement is a bug and the benchmark exits 1 after printing the table.

Timed, for both sides in the same run: the check of ops already in memory. Porcupine:
``CheckOperationsTimeout`` alone (partitioning, sorting and the search), timed inside the
driver (process start and JSON parsing excluded). replicalab: the kv model's partition,
each part's event ordering and the search core on each part (``<core>_ms``), timed in this
process; the rest of the encoding (Jepsen's semantics applied, values interned) is the
conversion Porcupine's input gets untimed, and ``<core>_e2e_ms`` adds it back (end to
end from LinOps; turning the History into LinOps is excluded, as Porcupine's parsing
is). ``<core>_core_ms`` is the search core's calls alone. ``check_ms`` is the whole
``check()`` with the default core, counterexample shrinking and explanations included,
from the first round. Medians over ``--repeats`` rounds; a check that hit ``--timeout``
is not repeated.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicalab.checkers import linearizability
from replicalab.checkers.linearizability import LinOp, ops_from_history
from replicalab.checkers.linmodels import UNKNOWN, event_order, get_model, prepare
from replicalab.checkers.linsearch import DEFAULT_MAX_CACHE, search_part
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
    verdicts: dict[str, Any] = field(default_factory=dict)
    times_s: dict[str, list[float]] = field(default_factory=dict)
    check_s: float | None = None


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


def run_porcupine(binary: Path, cases: Sequence[Case], timeout_s: float,
                  tmp: Path) -> dict[str, tuple[Any, float]]:
    """Return name -> (verdict, check time in s) from one driver run over ``cases``."""
    path = tmp / "histories.json"
    path.write_text(json.dumps({"repeats": 1, "timeout_s": timeout_s, "histories": [
        {"name": c.name, "ops": porcupine_ops(c.ops)} for c in cases]}))
    p = subprocess.run([str(binary), str(path)], capture_output=True, text=True,
                       timeout=len(cases) * (timeout_s + 60) + 60)
    if p.returncode != 0:
        raise SystemExit(f"bench_linearizability: the Porcupine driver failed: {p.stderr.strip()}")
    out = {}
    for line in p.stdout.splitlines():
        r = json.loads(line)
        verdict = {"true": True, "false": False}.get(r["valid"], "unknown")
        out[r["name"]] = (verdict, r["check_ns"] / 1e9)
    return out


Core = Callable[..., tuple[int, list[int], int]]


def verdict_with(core: Core, ops: Sequence[LinOp], timeout_s: float
                 ) -> tuple[Any, float, float, float]:
    """Return (verdict, like-for-like s, end-to-end s, search-core s) of the kv model on
    ``ops`` with the search core ``core``, no counterexample.

    End to end: the model's partition, each part's encoding (Jepsen's semantics, interned
    values, events in time order) and its search. Like for like with Porcupine's timed
    call: the partition, the ordering of each part's events and the search; the rest of
    the encoding is the conversion Porcupine's input gets untimed (porcupine_ops).
    """
    deadline = time.monotonic() + timeout_s
    model = get_model("kv")
    t = time.perf_counter()
    parts = model.partition(list(ops))
    part_s = time.perf_counter() - t
    encode_s = order_s = search_s = 0.0
    verdicts = []
    for _, part in parts:
        t = time.perf_counter()
        enc = model.encode(part)
        encode_s += time.perf_counter() - t
        t = time.perf_counter()
        event_order(enc.ops)  # what encode spent ordering the events, timed alone
        order_s += time.perf_counter() - t
        t = time.perf_counter()
        v, _, _ = core(enc.kinds, enc.a, enc.b, enc.events, enc.init, deadline,
                       DEFAULT_MAX_CACHE)
        search_s += time.perf_counter() - t
        verdicts.append(v)
    valid = False if 0 in verdicts else "unknown" if -1 in verdicts else True
    return valid, part_s + order_s + search_s, part_s + encode_s + search_s, search_s


def make_cases(sizes: Sequence[Size], seed: int) -> list[Case]:
    """Return a linearizable and a non-linearizable history of each size."""
    cases = []
    for size in sizes:
        for consistency, reads in (("consistent", "consistent"), ("eventual", "eventual@EU")):
            ops = ops_from_history(register_history(size, consistency, seed))
            name = f"{size.ops_per_key}x{size.keys}-c{size.clients}-{consistency}"
            cases.append(Case(name, size, reads, ops, max_concurrency(ops)))
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
    cores: dict[str, Core] = {"python": search_part}
    if replicalab_native is not None:
        cores = {"native": replicalab_native.search_part, **cores}
    else:
        print("replicalab_native is not installed (make builds it): pure Python only",
              file=sys.stderr)
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
            todo = [c for c in cases if c.verdicts.get("porcupine") != "unknown"]
            for name, (v, s) in run_porcupine(binary, todo, args.timeout, tmp).items():
                case = next(c for c in cases if c.name == name)
                case.verdicts["porcupine"] = v
                case.times_s.setdefault("porcupine", []).append(s)
            for case in cases:
                for label, core in cores.items():
                    if case.verdicts.get(label) == "unknown":
                        continue
                    v, like_s, e2e_s, core_s = verdict_with(core, case.ops, args.timeout)
                    case.verdicts[label] = v
                    case.times_s.setdefault(label, []).append(like_s)
                    case.times_s.setdefault(label + "_e2e", []).append(e2e_s)
                    case.times_s.setdefault(label + "_core", []).append(core_s)
                if r == 0:
                    t = time.perf_counter()
                    linearizability.check(case.ops, "kv", timeout_s=args.timeout)
                    case.check_s = time.perf_counter() - t
            print(f"round {r + 1}/{args.repeats} done", file=sys.stderr)
    return report(cases, list(cores), args)


def report(cases: Sequence[Case], labels: list[str], args: argparse.Namespace) -> int:
    """Print the table (times in ms, medians) and return 1 if the verdicts disagree."""
    head = ["history", "ops", "keys", "clients", "conc/key", "reads", "verdict",
            "porcupine_ms"]
    for label in labels:
        head += [f"{label}_core_ms", f"{label}_ms", f"{label}/porc", f"{label}_e2e_ms",
                 f"{label}_e2e/porc"]
    head.append("check_ms")
    rows, bad = [], []
    for c in cases:
        vs = c.verdicts
        definite = {v for v in vs.values() if v != "unknown"}
        if len(definite) > 1:
            bad.append(f"{c.name}: {vs}")
        verdict = ("DISAGREE" if len(definite) > 1 else
                   str(next(iter(definite))).lower() if definite else "unknown")
        row = [c.name, f"{len(c.ops):,}", str(c.size.keys), str(c.size.clients),
               str(c.concurrency), c.reads, verdict,
               _fmt_s(c.times_s["porcupine"], vs["porcupine"], args.timeout)]
        for label in labels:
            row.append(_fmt_s(c.times_s[label + "_core"], vs[label], args.timeout))
            for times in (c.times_s[label], c.times_s[label + "_e2e"]):
                row += [_fmt_s(times, vs[label], args.timeout),
                        _ratio(times, vs[label], c.times_s["porcupine"], vs["porcupine"],
                               args.timeout)]
        row.append("-" if c.check_s is None else f"{c.check_s * 1e3:,.1f}")
        rows.append(row)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(x.rjust(w) if i else x.ljust(w)
                        for i, (x, w) in enumerate(zip(r, widths, strict=True))))
    print(f"medians of {args.repeats} rounds; timeout {args.timeout:g} s per check; "
          f"'>T' = no verdict within T s; '<x' = ratio bound when Porcupine timed out")
    if args.json:
        args.json.write_text(json.dumps({"repeats": args.repeats, "timeout_s": args.timeout,
                                         "cases": [{
                                             "name": c.name, "ops": len(c.ops),
                                             "keys": c.size.keys, "clients": c.size.clients,
                                             "concurrency": c.concurrency,
                                             "verdicts": c.verdicts, "times_s": c.times_s,
                                             "check_s": c.check_s} for c in cases]}, indent=1))
    if bad:
        print("VERDICTS DISAGREE (a checker is wrong):\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

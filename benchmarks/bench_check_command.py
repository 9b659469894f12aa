"""Benchmark: ``replicalab check`` as a user runs it — command to answer, start-up,
parsing, search, 1-minimal counterexample and its explanation included — beside
Porcupine's verdicts on the same histories, both measured in this run.

Porcupine v1.3.1 comes from the Go module proxy (``porcupine.build``: its module brings its
test corpora) and checks each history through ``benchmarks/porcupine_driver``; its time is
the check call alone (``CheckOperationsTimeout``: a verdict, nothing else) on operations
built beforehand — its process start and parsing are left out, ours are not. Histories:

* **etcd**: the 102 Jepsen histories of a real etcd in Porcupine's corpus (``test_data/
  jepsen``, Jepsen's log lines, no ``:time``: the lines order them; ~80 operations, many
  ``:info``; the 103rd file is empty), cas-register model. All 102 in one ``replicalab
  check`` call, beside the sum of Porcupine's 102 calls; and ``etcd_000.log`` alone.
  Verdicts against Porcupine's.
* **kv**: Porcupine's key-value histories (``test_data/kv``: get/put/append, 1, 10 and 50
  clients, ``ok`` and ``bad``), ``--model kv``. Verdicts against the file names.
* **generated** register, cas-register and kv-with-append histories, 1, 10 and 50
  processes: linearizable by construction (each operation runs on a sequential object at
  a point inside its interval) and made non-linearizable by one known mutation (a read
  returns a value never written / a string never appended); checked from EDN files and,
  for the registers, from run directories (Parquet, as ``replicalab check RUN_DIR``
  loads them). Both checkers' verdicts against the known answers: where Porcupine gives
  none within ``--timeout``, ours is still checked against the construction.

Each command runs ``--repeats`` times (median); "command / Porcupine" is that median over
Porcupine's median check-call time of this run; "check / Porcupine" puts the checks'
own time (``check_ns`` of a ``--json`` run in every round, summed over the case's
histories in nanoseconds: search, shrinking and explanations, no start-up or parsing;
the median over the rounds) beside the same calls. The machine is shared: the load
average is printed before and after.

Run: .venv/bin/python benchmarks/bench_check_command.py [--repeats 5] [--timeout 20]
     [--quick] [--json PATH] [--cases etcd,kv,generated]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import porcupine
import replicalab
from replicalab.checkers.linearizability.from_file import ops_from_file
from replicalab.checkers.linearizability.ops import LinOp
from replicalab.checkers.linearizability.registry import get_model
from replicalab.history import History, save_history
from replicalab.history.read import read_ops

EXE = [str(Path(sys.executable).parent / "replicalab")]
MS = 10**6


@dataclass
class Case:
    """One history (or a set of them checked by one command) and what each side gave."""

    name: str
    model: str
    paths: list[Path]
    ops: list[list[LinOp]]
    expected: list[bool | None]
    processes: int = 0
    run_dir: Path | None = None
    ours_s: list[float] = field(default_factory=list)
    ours_dir_s: list[float] = field(default_factory=list)
    ours: list[Any] = field(default_factory=list)
    check_ns: list[int] = field(default_factory=list)  # per round: the checks' sum

    @property
    def check_s(self) -> float:
        """Return the median over rounds of the check time summed over the case's
        histories (s)."""
        return statistics.median(self.check_ns) / 1e9 if self.check_ns else float("nan")
    minimal: bool = True
    lines: bool = True
    porcupine: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _command(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Return (wall s, result) of one ``replicalab`` command, its output piped."""
    t = time.perf_counter()
    p = subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=3600)
    took = time.perf_counter() - t
    if p.returncode not in (0, 1, 3):
        raise SystemExit(f"replicalab {' '.join(args[:3])}... failed: {p.stderr.strip()}")
    return took, p


# ------------------------------------------------------------------ generated histories


def generate(model: str, n: int, procs: int, seed: int, keys: int = 1,
             mutate: bool = False) -> list[LinOp]:
    """Return a history of ``n`` ops by ``procs`` processes, linearizable by construction:
    each op takes effect on a sequential object at a point inside its interval; 5 % of
    writes end ``info`` (half of them took effect); cas ops from a wrong value fail. With
    ``mutate`` one read is made certainly not linearizable (:func:`_mutated`)."""
    rnd = random.Random(seed)
    spans = []
    t = [0] * procs
    for i in range(n):
        p = i % procs
        inv = t[p] + rnd.randint(0, 200)
        comp = inv + rnd.randint(50, 2000)
        t[p] = comp
        spans.append((rnd.randint(inv, comp), i, p, inv, comp))
    spans.sort()
    state: dict[Any, Any] = {}
    ops: list[LinOp] = []
    for _point, i, p, inv, comp in spans:
        key = f"k{rnd.randrange(keys)}" if keys > 1 else "k"
        cur = state.get(key)
        if model == "kv":
            f = rnd.choices(("read", "append", "write"), (0.5, 0.45, 0.05))[0]
            if f == "read":
                ops.append(LinOp(i, p, "read", key, cur, "ok", inv, comp))
                continue
            value = f"x {p} {i} y"
            state[key] = (cur or "") + value if f == "append" else value
            ops.append(LinOp(i, p, f, key, value, "ok", inv, comp))
            continue
        f = rnd.choice(("read", "write", "cas") if model == "cas-register" else
                       ("read", "write"))
        if f == "read":
            ops.append(LinOp(i, p, "read", key, cur, "ok", inv, comp))
            continue
        new = f"v{i}"
        if f == "cas" and rnd.random() < 0.3:
            ops.append(LinOp(i, p, "cas", key, (f"v{rnd.randint(0, i)}x", new), "fail", inv,
                             comp))
            continue
        outcome = "info" if rnd.random() < 0.05 else "ok"
        if outcome == "ok" or rnd.random() < 0.5:
            state[key] = new
        value = (cur, new) if f == "cas" else new
        if f == "cas" and outcome == "info" and state.get(key) != new:
            value = (f"v{i}y", new)  # a cas that did not take effect: a wrong expectation
        ops.append(LinOp(i, p, f, key, value, outcome, inv, comp))
    ops.sort(key=lambda o: o.index)
    if mutate:
        ops = _mutated(ops, model)
    return ops


def _mutated(ops: list[LinOp], model: str) -> list[LinOp]:
    """Return ``ops`` with one read made certainly not linearizable. Registers: a stale
    read — it returns v0, whose write w0 completed before a write w1 of another value
    began, which completed before the read began (values are written once, so v0 cannot
    come back). kv: a read with a string nobody appended at its end."""
    reads = [j for j, o in enumerate(ops) if o.f == "read" and o.outcome == "ok"]
    if model == "kv":
        j = reads[len(reads) // 2]
        o = ops[j]
        return [*ops[:j], LinOp(o.index, o.process, "read", o.key,
                                (o.value or "") + " x never appended y", "ok", o.invoke_ns,
                                o.complete_ns), *ops[j + 1:]]
    writes = [o for o in ops if o.f in ("write", "cas") and o.outcome == "ok"]
    for j in sorted(reads, key=lambda j: abs(j - reads[len(reads) // 2])):
        r = ops[j]
        for w1 in writes:
            if w1.complete_ns >= r.invoke_ns:
                continue
            for w0 in writes:
                v0 = w0.value[1] if w0.f == "cas" else w0.value
                if w0.complete_ns < w1.invoke_ns and v0 != r.value:
                    return [*ops[:j], LinOp(r.index, r.process, "read", r.key, v0, "ok",
                                            r.invoke_ns, r.complete_ns), *ops[j + 1:]]
    raise SystemExit("no read to make stale: generate a longer history")


def _edn(v: Any) -> str:
    if v is None:
        return "nil"
    if isinstance(v, tuple):
        return "[" + " ".join(_edn(x) for x in v) + "]"
    return json.dumps(v)


def write_edn(ops: list[LinOp], path: Path) -> None:
    """Write ``ops`` as a Jepsen EDN history: invokes and completions in time order."""
    evs = []
    for o in ops:
        inv_value = None if o.f == "read" else o.value
        # at one instant a completion is written before an invoke: a process's next op
        # may begin when its last one ends
        evs.append((o.invoke_ns, 1, o.index, o.process, "invoke", o.f, inv_value, o.key))
        if o.outcome != "info" or o.complete_ns >= 0:
            evs.append((o.complete_ns, 0, o.index, o.process, o.outcome, o.f, o.value, o.key))
    evs.sort()
    with path.open("w") as out:
        for t, _, _, p, typ, f, v, key in evs:
            out.write(f"{{:process {p}, :type :{typ}, :f :{f}, :key {_edn(key)}, "
                      f":value {_edn(v)}, :time {t}}}\n")


def write_run(ops: list[LinOp], run_dir: Path) -> None:
    """Save register ``ops`` as a replicalab run directory (``history.parquet``)."""
    h = History()
    for o in sorted(ops, key=lambda o: o.invoke_ns):
        if o.f == "cas":
            row = h.invoke(o.process, "cas", (o.key,), (o.value[1],), "none", o.invoke_ns,
                           (o.value[0],))
        else:
            row = h.invoke(o.process, o.f, (o.key,), (None if o.f == "read" else o.value,),
                           "none", o.invoke_ns)
        if o.outcome == "ok":
            h.ok(row, o.complete_ns, (o.value,) if o.f == "read" else None)
        elif o.outcome == "fail":
            h.fail(row, o.complete_ns, "failed")
        else:
            h.info(row, o.complete_ns, "timed out")
    save_history(h, run_dir, {"workload": "register"})


def max_in_flight(ops: list[LinOp]) -> int:
    """Return the most ops of one key in flight at once (info ops open to the end)."""
    most = 0
    by_key: dict[Any, list[tuple[int, int]]] = {}
    for o in ops:
        if o.outcome == "fail":
            continue
        end = o.complete_ns if o.outcome == "ok" else 2**62
        by_key.setdefault(o.key, []).extend([(o.invoke_ns, 1), (end, -1)])
    for evs in by_key.values():
        cur = 0
        for _, d in sorted(evs, key=lambda e: (e[0], -e[1])):
            cur += d
            most = max(most, cur)
    return most


# ------------------------------------------------------------------------ the cases


def etcd_cases(module: Path) -> list[Case]:
    """The 102 etcd histories of Porcupine's corpus that hold operations (etcd_095.log is
    empty: ``replicalab check`` refuses a history with nothing to check), and etcd_000
    alone."""
    files = sorted(f for f in (module / "test_data" / "jepsen").glob("etcd_*.log")
                   if f.stat().st_size)
    m = get_model("cas-register")
    ops = [ops_from_file(f, read_ops(f).ops, m) for f in files]
    expected = _porcupine_answers(module, files)
    return [Case(f"etcd, {len(files)} histories in one command", "cas-register", files, ops,
                 expected),
            Case("etcd_000 alone", "cas-register", files[:1], ops[:1], expected[:1])]


def _porcupine_answers(module: Path, files: list[Path]) -> list[bool | None]:
    """Return the verdict Porcupine's own test expects of each etcd history."""
    text = (module / "porcupine_test.go").read_text()
    want = {int(n): v == "true" for n, v in re.findall(r"checkJepsen\(t, (\d+), (\w+)\)", text)}
    return [want.get(int(f.stem.split("_")[1])) for f in files]


def kv_cases(module: Path) -> list[Case]:
    """Porcupine's kv histories: 1, 10 and 50 clients, ok and bad."""
    m = get_model("kv")
    out = []
    for clients in ("c01", "c10", "c50"):
        for kind in ("ok", "bad"):
            f = module / "test_data" / "kv" / f"{clients}-{kind}.txt"
            ops = ops_from_file(f, read_ops(f, tuples=True).ops, m)
            out.append(Case(f"Porcupine kv {clients}-{kind}", "kv", [f], [ops],
                            [kind == "ok"], processes=int(clients[1:])))
    return out


def generated_cases(tmp: Path, quick: bool) -> list[Case]:
    """Register, cas-register and kv-with-append histories, 1 / 10 / 50 processes,
    linearizable and with one known mutation, as EDN files and run directories."""
    out = []
    n = 300 if quick else 1000
    for model in ("register", "cas-register", "kv"):
        for procs in (1, 10, 50):
            for mutate in (False, True):
                ops = generate(model, n, procs, seed=procs * 7 + mutate,
                               keys=10 if model == "kv" else 1, mutate=mutate)
                name = f"{model}, {procs} processes, {'mutated' if mutate else 'by construction'}"
                path = tmp / (re.sub(r"\W+", "-", name) + ".edn")
                write_edn(ops, path)
                case = Case(name, model, [path], [ops], [not mutate], processes=procs)
                if model != "kv":
                    case.run_dir = tmp / "runs" / path.stem
                    write_run(ops, case.run_dir)
                out.append(case)
    return out


# ------------------------------------------------------------------------ measuring


def time_ours(case: Case) -> None:
    """Time ``replicalab check`` once on the case's files (and run directory), and record
    the check's own time of one ``--json`` run (``check_ns``, summed over the histories:
    nanoseconds, so a hundred sub-millisecond checks do not round to nothing)."""
    args = [*map(str, case.paths), "--model", case.model, "--timeout", "600s"]
    case.ours_s.append(_command(["check", *args])[0])
    _, p = _command(["check", *args, "--json"])
    case.check_ns.append(sum(int(d["check_ns"]) for d in json.loads(p.stdout)["results"]))
    if case.run_dir is not None:
        case.ours_dir_s.append(_command(["check", str(case.run_dir), "--model",
                                         case.model])[0])


def read_ours(case: Case) -> None:
    """Read the case's verdicts, check time, minimality and explanations from one
    ``--json`` run."""
    args = [*map(str, case.paths), "--model", case.model, "--timeout", "600s"]
    _, p = _command(["check", *args, "--json"])
    docs = json.loads(p.stdout)["results"]
    case.ours = [d["valid"] for d in docs]
    ces = [c for d in docs for c in d["counterexample"] or ()]
    case.minimal = all(c["minimal"] for c in ces)
    case.lines = all(not d["timed"] for d in docs)
    if case.run_dir is not None:
        _, p = _command(["check", str(case.run_dir), "--model", case.model, "--json"])
        assert [d["valid"] for d in json.loads(p.stdout)["results"]] == case.ours


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def porcupine_total(case: Case) -> tuple[float, list[Any]]:
    """Return (median over rounds of the summed check-call s, verdicts) of a case."""
    runs = [case.porcupine[f"{case.name}#{i}"] for i in range(len(case.paths))]
    rounds = min(len(r) for r in runs)
    totals = [sum(r[k]["check_ns"] for r in runs) / 1e9 for k in range(rounds)]
    verdict = {"true": True, "false": False}
    return _median(totals), [verdict.get(r[0]["valid"], "unknown") for r in runs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=20.0,
                    help="Porcupine's time per history (s) before it gives no verdict")
    ap.add_argument("--quick", action="store_true", help="smaller generated histories")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    ap.add_argument("--cases", default="etcd,kv,generated",
                    help="which cases, comma-separated: etcd, kv, generated")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    # An installed package is byte-compiled (pip compiles a wheel's modules; an editable
    # install writes __pycache__ on its first run), unless PYTHONDONTWRITEBYTECODE is set,
    # as in this project's sessions: then every command compiled its modules from source
    # again (0.1-0.3 s). Compiled once here, as a user's install is.
    compileall.compile_dir(Path(replicalab.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-check-") as d:
        tmp = Path(d)
        binary, module = porcupine.build(tmp)
        chosen = set(args.cases.split(","))
        cases = [*(etcd_cases(module) if "etcd" in chosen else ()),
                 *(kv_cases(module) if "kv" in chosen else ()),
                 *(generated_cases(tmp, args.quick) if "generated" in chosen else ())]
        histories = []
        seen: set[str] = set()
        for case in cases:
            for i, ops in enumerate(case.ops):
                name = f"{case.name}#{i}"
                if name not in seen:
                    seen.add(name)
                    histories.append((name, "kv" if case.model == "kv" else "register", ops))
        # rounds interleave the two sides, so both meet the shared machine's load alike:
        # Porcupine's calls on every history, then each of our commands once
        runs: dict[str, list[dict[str, Any]]] = {}
        hopeless: set[str] = set()
        for r in range(args.repeats):
            todo = [h for h in histories if h[0] not in hopeless]
            for name, recs in porcupine.run(binary, todo, 1, args.timeout, tmp).items():
                runs.setdefault(name, []).extend(recs)
                if recs[0]["valid"] == "unknown" and recs[0]["verbose_valid"] == "unknown":
                    hopeless.add(name)  # no verdict: waiting again would tell nothing
            for case in cases:
                time_ours(case)
            print(f"round {r + 1}/{args.repeats} done, load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr)
        for case in cases:
            case.porcupine = runs
            read_ours(case)
        rows = report(cases, args.timeout)
    print(f"load average after: {os.getloadavg()}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if not r["verdicts_agree"]]
    return 1 if bad else 0


def report(cases: list[Case], timeout_s: float) -> list[dict[str, Any]]:
    """Print the table (markdown) and return its rows."""
    rows = []
    print("| history | model | ops | in flight (info open to the end) | known | ours | "
          "command ms | run dir ms | check ms | Porcupine | Porcupine check ms | "
          "command / Porcupine | check / Porcupine | minimal | lines |")
    print("|---|---|---:|---:|---|---|---:|---:|---:|---|---:|---:|---:|---|---|")
    for c in cases:
        p_s, p_verdicts = porcupine_total(c)
        known = c.expected
        agree = all(k is None or o == k for o, k in zip(c.ours, known, strict=True)) and all(
            v == "unknown" or k is None or v == k for v, k in zip(p_verdicts, known,
                                                                  strict=True))
        agree = agree and all(v == "unknown" or v == o for v, o in zip(p_verdicts, c.ours,
                                                                       strict=True))
        ours_s = _median(c.ours_s)
        no_verdict = sum(v == "unknown" for v in p_verdicts)
        ratio = (f"< {ours_s / (timeout_s * no_verdict):.2g}" if no_verdict else
                 f"{ours_s / p_s:.2f}")
        check_ratio = (f"< {c.check_s / (timeout_s * no_verdict):.2g}" if no_verdict else
                       f"{c.check_s / p_s:.2f}")
        n_ops = sum(len(o) for o in c.ops)
        flight = max(max_in_flight(o) for o in c.ops)

        def verdicts(vs: list[Any]) -> str:
            if len(vs) == 1:
                return str(vs[0]).lower()
            t = sum(v is True for v in vs)
            f = sum(v is False for v in vs)
            return f"{t} true, {f} false" + (f", {len(vs) - t - f} none" if t + f < len(vs)
                                              else "")

        p_text = (f"no verdict in {timeout_s:g} s" if no_verdict == len(p_verdicts) else
                  verdicts(p_verdicts))
        row = {"history": c.name, "model": c.model, "ops": n_ops, "in_flight": flight,
               "known": verdicts(known), "ours": verdicts(c.ours),
               "command_ms": round(ours_s * 1000, 1),
               "run_dir_ms": round(_median(c.ours_dir_s) * 1000, 1) if c.ours_dir_s else None,
               "check_ms": round(c.check_s * 1000, 3),
               "check_ms_all": [round(x / 1e6, 3) for x in c.check_ns],
               "porcupine": p_text, "porcupine_ms": None if no_verdict else round(p_s * 1000, 1),
               "ratio": ratio, "check_ratio": check_ratio, "minimal": c.minimal,
               "lines": c.lines,
               "command_s_all": [round(x, 4) for x in c.ours_s], "verdicts_agree": agree}
        rows.append(row)
        print(f"| {c.name} | {c.model} | {n_ops:,} | {flight} | {row['known']} | "
              f"{row['ours']} | {row['command_ms']:,} | "
              f"{'-' if c.run_dir is None else format(row['run_dir_ms'], ',')} | "
              f"{row['check_ms']:,.3f} | "
              f"{p_text} | {'-' if no_verdict else f'{p_s * 1000:,.1f}'} | {ratio} | "
              f"{check_ratio} | "
              f"{'yes' if c.minimal else 'NO'} | {'yes' if c.lines else 'no (timed)'} |"
              + ("" if agree else " VERDICTS DISAGREE"))
    return rows


if __name__ == "__main__":
    sys.exit(main())

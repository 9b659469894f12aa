"""Mutation run for the transaction checker (issue 36): each mutation puts back one of
the faults the checker had, in a copy of the pure-Python reference, and the script shows
that at least one test goes red for it (and that all of them pass unmutated).

Mutations:
  one-anchor        each class's search tries one candidate edge per component (the
                    first rw edge, the first anchor), as the old search tried a few
  g1a-last-element  G1a looks at the last element of a read only
  no-rt-into-info   no real-time edge into a transaction that did not commit (ok)
  wfr-always        rw-register infers writes-follow-reads without being asked
  no-version-search rw-register's open version orders are not searched (Elle's inference
                    alone: a model every order rules out stays possible)
  likely-order-only the search tries the likely order only and calls a model impossible
                    when that order closes a forbidden cycle

Run: .venv/bin/python benchmarks/txn_mutations.py [--only one-anchor,...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/test_txn_issue36.py", "tests/test_txn_elle.py", "tests/test_txn_oracle.py",
         "tests/test_txn_checker.py"]
PKG = "src/replicalab/checkers/txn"

MUTATIONS: dict[str, list[tuple[str, str, str]]] = {
    "one-anchor": [
        (f"{PKG}/cycles.py",
         "        if c is None or id(c) in out or cid in stopped:\n            continue\n",
         "        if c is None or id(c) in out or cid in stopped or cid in tried:\n"
         "            continue\n        tried.add(cid)\n"),
        (f"{PKG}/cycles.py",
         "    reach = _Reach(g, flow)\n",
         "    reach = _Reach(g, flow)\n    tried: set[int] = set()\n"),
        (f"{PKG}/cycles.py",
         "        if c is None or g.comp[e[0]] in done or sub[e[0]] != sub[e[1]]:\n",
         "        if c is None or g.comp[e[0]] in done or g.comp[e[0]] in tried:\n"
         "            continue\n        tried.add(g.comp[e[0]])\n"
         "        if sub[e[0]] != sub[e[1]]:\n"),
        (f"{PKG}/cycles.py",
         "    out: dict[int, Any] = {}\n    done: set[int] = set()\n",
         "    out: dict[int, Any] = {}\n    done: set[int] = set()\n    tried: set[int] = set()\n"),
        (f"{PKG}/cycles.py",
         "        if c is None or id(c) in out or hcomp[a] != hcomp[b]:\n",
         "        if c is None or id(c) in out or id(c) in tried_h:\n            continue\n"
         "        tried_h.add(id(c))\n        if hcomp[a] != hcomp[b]:\n"),
        (f"{PKG}/cycles.py",
         "    by = _comp_of(g, todo)\n    out: dict[int, Any] = {}\n    for i, e in "
         "enumerate(g.edges):\n        if g.bits[i] != _RW:\n            continue\n"
         "        c = by.get(g.comp[e[0]])\n        a, b",
         "    by = _comp_of(g, todo)\n    out: dict[int, Any] = {}\n    tried_h: set[int] = "
         "set()\n    for i, e in enumerate(g.edges):\n        if g.bits[i] != _RW:\n"
         "            continue\n        c = by.get(g.comp[e[0]])\n        a, b"),
    ],
    "g1a-last-element": [
        (f"{PKG}/listappend.py",
         "                for e in v:\n                    src = w.writer.get((k, e))",
         "                for e in v[-1:]:\n                    src = w.writer.get((k, e))"),
    ],
    "no-rt-into-info": [
        (f"{PKG}/graph.py",
         "        if x.invoke != NEVER:\n            events.append((x.invoke, 0, t))",
         "        if x.invoke != NEVER and x.outcome == OK:\n"
         "            events.append((x.invoke, 0, t))"),
    ],
    "wfr-always": [
        (f"{PKG}/types.py", "    wfr_keys: bool = False\n", "    wfr_keys: bool = True\n"),
    ],
    "no-version-search": [
        (f"{PKG}/versions.py", "    keys = reg.open_keys()\n", "    keys: list[str] = []\n"),
    ],
    "likely-order-only": [
        (f"{PKG}/versions.py", 'return "possible" if go(0, []) else "impossible"',
         'return "impossible"'),
    ],
}


def run_tests(src: Path) -> tuple[int, str]:
    """Run the txn tests on the Python engine with ``src`` first on the path; return the
    exit status and the first failing test's name."""
    env = dict(os.environ, PYTHONPATH=str(src), REPLICALAB_TXN_ENGINE="python")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k",
         "not native and not port_counts", *TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    failed = next((ln.split(" ")[1] for ln in proc.stdout.splitlines()
                   if ln.startswith("FAILED ")), "")
    return proc.returncode, failed


def mutated(tmp: Path, name: str) -> Path:
    """Return a copy of src/ with mutation ``name`` applied (each edit must apply once)."""
    src = tmp / name / "src"
    shutil.copytree(ROOT / "src", src)
    for rel, old, new in MUTATIONS[name]:
        path = tmp / name / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"mutation {name}: {rel} holds the text to change "
                             f"{text.count(old)} times, not once; update this script")
        path.write_text(text.replace(old, new))
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(MUTATIONS))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        code, failed = run_tests(ROOT / "src")
        print(f"unmutated: {'all pass' if code == 0 else 'FAILED ' + failed}", flush=True)
        bad = code != 0
        for name in args.only.split(","):
            code, failed = run_tests(mutated(tmp, name))
            print(f"{name}: {'red: ' + failed if code else 'GREEN (no test caught it)'}",
                  flush=True)
            bad |= code == 0
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

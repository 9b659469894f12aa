"""Where the test suite's CPU goes: run pytest with ``tests/cpuprofile.py`` and a sampler of
every process on the machine, then print CPU seconds by test file, by xdist group and by
server kind.

    python benchmarks/suite_cpu.py [--out docs/data/suite-cpu-DATE.json] [-- PYTEST ARGS]

The suite is bound by CPU on 2 cores (``vmstat``: under 2 % idle while it runs), so cutting
its wall time means cutting CPU seconds, and a test's wall time does not say which tests
cost them. Per test: the test process's own CPU and that of the commands it waited for
(``tests/cpuprofile.py``). Servers started in the background are not waited for: every
``SAMPLE_S`` the sampler reads each process's CPU from ``/proc/<pid>/stat`` and keeps the
last figure per process (a process's final ``SAMPLE_S`` can be missed), named by its
command. Both together come to the machine's busy CPU over the run, printed beside it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_S = 1.0
TICK = os.sysconf("SC_CLK_TCK")


def _kind(cmd: str) -> str:
    """Return a short name for a process's command line (what server or tool it is)."""
    for key, name in (("cassandra", "cassandra (java)"), ("zookeeper", "zookeeper (java)"),
                      ("etcd", "etcd"), ("toxiproxy", "toxiproxy"), ("postgres", "postgres"),
                      ("redis-server", "redis"), ("minio", "minio"), ("sshd", "sshd"),
                      ("prometheus", "prometheus"), ("chrom", "chromium"),
                      ("exec(eval(sys.stdin", "pytest worker"), ("replicalab", "replicalab "
                      "commands"), ("python", "other python"), ("java", "other java")):
        if key in cmd:
            return name
    return cmd.split(" ", 1)[0].rsplit("/", 1)[-1][:30] or "?"


def _sample(stop: threading.Event, seen: dict[int, tuple[str, float]]) -> None:
    while not stop.wait(SAMPLE_S):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            key = int(pid)
            if key not in seen or seen[key][1] < cpu:
                seen[key] = (cmd, cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the per-test and per-kind figures here")
    ap.add_argument("pytest_args", nargs="*", default=["-q", "-n", "4", "--dist", "loadgroup"])
    a = ap.parse_args()
    log = Path(f"/tmp/suite-cpu-{os.getpid()}.jsonl")
    log.unlink(missing_ok=True)
    before = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    seen: dict[int, tuple[str, float]] = {}
    stop = threading.Event()
    t = threading.Thread(target=_sample, args=(stop, seen), daemon=True)
    t.start()
    env = {**os.environ, "REPLICALAB_CPU_LOG": str(log), "PYTHONPATH": str(ROOT / "tests")}
    rc = subprocess.call([sys.executable, "-m", "pytest", "-p", "cpuprofile", *a.pytest_args],
                         cwd=ROOT, env=env)
    stop.set()
    t.join()
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    session = next((r for r in rows if r.get("session")), {})
    tests = [r for r in rows if "test" in r]
    by_file: dict[str, float] = collections.Counter()
    for r in tests:
        by_file[r["test"].split("::")[0]] += r["cpu_s"] + r["children_cpu_s"]
    by_kind: dict[str, float] = collections.Counter()
    for pid, (cmd, cpu) in seen.items():
        if pid not in before:
            by_kind[_kind(cmd)] += cpu
    total_tests = sum(by_file.values())
    print(f"\nmachine busy {session.get('machine_cpu_s')} CPU s over {session.get('wall_s')} s "
          f"of wall; tests and the commands they waited for: {total_tests:.0f} CPU s")
    print("\nby process kind (sampled, processes started during the run):")
    for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {v:8.1f}  {k}")
    print("\nby test file (own + waited-for children):")
    for k, v in sorted(by_file.items(), key=lambda kv: -kv[1])[:40]:
        print(f"  {v:8.1f}  {k}")
    print("\nslowest tests by CPU:")
    for r in sorted(tests, key=lambda r: -(r["cpu_s"] + r["children_cpu_s"]))[:40]:
        print(f"  {r['cpu_s']:7.1f} + {r['children_cpu_s']:6.1f}  wall {r['wall_s']:6.1f}  "
              f"{r['test']}")
    if a.out:
        a.out.write_text(json.dumps({"command": "python benchmarks/suite_cpu.py " +
                                     " ".join(sys.argv[1:]), "session": session,
                                     "by_kind": by_kind, "by_file": by_file, "tests": tests},
                                    indent=1) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())

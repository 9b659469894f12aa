"""How fast a simulated probe exits after Ctrl-C: start `replicalab probe --store
sim://simpledb --duration 24h` as a user would, send SIGINT 5 s in, and print per run the
seconds until the process is gone, the CPU seconds it used after the signal (from
/proc/PID/stat) and how many operations it saved.

    python benchmarks/ctrl_c_exit.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def _cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(out: str, after_s: float) -> tuple[float, float, str]:
    """Return (seconds to exit, CPU seconds after SIGINT, operations saved) of one run."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "replicalab.cli.main", "probe", "--store",
                          "sim://simpledb", "--duration", "24h", "--out", out],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    p.stderr.readline()  # the first progress line: the run is going
    time.sleep(max(0.0, after_s - (time.monotonic() - t0)))
    cpu0 = cpu1 = _cpu_s(p.pid) or 0.0
    p.send_signal(signal.SIGINT)
    sent = time.monotonic()
    while p.poll() is None and time.monotonic() < sent + 60:
        cpu1 = _cpu_s(p.pid) or cpu1
        time.sleep(0.005)
    exit_s = time.monotonic() - sent
    m = re.search(r"history \(([\d,]+) operations", p.stderr.read())
    return exit_s, cpu1 - cpu0, m.group(1) if m else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--after", type=float, default=5.0, help="seconds before the SIGINT")
    a = ap.parse_args()
    exits = []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(a.runs):
            exit_s, cpu_s, ops = one(out, a.after)
            exits.append(exit_s)
            print(f"exit {exit_s:.2f} s after SIGINT, {cpu_s:.2f} s CPU, {ops} operations saved")
    print(f"median exit {statistics.median(exits):.2f} s over {a.runs} runs")


if __name__ == "__main__":
    main()

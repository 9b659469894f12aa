"""How often Ctrl-C sent some time after `placement simulate`'s first piped progress line
still finds the command running: the race `tests/parked.py` removes from two tests.

    python benchmarks/ctrl_c_after_first_line.py [TRIES] [MAX_DELAY_S]

Each try starts the command, reads its first stderr line, waits a delay drawn uniformly
from [0, MAX_DELAY_S] s, sends SIGINT and prints the exit status counts (130: the signal
cut the run; 0: the run had already finished) and the delays that came too late."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter


def main(tries: int = 30, max_delay_s: float = 10.0) -> None:
    codes: Counter[int] = Counter()
    late = []
    for _ in range(tries):
        out = tempfile.mkdtemp(prefix="ctrl-c-")
        p = subprocess.Popen([sys.executable, "-m", "replicalab.cli.main", "placement",
                              "simulate", "--objects", "20000", "--requests", "5000000",
                              "--out", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stderr.readline()  # type: ignore[union-attr]
        delay = random.uniform(0.0, max_delay_s)
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=300)
        codes[p.returncode] += 1
        if p.returncode != 130:
            late.append(round(delay, 2))
        shutil.rmtree(out, ignore_errors=True)
    print(f"exit codes over {tries} tries: {dict(codes)}; delays (s) after the line that "
          f"found the run over: {sorted(late)}")


if __name__ == "__main__":
    main(*(f(a) for f, a in zip((int, float), sys.argv[1:], strict=False)))

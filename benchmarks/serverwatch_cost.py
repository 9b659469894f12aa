"""What watching the servers costs the client it runs beside (issue 38): the client loop's
stall p99 (the noise floor's own stall detector, ``runtime/noise.py``) over 4 s, with no
server watch, with the watch's sampling loop in a thread of the client, and with it in a
process of its own (what the product does), watching a "server" of 500 threads of which one
wakes every ms; and the watch process's CPU share. Rounds interleaved, medians printed.

    python benchmarks/serverwatch_cost.py [ROUNDS]
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from replicalab.runtime import serverwatch
from replicalab.runtime.noise import NoiseFloor, NoiseMonitor

SERVER = """import threading, time
ev = threading.Event()
for _ in range(499):
    threading.Thread(target=ev.wait, daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.001)
"""
SECONDS = 4.0


async def _floor(pids: list[int]) -> NoiseFloor:
    mon = NoiseMonitor(None, server_pids=pids)
    mon.start()
    await asyncio.sleep(SECONDS)
    return await mon.stop()


def _in_thread(pid: int) -> NoiseFloor:
    """The watch's loop in a thread of the client (its stop a threading event)."""
    stop = threading.Event()
    serverwatch._stopped = lambda timeout_s: stop.wait(timeout_s)  # type: ignore[assignment]
    out = Path("/tmp/serverwatch-cost.txt")
    t = threading.Thread(target=serverwatch.watch, args=([pid], out, 0.1, 60.0, None))
    t.start()
    try:
        return asyncio.run(_floor([]))
    finally:
        stop.set()
        t.join()
        out.unlink(missing_ok=True)


def main(rounds: int) -> None:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline() == "ready\n"
    got: dict[str, list[float]] = {"no watch": [], "watch in a thread": [],
                                   "watch in a process": []}
    cpu: list[float] = []
    try:
        for _ in range(rounds):
            got["no watch"].append(asyncio.run(_floor([])).stall_p99_ms)
            got["watch in a thread"].append(_in_thread(server.pid).stall_p99_ms)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            floor = asyncio.run(_floor([server.pid]))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            got["watch in a process"].append(floor.stall_p99_ms)
            cpu.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                       / SECONDS)
            assert floor.server_threads == 500, floor.server_threads
    finally:
        server.kill()
    print(f"{time.strftime('%Y-%m-%d %H:%M')} load {os.getloadavg()[0]:.2f}"
          f", {rounds} rounds of {SECONDS:g} s, a server of 500 threads")
    for k, v in got.items():
        print(f"  client stall p99, {k:<19} median {statistics.median(v):6.2f} ms "
              f"({', '.join(f'{x:.2f}' for x in v)})")
    print(f"  the watch process's CPU: median {100 * statistics.median(cpu):.1f} % of a core")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)

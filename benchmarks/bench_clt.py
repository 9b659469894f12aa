"""Per-ping overhead of the CLT agents against a bare asyncio echo, side by side in one run.

Both sides run as two processes on 127.0.0.1, exchange 1 KiB pings at the same open-loop
rate for the same time, and are measured the same way:

* RTT from the actual send to the echo's arrival (median, p99), so scheduling lag is left out
  and what remains is the per-ping cost of the stack in each;
* CPU per ping: user + system CPU of both processes (from /proc) divided by the pings
  exchanged, i.e. the cost of one send, one echo and one receive.

The CLT side is two real agents driven by the coordinator (HLC stamps and trace log on). The
peer is the smallest reasonable asyncio echo: length-prefixed frames over one persistent
connection, no clock, no trace. Ratios are CLT / bare (1.0 = no overhead).

    .venv/bin/python benchmarks/bench_clt.py --rate 500 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from replicalab.clt import runner
from replicalab.cluster import process
from replicalab.cluster.ports import allocate, wait_listening

_LEN = struct.Struct("!I")
_HDR = struct.Struct("!IQ")


def _cpu_s(pid: int) -> float:
    """Return user + system CPU seconds used so far by ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the bare asyncio echo peer ----------------------------------------------------------

class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            (n,) = _LEN.unpack_from(self.buf)
            if len(self.buf) < 4 + n:
                break
            self.t.write(bytes(self.buf[:4 + n]))  # type: ignore[attr-defined]
            del self.buf[:4 + n]


async def _bare_server(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(_Echo, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


class _Client(asyncio.Protocol):
    def __init__(self, rtts: list[int]) -> None:
        self.rtts = rtts
        self.buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns() // 1000
        self.buf += data
        while len(self.buf) >= 4:
            (n,) = _LEN.unpack_from(self.buf)
            if len(self.buf) < 4 + n:
                break
            _, sent = _HDR.unpack_from(self.buf, 4)
            self.rtts.append(now - sent)
            del self.buf[:4 + n]


async def _bare_client(port: int, rate: float, seconds: float, payload: int) -> list[int]:
    rtts: list[int] = []
    loop = asyncio.get_running_loop()
    t, _proto = await loop.create_connection(lambda: _Client(rtts), "127.0.0.1", port)
    body = os.urandom(payload)
    period = 1.0 / rate
    t0 = time.monotonic() + 0.2
    for i in range(int(rate * seconds)):
        delay = t0 + i * period - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        msg = _HDR.pack(i, time.monotonic_ns() // 1000) + body
        t.write(_LEN.pack(len(msg)) + msg)
    await asyncio.sleep(0.5)
    t.close()
    return rtts


def _bare(rate: float, seconds: float, payload: int, logs: Path) -> dict:
    """Run the bare echo: server and client as two processes; return RTTs and CPU/ping."""
    port = allocate(1)[0]
    srv = process.start([sys.executable, __file__, "--role", "server", "--port", str(port)],
                        logs / "bare-server.log")
    try:
        if not wait_listening(port, 30):
            raise RuntimeError("bare echo server did not start")
        cpu0 = _cpu_s(srv)
        p = subprocess.run([sys.executable, __file__, "--role", "client", "--port", str(port),
                            "--rate", str(rate), "--seconds", str(seconds),
                            "--payload", str(payload)], capture_output=True, text=True,
                           timeout=seconds + 120, check=True)
        out = json.loads(p.stdout)
        cpu = _cpu_s(srv) - cpu0 + out["cpu_s"]
    finally:
        process.stop(srv)
    rtts = np.array(out["rtts_us"], dtype=float)
    return {"pings": len(rtts), "p50_us": float(np.median(rtts)),
            "p99_us": float(np.percentile(rtts, 99)), "cpu_us_per_ping": cpu * 1e6 / len(rtts)}


def _clt(rate: float, seconds: float, payload: int, logs: Path) -> dict:
    """Run two CLT agents pinging each other; return RTTs from actual send and CPU/ping."""
    ports = allocate(2)
    pids = [process.start([sys.executable, "-m", "replicalab.clt.agent", "--listen",
                           f"127.0.0.1:{p}"], logs / f"agent{p}.log") for p in ports]
    try:
        if not all(wait_listening(p, 30) for p in ports):
            raise RuntimeError("CLT agents did not start")
        agents = [runner.AgentSpec(f"n{i + 1}", "127.0.0.1", p) for i, p in enumerate(ports)]
        # each agent pings the other, so a round is two pings: half the rate gives the same
        # number of pings per second as the bare client
        cfg = runner.RunConfig(rate_hz=rate / 2, payload_bytes=payload, duration_s=seconds)
        cpu0 = sum(_cpu_s(p) for p in pids)
        out = runner.run(agents, cfg, runner.plan_targets(agents, cfg), logs / "traces")
        cpu = sum(_cpu_s(p) for p in pids) - cpu0
    finally:
        for pid in pids:
            process.stop(pid)
    rec = out.records
    ok = ~rec.timed_out
    rtts = (rec.end_us - rec.start_us - rec.lag_us)[ok].astype(float)
    return {"pings": int(ok.sum()), "p50_us": float(np.median(rtts)),
            "p99_us": float(np.percentile(rtts, 99)), "cpu_us_per_ping": cpu * 1e6 / len(rec),
            "lag_p50_us": float(np.median(rec.lag_us)),
            "lag_p99_us": float(np.percentile(rec.lag_us, 99))}


def main() -> None:
    """Run both sides ``--repeats`` times (alternating) and print medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=["bench", "server", "client"], default="bench")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--rate", type=float, default=500.0, help="pings per second")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--payload", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    if a.role == "server":
        asyncio.run(_bare_server(a.port))
        return
    if a.role == "client":
        t0 = time.process_time()
        rtts = asyncio.run(_bare_client(a.port, a.rate, a.seconds, a.payload))
        print(json.dumps({"rtts_us": rtts, "cpu_s": time.process_time() - t0}))
        return
    clt, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.repeats):
            bare.append(_bare(a.rate, a.seconds, a.payload, Path(tmp)))
            clt.append(_clt(a.rate, a.seconds, a.payload, Path(tmp)))

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)
    print(f"{a.rate:g} pings/s, {a.payload} B payload, {a.seconds:g} s, "
          f"{a.repeats} repeat(s), medians:")
    print(f"{'':10} {'pings':>8} {'RTT p50 µs':>11} {'RTT p99 µs':>11} {'CPU µs/ping':>12}")
    for name, rows in (("bare", bare), ("clt", clt)):
        print(f"{name:10} {med(rows, 'pings'):>8.0f} {med(rows, 'p50_us'):>11.0f} "
              f"{med(rows, 'p99_us'):>11.0f} {med(rows, 'cpu_us_per_ping'):>12.1f}")
    print(f"CLT schedule lag p50 {med(clt, 'lag_p50_us'):.0f} µs, p99 "
          f"{med(clt, 'lag_p99_us'):.0f} µs")
    print(f"ratio CLT/bare: RTT p50 {med(clt, 'p50_us') / med(bare, 'p50_us'):.2f}x, "
          f"CPU per ping {med(clt, 'cpu_us_per_ping') / med(bare, 'cpu_us_per_ping'):.2f}x")


if __name__ == "__main__":
    main()

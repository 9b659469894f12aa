"""A quick side-by-side probe of the three middleware variants on one set of data centres.

``python -m replicalab.counters.mw_probe redis`` (or ``postgresql``, ``sim``) starts three
DCs, then for each variant prints the median latency of one strictly-local decrement per
DC (one client, 100 decrements) and the throughput of 30 concurrent clients in US-E
(40 decrements each, no think time), with the server-based serialiser's writes per
operation. The full experiments of seed 004 are ``replicalab counter bench``.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from replicalab.counters import topology
from replicalab.counters.client_mw import ClientMiddleware
from replicalab.counters.crdt import CounterError
from replicalab.counters.middleware import Middleware, Options
from replicalab.counters.server_mw import ServerMiddleware
from replicalab.counters.service import Placement
from replicalab.stores import StoreError

VARIANTS = ("client-based", "server-based", "server-based+batch")


def _make(variant: str, placement: Placement) -> Middleware:
    if variant == "client-based":
        return ClientMiddleware(placement, Options())
    return ServerMiddleware(placement, Options(), batch_ms=2.0 if variant.endswith("batch")
                            else 0.0)


async def probe(t: topology.DataCentres, variant: str, clients: int = 30,
                ops: int = 40) -> dict[str, float]:
    """Return medians of one decrement per DC (``<dc>_ms``), ``ops_per_s`` of ``clients``
    concurrent clients in the first DC and ``writes_per_op`` (server-based only)."""
    mws = {dc: _make(variant, Placement.from_topology(t, dc)) for dc in t.dcs}
    out: dict[str, float] = {}
    try:
        for m in mws.values():
            m.start()
        key = f"probe-{variant}"
        await mws[t.dcs[0]].create(key, 1_000_000)
        await asyncio.sleep(0.5)
        for dc, m in mws.items():
            lat_ms = []
            for _ in range(100):
                t0 = time.perf_counter()
                await m.dec(key)
                lat_ms.append((time.perf_counter() - t0) * 1e3)
            out[f"{dc}_ms"] = statistics.median(lat_ms)
        m = mws[t.dcs[0]]
        base = m.batch_stats.writes if isinstance(m, ServerMiddleware) else 0
        base_ops = m.batch_stats.ops if isinstance(m, ServerMiddleware) else 0

        async def client() -> int:
            done = 0
            for _ in range(ops):
                try:
                    await m.dec(key)
                    done += 1
                except (CounterError, StoreError):
                    pass
            return done

        t0 = time.perf_counter()
        done = sum(await asyncio.gather(*(client() for _ in range(clients))))
        out["ok"] = done
        out["ops_per_s"] = done / (time.perf_counter() - t0)
        if isinstance(m, ServerMiddleware):
            out["writes_per_op"] = ((m.batch_stats.writes - base)
                                    / max(m.batch_stats.ops - base_ops, 1))
    finally:
        for m in mws.values():
            await m.close()
    return out


async def _main(kind: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="replicalab-mwprobe-"))
    root.chmod(0o755)  # PostgreSQL runs as its own user
    t = topology.start(kind, root, f"mwprobe-{kind[:5]}")
    try:
        for v in VARIANTS:
            r = await probe(t, v)
            lat = " ".join(f"{dc}={r[f'{dc}_ms']:.2f}" for dc in t.dcs)
            extra = f" writes/op={r['writes_per_op']:.2f}" if "writes_per_op" in r else ""
            print(f"{kind} {v:19s} median dec ms {lat} | 30 clients: {r['ok']:.0f} ok, "
                  f"{r['ops_per_s']:.0f} ops/s{extra}", flush=True)
    finally:
        t.down()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1] if len(sys.argv) > 1 else "sim"))

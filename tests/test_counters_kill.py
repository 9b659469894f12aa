"""kill -9 of a server-based middleware process mid-run loses no acknowledged decrement.

Three data centres, each a real Redis with Toxiproxy links carrying the ``dc3`` latencies,
each served by its own ``python -m replicalab.counters.server`` process. Clients in every
DC decrement (globally) while the US-E server is killed with SIGKILL; after a restart, US-E's
store must record at least every decrement US-E acknowledged before the kill, and once the
DCs have synchronised every DC must agree and see a value >= 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import pytest

from replicalab.cluster import datacentres as topology
from replicalab.cluster import process
from replicalab.cluster.ports import allocate, wait_listening
from replicalab.counters.crdt import BoundedCounter, InsufficientRights
from replicalab.counters.server import RemoteCounterService
from replicalab.counters.service import Contended, read_state
from replicalab.stores import StoreError
from servers import server_missing

pytestmark = pytest.mark.integration

INITIAL = 600
KEY = "stock"
VICTIM = "US-E"


def _launch(t: topology.DataCentres, dc: str, port: int, log: Path) -> int:
    argv = [sys.executable, "-m", "replicalab.cli.main", "counter", "serve", "--dc", dc,
            "--port", str(port), "--sync", "100ms", "--threshold", "10", "--batch-ms", "2"]
    for other in t.dcs:  # in replica order; other DCs' stores through the WAN links
        argv += ["--store", f"{other}={t.url(other, from_dc=dc)}"]
    pid = process.start(argv, log)
    if not wait_listening(port, 30):
        process.stop(pid)
        raise AssertionError(f"counter server {dc} did not start; see {log}")
    return pid


async def _stored(t: topology.DataCentres, dc: str) -> BoundedCounter:
    store = t.store(dc)
    try:
        state = (await read_state(await store.connect(), KEY, dc)).state
    finally:
        await store.close()
    assert state is not None
    return state


async def _scenario(t: topology.DataCentres, ports: dict[str, int], pids: dict[str, int],
                    logs: Path) -> None:
    svcs = {dc: await RemoteCounterService.connect("127.0.0.1", ports[dc]) for dc in t.dcs}
    await svcs[VICTIM].create(KEY, INITIAL)
    await asyncio.sleep(0.5)  # the other DCs learn the counter
    acked = dict.fromkeys(t.dcs, 0)
    stop = asyncio.Event()

    async def client(dc: str) -> None:
        for _ in range(100_000):  # bounded; ends at `stop` long before
            if stop.is_set():
                return
            try:
                value = await svcs[dc].dec(KEY, allow_global=True)
                assert value >= 0
                acked[dc] += 1
            except (InsufficientRights, Contended):
                await asyncio.sleep(0.01)
            except StoreError:  # the victim died under us: outcome unknown, not acked
                await asyncio.sleep(0.05)

    clients = [asyncio.ensure_future(client(dc)) for dc in t.dcs for _ in range(4)]
    await asyncio.sleep(1.5)
    process.kill9(pids[VICTIM])
    acked_at_kill = acked[VICTIM]
    await asyncio.sleep(0.3)
    stop.set()
    await asyncio.gather(*clients)
    assert acked[VICTIM] == acked_at_kill and acked_at_kill > 0
    for s in svcs.values():
        await s.close()

    # every decrement acknowledged before the kill is in US-E's durable state
    victim = await _stored(t, VICTIM)
    assert victim.down is not None
    assert victim.down.u[t.dcs.index(VICTIM)] >= acked_at_kill

    # restart: the new process starts from the store and the DCs converge
    pids[VICTIM] = _launch(t, VICTIM, ports[VICTIM], logs / f"{VICTIM}-2.log")
    svc = await RemoteCounterService.connect("127.0.0.1", ports[VICTIM])
    with contextlib.suppress(InsufficientRights):
        await svc.dec(KEY)
        acked[VICTIM] += 1
    await svc.close()
    for _ in range(60):
        await asyncio.sleep(0.25)
        states = [await _stored(t, dc) for dc in t.dcs]
        if all(s == states[0] for s in states):
            break
    final = states[0]
    assert all(s == final for s in states), "the DCs did not converge"
    assert final.down is not None
    for i, dc in enumerate(t.dcs):
        assert final.down.u[i] >= acked[dc]
        assert final.local_rights(dc) >= 0
    assert final.value() >= 0
    assert sum(acked.values()) <= INITIAL


def test_kill9_of_the_server_loses_no_acknowledged_decrement(tmp_path: Path) -> None:
    try:
        t = topology.start("redis", tmp_path, "mwkill")
    except ValueError as err:
        server_missing("redis data centres", err)
    pids: dict[str, int] = {}
    try:
        ports = dict(zip(t.dcs, allocate(len(t.dcs)), strict=True))
        for dc in t.dcs:
            pids[dc] = _launch(t, dc, ports[dc], tmp_path / f"{dc}.log")
        asyncio.run(asyncio.wait_for(_scenario(t, ports, pids, tmp_path), 90))
    finally:
        for pid in pids.values():
            process.stop(pid)
        t.down()

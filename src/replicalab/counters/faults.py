"""Faults between data centres during a counter-bench point (seed 004 §IV-E).

* ``partition`` — data centre ``dc`` is cut off from every other one for ``for_s`` seconds
  from ``at_s`` (every WAN link between them swallows all data), then healed. "During a
  network partition, rights can be used in both sides of the partition – the only restriction
  is that it is impossible to transfer rights between any two partitioned DCs."
* ``dc-loss`` — data centre ``dc`` is lost at ``at_s``: its links are cut, then its
  middleware stops (its clients are refused) and its store's server is killed (SIGKILL).
  Its rights are unavailable for ``for_s`` seconds; then it is retired and its rights
  recovered by the procedure of :mod:`replicalab.counters.recovery` (its store restarted
  from its data directory and read by the operator, here the bench, directly), and the
  survivors are handed the result. The lost DC stays cut off and out of service until the
  point ends.

The faults act through ``cluster/`` (Toxiproxy links, process control) as ``faults/`` does on
a cluster; every fault is healed when the point ends, however it ends, so the next point
finds its data centres whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from replicalab.counters.crdt import BoundedCounter
from replicalab.counters.recovery import READY_S, Recovery, open_answering, recover
from replicalab.stores import Client, Store, StoreError

FAULTS = ("partition", "dc-loss")


class Topology(Protocol):
    """What the faults need of :class:`replicalab.cluster.datacentres.DataCentres`."""

    dcs: tuple[str, ...]

    def store(self, dc: str, from_dc: str | None = None) -> Store: ...

    def cut(self, a: str, b: str, on: bool = True) -> None: ...

    def stop_store(self, dc: str) -> None: ...

    def start_store(self, dc: str) -> None: ...


class Faultable(Protocol):
    """What the faults need of a deployment: stop one DC's middleware, hand a state to the
    others'."""

    async def lose(self, dc: str) -> None: ...

    async def absorb(self, dc: str, key: str, state: BoundedCounter) -> None: ...


@dataclass
class FaultRun:
    """One fault as it happened: times in s since the point's start."""

    kind: str
    dc: str
    others: tuple[str, ...]
    at_s: float
    for_s: float
    start_s: float | None = None
    end_s: float | None = None  # healed (partition) or rights recovered (dc-loss)
    recoveries: list[Recovery] = field(default_factory=list)
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {"kind": self.kind, "dc": self.dc, "others": list(self.others),
                "at_s": self.at_s, "for_s": self.for_s, "start_s": self.start_s,
                "end_s": self.end_s, "error": self.error,
                "recoveries": [r.to_json() for r in self.recoveries]}


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    # Toxiproxy's API and process control block: keep the clients' loop running
    return await asyncio.to_thread(fn, *args)


def _cut_off(topo: Topology, dc: str, others: Sequence[str], on: bool) -> None:
    for o in others:
        topo.cut(dc, o, on)


async def _sessions(topo: Topology, dcs: Sequence[str]) -> tuple[list[Store], dict[str, Client]]:
    stores, clients = [], {}
    for dc in dcs:
        store = topo.store(dc)
        stores.append(store)
        clients[dc] = await store.connect()
    return stores, clients


async def recover_lost(topo: Topology, lost: str, survivors: Sequence[str],
                       keys: Sequence[str], ready_s: float = READY_S) -> list[Recovery]:
    """Restart ``lost``'s store from its data directory, recover every counter of ``keys``
    from it into the ``survivors``' stores (reached directly, as an operator would) and
    return what was done; a store that will not restart, or not answer within ``ready_s``,
    has its DC's rights written off."""
    lost_client: Client | None = None
    opened: list[Store] = []
    try:
        try:
            await _in_thread(topo.start_store, lost)
            got = await open_answering(lambda: topo.store(lost), keys, ready_s)
            if got is not None:
                opened.append(got[0])
                lost_client = got[1]
        except (ValueError, OSError, StoreError):
            lost_client = None  # its disk is gone: write its rights off
        stores, clients = await _sessions(topo, survivors)
        opened += stores
        return [await recover(k, lost, lost_client, clients, seed=i)
                for i, k in enumerate(keys)]
    finally:
        for s in opened:
            with contextlib.suppress(Exception):
                await s.close()


async def run_fault(kind: str, dc: str, at_s: float, for_s: float, topo: Topology,
                    dep: Faultable, keys: Sequence[str], t0_ns: int,
                    on_end: Callable[[], None] | None = None,
                    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> FaultRun:
    """Carry out fault ``kind`` on ``dc`` (``at_s`` after ``t0_ns``, for ``for_s``) and return
    what happened; ``on_end`` is called once it has ended. Cancelling it heals a partition
    and returns what happened so far (``error`` "interrupted")."""
    others = tuple(d for d in topo.dcs if d != dc)
    run = FaultRun(kind, dc, others, at_s, for_s)

    def since_s() -> float:
        return (time.monotonic_ns() - t0_ns) / 1e9

    cut = False
    try:
        await sleep(max(0.0, at_s - since_s()))
        run.start_s = round(since_s(), 4)
        cut = True
        # a lost DC's network goes first: what it did since its last synchronisation is
        # known only to its own store
        await _in_thread(_cut_off, topo, dc, others, True)
        if kind == "dc-loss":
            await dep.lose(dc)
            await _in_thread(topo.stop_store, dc)
        await sleep(max(0.0, run.start_s + for_s - since_s()))
        if kind == "partition":
            await _in_thread(_cut_off, topo, dc, others, False)
            cut = False
        else:
            run.recoveries = await recover_lost(topo, dc, others, keys)
            for r in run.recoveries:
                if r.state is not None:
                    for o in others:  # hand the survivors the result now, as a sync would
                        await dep.absorb(o, r.key, r.state)
        run.end_s = round(since_s(), 4)
    except (StoreError, ValueError, OSError) as err:
        run.error = f"{type(err).__name__}: {err}"
    except asyncio.CancelledError:
        run.error = "interrupted"  # the point stopped first: keep what happened so far
    finally:
        if on_end is not None:
            on_end()
        if cut and kind == "partition":  # cancelled mid-partition: heal now
            with contextlib.suppress(Exception):
                _cut_off(topo, dc, others, False)
    return run


@contextlib.contextmanager
def quiet_drivers(kind: str) -> Any:
    """While a DC is lost, keep its store driver's warnings about the connections its killed
    server dropped (psycopg: "error ignored in rollback", "query cancellation failed") off
    the terminal: they are the fault, expected, and the point records what they did."""
    if kind != "dc-loss":
        yield
        return
    logger = logging.getLogger("psycopg")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def heal(topo: Topology, run: FaultRun | None, kind: str, dc: str) -> None:
    """Undo whatever fault ``kind`` on ``dc`` left behind (links cut, a store stopped), so the
    next point finds every data centre whole; errors are ignored (best effort)."""
    others = [d for d in topo.dcs if d != dc]
    with contextlib.suppress(Exception):
        _cut_off(topo, dc, others, False)
    if kind == "dc-loss":
        with contextlib.suppress(Exception):
            topo.start_store(dc)


def crossed(log: Sequence[tuple[int, int, str, str, int]], me: str, others: Sequence[str],
            start_ns: int, end_ns: int) -> int:
    """Return how many of ``me``'s transfers with ``others`` (``log`` rows: asked ns, done ns,
    key, donor, given) were both asked and done inside ``[start_ns, end_ns]``."""
    return sum(1 for asked, done, _k, donor, _n in log
               if donor in others and start_ns <= asked and done <= end_ns)


__all__ = ["FAULTS", "FaultRun", "crossed", "heal", "quiet_drivers", "recover_lost",
           "run_fault"]

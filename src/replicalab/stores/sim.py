"""``sim://`` — the built-in simulated store, in virtual time, needing no server.

``sim://simpledb`` (seed 003 §4.3), ``sim://quorum?n=3&r=1&w=1&regions=aws5``,
``sim://primary?replication=async|sync&regions=dc3``. Every run with the same seed gives the
same history. Clients are placed in a region with ``connect(region=...)``; by default the
first region of the scheme's region set. ``clock=real`` runs the same simulation in real
time on asyncio (slow, but it exercises the real-time path of workloads end to end).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from replicalab.regions import region_set
from replicalab.runtime import RealRuntime, VirtualRuntime
from replicalab.sim import native
from replicalab.sim.errors import ConditionNotMet, Lost, NotExpressible, ServiceUnavailable
from replicalab.sim.params import parse_params
from replicalab.sim.primary import Primary, PrimaryParams
from replicalab.sim.quorum import Quorum, QuorumParams
from replicalab.sim.simpledb import SimpleDB, SimpleDBParams
from replicalab.stores.base import (
    ABSENT,
    ConditionFailed,
    Feature,
    MicroOp,
    Overloaded,
    ReadResult,
    StoreInfo,
    Unavailable,
    Unsupported,
    WriteResult,
    parse_element,
)
from replicalab.stores.txnops import appended_text, check_ops, decode_stored

_SCHEMES: dict[str, tuple[type, type]] = {
    "simpledb": (SimpleDB, SimpleDBParams),
    "quorum": (Quorum, QuorumParams),
    "primary": (Primary, PrimaryParams),
}


_new = object.__new__
if [f.name for f in fields(ReadResult)] != ["values", "node", "sent_ns", "received_ns"]:
    raise RuntimeError("ReadResult's fields changed: update stores/sim.py's _read_result")
_SET_VALUES, _SET_NODE = ReadResult.values.__set__, ReadResult.node.__set__  # type: ignore[attr-defined]
_SET_SENT, _SET_RECEIVED = ReadResult.sent_ns.__set__, ReadResult.received_ns.__set__  # type: ignore[attr-defined]


def _read_result(values: tuple[str | None, ...], node: str) -> ReadResult:
    """Return ``ReadResult(values, node)``, its slots set directly: the same object in half
    the time of the frozen dataclass's ``__init__`` (one per simulated read)."""
    r = _new(ReadResult)
    _SET_VALUES(r, values)
    _SET_NODE(r, node)
    _SET_SENT(r, 0)
    _SET_RECEIVED(r, 0)
    return r


@dataclass
class SimClient:
    """A client placed in one region of the simulated store, on client machine
    ``machine`` (schemes that model the client's CPU give each machine its own core)."""

    store: SimStore
    region: str
    machine: int = 0

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` read in one call."""
        try:
            # a simulated call that met no other event has finished already (a tuple)
            got = (self.store.scheme.read(self.region, keys, consistent, self.machine)
                   if self.machine else self.store.scheme.read(self.region, keys, consistent))
            values, node = got if type(got) is tuple else await got
        except Lost as err:
            raise Unavailable(str(err)) from None
        except ServiceUnavailable as err:
            raise Overloaded(str(err)) from None
        except NotExpressible as err:
            raise Unsupported(str(err)) from None
        return _read_result(values, node)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` in one call, conditionally if ``expect`` is given."""
        if expect and Feature.CONDITIONAL_WRITE not in self.store.info.features:
            raise Unsupported(f"{self.store.info.url} has no conditional writes")
        try:
            got = (self.store.scheme.write(self.region, values, expect, ABSENT, self.machine)
                   if self.machine else
                   self.store.scheme.write(self.region, values, expect, ABSENT))
            node = got if type(got) is str else await got
        except Lost as err:
            raise Unavailable(str(err)) from None
        except ServiceUnavailable as err:
            raise Overloaded(str(err)) from None
        except ConditionNotMet as err:
            raise ConditionFailed(str(err)) from None
        except NotExpressible as err:
            raise Unsupported(str(err)) from None
        return WriteResult(node)

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` in one call."""
        return await self.write(dict.fromkeys(keys))  # type: ignore[arg-type]

    async def transact(self, ops: list[MicroOp], *, gap_ns: int = 0) -> list[MicroOp]:
        """Run the micro-operations one by one, as an application without transactions
        does: a read is one read (consistent where the scheme has them), an append a read
        then a write of the longer list, a write one write; ``gap_ns`` apart. Nothing is
        isolated and nothing is undone: an error part-way leaves the earlier writes done
        (the outcome is then unknown: Unavailable)."""
        check_ops(ops)
        consistent = Feature.CONSISTENT_READ in self.store.info.features
        out: list[MicroOp] = []
        for n, (f, k, v) in enumerate(ops):
            if n and gap_ns:
                await self.store.runtime.sleep_ns(gap_ns)
            if f == "w":
                await self.write({k: str(int(v))})
                out.append((f, k, v))
                continue
            text = (await self.read((k,), consistent=consistent)).values[0]
            if f == "r":
                out.append((f, k, decode_stored(text)))
            else:
                await self.write({k: appended_text(text, v)})
                out.append((f, k, v))
        return out

    async def close(self) -> None:
        """Nothing to release."""


class SimStore:
    """The simulated store: one scheme on one network, driven by a VirtualRuntime."""

    def __init__(self, url: str, seed: int) -> None:
        parts = urlsplit(url)
        kind = parts.netloc or parts.path.lstrip("/")
        if kind not in _SCHEMES:
            raise ValueError(f"unknown simulated store {kind!r} in {url!r}; use one of: "
                             f"{', '.join('sim://' + k for k in _SCHEMES)}")
        scheme_cls, params_cls = _SCHEMES[kind]
        query = parse_qs(parts.query, keep_blank_values=True)
        clock = query.pop("clock", ["virtual"])[-1]
        if clock not in ("virtual", "real"):
            raise ValueError(f"parameter clock={clock!r} for sim://{kind} must be virtual or real")
        params = parse_params(params_cls, query, f"sim://{kind}")
        regions = region_set(getattr(params, "regions", "lan"))
        self.runtime = VirtualRuntime() if clock == "virtual" else RealRuntime()
        stream = native.stream_for(np.random.default_rng(seed), clock == "virtual")
        self.scheme = scheme_cls(self.runtime, stream, regions, params)
        # every this many consecutive connections share a client machine (0: all one)
        self.clients_per_machine = getattr(params, "clients_per_machine", 0)
        self.connections = 0
        self.info = StoreInfo(
            url=url, kind=f"sim/{kind}",
            # transactions: the micro-operations one by one, isolating nothing
            features=frozenset(Feature(f) for f in scheme_cls.features)
            | {Feature.TRANSACTIONS},
            regions=regions.regions, params=self.scheme.describe(),
            eventual_read_served_by=scheme_cls.eventual_read_served_by)

    async def connect(self, region: str | None = None) -> SimClient:
        """Return a client in ``region`` (default: the first region)."""
        regions = self.info.regions
        if region is None:
            region = regions[0]
        elif region not in regions:
            raise ValueError(f"region {region!r} is not in this store's regions "
                             f"({', '.join(regions)}); pick one of them")
        n, self.connections = self.connections, self.connections + 1
        return SimClient(self, region, n // self.clients_per_machine
                         if self.clients_per_machine else 0)

    async def close(self) -> None:
        """Nothing to release."""


def open_sim(url: str, seed: int) -> SimStore:
    """Return a simulated store for ``url`` seeded with ``seed``."""
    return SimStore(url, seed)


__all__ = ["SimClient", "SimStore", "open_sim", "parse_element"]

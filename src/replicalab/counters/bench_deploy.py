"""Each bench configuration deployed on a topology: what hands a client its session.

* ``weak`` / ``strong`` — :mod:`replicalab.counters.baselines` (a session per client);
  on Cassandra ``weak`` is the store's native counters (:mod:`replicalab.counters.native`);
* ``client-based`` / ``server-based`` / ``server-based+batch`` — one middleware per data
  centre (:mod:`client_mw`, :mod:`server_mw`), shared by that DC's clients in this process,
  reaching its own store directly and the other DCs' stores over the topology's WAN links
  (:meth:`Placement.from_topology`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

from replicalab.counters.baselines import StrongDeployment, Topology, WeakDeployment
from replicalab.counters.bench import CONFIGS, Deployment
from replicalab.counters.client_mw import ClientMiddleware
from replicalab.counters.crdt import BoundedCounter
from replicalab.counters.middleware import Middleware, Options
from replicalab.counters.native import NativeWeakDeployment
from replicalab.counters.server_mw import ServerMiddleware
from replicalab.counters.service import Placement

BATCH_MS = 2.0
"""Group-commit window of ``server-based+batch`` (ms)."""


@dataclass
class _Session:
    """A client's handle on its DC's shared middleware (closing it keeps the middleware)."""

    mw: Middleware
    dc: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        self.dc, self.name = self.mw.dc, self.mw.name

    async def create(self, key: str, initial: int, lower: int | None = 0,
                     upper: int | None = None) -> None:
        await self.mw.create(key, initial, lower, upper)

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        return await self.mw.dec(key, n, allow_global=allow_global)

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        return await self.mw.inc(key, n, allow_global=allow_global)

    async def value(self, key: str) -> int:
        return await self.mw.value(key)

    async def close(self) -> None:
        """The middleware belongs to the deployment."""


@dataclass
class MiddlewareDeployment:
    """One middleware per DC of ``topo``, of kind ``config``."""

    topo: Topology
    config: str
    options: Options = field(default_factory=Options)
    batch_ms: float = BATCH_MS
    name: str = ""
    mws: dict[str, Middleware] = field(default_factory=dict)

    def open(self) -> MiddlewareDeployment:
        """Create and start the middlewares (needs a running event loop)."""
        self.name = self.config
        for i, dc in enumerate(self.topo.dcs):
            opt = replace(self.options, seed=self.options.seed * 101 + i)
            mw: Middleware
            if self.config == "client-based":
                mw = ClientMiddleware(Placement.from_topology(self.topo, dc), opt)
            else:
                batch = self.batch_ms if self.config == "server-based+batch" else 0.0
                mw = ServerMiddleware(Placement.from_topology(self.topo, dc), opt,
                                      batch_ms=batch)
            mw.start()
            self.mws[dc] = mw
        return self

    async def service(self, dc: str) -> _Session:
        """Return a session on ``dc``'s middleware."""
        if dc not in self.mws:
            raise ValueError(f"unknown data centre {dc!r}; use one of {', '.join(self.mws)}")
        return _Session(self.mws[dc])

    async def lose(self, dc: str) -> None:
        """Stop ``dc``'s middleware as a lost data centre's: its sessions are refused from
        now on (Unavailable), operations in flight fail with an unknown outcome."""
        await self.mws[dc].close()

    async def absorb(self, dc: str, key: str, state: BoundedCounter) -> None:
        """Merge ``state`` into ``dc``'s counter ``key`` through its middleware."""
        await self.mws[dc].absorb(key, state)

    async def durable(self, dc: str, key: str) -> BoundedCounter | None:
        """Return counter ``key`` as ``dc`` durably holds it (None if absent)."""
        return await self.mws[dc].durable(key)

    async def close(self) -> None:
        """Stop every middleware."""
        for mw in self.mws.values():
            with contextlib.suppress(Exception):
                await mw.close()
        self.mws.clear()


async def open_deployment(config: str, topo: Topology, *, sync_ms: float = 200.0,
                          seed: int = 1) -> Deployment:
    """Return configuration ``config`` deployed and started on ``topo`` (ValueError for an
    unknown name). ``sync_ms`` is the inter-DC synchronisation period of every config."""
    if config == "weak":
        if getattr(topo, "kind", "") == "cassandra":  # the store's own CRDT counters
            return await NativeWeakDeployment(topo).open()
        return await WeakDeployment(topo, seed=seed, sync_period_ms=sync_ms).open()
    if config == "strong":
        return await StrongDeployment(topo, home=topo.dcs[0], seed=seed).open()
    if config in ("client-based", "server-based", "server-based+batch"):
        return MiddlewareDeployment(topo, config, Options(sync_ms=sync_ms, seed=seed)).open()
    raise ValueError(f"configuration {config!r}: use one of {', '.join(CONFIGS)}")

"""Where live migration runs: one store per region, each reachable from every region.

* :class:`SimDeployment` — in virtual time: per region one simulated single-node store
  (``sim/primary.py`` with no replica) on its own network, whose links from other regions
  carry the region matrix's one-way delays; a run of minutes takes seconds and a seed fixes
  it.
* :class:`RealDeployment` — in real time on servers: one Redis (or PostgreSQL) per region,
  started by ``cluster/datacentres.py`` or given as URLs, and a Toxiproxy link for every
  ordered pair of regions carrying the matrix's delays. A session from region A to B's store
  goes through the A->B link; one inside a region is direct.

Both give :class:`~replicalab.placement.live.Conns` (sessions from one region to every
region's store) and the runtime their clients run in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from replicalab.cluster import datacentres
from replicalab.placement.live import Conns
from replicalab.placement.matrix import RegionMatrix
from replicalab.regions import REGION_SETS, RegionSet, region_set
from replicalab.runtime import RealRuntime, Runtime, VirtualRuntime
from replicalab.sim.primary import Primary, PrimaryParams
from replicalab.sim.random import Stream
from replicalab.stores import Client, Feature, Store, StoreInfo, open_store
from replicalab.stores.sim import SimClient


class Deployment(Protocol):
    """Stores of several regions and the sessions between them."""

    regions: RegionSet
    runtime: Runtime

    async def conns(self, at: str) -> Conns:
        """Return new sessions from region ``at`` to every region's store."""
        ...

    async def close(self) -> None:
        """Close every session opened (servers are stopped by their owner)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Return a JSON-ready description (kind, regions, per-region stores)."""
        ...


def region_set_of(matrix: RegionMatrix, spec: str) -> RegionSet:
    """Return the region set behind ``matrix`` (made from ``spec``: ``dc3`` or a subset such
    as ``aws15:us-east-1,eu-west-1``). A subset is registered under its spec's name, because
    the WAN links of ``cluster/datacentres.py`` look their delays up by region-set name."""
    name = spec.partition(":")[0].strip()
    full = region_set(name)
    if matrix.regions == full.regions:
        return full
    sub = RegionSet.from_matrix(matrix.name, matrix.regions,
                                [[0.0 if i == j else float(matrix.rtt_ms[i][j])
                                  for j in range(matrix.size)] for i in range(matrix.size)],
                                full.sd_ms, f"{full.source}; regions {', '.join(matrix.regions)}",
                                full.intra_rtt_ms, full.intra_sd_ms)
    REGION_SETS.setdefault(sub.name, sub)
    return REGION_SETS[sub.name]


def rotated(rs: RegionSet, first: str) -> RegionSet:
    """Return ``rs`` with ``first`` moved to the front (the same matrix, reordered)."""
    order = [first] + [r for r in rs.regions if r != first]
    idx = [rs.index(r) for r in order]
    return RegionSet(rs.name, tuple(order),
                     tuple(tuple(rs.rtt_ms[i][j] for j in idx) for i in idx),
                     rs.sd_ms, rs.source, rs.intra_rtt_ms, rs.intra_sd_ms)


@dataclass
class _RegionStore:
    """One region's simulated store, in the shape :class:`SimClient` talks to."""

    scheme: Primary
    info: StoreInfo
    runtime: Runtime


@dataclass
class SimDeployment:
    """Simulated stores, one per region, sharing one virtual clock (see the module
    docstring); ``timeout_ms`` is how long a request to an unreachable store waits."""

    regions: RegionSet
    seed: int = 1
    timeout_ms: float = 5000.0
    runtime: VirtualRuntime = field(default_factory=VirtualRuntime)
    stores: dict[str, _RegionStore] = field(default_factory=dict)

    def __post_init__(self) -> None:
        features = frozenset(Feature(f) for f in Primary.features)
        for i, region in enumerate(self.regions.regions):
            params = PrimaryParams(regions=self.regions.name, replicas=1,
                                   timeout_ms=self.timeout_ms)
            stream = Stream(np.random.default_rng([self.seed, i]))
            scheme = Primary(self.runtime, stream, rotated(self.regions, region), params)
            info = StoreInfo(url=f"sim://primary?regions={self.regions.name}#{region}",
                             kind="sim/primary", features=features, regions=(region,),
                             params=scheme.describe())
            self.stores[region] = _RegionStore(scheme, info, self.runtime)

    async def conns(self, at: str) -> Conns:
        """Return sessions from ``at`` to every region's store."""
        self.regions.index(at)
        clients: dict[str, Client] = {r: SimClient(s, at)  # type: ignore[arg-type]
                                      for r, s in self.stores.items()}
        return Conns(at, clients)

    async def close(self) -> None:
        """Nothing to release."""

    def describe(self) -> dict[str, Any]:
        """Return kind, region set and each region's store URL."""
        return {"kind": "sim", "clock": "virtual", "regions": list(self.regions.regions),
                "region_set": self.regions.name,
                "stores": {r: s.info.url for r, s in self.stores.items()}}


@dataclass
class RealDeployment:
    """Real stores, one per region, reached through WAN links (see the module docstring).

    ``topology`` holds the servers and links; its owner (whoever called
    :func:`start_real`) stops them with ``topology.down()``.
    """

    topology: datacentres.DataCentres
    regions: RegionSet
    runtime: RealRuntime = field(default_factory=RealRuntime)
    _opened: list[Store] = field(default_factory=list)

    async def conns(self, at: str) -> Conns:
        """Return sessions from ``at`` to every region's store (ValueError when one cannot
        be reached)."""
        stores = [open_store(self.topology.url(region, at)) for region in self.regions.regions]
        self._opened.extend(stores)
        connected = await self.runtime.gather(*(s.connect() for s in stores))
        return Conns(at, dict(zip(self.regions.regions, connected, strict=True)))

    async def close(self) -> None:
        """Close every store opened for sessions."""
        for store in self._opened:
            await store.close()
        self._opened.clear()

    def describe(self) -> dict[str, Any]:
        """Return kind, regions and each region's direct store URL."""
        return {"kind": self.topology.kind, "clock": "real",
                "regions": list(self.regions.regions), "region_set": self.regions.name,
                "stores": dict(self.topology.urls),
                "links": "toxiproxy, one per ordered pair of regions"}


def start_real(kind: str, regions: RegionSet, root: Path, name: str) -> RealDeployment:
    """Start one ``kind`` server (redis or postgresql) per region and return the deployment
    (ValueError naming the problem; the caller stops it with ``.topology.down()``)."""
    if kind not in ("redis", "postgresql"):
        raise ValueError(f"store kind {kind!r}: live migration on real servers runs on "
                         "redis or postgresql")
    topo = datacentres.start(kind, root, name, regions.name)
    return RealDeployment(topo, regions)


def attach_real(urls: list[str], regions: RegionSet, root: Path, name: str
                ) -> RealDeployment:
    """Return a deployment on servers already running, one URL per region in the order of
    ``regions`` (links are started here; ValueError on a count or scheme mismatch)."""
    if len(urls) != len(regions.regions):
        raise ValueError(f"{len(urls)} store URLs for {len(regions.regions)} regions "
                         f"({', '.join(regions.regions)}): give one URL per region")
    kinds = {u.split("://", 1)[0] for u in urls}
    if len(kinds) != 1 or not kinds <= {"redis", "postgresql"}:
        raise ValueError("store URLs must all be redis:// or all postgresql://")
    topo = datacentres.DataCentres(kinds.pop(), regions.name, regions.regions, root, name,
                                   urls=dict(zip(regions.regions, urls, strict=True)))
    return RealDeployment(topo, regions)

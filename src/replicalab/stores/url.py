"""URLs of replicated stores started by ``replicalab cluster up``, parsed once for all kinds.

``scheme://HOST:PORT[/...]?<peers>=H:P,H:P&node_regions=R0,R1,...&regions=SET&read=nearest|
random&timeout_ms=2000[&kind-specific parameters]``: the node before ``?`` is n0, the
peers n1, n2, ... in order. Unknown parameters are an error naming the valid ones.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from replicalab.regions import RegionSet, region_set
from replicalab.stores.base import redact_url

READ_POLICIES = ("nearest", "random")


@dataclass(frozen=True)
class Endpoint:
    """One server: its name (``n<i>``), address and region."""

    name: str
    host: str
    port: int
    region: str


@dataclass(frozen=True)
class StoreUrl:
    """A parsed replicated-store URL."""

    scheme: str
    nodes: tuple[Endpoint, ...]
    regions: RegionSet | None
    read: str
    timeout_s: float
    query: dict[str, str]

    def number(self, key: str, default: float, minimum: float = 0.0) -> float:
        """Return parameter ``key`` as a number >= ``minimum`` (ValueError naming it)."""
        text = self.query.get(key)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"parameter {key}={text!r} of {self.scheme}:// must be a "
                             "number") from None
        if value < minimum:
            raise ValueError(f"parameter {key}={text!r} of {self.scheme}:// must be at "
                             f"least {minimum:g}")
        return value

    def choice(self, key: str, allowed: Sequence[str], default: str) -> str:
        """Return parameter ``key``, one of ``allowed`` (ValueError listing them)."""
        value = self.query.get(key, default)
        if value not in allowed:
            raise ValueError(f"parameter {key}={value!r} for {self.scheme}:// must be "
                             f"{' or '.join(allowed)}")
        return value

    def placed(self, region: str | None) -> str | None:
        """Return the region a client is in: ``region`` (ValueError if unknown), else the
        URL's ``client_region`` (what ``cluster up --client-region`` prints), else None."""
        region = region if region is not None else self.query.get("client_region")
        known = self.regions.regions if self.regions is not None else self.region_names()
        if region is not None and region not in known:
            raise ValueError(f"region {region!r} is not one of this store's regions "
                             f"({', '.join(known)})")
        return region

    def region_names(self) -> tuple[str, ...]:
        """Return the regions clients may be placed in, in node order, each once."""
        return tuple(dict.fromkeys(n.region for n in self.nodes))

    def pick(self, candidates: Sequence[Endpoint], region: str | None,
             rng: random.Random) -> Endpoint:
        """Return the endpoint a client in ``region`` uses among ``candidates``: ``random``
        = a seeded random one; ``nearest`` = one in its region, else the one with the
        lowest RTT from it, else the first."""
        if self.read == "random":
            return rng.choice(list(candidates))
        if region is not None:
            local = [c for c in candidates if c.region == region]
            if local:
                return local[0]
            rs = self.regions
            if rs is not None and region in rs.regions:
                return min(candidates, key=lambda c: rs.one_way_ms(region, c.region)[0])
        return candidates[0]


def _hostport(text: str, url: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ValueError(f"{text!r} in {redact_url(url)!r} is not HOST:PORT") from None


def parse_store_url(url: str, peers: str, extra: Sequence[str] = (),
                    example: str = "") -> StoreUrl:
    """Return the parsed ``url``; ``peers`` names the list parameter of the other nodes and
    ``extra`` the kind-specific parameters (ValueError names any problem)."""
    parts = urlsplit(url)
    scheme = parts.scheme
    allowed = (peers, "regions", "node_regions", "read", "timeout_ms", "client_region", *extra)
    q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    for k in q:
        if k not in allowed:
            raise ValueError(f"unknown parameter {k!r} for {scheme}://; valid: "
                             f"{', '.join(allowed)}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not port:
        raise ValueError(f"{redact_url(url)!r} needs a port: {example or scheme + '://HOST:PORT'}")
    addrs = [(parts.hostname or "127.0.0.1", port)]
    addrs += [_hostport(x, url) for x in q.get(peers, "").split(",") if x]
    node_regions = [x for x in q.get("node_regions", "").split(",") if x]
    if node_regions and len(node_regions) != len(addrs):
        raise ValueError(f"node_regions lists {len(node_regions)} regions for {len(addrs)} "
                         f"nodes in {redact_url(url)!r}; give one per node")
    regions = region_set(q.get("regions", "lan")) if node_regions else None
    if regions is not None:
        for r in node_regions:
            regions.index(r)
    names = node_regions or ["local"] * len(addrs)
    nodes = tuple(Endpoint(f"n{i}", h, p, names[i]) for i, (h, p) in enumerate(addrs))
    u = StoreUrl(scheme, nodes, regions, "nearest", 2.0, q)
    read = u.choice("read", READ_POLICIES, "nearest")
    timeout_ms = u.number("timeout_ms", 2000.0)
    if not timeout_ms > 0:
        raise ValueError(f"parameter timeout_ms of {scheme}:// must be positive")
    u = StoreUrl(scheme, nodes, regions, read, timeout_ms / 1000, q)
    u.placed(None)  # validates client_region
    return u

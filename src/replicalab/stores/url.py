"""URLs of replicated stores, parsed once for all kinds: those ``replicalab cluster up``
prints and those of stores replicalab did not start.

``scheme://[USER[:PASSWORD]@]HOST:PORT[/DATABASE]?<peers>=H:P,H:P&node_regions=R0,R1,...
&regions=SET&read=nearest|random&timeout_ms=2000[&tls=1&tls_ca=PATH&tls_cert=PATH
&tls_key=PATH][&kind-specific parameters]``: the node before ``?`` is n0, the peers n1, n2,
... in order. Unknown parameters are an error naming the valid ones. User, password and
database are percent-decoded; the password is kept out of ``repr`` and never printed
(:func:`replicalab.stores.base.redact_url` masks it in every message).
"""

from __future__ import annotations

import random
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

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


TLS_PARAMS = ("tls", "tls_ca", "tls_cert", "tls_key")
"""The URL parameters of a TLS connection: on/off, CA file, client certificate and key."""


URL_PARAMETERS = {
    "isolation": "postgresql://USER@HOST:5432/DB?isolation=serializable",
    "lock_timeout_ms": "postgresql://USER@HOST:5432/DB?isolation=serializable"
                       "&lock_timeout_ms=20",
    "txn_reads": "postgresql://USER@HOST:5432/DB?isolation=serializable&txn_reads=standby",
    "synchronous_commit": "postgresql://USER@HOST:5432/DB?synchronous_commit=on",
    "txn": "cassandra://HOST:9042?txn=lwt",
    "write_cl": "cassandra://HOST:9042?write_cl=QUORUM",
    "eventual_cl": "cassandra://HOST:9042?eventual_cl=ONE",
    "consistent_cl": "cassandra://HOST:9042?consistent_cl=QUORUM",
    "timeout_ms": "redis://HOST:6379?timeout_ms=2000",
}
"""Store settings that are parameters of the store URL, not options of a command, each
with an example URL (what ``probe --isolation serializable`` is told to write instead)."""


def url_parameter_hint(option: str) -> str:
    """Return, for an option a command does not have that is a store URL parameter
    (``--isolation``), the one line saying where it goes instead; "" for any other."""
    name = option.lstrip("-").replace("-", "_")
    example = URL_PARAMETERS.get(name)
    if example is None:
        return ""
    return (f"{option} is not an option: {name} is a parameter of the store URL, e.g. "
            f"--store '{example}'")


@dataclass(frozen=True)
class Credentials:
    """Who a client logs in as: user, password (never shown) and database/namespace, each
    None when neither the URL nor the environment gives it."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    database: str | None = None

    def with_env(self, user: str | None, password: str | None) -> Credentials:
        """Return these credentials with ``user``/``password`` (from the environment) filling
        what the URL left out: the URL wins."""
        return Credentials(self.user if self.user is not None else (user or None),
                           self.password if self.password is not None else (password or None),
                           self.database)


@dataclass(frozen=True)
class Tls:
    """How to open a TLS connection: CA file (None: the system's), client certificate and
    key (None: no client certificate)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def context(self) -> ssl.SSLContext:
        """Return an SSL context that verifies the server against ``ca`` (ValueError naming
        an unreadable file)."""
        for name, path in (("tls_ca", self.ca), ("tls_cert", self.cert), ("tls_key", self.key)):
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{name}={path!r}: no such file; give the path of a PEM file")
        try:
            ctx = ssl.create_default_context(cafile=self.ca)
            if self.cert is not None:
                ctx.load_cert_chain(self.cert, self.key)
        except (ssl.SSLError, OSError) as err:
            raise ValueError(f"cannot load the TLS files ({err}); tls_ca, tls_cert and "
                             "tls_key must be PEM files") from None
        return ctx


@dataclass(frozen=True)
class StoreUrl:
    """A parsed replicated-store URL."""

    scheme: str
    nodes: tuple[Endpoint, ...]
    regions: RegionSet | None
    read: str
    timeout_s: float
    query: dict[str, str]
    credentials: Credentials = Credentials()
    tls: Tls | None = None

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

    def via(self, node: Endpoint, region: str | None) -> Endpoint:
        """Return where a client in ``region`` connects to reach ``node``: the client link
        the URL's ``client_links`` names for that region and node (a Toxiproxy proxy on
        127.0.0.1 carrying the WAN delay between them, what ``replicalab cluster up``
        makes), else the node itself (a client with no region, one in the node's region,
        or a store without client links)."""
        if region is None or region == node.region:
            return node
        index = int(node.name[1:]) if node.name[1:].isdigit() else -1
        port = client_links(self.query.get("client_links", "")).get((region, index))
        return node if port is None else Endpoint(node.name, "127.0.0.1", port, node.region)

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


def client_links(text: str) -> dict[tuple[str, int], int]:
    """Return {(client region, node index): 127.0.0.1 port} from a URL's ``client_links``
    (``REGION:NODE:PORT,...``; ValueError naming a malformed entry)."""
    out = {}
    for entry in (x for x in text.split(",") if x):
        region, _, rest = entry.partition(":")
        node, _, port = rest.partition(":")
        if not (region and node.isdigit() and port.isdigit()):
            raise ValueError(f"client_links entry {entry!r}: give REGION:NODE:PORT, e.g. "
                             "US-W:0:41234 (what `replicalab cluster up` prints)")
        out[(region, int(node))] = int(port)
    return out


def _hostport(text: str, url: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ValueError(f"{text!r} in {redact_url(url)!r} is not HOST:PORT") from None


def _tls(scheme: str, tls_scheme: str | None, q: dict[str, str]) -> Tls | None:
    """Return the TLS settings of a URL: on for ``tls_scheme`` (e.g. ``rediss``) or ``tls=1``."""
    flag = q.get("tls", "")
    if flag not in ("", "0", "1", "true", "false", "yes", "no"):
        raise ValueError(f"parameter tls={flag!r} of {scheme}:// must be 1 or 0")
    on = (bool(tls_scheme) and scheme == tls_scheme) or flag in ("1", "true", "yes")
    if not on:
        given = [k for k in TLS_PARAMS[1:] if k in q]
        if given:
            raise ValueError(f"{given[0]} needs TLS: add tls=1 to the {scheme}:// URL")
        return None
    return Tls(q.get("tls_ca") or None, q.get("tls_cert") or None, q.get("tls_key") or None)


def parse_store_url(url: str, peers: str, extra: Sequence[str] = (),
                    example: str = "", tls_scheme: str | None = None) -> StoreUrl:
    """Return the parsed ``url``; ``peers`` names the list parameter of the other nodes,
    ``extra`` the kind-specific parameters, and ``tls_scheme`` (e.g. ``rediss``; "" for
    none) the scheme that means TLS; a kind with ``tls_scheme`` also takes the ``tls*``
    parameters
    (ValueError names any problem, with the password masked)."""
    parts = urlsplit(url)
    scheme = parts.scheme
    tls_params = TLS_PARAMS if tls_scheme is not None else ()
    allowed = (peers, "regions", "node_regions", "read", "timeout_ms", "client_region",
               "client_links", *tls_params, *extra)
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
    creds = Credentials(unquote(parts.username) if parts.username else None,
                        unquote(parts.password) if parts.password is not None else None,
                        unquote(parts.path.lstrip("/")) or None)
    tls = _tls(scheme, tls_scheme, q) if tls_scheme is not None else None
    u = StoreUrl(scheme, nodes, regions, read, timeout_ms / 1000, q, creds, tls)
    u.placed(None)  # validates client_region
    client_links(q.get("client_links", ""))  # validates client_links
    return u

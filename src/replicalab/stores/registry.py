"""URL scheme -> store adapter. Later adapters register here (redis, postgresql, etcd, zk)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from urllib.parse import urlsplit

from replicalab.stores.base import Store

Opener = Callable[[str, int], Store]


_ADAPTERS = {
    "sim": "replicalab.stores.sim:open_sim",
    "redis": "replicalab.stores.redis:open_redis",
    "postgresql": "replicalab.stores.postgres:open_postgres",
    "etcd": "replicalab.stores.etcd:open_etcd",
    "zk": "replicalab.stores.zookeeper:open_zk",
    "cassandra": "replicalab.stores.cassandra:open_cassandra",
}


def _lazy(target: str) -> Opener:
    def opener(url: str, seed: int) -> Store:
        module, fn = target.split(":")
        return getattr(importlib.import_module(module), fn)(url, seed)

    return opener


_OPENERS: dict[str, Opener] = {scheme: _lazy(t) for scheme, t in _ADAPTERS.items()}


def schemes() -> list[str]:
    """Return the URL schemes replicalab can open."""
    return sorted(_OPENERS)


def register(scheme: str, opener: Opener) -> None:
    """Make ``scheme://`` URLs open with ``opener(url, seed)``."""
    _OPENERS[scheme] = opener


def open_store(url: str, seed: int = 1) -> Store:
    """Return an opened Store for ``url`` (ValueError names a bad scheme or parameter)."""
    scheme = urlsplit(url).scheme
    if not scheme or "://" not in url:
        raise ValueError(f"store URL {url!r} has no scheme; use e.g. sim://simpledb")
    try:
        opener = _OPENERS[scheme]
    except KeyError:
        raise ValueError(
            f"unknown store URL scheme {scheme!r} in {url!r}; "
            f"use one of: {', '.join(s + '://' for s in schemes())}") from None
    return opener(url, seed)

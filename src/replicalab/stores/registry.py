"""URL scheme -> store adapter. Later adapters register here (redis, postgresql, etcd, zk)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from replicalab.stores.base import Store

Opener = Callable[[str, int], Store]


def _open_sim(url: str, seed: int) -> Store:
    from replicalab.stores.sim import open_sim

    return open_sim(url, seed)


def _open_redis(url: str, seed: int) -> Store:
    from replicalab.stores.redis import open_redis

    return open_redis(url, seed)


_OPENERS: dict[str, Opener] = {"sim": _open_sim, "redis": _open_redis}


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

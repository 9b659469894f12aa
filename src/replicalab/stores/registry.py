"""URL scheme -> store adapter: the shipped adapters, adapters other packages declare in the
``replicalab.stores`` entry-point group, and adapters registered at run time.

An outside adapter is a package whose metadata declares, e.g. in its ``pyproject.toml``::

    [project.entry-points."replicalab.stores"]
    mystore = "replicalab_mystore:open_mystore"

where ``open_mystore(url: str, seed: int) -> Store``; ``pip install`` it and
``mystore://...`` URLs open with it, with no edit to replicalab (docs/your-store.md). A
shipped scheme cannot be taken over by a package. Entry points are only imported when their
scheme is used, so a broken outside package breaks only its own URLs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from urllib.parse import urlsplit

from replicalab.stores.base import Store, redact_url

Opener = Callable[[str, int], Store]

STORE_GROUP = "replicalab.stores"
"""The entry-point group outside store adapters declare their URL schemes in."""

_ADAPTERS = {
    "sim": "replicalab.stores.sim:open_sim",
    "redis": "replicalab.stores.redis:open_redis",
    "rediss": "replicalab.stores.redis:open_redis",
    "postgresql": "replicalab.stores.postgres:open_postgres",
    "etcd": "replicalab.stores.etcd:open_etcd",
    "zk": "replicalab.stores.zookeeper:open_zk",
    "cassandra": "replicalab.stores.cassandra:open_cassandra",
    "s3": "replicalab.stores.s3:open_s3",
}


def lazy(target: str) -> Opener:
    """Return an opener that imports ``"module:function"`` on its first use."""

    def opener(url: str, seed: int) -> Store:
        module, fn = target.split(":")
        return getattr(importlib.import_module(module), fn)(url, seed)  # type: ignore[no-any-return]

    return opener


_OPENERS: dict[str, Opener] = {scheme: lazy(t) for scheme, t in _ADAPTERS.items()}


def declared(group: str) -> dict[str, EntryPoint]:
    """Return the entry points installed packages declare in ``group``, by name (for a
    name declared twice, the first package found)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        found.setdefault(ep.name, ep)
    return found


def load_entry_point(ep: EntryPoint, what: str) -> Callable[..., object]:
    """Return the callable ``ep`` names; ValueError naming the package and its error when it
    cannot be imported (``what`` says what it is, e.g. "store adapter")."""
    package = ep.dist.name if ep.dist is not None else "an installed package"
    try:
        target = ep.load()
    except Exception as err:  # whatever the outside package raises while importing
        raise ValueError(f"the {ep.name}:// {what} from {package} ({ep.value}) failed to "
                         f"load: {type(err).__name__}: {err}; fix or reinstall {package}"
                         ) from None
    if not callable(target):
        raise ValueError(f"the {ep.name}:// {what} from {package} names {ep.value}, which "
                         "is not a function; it must name opener(url, seed)")
    return target  # type: ignore[no-any-return]


def schemes(installed: bool = True) -> list[str]:
    """Return the URL schemes replicalab can open: shipped and registered, and (unless
    ``installed`` is False: reading every package's metadata takes ~0.2 s) those installed
    packages declare."""
    return sorted({*_OPENERS, *(declared(STORE_GROUP) if installed else ())})


def register(scheme: str, opener: Opener) -> None:
    """Make ``scheme://`` URLs open with ``opener(url, seed)`` in this process."""
    _OPENERS[scheme] = opener


def _opener(scheme: str) -> Opener | None:
    opener = _OPENERS.get(scheme)
    if opener is not None:
        return opener
    ep = declared(STORE_GROUP).get(scheme)
    if ep is None:
        return None
    opener = load_entry_point(ep, "store adapter")  # type: ignore[assignment]
    _OPENERS[scheme] = opener
    return opener


def open_store(url: str, seed: int = 1) -> Store:
    """Return an opened Store for ``url`` (ValueError names a bad scheme or parameter)."""
    scheme = urlsplit(url).scheme
    if not scheme or "://" not in url:
        raise ValueError(f"store URL {redact_url(url)!r} has no scheme; use e.g. "
                         "sim://simpledb")
    opener = _opener(scheme)
    if opener is None:
        raise ValueError(
            f"unknown store URL scheme {scheme!r} in {redact_url(url)!r}; "
            f"use one of: {', '.join(s + '://' for s in schemes())} (or install a package "
            f"that adds {scheme}:// in the {STORE_GROUP} entry-point group)")
    return opener(url, seed)

"""URL scheme -> store adapter: the shipped adapters, adapters other packages declare in the
``replicalab.stores`` entry-point group (or name in the record of a store kind they declare
in ``replicalab.store_kinds``), and adapters registered at run time.

An outside adapter is a package whose metadata declares, e.g. in its ``pyproject.toml``::

    [project.entry-points."replicalab.stores"]
    mystore = "replicalab_mystore:open_mystore"

where ``open_mystore(url: str, seed: int) -> Store``; ``pip install`` it and
``mystore://...`` URLs open with it, with no edit to replicalab (docs/your-store.md). The
shipped adapters are declared the same way in replicalab's own pyproject.toml and listed in
``_ADAPTERS`` below (so that opening a shipped scheme reads no package metadata). A shipped
scheme cannot be taken over by a package. Entry points are only imported when their scheme
is used, so a broken outside package breaks only its own URLs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from replicalab import plugins
from replicalab.stores.base import Store, redact_url

Opener = Callable[[str, int], Store]

STORE_GROUP = plugins.STORES
"""The entry-point group store adapters declare their URL schemes in."""

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
"""The shipped adapters, one line each, as pyproject.toml declares them."""


def lazy(target: str) -> Opener:
    """Return an opener that imports ``"module:function"`` on its first use."""

    def opener(url: str, seed: int) -> Store:
        return plugins.import_target(target)(url, seed)  # type: ignore[no-any-return]

    return opener


_OPENERS: dict[str, Opener] = {scheme: lazy(t) for scheme, t in _ADAPTERS.items()}


def schemes(installed: bool = True) -> list[str]:
    """Return the URL schemes replicalab can open: shipped and registered, and (unless
    ``installed`` is False: reading every package's metadata takes ~0.2 s) those installed
    packages declare as adapters."""
    return sorted({*_OPENERS, *(plugins.declared(STORE_GROUP) if installed else ())})


def register(scheme: str, opener: Opener) -> None:
    """Make ``scheme://`` URLs open with ``opener(url, seed)`` in this process."""
    _OPENERS[scheme] = opener


def _is_opener(obj: Any) -> bool:
    return callable(obj)


def _kind_adapter(scheme: str) -> Opener | None:
    """Return the adapter the record of an installed store kind names for ``scheme`` (the
    records of ``replicalab.store_kinds``, read as plain data: schemes and adapter), None
    when none does. A kind whose package fails to load is skipped unless no other names
    the scheme: its error is then the answer."""
    errors = []
    for entry in plugins.declared(plugins.STORE_KINDS).values():
        if entry.builtin:
            continue  # the shipped kinds' adapters are _ADAPTERS' lines
        try:
            kind = plugins.load(entry, "store kind")
        except plugins.PluginError as err:
            errors.append(str(err))
            continue
        adapter = getattr(kind, "adapter", None)
        if scheme in getattr(kind, "schemes", ()) and adapter is not None:
            return lazy(adapter) if isinstance(adapter, str) else adapter  # type: ignore[no-any-return]
    if errors:
        raise plugins.PluginError(errors[0])
    return None


def _opener(scheme: str) -> Opener | None:
    opener = _OPENERS.get(scheme)
    if opener is not None:
        return opener
    opener = plugins.find(STORE_GROUP, scheme, "store adapter", _is_opener,
                          "a function opener(url, seed)") or _kind_adapter(scheme)
    if opener is not None:
        _OPENERS[scheme] = opener
    return opener


def open_store(url: str, seed: int = 1) -> Store:
    """Return an opened Store for ``url`` (ValueError names a bad scheme or parameter, or
    the installed package whose adapter for it fails to load)."""
    scheme = urlsplit(url).scheme
    if not scheme or "://" not in url:
        raise ValueError(f"store URL {redact_url(url)!r} has no scheme; use e.g. "
                         "sim://simpledb")
    opener = _opener(scheme)
    if opener is None:
        raise ValueError(
            f"unknown store URL scheme {scheme!r} in {redact_url(url)!r}; "
            f"use one of: {', '.join(s + '://' for s in schemes())} (or install a package "
            f"that adds {scheme}:// in the {STORE_GROUP} entry-point group, or a store kind "
            f"of that scheme in {plugins.STORE_KINDS})")
    return opener(url, seed)

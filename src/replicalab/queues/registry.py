"""URL scheme -> queue backend, opened lazily so a backend's client library is imported only
when its URL is used: ``sim://sqs``, ``redis://``, ``postgresql://``, and the schemes other
packages declare in the ``replicalab.queues`` entry-point group (``name = "module:opener"``
with ``opener(url, seed) -> Queue``; a shipped scheme cannot be taken over). The shipped
backends are declared in that group too (pyproject.toml) and listed here, so that opening
one reads no package metadata."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from urllib.parse import urlsplit

from replicalab import plugins
from replicalab.queues.base import Queue
from replicalab.runtime import VirtualRuntime
from replicalab.stores.base import redact_url

QUEUE_GROUP = plugins.QUEUES
"""The entry-point group queue backends declare their URL schemes in."""

SIM_BACKEND = "replicalab.queues.sqs_sim:open_sqs_sim"
"""``sim://``: opened with the virtual runtime it may share with a simulated store."""
_BACKENDS = {
    "redis": "replicalab.queues.redis:open_redis_queue",
    "postgresql": "replicalab.queues.postgres:open_postgres_queue",
}


Opener = Callable[[str, int], Queue]
_REGISTERED: dict[str, Opener] = {}


def register(scheme: str, opener: Opener) -> None:
    """Make ``scheme://`` queue URLs open with ``opener(url, seed)`` in this process."""
    _REGISTERED[scheme] = opener


def schemes() -> list[str]:
    """Return the URL schemes a queue can be opened from (reads the installed packages'
    metadata)."""
    return sorted({"sim", *_BACKENDS, *_REGISTERED, *plugins.declared(QUEUE_GROUP)})


def open_queue(url: str, seed: int = 1, runtime: VirtualRuntime | None = None) -> Queue:
    """Return an opened Queue for ``url`` (ValueError names a bad scheme or parameter).

    ``runtime``: for ``sim://`` only, the virtual runtime to run on (shared with a simulated
    central store); real backends run in real time and refuse one.
    """
    scheme = urlsplit(url).scheme
    if not scheme or "://" not in url:
        raise ValueError(f"queue URL {url!r} has no scheme; use e.g. sim://sqs")
    if scheme == "sim":
        return plugins.import_target(SIM_BACKEND)(url, seed, runtime)  # type: ignore[no-any-return]
    if scheme in _REGISTERED:
        return _REGISTERED[scheme](url, seed)
    target = _BACKENDS.get(scheme)
    if target is None:
        outside = plugins.find(QUEUE_GROUP, scheme, "queue backend", callable,
                               "a function opener(url, seed)")
        if outside is None:
            raise ValueError(f"unknown queue URL scheme {scheme!r} in {redact_url(url)!r}; "
                             f"use one of: {', '.join(s + '://' for s in schemes())} (or "
                             f"install a package that adds {scheme}:// in the "
                             f"{QUEUE_GROUP} entry-point group)")
        if runtime is not None:
            raise ValueError(f"{scheme}:// queues run in real time; a simulated (sim://) "
                             "central store cannot share their clock: use a real central "
                             "store")
        return outside(url, seed)  # type: ignore[no-any-return]
    if runtime is not None:
        raise ValueError(f"{scheme}:// queues run in real time; a simulated (sim://) central "
                         "store cannot share their clock: use a real central store")
    module, fn = target.split(":")
    try:
        opener = getattr(importlib.import_module(module), fn)
    except ImportError as err:
        raise ValueError(f"the {scheme}:// queue backend is not available ({err}); use "
                         "sim://sqs") from None
    return opener(url, seed)  # type: ignore[no-any-return]

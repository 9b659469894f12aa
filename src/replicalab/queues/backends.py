"""Open what a queue run talks to: the queue and the store the results go to, on one clock.

The store is the central store for the central strategies (claims and effects: ``central``
commits its effect in the write that fences its claim, so both must live in one store);
for ``none`` and ``tag`` it is the effect store alone, opened on the queue's own server:
``sim://simpledb`` on ``sim://sqs``'s virtual clock, the Redis or PostgreSQL server a
``redis://`` or ``postgresql://`` queue URL names, or one kept by the run's process for a
queue backend that names no server (``effects.py``)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from replicalab.errors import ParameterError
from replicalab.queues.base import Queue
from replicalab.queues.effects import LocalEffectStore
from replicalab.queues.registry import open_queue
from replicalab.queues.spec import DEFAULT_CENTRAL, QueueSpec
from replicalab.queues.strategies import CENTRAL
from replicalab.stores.base import Feature, Store

# parameters only the queue backends read: the store on the same server does not take them
_QUEUE_ONLY = {"redis": ("queue", "max_receives"),
               "postgresql": ("queue", "max_receives")}


def effects_url(spec: QueueSpec) -> str | None:
    """Return the URL of the store a run's effects go to: the central store of a central
    strategy; else ``sim://simpledb`` for a simulated queue, or the queue's own server
    (the queue URL without the queue's parameters); None for a backend that names no
    store server."""
    if spec.strategy in CENTRAL:
        url = spec.central or (DEFAULT_CENTRAL if spec.queue.startswith("sim://") else None)
        if url is None:
            raise ParameterError("strategy", f"{spec.strategy} needs {{central}} URL: a store "
                                             "with conditional writes (redis://, "
                                             "postgresql://, etcd://, zk://)",
                                 {"central": "central"})
        return url
    if spec.queue.startswith("sim://"):
        return DEFAULT_CENTRAL
    parts = urlsplit(spec.queue)
    drop = _QUEUE_ONLY.get(parts.scheme)
    if drop is None:
        return None
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k not in drop]
    path = "" if parts.scheme == "redis" else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path, urlencode(query), ""))


def open_backends(spec: QueueSpec) -> tuple[Queue, Store]:
    """Open the queue and the store of claims and effects (``effects_url``), sharing one
    virtual clock when both are simulated; ValueError names a bad URL, a store without
    conditional writes or a simulated/real mix."""
    from replicalab.stores import open_store

    url = effects_url(spec)
    if url is None:
        queue = open_queue(spec.queue, spec.seed)
        return queue, LocalEffectStore(queue.runtime)
    store = open_store(url, spec.seed)
    what = "central store" if spec.strategy in CENTRAL else "effect store"
    if Feature.CONDITIONAL_WRITE not in store.info.features:
        raise ValueError(f"{what} {url} has no conditional writes; use one that "
                         "has (sim://simpledb, redis://, postgresql://, etcd://, zk://)")
    sim_store = getattr(store.runtime, "virtual", False)
    if spec.queue.startswith("sim://") != sim_store:
        raise ValueError(f"queue {spec.queue} and {what} {url} run on different "
                         "clocks; pair sim://sqs with a sim:// store (virtual time) and a "
                         "real queue with a real store")
    return open_queue(spec.queue, spec.seed, store.runtime if sim_store else None), store

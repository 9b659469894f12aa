"""Open what a queue run talks to: the queue and, for the central strategies, the central
store, on one clock."""

from __future__ import annotations

from replicalab.queues.base import Queue
from replicalab.queues.registry import open_queue
from replicalab.queues.spec import DEFAULT_CENTRAL, QueueSpec
from replicalab.queues.strategies import CENTRAL
from replicalab.stores.base import Feature, Store


def open_backends(spec: QueueSpec) -> tuple[Queue, Store | None]:
    """Open the queue and (central strategies) the central store, sharing one virtual clock
    when both are simulated; ValueError names a bad URL, a store without conditional writes
    or a simulated/real mix."""
    if spec.strategy not in CENTRAL:
        return open_queue(spec.queue, spec.seed), None
    from replicalab.stores import open_store

    url = spec.central or (DEFAULT_CENTRAL if spec.queue.startswith("sim://") else None)
    if url is None:
        raise ValueError(f"--strategy {spec.strategy} needs --central URL: a store with "
                         "conditional writes (redis://, postgresql://, etcd://, zk://)")
    store = open_store(url, spec.seed)
    if Feature.CONDITIONAL_WRITE not in store.info.features:
        raise ValueError(f"central store {url} has no conditional writes; use one that "
                         "has (sim://simpledb, redis://, postgresql://, etcd://, zk://)")
    sim_store = getattr(store.runtime, "virtual", False)
    if spec.queue.startswith("sim://") != sim_store:
        raise ValueError(f"queue {spec.queue} and central store {url} run on different "
                         "clocks; pair sim://sqs with a sim:// store (virtual time) and a "
                         "real queue with a real store")
    return open_queue(spec.queue, spec.seed, store.runtime if sim_store else None), store

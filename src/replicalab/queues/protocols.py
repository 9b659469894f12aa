"""What a processing strategy is, and the little it may use of the consumer thread that hands
it a delivery. Strategies (``strategies.py``, ``claims.py``, ``fenced.py``) are typed against
:class:`Consumer` only, so they never import the worker that implements it
(``worker.py``) and the worker imports them: no cycle."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from replicalab.queues.base import Delivery
from replicalab.queues.record import QueueLog
from replicalab.runtime import Runtime
from replicalab.stores.base import Client


class ReaderState(Protocol):
    """What the reader process a consumer thread belongs to knows."""

    seen: dict[str, Any]  # tag strategy: tag -> consumer index in progress, or "done"
    others: bool  # central-detect: the queue's counts showed another reader at work


class Consumer(Protocol):
    """One consumer thread, as a strategy sees it while handling one delivery.

    ``rt`` is the run's clock, which the record is stamped with; :meth:`now_ns` is the
    consumer's own clock (off by a ``skew`` fault), which lease arithmetic must use, as a
    real consumer only has its own.
    """

    index: int
    gen: int
    claims: str  # the central store's claim domain of this run
    visibility_s: float  # the visibility timeout every receive asks for
    reader: ReaderState
    log: QueueLog
    rt: Runtime

    def now_ns(self) -> int:
        """Return the consumer's own clock (ns)."""
        ...

    def store_of(self, d: Delivery) -> Client:
        """Return the store client (central store, or the effect store) lent to the handling
        of ``d``."""
        ...

    async def process(self, d: Delivery, tag: str,
                      heartbeat: Callable[[], Awaitable[bool]] | None = None,
                      every_ns: int = 0) -> bool:
        """Process ``d`` (renewing with ``heartbeat`` every ``every_ns``); return False if
        the work was abandoned."""
        ...

    def effect_entry(self, d: Delivery) -> str:
        """Return the entry naming this handling of ``d`` in an effect list."""
        ...

    async def commit(self, d: Delivery, tag: str) -> bool:
        """Append the result of processing ``d`` to the effect store, unconditionally on
        any claim; return True once it certainly landed."""
        ...

    def skip(self, d: Delivery, tag: str, why: str) -> None:
        """Record that ``d`` was not processed, and why."""
        ...

    async def delete(self, d: Delivery, tag: str) -> bool:
        """Delete ``d``'s message with its receipt; return True if the queue accepted it."""
        ...

    async def extend(self, d: Delivery, tag: str) -> bool:
        """Hide ``d``'s message for another visibility timeout from now (its receipt must
        still be current); return True if the queue accepted it."""
        ...


class Strategy(Protocol):
    """How one consumer thread handles one delivery."""

    name: str
    detect: bool  # read the queue's counts once per batch (central-detect)

    async def handle(self, w: Consumer, d: Delivery, tag: str) -> None:
        """Process (or drop) delivery ``d`` of message ``tag``; record every operation."""
        ...

"""The visibility-timeout queue contract every backend implements (sim://sqs, redis://,
postgresql://).

A receive is also a write: it hides the messages it returns for ``visibility_timeout_s``
and hands each a receipt that names that one delivery. Deleting or extending a message
needs the receipt of its current delivery; a receipt from an earlier delivery (the lease
expired and the message went to someone else) is refused with :class:`StaleReceipt`, so a
slow worker can never delete a message another worker now holds. A message received more
than ``max_receives`` times moves to the dead-letter queue instead of being delivered again.

Times cross this boundary as seconds (``_s``) in the queue's own runtime: virtual time for
``sim://``, the machine's monotonic clock for real servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from replicalab.runtime import Runtime


class QueueError(Exception):
    """Base of the errors a queue raises."""


class StaleReceipt(QueueError):
    """The receipt is not the one of the message's current delivery (or the message is
    gone): the delete or visibility change did not happen."""


class QueueUnavailable(QueueError):
    """The backend did not answer; whether the operation took effect is unknown."""


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message: its id, body, the receipt valid for this delivery only,
    and how many times the message has been received, this one included (1 = first)."""

    id: str
    body: str
    receipt: str
    receive_count: int


@dataclass(frozen=True)
class DeadLetter:
    """A message moved to the dead-letter queue after ``receive_count`` receives."""

    id: str
    body: str
    receive_count: int


@dataclass
class QueueInfo:
    """Static description of an opened queue, saved in the run config (no credentials)."""

    url: str
    kind: str
    max_receives: int
    fifo: bool = False
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict of this description."""
        return {"url": self.url, "kind": self.kind, "max_receives": self.max_receives,
                "fifo": self.fifo, "params": self.params}


class QueueClient(Protocol):
    """One client's session with the queue (a consumer or producer)."""

    async def send(self, body: str) -> str:
        """Enqueue ``body``; return the message id once the queue has acknowledged it."""
        ...

    async def receive(self, max_messages: int, visibility_timeout_s: float) -> list[Delivery]:
        """Return up to ``max_messages`` visible messages, each hidden from other receivers
        for ``visibility_timeout_s`` seconds (an empty list when none is visible)."""
        ...

    async def delete(self, receipt: str) -> None:
        """Delete the message of this delivery; StaleReceipt when the receipt is not the
        current delivery's."""
        ...

    async def change_visibility(self, receipt: str, timeout_s: float) -> None:
        """Hide the message of this delivery for ``timeout_s`` more seconds from now (0 makes
        it visible at once); StaleReceipt when the receipt is not the current delivery's."""
        ...

    async def close(self) -> None:
        """Release the session."""
        ...


class Queue(Protocol):
    """An opened queue: its description, the runtime it runs in, and client sessions."""

    info: QueueInfo
    runtime: Runtime

    async def connect(self) -> QueueClient:
        """Return a new client session."""
        ...

    async def dead_letters(self) -> list[DeadLetter]:
        """Return the messages in the dead-letter queue, oldest first."""
        ...

    async def depth(self) -> tuple[int, int]:
        """Return (visible, in flight) message counts, as SQS's approximate counts."""
        ...

    async def close(self) -> None:
        """Release everything the queue holds (the queue's data stays on a real server)."""
        ...

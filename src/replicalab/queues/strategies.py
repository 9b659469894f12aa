"""The ways of seed 000 (Cloud MapReduce) to live with duplicate deliveries, by name.

* ``none`` — process every delivery; duplicates are filtered downstream by the effect
  records (the checker counts distinct committed results).
* ``tag`` — one reader per queue, many threads: the reader keeps the tags it has seen (in
  progress or done) and a thread drops a delivery whose tag is already there. A thread that
  crashes forgets its in-progress tags, so the redelivery is processed.
* ``central`` — claim every message in a central store with a fencing token; the result is
  committed only with the current token (``fenced.py``).
* ``central-lease``, ``central-detect`` — the same claim as a lease judged on the consumers'
  clocks, without fencing (``claims.py``): what ``central`` was before fencing, kept so that
  the difference can be measured.

A strategy is a class with ``name``, ``detect`` and ``handle(consumer, delivery, tag)``
(``protocols.py``), and one line in :func:`make_strategy`.
"""

from __future__ import annotations

from replicalab.queues.base import Delivery
from replicalab.queues.claims import LeaseStrategy
from replicalab.queues.fenced import FencedStrategy
from replicalab.queues.protocols import Consumer, Strategy
from replicalab.runtime.base import NS_PER_S

STRATEGIES = ("none", "tag", "central", "central-lease", "central-detect")
CENTRAL = ("central", "central-lease", "central-detect")
"""The strategies that need a central store."""
COMMIT_RETRY_S = 60.0
"""How long a commit whose outcome is unknown is retried (s): a store that fails longer
leaves it unknown (``info``), and the message to its next delivery."""


class NoStrategy:
    """Process every delivery, commit, delete."""

    name = "none"
    detect = False

    async def handle(self, w: Consumer, d: Delivery, tag: str) -> None:
        """Process, commit and delete ``d`` whatever happened to it before."""
        if await w.process(d, tag) and await w.commit(d, tag):
            await w.delete(d, tag)


class TagStrategy:
    """Drop deliveries whose tag this reader has seen (in progress or done)."""

    name = "tag"
    detect = False

    async def handle(self, w: Consumer, d: Delivery, tag: str) -> None:
        """Process ``d`` unless its tag is in the reader's seen set."""
        seen = w.reader.seen
        state = seen.get(tag)
        if state == "done":
            w.skip(d, tag, "tag seen: done")
            await w.delete(d, tag)
            return
        if state is not None:
            # another thread is on it: leave this delivery; if that thread's delete is
            # refused (this delivery superseded it) the message comes back, done, and goes
            w.skip(d, tag, f"tag seen: in progress on consumer {state}")
            return
        seen[tag] = w.index
        if not await w.process(d, tag) or not await w.commit(d, tag):
            seen.pop(tag, None)  # not done: a redelivery is processed
            return
        seen[tag] = "done"
        await w.delete(d, tag)


def make_strategy(name: str, visibility_s: float) -> Strategy:
    """Return the strategy called ``name`` (ValueError lists the choices); lease claims last
    half the visibility timeout; a fenced commit of unknown outcome is retried for up to
    ``COMMIT_RETRY_S``."""
    if name == "none":
        return NoStrategy()
    if name == "tag":
        return TagStrategy()
    if name == "central":
        return FencedStrategy(visibility_s, COMMIT_RETRY_S)
    if name in ("central-lease", "central-detect"):
        return LeaseStrategy(name == "central-detect", int(visibility_s * NS_PER_S / 2))
    raise ValueError(f"unknown strategy {name!r}; use one of {', '.join(STRATEGIES)}")

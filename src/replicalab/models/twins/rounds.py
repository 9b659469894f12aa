"""What every protocol twin's run of rounds shares (virtual time): requests arrive at the
leader one gap after another, each round's latency is kept when it finishes, and the run
ends when the last one has.
"""

from __future__ import annotations

from typing import Any


class RoundsRun:
    """A run of ``total`` rounds of one protocol twin in virtual time.

    A subclass sets, in its ``__init__``: ``rt`` (a VirtualRuntime), ``s`` (its random
    stream), ``client`` (the client link, with ``draw(s)`` -> ns), ``gaps`` (ns between
    requests), ``total``, ``sent`` and ``latency_ns`` (``[0] * total``), ``finished``
    (0) and ``fut`` (``rt.future()``); and defines ``at_leader_request(rid)``, the
    protocol's first step, which ends by calling :meth:`finish`.
    """

    rt: Any
    s: Any
    client: Any
    gaps: list[int]
    total: int
    sent: list[int]
    latency_ns: list[int]
    finished: int
    fut: Any

    def at_leader_request(self, rid: int) -> None:
        """The protocol's first step for round ``rid`` (the request reached the leader)."""
        raise NotImplementedError

    def arrival(self, rid: int) -> None:
        """Round ``rid``'s request leaves its client; the next one is due one gap later."""
        self.sent[rid] = self.rt.now_ns()
        self.rt.schedule(self.client.draw(self.s), self.at_leader_request, rid)
        if rid + 1 < self.total:
            self.rt.schedule(self.gaps[rid + 1], self.arrival, rid + 1)

    def finish(self, rid: int) -> None:
        """Round ``rid``'s reply reached its client: keep its latency (ns)."""
        self.latency_ns[rid] = self.rt.now_ns() - self.sent[rid]
        self.finished += 1
        if self.finished == self.total:
            self.fut.set_result(None)

    async def main(self) -> None:
        """Start the first request and wait for the last round."""
        self.rt.schedule(0, self.arrival, 0)
        await self.fut

    def run(self) -> None:
        """Run every round to completion."""
        self.rt.run(self.main())

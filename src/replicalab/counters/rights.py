"""Rights redistribution between data centres (seed 004 §II-B, §IV).

A replica short of rights asks another for some of theirs. The rules, each a pure
function here so each is tested on its own:

* ask the replica *believed* richest (from the local, possibly stale, state) for **half
  the difference** between its rights and ours — never for the whole shortfall, which
  would strip a donor that is itself about to run short;
* a donor **never gives more than half** of what it holds (checked on the donor's own,
  current state when the transfer executes);
* requests are **idempotent**: a request states how much the requester has already
  received from that donor (``transferred(donor, me)`` in its view) and asks for a total
  of ``already + amount``; the donor gives only what is missing to that total, so a
  duplicated or retried request gives rights once;
* repeated background requests to one donor are throttled: a request is due when at
  least ``interval`` has passed *since* the last one (``now - last >= interval``).

How a request reaches the donor: the requester executes the transfer *as the donor* by a
conditional read-modify-write of the counter in the donor DC's store, reached over the
WAN link. This is safe because every operation that spends the donor's rights is
serialised by conditional writes on that same element (the donor's own middleware loses
the race and re-reads). No request record, no extra round of polling: one link round trip
to read and one to write, then the donor's new state is merged locally at once.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from replicalab.counters.crdt import BoundedCounter
from replicalab.counters.service import Contended, UnknownCounter, read_state, write_state
from replicalab.stores import Client, ConditionFailed


@dataclass(frozen=True)
class TransferRequest:
    """``to`` asks ``donor`` to bring the rights in ``direction`` it gave ``to`` (counter
    ``key``) up to ``already + amount`` in total. Rights to decrement ("dec") guard a lower
    bound, rights to increment ("inc") an upper bound."""

    key: str
    donor: str
    to: str
    already: int
    amount: int
    direction: str = "dec"

    @property
    def target(self) -> int:
        """Return the total transferred donor -> to that satisfies this request (units)."""
        return self.already + self.amount


def directions(state: BoundedCounter) -> tuple[str, ...]:
    """Return the directions in which ``state``'s value is bounded: ("dec",) for a lower
    bound, ("inc",) for an upper bound, both for a two-sided counter."""
    return tuple(d for d, b in (("dec", state.lower), ("inc", state.upper)) if b is not None)


def rights_of(state: BoundedCounter, replica: str, direction: str = "dec") -> int:
    """Return ``replica``'s rights in ``direction`` as ``state`` believes (0 if that
    direction is unbounded)."""
    return state.local_rights(replica, direction) or 0


def donors_by_wealth(state: BoundedCounter, me: str,
                     direction: str = "dec") -> list[tuple[str, int]]:
    """Return the other replicas with their believed rights in ``direction``, richest first
    (ties in replica order), leaving out those believed to hold nothing."""
    others = [(r, rights_of(state, r, direction)) for r in state.replicas if r != me]
    return sorted((x for x in others if x[1] > 0), key=lambda x: -x[1])


def half_difference(theirs: int, mine: int) -> int:
    """Return what to ask a donor holding ``theirs`` for when we hold ``mine``: half the
    difference (0 when the donor is not richer)."""
    return max(theirs - mine, 0) // 2


def request_to(state: BoundedCounter, key: str, me: str, donor: str,
               direction: str = "dec") -> TransferRequest | None:
    """Return the request ``me`` sends ``donor`` for rights in ``direction`` by the
    half-difference rule, or None when there is nothing to ask for."""
    amount = half_difference(rights_of(state, donor, direction),
                             rights_of(state, me, direction))
    if amount <= 0:
        return None
    return TransferRequest(key, donor, me, state.transferred(donor, me, direction), amount,
                           direction)


def plan_background(state: BoundedCounter, key: str, me: str, threshold: int,
                    direction: str = "dec") -> TransferRequest | None:
    """Return the background request of ``me`` when its rights in ``direction`` are below
    ``threshold``: to the replica believed richest, for half the difference (None when not
    needed)."""
    if rights_of(state, me, direction) >= threshold:
        return None
    for donor, _ in donors_by_wealth(state, me, direction):
        return request_to(state, key, me, donor, direction)
    return None


def serve(state: BoundedCounter, req: TransferRequest) -> tuple[BoundedCounter, int]:
    """Return the donor's state after serving ``req`` and the rights given (units).

    Gives what is missing to the request's total, at most half of what the donor holds;
    a request already satisfied (a duplicate, or overtaken by an earlier one) gives 0.
    """
    have = state.transferred(req.donor, req.to, req.direction)
    missing = req.target - have
    give = min(missing, rights_of(state, req.donor, req.direction) // 2)
    if give <= 0:
        return state, 0
    return state.transfer(req.donor, req.to, give, req.direction), give


def due(now_ns: int, last_ns: int | None, interval_ns: int) -> bool:
    """Return True when at least ``interval_ns`` has passed since ``last_ns`` (never
    requested: due). Elapsed time is ``now - last``, not the other way round."""
    return last_ns is None or now_ns - last_ns >= interval_ns


@dataclass
class Throttle:
    """Last request time per (counter, donor, direction); ``allow`` says whether one is due
    now."""

    interval_ns: int
    last_ns: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def allow(self, key: str, donor: str, now_ns: int, direction: str = "dec") -> bool:
        """Return True (and record ``now_ns``) when a request to ``donor`` is due."""
        at = (key, donor, direction)
        if not due(now_ns, self.last_ns.get(at), self.interval_ns):
            return False
        self.last_ns[at] = now_ns
        return True


async def execute(client: Client, req: TransferRequest, *, retries: int = 8,
                  rng: random.Random | None = None, where: str = "") -> tuple[BoundedCounter, int]:
    """Serve ``req`` on the donor's store behind ``client`` by conditional
    read-modify-write; return the donor's state after it and the rights given (units).

    UnknownCounter if the donor's store has no such counter; Contended when every attempt
    lost a race; store errors (Unavailable) pass through with nothing changed.
    """
    rng = rng or random.Random(0)
    for attempt in range(retries):
        stored = await read_state(client, req.key, where or req.donor)
        if stored.state is None:
            raise UnknownCounter(f"counter {req.key!r} is not in {req.donor}'s store yet; "
                                 "retry after the next sync")
        new, given = serve(stored.state, req)
        if given == 0:
            return stored.state, 0
        try:
            await write_state(client, req.key, new, stored.text)
        except ConditionFailed:
            await asyncio.sleep(rng.uniform(0, min(0.05, 0.002 * 2 ** attempt)))
            continue
        return new, given
    raise Contended(f"transfer from {req.donor} for {req.key!r} lost {retries} races in a "
                    "row; retry later")

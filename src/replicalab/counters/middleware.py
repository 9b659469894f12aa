"""What the client-based and server-based middlewares share: the CounterService face,
strictly-local vs global operations, and the background synchroniser and rights policy.

A decrement spends rights to decrement (a lower bound), an increment spends rights to
increment (an upper bound); an operation in an unbounded direction needs no rights.

A subclass decides how one DC's operations on a counter are serialised (``_apply``) and
how its durable state is read and merged into (``durable``/``absorb``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from replicalab.counters import rights
from replicalab.counters.crdt import BoundedCounter, CounterError, InsufficientRights
from replicalab.counters.service import (
    CounterExists,
    Placement,
    Stores,
    UnknownCounter,
    write_state,
)
from replicalab.counters.sync import Syncer
from replicalab.stores import ConditionFailed, StoreError, Unavailable

log = logging.getLogger(__name__)

HINT_GLOBAL = "retry with allow_global=True"
HINT_EXHAUSTED = "counter exhausted"


class Stopped(Unavailable):
    """This data centre's middleware is stopped (the DC is lost): the operation did not
    happen."""


@dataclass(frozen=True)
class Options:
    """Tuning of one DC's middleware (times in ms, amounts in counter units)."""

    sync_ms: float = 200.0
    full_every: int = 10  # exchange every known counter every this many sync rounds
    threshold: int = 20  # background policy asks for rights below this many
    throttle_ms: float = 500.0  # at most one background request per counter and donor
    policy_ms: float = 100.0  # how often the background policy looks at the counters
    retries: int = 10  # conditional-write attempts per operation before Contended
    global_rounds: int = 3  # rounds of asking donors for one global decrement
    pool: int = 16  # client sessions to this DC's own store (each used by one op at a time)
    link_pool: int = 8  # sessions to each peer's store over the WAN (sync and transfers)
    down_ms: float = 5000.0  # a donor that did not answer is not asked again for this long
    seed: int = 0


class Middleware:
    """Base of the two middlewares: one data centre's CounterService."""

    name = "middleware"

    def __init__(self, placement: Placement, options: Options | None = None, *,
                 now_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.placement = placement
        self.dc = placement.dc
        self.opt = options or Options()
        self.stores = Stores(placement, pool=self.opt.pool)
        self.links = Stores(placement, pool=self.opt.link_pool)
        self.rng = random.Random(self.opt.seed)
        self.now_ns = now_ns
        self.syncer = Syncer(self, placement, self.links, self.opt.sync_ms,
                             self.opt.full_every, seed=self.opt.seed)
        self.throttle = rights.Throttle(int(self.opt.throttle_ms * 1e6))
        self.transfers: list[tuple[str, str, int, bool]] = []  # (key, donor, given, on demand)
        # (asked at, done at (monotonic ns), key, donor, given): when each transfer crossed
        self.transfer_log: list[tuple[int, int, str, str, int]] = []
        self.closed = False
        # donor -> until when (ns) it is not asked: it did not answer (cut off, or lost); a
        # request to it would wait for its timeout while the client waits
        self.down_until_ns: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._obtaining: dict[tuple[str, str], asyncio.Future[int]] = {}

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the synchroniser and the background rights policy (needs a running loop)."""
        if not self._tasks:
            self._tasks = [asyncio.get_running_loop().create_task(self.syncer.run()),
                           asyncio.get_running_loop().create_task(self._policy_loop())]

    async def close(self) -> None:
        """Stop background work and close every session; operations after it fail with
        Unavailable (a stopped DC serves nobody; nothing restarts it behind the caller)."""
        self.closed = True
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        for f in list(self._obtaining.values()):
            f.cancel()
        await self._close_serialisers()
        await self.stores.close()
        await self.links.close()

    async def _close_serialisers(self) -> None:
        """Subclasses stop their per-key work here."""

    async def __aenter__(self) -> Middleware:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- to be provided by a middleware -------------------------------------------------
    async def _apply(self, key: str, op: str, n: int) -> int:
        """Apply ``op`` ("inc"/"dec") of ``n`` to this DC's replica durably; return the
        value after it."""
        raise NotImplementedError

    async def durable(self, key: str) -> BoundedCounter | None:
        """Return ``key`` as durably stored in this DC (None if absent)."""
        raise NotImplementedError

    async def absorb(self, key: str, other: BoundedCounter) -> None:
        """Merge ``other`` into this DC's durable state of ``key``."""
        raise NotImplementedError

    # -- CounterService -----------------------------------------------------------------
    def _serving(self) -> None:
        if self.closed:
            raise Stopped(f"{self.dc}: its middleware is stopped; the operation did not "
                          "happen")

    async def create(self, key: str, initial: int, lower: int | None = 0,
                     upper: int | None = None) -> None:
        """Create ``key`` with invariant ``lower <= value <= upper`` (either bound may be
        None) in this DC's store (CounterExists if there), its slack to each bound split
        evenly over the DCs, then push it to the peers (best effort; sync catches up)."""
        self._serving()
        state = BoundedCounter.create(self.placement.dcs, initial=initial, lower=lower,
                                      upper=upper)
        try:
            async with self.stores.session(self.dc) as client:
                await write_state(client, key, state, None)
        except ConditionFailed:
            raise CounterExists(f"counter {key!r} already exists in {self.dc}; pick another "
                                "name") from None
        self.syncer.touch(key)
        await self.syncer.sync_key(key)

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value here after adding ``n``; under an upper bound it spends rights
        to increment, as ``dec`` spends rights to decrement."""
        return await self._spend(key, "inc", n, allow_global)

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return the value here after subtracting ``n``.

        Strictly local (default): InsufficientRights at once when this DC lacks the rights,
        with a hint whether a global attempt could succeed. Global: ask peers for rights
        (half the difference each, richest first) and retry, failing only when they cannot
        give enough.
        """
        return await self._spend(key, "dec", n, allow_global)

    async def _spend(self, key: str, op: str, n: int, allow_global: bool) -> int:
        self._serving()
        self.syncer.known.add(key)
        try:
            return await self._apply(key, op, n)
        except InsufficientRights as err:
            if not allow_global:
                raise await self._hinted(key, op, err) from None
            last = err
        for _ in range(self.opt.global_rounds):
            await self.obtain(key, n, op)
            try:
                return await self._apply(key, op, n)
            except InsufficientRights as err:
                last = err
        raise await self._hinted(key, op, last, global_tried=True) from None

    async def value(self, key: str) -> int:
        """Return the value as this DC knows it."""
        self._serving()
        state = await self.durable(key)
        if state is None:
            raise self.unknown(key)
        self.syncer.known.add(key)
        return state.value()

    # -- helpers ------------------------------------------------------------------------
    def unknown(self, key: str) -> UnknownCounter:
        """Return the error for a counter absent from this DC's store."""
        return UnknownCounter(f"no counter {key!r} in {self.dc}'s store; create it first "
                              "(or wait for the next sync if it was created elsewhere)")

    def reachable(self, dc: str) -> bool:
        """Return False while ``dc`` is taken as unreachable (it failed to answer lately)."""
        return self.down_until_ns.get(dc, 0) <= self.now_ns()

    def _unreachable(self, dc: str, err: Exception) -> None:
        if isinstance(err, Unavailable):
            self.down_until_ns[dc] = self.now_ns() + int(self.opt.down_ms * 1e6)

    async def _hinted(self, key: str, direction: str, err: InsufficientRights,
                      global_tried: bool = False) -> InsufficientRights:
        state = await self.durable(key)
        slack = 0 if state is None else _slack(state, direction)
        hint = HINT_EXHAUSTED if global_tried or slack < err.needed else HINT_GLOBAL
        away = [] if state is None or not global_tried else [
            d for d, _ in rights.donors_by_wealth(state, self.dc, direction)
            if not self.reachable(d)]
        if away:
            hint = (f"the rights {', '.join(away)} hold are unavailable ("
                    f"{'it does' if len(away) == 1 else 'they do'} not answer); retry later")
        what = "after asking the other DCs" if global_tried else "locally"
        return InsufficientRights(
            f"{self.dc} holds {err.available} rights to {direction} {key!r} and needs "
            f"{err.needed} {what} (value here {state.value() if state else '?'}): {hint}",
            err.available, err.needed)

    def note_transfer(self, key: str, donor: str, given: int, on_demand: bool) -> None:
        """Record a transfer received (for reports and tests)."""
        self.transfers.append((key, donor, given, on_demand))
        log.debug("%s got %d rights for %s from %s", self.dc, given, key, donor)

    async def request(self, req: rights.TransferRequest, on_demand: bool) -> int:
        """Execute ``req`` at the donor's store, merge the donor's new state here at once
        and push it on; return the rights given (0 when nothing was due)."""
        asked_ns = self.now_ns()
        async with self.links.session(req.donor) as client:
            donor_state, given = await rights.execute(client, req, retries=self.opt.retries,
                                                      rng=self.rng, where=req.donor)
        if given:
            self.transfer_log.append((asked_ns, self.now_ns(), req.key, req.donor, given))
        await self.absorb(req.key, donor_state)
        if given:
            self.note_transfer(req.key, req.donor, given, on_demand)
            self.syncer.touch(req.key)
        return given

    async def obtain(self, key: str, needed: int, direction: str = "dec") -> int:
        """Ask donors, richest first, for half the difference each until this DC holds
        ``needed`` rights in ``direction``; return the rights received (store errors of one
        donor are skipped). Concurrent callers for one counter and direction share one
        round of requests: many clients short of rights at once would otherwise race each
        other on the donors' stores."""
        at = (key, direction)
        pending = self._obtaining.get(at)
        if pending is None:
            pending = asyncio.ensure_future(self._obtain(key, needed, direction))
            self._obtaining[at] = pending
            pending.add_done_callback(lambda _f: self._obtaining.pop(at, None))
        return await asyncio.shield(pending)

    async def _obtain(self, key: str, needed: int, direction: str) -> int:
        got = 0
        state = await self.durable(key)
        if state is None:
            raise self.unknown(key)
        for donor, _ in rights.donors_by_wealth(state, self.dc, direction):
            if rights.rights_of(state, self.dc, direction) >= needed:
                break
            req = rights.request_to(state, key, self.dc, donor, direction)
            if req is None or not self.reachable(donor):
                continue
            try:
                got += await self.request(req, on_demand=True)
            except (StoreError, CounterError) as err:
                log.debug("on-demand transfer from %s failed: %s", donor, err)
                self._unreachable(donor, err)
                continue
            state = await self.durable(key) or state
        return got

    async def _policy_loop(self) -> None:
        while True:
            await asyncio.sleep(self.opt.policy_ms / 1000)
            keys = sorted(self.syncer.known)
            await asyncio.gather(*(self.rebalance(k) for k in keys))

    async def rebalance(self, key: str) -> int:
        """Run the background policy once for ``key`` in each bounded direction; return the
        rights received."""
        got = 0
        try:
            state = await self.durable(key)
            if state is None:
                return 0
            for direction in rights.directions(state):
                req = rights.plan_background(state, key, self.dc, self.opt.threshold,
                                             direction)
                if req is None or not self.reachable(req.donor) or not self.throttle.allow(
                        key, req.donor, self.now_ns(), direction):
                    continue
                try:
                    got += await self.request(req, on_demand=False)
                except (StoreError, CounterError) as err:
                    self._unreachable(req.donor, err)
                    raise
        except (StoreError, CounterError) as err:
            log.debug("background transfer for %s failed: %s", key, err)
        return got


def _slack(state: BoundedCounter, direction: str) -> int:
    """Return how far the value may still move in ``direction`` before its bound, summed
    over every replica's rights (units; as ``state`` knows it)."""
    if direction == "dec":
        return state.value() - state.lower if state.lower is not None else 0
    return state.upper - state.value() if state.upper is not None else 0


"""Recovering the rights a lost data centre held (seed 004 §IV-E).

"If an entire DC becomes unavailable, the rights owned by the unreachable DC become
temporarily unavailable. If a DC fails permanently, as the Bounded Counter records the rights
owned by every replica, it is possible to recover the rights that were owned by the failed
DC." The seed gives no procedure; this is ours, and why each step is there:

1. **Retire the lost DC for good.** Only replica ``i`` writes row ``i`` of the rights
   matrix; recovery writes the lost DC's row in its place, which is safe only if that DC
   never operates again under its name (a DC that comes back is a new replica).
2. **Read the lost DC's final durable state** from its own store (the seed assumes a DC
   "never loses its state": its store, restarted from its disk, holds every operation it
   acknowledged — the middlewares acknowledge only after the durable write). Its row there
   is exact; the survivors' copies of that row can be stale: the lost DC may have spent
   rights after its last synchronisation. Moving the survivors' stale view of its rights
   would hand out rights already spent: an oversell.
3. **Move every right it held to the survivors**, as transfers *from* the lost DC (split
   evenly, remainder to the first), and write the result first into the lost DC's own store
   (conditionally on what was read there: were it ever restarted, it holds nothing), then
   into every survivor's store (conditional merge, as synchronisation does).
4. **If the lost DC's store cannot be read, or no longer holds the counter** (its disk
   was lost: a DC that never learnt of the counter and one that lost it look alike),
   nothing is moved: its rights are *written off*. They stay recorded as its, unusable, and
   the counter can never go below its bound because of them.

Accounting (per counter and direction): ``held`` = the rights the lost DC held when it was
lost (from its final state merged with the survivors'), ``recovered`` = rights moved to the
survivors, ``written_off`` = rights left with it (``held - recovered``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from replicalab.counters.crdt import BoundedCounter, CounterError
from replicalab.counters.rights import directions, rights_of
from replicalab.counters.service import UnknownCounter, read_state, state_key, write_state
from replicalab.errors import ParameterError
from replicalab.stores import Client, ConditionFailed, Store, StoreError

RETRIES = 20
"""Conditional-write attempts per store before recovery gives up (each loses only to a
concurrent writer: a survivor's middleware or its synchroniser)."""


@dataclass(frozen=True)
class Recovery:
    """What recovering ``key`` from ``lost`` did (rights in counter units, per direction)."""

    key: str
    lost: str
    source: str  # "final state" (read from the lost DC's store), "unreadable", "state lost"
    held: dict[str, int]
    recovered: dict[str, dict[str, int]]  # direction -> survivor -> rights moved to it
    written_off: dict[str, int]
    state: BoundedCounter | None = field(default=None, compare=False)

    def recovered_total(self, direction: str = "dec") -> int:
        """Return the rights moved to the survivors in ``direction`` (units)."""
        return sum(self.recovered.get(direction, {}).values())

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict (without the state)."""
        return {"key": self.key, "lost": self.lost, "source": self.source,
                "held": dict(self.held),
                "recovered": {d: dict(v) for d, v in self.recovered.items()},
                "recovered_total": {d: self.recovered_total(d) for d in self.held},
                "written_off": dict(self.written_off)}


def shares(total: int, survivors: Sequence[str]) -> dict[str, int]:
    """Return ``total`` split evenly over ``survivors``, remainder to the first ones."""
    if not survivors:
        raise CounterError("no surviving data centre to give the rights to")
    base, extra = divmod(total, len(survivors))
    return {s: base + (1 if i < extra else 0) for i, s in enumerate(survivors)}


def move_rights(state: BoundedCounter, lost: str, survivors: Sequence[str]
                ) -> tuple[BoundedCounter, dict[str, dict[str, int]]]:
    """Return ``state`` after ``lost`` transferred every right it holds, in every bounded
    direction, to ``survivors`` (split evenly), and what went where."""
    state.index(lost)
    for s in survivors:
        state.index(s)
        if s == lost:
            raise CounterError(f"{lost} is lost: it cannot be one of the survivors")
    moved: dict[str, dict[str, int]] = {}
    for d in directions(state):
        give = shares(rights_of(state, lost, d), survivors)
        for s, n in give.items():
            if n:
                state = state.transfer(lost, s, n, d)
        moved[d] = {s: n for s, n in give.items() if n}
    return state, moved


async def _merge_into(client: Client, key: str, new: BoundedCounter, where: str,
                      rng: random.Random) -> None:
    """Write ``new`` merged with what ``client``'s store holds, conditionally (as sync)."""
    for attempt in range(RETRIES):
        stored = await read_state(client, key, where)
        merged = new if stored.state is None else stored.state.merge(new)
        if stored.state is not None and merged == stored.state:
            return
        try:
            await write_state(client, key, merged, stored.text)
            return
        except ConditionFailed:
            await asyncio.sleep(rng.uniform(0, min(0.05, 0.002 * 2 ** attempt)))
    raise CounterError(f"recovering {key!r}: {where}'s store changed {RETRIES} times in a row "
                       "under the recovery; retry")


async def recover(key: str, lost: str, lost_store: Client | None,
                  survivors: Mapping[str, Client], seed: int = 0) -> Recovery:
    """Recover the rights ``lost`` held in counter ``key`` (see the module docstring).

    ``lost_store`` is a session of the lost DC's own store (None, or one that fails, when it
    cannot be read: its rights are then written off); ``survivors`` a session of every
    surviving DC's store. The lost DC must never operate again under its name. Returns what
    was done; UnknownCounter when no store holds the counter; store errors of a survivor
    pass through (run it again: every step is idempotent, a second run moves nothing).
    """
    if not survivors:
        raise CounterError("name at least one surviving data centre")
    rng = random.Random(seed)
    views = [s for s in [(await read_state(c, key, dc)).state for dc, c in survivors.items()]
             if s is not None]
    merged: BoundedCounter | None = None
    for v in views:
        merged = v if merged is None else merged.merge(v)
    final, source = None, "unreadable"
    if lost_store is not None:
        try:
            final = await _recover_at_lost(lost_store, key, lost, merged, list(survivors), rng)
            source = "final state" if final is not None else "state lost"
        except StoreError:
            final = None  # unreadable: write the rights off below
    if final is not None:
        new, held, moved = final
    else:
        if merged is None:
            raise UnknownCounter(f"no surviving data centre holds counter {key!r}")
        new = merged
        held = {d: rights_of(merged, lost, d) for d in directions(merged)}
        moved = {d: {} for d in held}
    for dc, c in survivors.items():
        await _merge_into(c, key, new, dc, rng)
    recovered = {d: sum(v.values()) for d, v in moved.items()}
    return Recovery(key, lost, source, held, moved,
                    {d: held[d] - recovered.get(d, 0) for d in held}, new)


async def _recover_at_lost(client: Client, key: str, lost: str, merged: BoundedCounter | None,
                           survivors: list[str], rng: random.Random
                           ) -> tuple[BoundedCounter, dict[str, int],
                                      dict[str, dict[str, int]]] | None:
    """Move the lost DC's rights on its own store (conditionally on what is read there):
    return the new state, what it held, and what moved where; None when its store no longer
    holds the counter (its rights cannot be known)."""
    for attempt in range(RETRIES):
        stored = await read_state(client, key, lost)
        if stored.state is None:
            if merged is None:
                raise UnknownCounter(f"no data centre's store holds counter {key!r}")
            return None
        base = stored.state if merged is None else stored.state.merge(merged)
        held = {d: rights_of(base, lost, d) for d in directions(base)}
        new, moved = move_rights(base, lost, survivors)
        if stored.state is not None and new == stored.state:
            return new, held, moved  # an earlier run moved them: nothing is held
        try:
            await write_state(client, key, new, stored.text)
        except ConditionFailed:
            await asyncio.sleep(rng.uniform(0, min(0.05, 0.002 * 2 ** attempt)))
            continue
        return new, held, moved
    raise CounterError(f"recovering {key!r}: {lost}'s store changed {RETRIES} times in a row; "
                       "is its middleware still running? (a lost DC must be stopped)")


READY_S = 10.0
"""How long a restarted lost store may take to answer (replay its log) before its DC's rights
are written off as unreadable (s)."""


async def open_answering(make: Callable[[], Store], keys: Sequence[str], ready_s: float
                         ) -> tuple[Store, Client] | None:
    """Return a session of the store ``make`` opens once it answers a consistent read of the
    first counter of ``keys``, or None when it has not within ``ready_s`` seconds.

    A restarted server listens before it has loaded its data: Redis accepts connections and
    answers "LOADING Redis is loading the dataset in memory" to every command (PING included)
    while it replays its append-only file. Taking that first refusal for a lost disk wrote
    the lost DC's rights off and left what it acknowledged since its last synchronisation out
    of every survivor's state (a bench drift of + those decrements; on an idle machine the
    loader wins the race, on a busy one the operator's first command arrives first)."""
    deadline = time.monotonic() + ready_s
    probe = [state_key(keys[0])] if keys else []
    while True:
        store = make()
        try:
            client = await store.connect()
            if probe:
                await client.read(probe, consistent=True)
            return store, client
        except (ValueError, OSError, StoreError):
            with contextlib.suppress(Exception):
                await store.close()
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)


async def recover_from_urls(keys: Sequence[str], lost: str, urls: Mapping[str, str],
                            opener: Any = None, ready_s: float = READY_S) -> list[Recovery]:
    """Recover every counter of ``keys`` from data centre ``lost``, each DC's store given
    by its URL (``urls[lost]``: the lost DC's store restarted from its disk; when it has not
    answered within ``ready_s`` seconds, its rights are written off). Unavailable naming a
    survivor that cannot be reached; ValueError for a lost DC that is not among ``urls``."""
    from replicalab.stores import open_store

    opener = opener or open_store
    if lost not in urls:
        raise ParameterError("lost", f"{lost!r} is not one of the data centres given "
                                     f"({', '.join(urls)}); give its store too (restarted "
                                     "from its disk)")
    if len(urls) < 2:
        raise ValueError("give the store of every data centre: the lost one and the survivors")
    stores, clients = [], {}
    lost_client = None
    try:
        for dc, url in urls.items():
            if dc == lost:  # restarted just now, it may still be loading its data
                got = await open_answering(lambda url=url: opener(url), keys, ready_s)
                if got is not None:  # else its disk is gone too: its rights are written off
                    stores.append(got[0])
                    lost_client = got[1]
                continue
            store = opener(url)
            stores.append(store)
            try:
                clients[dc] = await store.connect()
            except (ValueError, OSError, StoreError) as err:
                raise StoreError(f"cannot reach {dc}'s store: {err}") from None
        return [await recover(k, lost, lost_client, clients, seed=i)
                for i, k in enumerate(keys)]
    finally:
        for s in stores:
            with contextlib.suppress(Exception):
                await s.close()

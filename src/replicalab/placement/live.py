"""Live migration on a running multi-region store: the client's access path and the migrator.

Every region has a store of its own; an object is served by its *owner* region only, whose
store holds its value beside an ownership mark, and the owner is recorded in a directory
entry in the object's home region (see :mod:`replicalab.placement.directory`). All changes of
ownership are conditional writes (the Store API's ``expect``), so no step needs a lock
service or a transaction across stores.

**Access** (:class:`Router`). A client remembers where each object lives (a cache filled
from the directory). A write is one conditional write at the owner: value set only if the
mark still says ``<epoch>:own``. A read reads value and mark in one call and keeps the value
only if the mark says ``own``. When that fails the mark says why: ``gone:<to>`` (follow the
redirect), ``own`` at another epoch (a rolled-back migration), ``frozen``/``pending``
(a migration is under way: look at the directory, wait a poll, and once it has been stuck
``stuck_ms`` finish or undo it as the directory says), or nothing (stale cache: ask the
directory).

**Migration** (:func:`migrate`, run from the old owner's region), for an object owned by S
at epoch E moving to T:

1. *freeze*: at S, mark ``E:own`` -> ``E:frozen:T``; from here S accepts no write, and the
   last acknowledged write is in S's value;
2. *copy*: read S's value, write it at T with mark ``E+1:pending`` (only if T's mark, read
   before the freeze, is absent, ``gone`` or ``pending`` from an older epoch, and unchanged);
3. *commit*: directory ``S|E`` -> ``T|E+1`` (the one decisive step);
4. *activate*: at T, ``E+1:pending`` -> ``E+1:own``;
5. *retire*: at S, ``E:frozen:T`` -> ``E:gone:T`` (a redirect for stale caches).

A migrator that dies leaves the object frozen or pending. Before the commit, a client
stuck on it for ``stuck_ms`` rolls it back: directory ``S|E`` -> ``S|E+1`` first (so a slow
migrator's commit, which expects ``S|E``, now fails), then S's mark -> ``E+1:own``. After
the commit, the next access rolls it forward (activate, retire). Either way the served value
is the frozen one, which holds every acknowledged write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from replicalab.placement.directory import (
    FROZEN,
    GONE,
    OWN,
    PENDING,
    Entry,
    Mark,
    activation,
    dir_key,
    may_receive_copy,
    meta_key,
    parse_entry,
    parse_mark,
    retirement,
    value_key,
)
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_MS
from replicalab.stores.base import ABSENT, Client, ConditionFailed, StoreError, Unavailable

STEPS = ("freeze", "copy", "commit", "activate", "retire")
"""The migration steps in order; a halt hook is called after each."""


@dataclass(frozen=True)
class LiveOptions:
    """Timing of the access path (ms) and its bounds.

    ``stuck_ms``: how long an object may stay frozen or pending at its directory owner
    before a client decides its migrator is gone and finishes or undoes the migration (must
    exceed a migration's duration: about four WAN round trips). ``poll_ms``: the wait between
    looks at an object being migrated. ``deadline_ms`` / ``max_attempts``: an access gives
    up (outcome unknown) after this long or this many tries.
    """

    stuck_ms: float = 2000.0
    poll_ms: float = 20.0
    deadline_ms: float = 15_000.0
    max_attempts: int = 500

    def check(self) -> None:
        """Raise ValueError naming the first inconsistent option."""
        if self.stuck_ms <= 0 or self.poll_ms <= 0 or self.max_attempts < 1:
            raise ValueError("stuck_ms and poll_ms must be positive, max_attempts at least 1")
        if self.deadline_ms <= self.stuck_ms + self.poll_ms:
            raise ValueError(f"deadline_ms ({self.deadline_ms:g}) must exceed stuck_ms "
                             f"({self.stuck_ms:g}): a stuck migration must be recoverable "
                             "within one access")


@dataclass
class Conns:
    """One process's sessions from region ``at`` to every region's store."""

    at: str
    clients: Mapping[str, Client]

    def __getitem__(self, region: str) -> Client:
        return self.clients[region]


async def read_entry(conns: Conns, home: str, item: str) -> Entry:
    """Return ``item``'s directory entry read (consistently) in its home region."""
    r = await conns[home].read([dir_key(item)], consistent=True)
    entry = parse_entry(r.values[0])
    if entry is None:
        raise StoreError(f"object {item} has no directory entry in {home}: was the "
                         "deployment set up (seed_objects)?")
    return entry


async def read_at(conns: Conns, region: str, item: str) -> tuple[str | None, Mark | None]:
    """Return (value, mark) of ``item`` in ``region``'s store, read in one call."""
    r = await conns[region].read([value_key(item), meta_key(item)], consistent=True)
    return r.values[0], parse_mark(r.values[1])


async def swap_mark(conns: Conns, region: str, item: str, old: Mark | None,
                    new: Mark) -> bool:
    """Set ``item``'s mark in ``region`` to ``new`` if it is still ``old``; return whether
    it was set (False: someone changed it first)."""
    try:
        await conns[region].write({meta_key(item): new.encode()},
                                  expect={meta_key(item): old.encode() if old else ABSENT})
    except ConditionFailed:
        return False
    return True


async def roll_back(conns: Conns, home: str, item: str, entry: Entry, frozen: Mark) -> bool:
    """Undo an uncommitted migration of ``item`` (owner ``entry.owner`` frozen at
    ``entry.epoch``): fence the directory one epoch up, then let the owner serve again.
    Return False if the directory had already changed (nothing done)."""
    fenced = Entry(entry.owner, entry.epoch + 1)
    try:
        await conns[home].write({dir_key(item): fenced.encode()},
                                expect={dir_key(item): entry.encode()})
    except ConditionFailed:
        return False
    await swap_mark(conns, entry.owner, item, frozen, Mark(fenced.epoch, OWN))
    return True


@dataclass
class _Stuck:
    since_ns: int = -1


@dataclass
class Router:
    """A client's access path to objects that may move (see the module docstring).

    ``home_of(item)`` names the region holding ``item``'s directory entry. ``cache`` maps
    items to where this client last found them. ``redirects`` and ``recoveries`` count
    followed redirects and finished or undone migrations, for the run's results.
    """

    conns: Conns
    runtime: Runtime
    home_of: Callable[[str], str]
    opts: LiveOptions = field(default_factory=LiveOptions)
    cache: dict[str, Entry] = field(default_factory=dict)
    redirects: int = 0
    recoveries: int = 0

    async def lookup(self, item: str) -> Entry:
        """Return (and cache) ``item``'s directory entry."""
        entry = await read_entry(self.conns, self.home_of(item), item)
        self.cache[item] = entry
        return entry

    async def read(self, item: str) -> tuple[str | None, str]:
        """Return (value, serving region) of ``item``; Unavailable if no owner served it
        within the deadline."""
        return await self._access(item, None)

    async def write(self, item: str, value: str) -> str:
        """Write ``value`` to ``item`` at its owner; return the serving region. Unavailable
        (outcome unknown) if it could not finish within the deadline."""
        return (await self._access(item, value))[1]

    async def _access(self, item: str, value: str | None) -> tuple[str | None, str]:
        rt = self.runtime
        give_up = rt.now_ns() + int(self.opts.deadline_ms * NS_PER_MS)
        stuck = _Stuck()
        for _ in range(self.opts.max_attempts):
            entry = self.cache.get(item) or await self.lookup(item)
            region = entry.owner
            if value is not None:
                try:
                    await self.conns[region].write(
                        {value_key(item): value},
                        expect={meta_key(item): Mark(entry.epoch, OWN).encode()})
                    return None, region
                except ConditionFailed:
                    pass
                seen, mark = await read_at(self.conns, region, item)
            else:
                seen, mark = await read_at(self.conns, region, item)
                if mark is not None and mark.state == OWN:
                    if mark.epoch != entry.epoch:
                        self.cache[item] = Entry(region, mark.epoch)
                    return seen, region
            await self._missed(item, region, entry, mark, stuck)
            if rt.now_ns() >= give_up:
                break
        raise Unavailable(f"{item}: no owner served it within {self.opts.deadline_ms:g} ms "
                          f"({self.opts.max_attempts} tries at most)")

    async def _missed(self, item: str, region: str, cached: Entry, mark: Mark | None,
                      stuck: _Stuck) -> None:
        """Act on a region that did not serve ``item``, as its mark says."""
        if mark is not None and mark.state == OWN:  # same owner, epoch moved (a roll-back)
            self.cache[item] = Entry(region, mark.epoch)
            return
        if mark is not None and mark.state == GONE:
            self.redirects += 1
            self.cache[item] = Entry(mark.to, mark.epoch + 1)
            return
        home = self.home_of(item)
        entry = await self.lookup(item)
        if entry.owner != region:
            # the directory moved on: tidy the old owner if its migrator did not
            done = retirement(entry, region, mark)
            if done is not None and await swap_mark(self.conns, region, item, mark, done):
                self.recoveries += 1
            return
        if entry != cached:
            return  # a newer entry for the same region: try it
        now = await self._ready_or_stuck(item, region, entry, mark, stuck)
        if now:
            self.recoveries += 1
            if await roll_back(self.conns, home, item, entry, mark):  # type: ignore[arg-type]
                self.cache[item] = Entry(region, entry.epoch + 1)

    async def _ready_or_stuck(self, item: str, region: str, entry: Entry, mark: Mark | None,
                              stuck: _Stuck) -> bool:
        """Finish a committed change or wait for one under way; return True when an
        uncommitted migration has been stuck long enough to roll back."""
        done = activation(entry, mark)
        if done is not None:
            if await swap_mark(self.conns, region, item, mark, done):
                self.recoveries += 1
            return False
        if mark is None or mark.state not in (FROZEN, PENDING) or mark.epoch != entry.epoch:
            raise StoreError(f"inconsistent ownership of {item}: directory says "
                             f"{entry.encode()}, {region} holds mark "
                             f"{mark.encode() if mark else 'none'}")
        rt = self.runtime
        if mark.state == FROZEN:
            if stuck.since_ns < 0:
                stuck.since_ns = rt.now_ns()
            if rt.now_ns() - stuck.since_ns >= self.opts.stuck_ms * NS_PER_MS:
                return True
        await rt.sleep_ns(int(self.opts.poll_ms * NS_PER_MS))
        return False


Halt = Callable[[str], Awaitable[None]]


async def _no_halt(step: str) -> None:
    return None


@dataclass(frozen=True)
class Migration:
    """What one call of :func:`migrate` did: ``outcome`` is ``moved``, ``stale`` (the
    object is not where the caller thought), ``busy`` (another migration holds it),
    ``refused`` (the target cannot take it; undone) or ``overtaken`` (a client rolled it
    back first); ``epoch`` the directory epoch it ended at; times in ns of the runtime."""

    item: str
    source: str
    target: str
    outcome: str
    epoch: int
    start_ns: int
    end_ns: int


async def migrate(conns: Conns, runtime: Runtime, home: str, item: str, source: str,
                  target: str, halt: Halt = _no_halt) -> Migration:
    """Move ``item`` from ``source`` to ``target`` with the five steps of the module
    docstring, calling ``halt(step)`` after each (a test stops a migrator there); return
    what happened. Store errors (Unavailable) propagate and leave the object for clients
    to recover."""
    t0 = runtime.now_ns()

    def done(outcome: str, epoch: int) -> Migration:
        return Migration(item, source, target, outcome, epoch, t0, runtime.now_ns())

    entry = await read_entry(conns, home, item)
    if entry.owner != source or source == target:
        return done("stale", entry.epoch)
    # the target's mark is read before the freeze, to keep a WAN round trip out of the
    # frozen time; the copy's condition fails if it changes in between
    _, there = await read_at(conns, target, item)
    own = Mark(entry.epoch, OWN)
    frozen = Mark(entry.epoch, FROZEN, target)
    if not await swap_mark(conns, source, item, own, frozen):
        return done("busy", entry.epoch)
    await halt("freeze")
    value, _ = await read_at(conns, source, item)
    pending = Mark(entry.epoch + 1, PENDING)
    copied = may_receive_copy(there, pending.epoch)
    if copied:
        try:
            await conns[target].write(
                {value_key(item): value if value is not None else "",
                 meta_key(item): pending.encode()},
                expect={meta_key(item): there.encode() if there else ABSENT})
        except ConditionFailed:
            copied = False
    if not copied:
        await roll_back(conns, home, item, entry, frozen)
        return done("refused", entry.epoch + 1)
    await halt("copy")
    moved = Entry(target, pending.epoch)
    try:
        await conns[home].write({dir_key(item): moved.encode()},
                                expect={dir_key(item): entry.encode()})
    except ConditionFailed:
        return done("overtaken", entry.epoch + 1)
    await halt("commit")
    await swap_mark(conns, target, item, pending, Mark(moved.epoch, OWN))
    await halt("activate")
    await swap_mark(conns, source, item, frozen, Mark(entry.epoch, GONE, target))
    await halt("retire")
    return done("moved", moved.epoch)


async def seed_objects(conns: Conns, homes: Mapping[str, str], initial: str = "init") -> None:
    """Create every item of ``homes`` (item -> home region) owned by its home at epoch 0
    with value ``initial``: value, mark and directory entry in one write per home store,
    after deleting whatever an earlier run left of these items in every other region's store
    (a stale ``own`` mark there would break the one-owner rule)."""
    for region in conns.clients:
        stale = [k for item, home in homes.items() if home != region
                 for k in (value_key(item), meta_key(item), dir_key(item))]
        if stale:
            await conns[region].delete(stale)
    by_home: dict[str, dict[str, str]] = {}
    for item, home in homes.items():
        batch = by_home.setdefault(home, {})
        batch[value_key(item)] = initial
        batch[meta_key(item)] = Mark(0, OWN).encode()
        batch[dir_key(item)] = Entry(home, 0).encode()
    for home, batch in by_home.items():
        await conns[home].write(batch)

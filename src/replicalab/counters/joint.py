"""Invariants over several counters (seed 004 §VI-B), kept with compensation.

"We may want to have x + y >= k. To address this, the invariant can be maintained by a
Bounded Counter that represents the value of x + y. In this case, when updating the value of
x (resp. y), it is necessary to update both the Bounded Counter for x (resp. y) and for
x + y, with the operation succeeding if both execute with success. [...] this needs to be
done atomically but not in isolation [...] if one Bounded Counter operation fails, the
operation in the other Bounded Counter is compensated by executing the inverse operation."

A :class:`SumInvariant` ``lower <= sum(members) <= upper`` is one Bounded Counter (its
``name``) holding the sum. Updating a member updates the member and every sum it is in, one
Bounded Counter after the other; when one refuses, the ones already done are undone by the
inverse operation, latest first, and the refusal is raised.

The order is chosen so that whoever reads the counters between two steps sees a *safe*
state, and so that a crash between two steps (nothing here survives a crash: the seed's
"transactional mechanism" is not built) can only leave rights unused, never break an
invariant: a sum whose bound the operation moves towards is updated *before* the member
(a decrement under ``x + y >= k`` first takes the sum down), the others *after* it (an
increment raises the sum last). Then the sum counter's value never promises more room than
the members really leave: ``lower <= sum counter <= x + y`` for a lower bound (mirrored for an
upper bound). A compensation that is itself refused (a two-sided counter whose rights to
undo moved away meanwhile) raises :class:`CompensationFailed` naming what was left undone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from replicalab.counters.crdt import BoundViolation, CounterError
from replicalab.counters.service import CounterService
from replicalab.stores import StoreError


@dataclass(frozen=True)
class SumInvariant:
    """``lower <= sum of members <= upper`` (a None bound is no bound), kept by the Bounded
    Counter ``name`` holding the sum."""

    name: str
    members: tuple[str, ...]
    lower: int | None = None
    upper: int | None = None

    def check(self) -> None:
        """Raise CounterError naming what is wrong with this invariant."""
        if len(self.members) < 2 or len(set(self.members)) != len(self.members):
            raise CounterError(f"sum invariant {self.name!r}: give two or more distinct "
                               f"member counters (got {list(self.members)})")
        if self.lower is None and self.upper is None:
            raise CounterError(f"sum invariant {self.name!r}: give a lower or an upper bound")
        if self.name in self.members:
            raise CounterError(f"sum invariant {self.name!r} cannot be one of its members")

    def first(self, op: str) -> bool:
        """Return True when ``op`` ("dec"/"inc") of a member moves this sum towards a bound,
        so the sum is updated before the member (see the module docstring)."""
        return (self.lower is not None) if op == "dec" else (self.upper is not None)


class CompensationFailed(CounterError):
    """An update was refused and undoing its earlier steps was refused too: the counters
    named in ``left`` keep the update (safe for the invariants, but rights are unused)."""

    def __init__(self, message: str, left: Sequence[str]) -> None:
        super().__init__(message)
        self.left = tuple(left)


@dataclass
class JointStats:
    """Counts of one :class:`JointCounters`: updates done, refused, steps compensated."""

    done: int = 0
    refused: int = 0
    compensations: int = 0
    failed_compensations: int = 0


_INVERSE = {"dec": "inc", "inc": "dec"}


@dataclass
class JointCounters:
    """Member counters bound one by one and by sums over several, on one data centre's
    counter service (a middleware; the Bounded Counters replicate as usual)."""

    service: CounterService
    invariants: Sequence[SumInvariant]
    stats: JointStats = field(default_factory=JointStats)

    def __post_init__(self) -> None:
        names = [inv.name for inv in self.invariants]
        if len(set(names)) != len(names):
            raise CounterError(f"sum invariants need distinct names (got {names})")
        members = {m for inv in self.invariants for m in inv.members}
        for inv in self.invariants:
            inv.check()
            if inv.name in members:
                raise CounterError(f"{inv.name!r} is both a sum and a member; a sum of sums "
                                   "is not supported")

    def steps(self, key: str, op: str) -> list[str]:
        """Return the counters ``op`` on member ``key`` updates, in order."""
        if key in {inv.name for inv in self.invariants}:
            raise CounterError(f"{key!r} holds a sum: update its members, not the sum")
        mine = [inv for inv in self.invariants if key in inv.members]
        return ([inv.name for inv in mine if inv.first(op)] + [key]
                + [inv.name for inv in mine if not inv.first(op)])

    async def create(self, initial: Mapping[str, int],
                     bounds: Mapping[str, tuple[int | None, int | None]] | None = None
                     ) -> None:
        """Create every member with its ``initial`` value and own ``(lower, upper)`` bounds
        (default ``(0, None)``: never below 0; a Bounded Counter needs a bound), then each
        sum's counter with the sum of its members' initial values (BoundViolation when that
        breaks it)."""
        bounds = bounds or {}
        members = {m for inv in self.invariants for m in inv.members}
        missing = sorted(members - set(initial))
        if missing:
            raise CounterError(f"give an initial value for every member: {missing} missing")
        for inv in self.invariants:
            total = sum(initial[m] for m in inv.members)
            if (inv.lower is not None and total < inv.lower) or (
                    inv.upper is not None and total > inv.upper):
                raise BoundViolation(f"initial values give {inv.name} = {total}, outside "
                                     f"[{inv.lower}, {inv.upper}]")
        for key, value in initial.items():
            lower, upper = bounds.get(key, (0, None))
            await self.service.create(key, value, lower, upper)
        for inv in self.invariants:
            await self.service.create(inv.name, sum(initial[m] for m in inv.members),
                                      inv.lower, inv.upper)

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """Return member ``key``'s value here after subtracting ``n`` from it and from every
        sum it is in; all or none (the refusal of any, with the others compensated)."""
        return await self._update(key, "dec", n, allow_global)

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        """As :meth:`dec`, adding ``n``."""
        return await self._update(key, "inc", n, allow_global)

    async def _call(self, counter: str, op: str, n: int, allow_global: bool) -> int:
        fn = self.service.dec if op == "dec" else self.service.inc
        return await fn(counter, n, allow_global=allow_global)

    async def _update(self, key: str, op: str, n: int, allow_global: bool) -> int:
        done: list[str] = []
        value = 0
        try:
            for counter in self.steps(key, op):
                v = await self._call(counter, op, n, allow_global)
                done.append(counter)
                if counter == key:
                    value = v
        except (CounterError, StoreError) as err:
            if done:
                await self._compensate(done, op, n, err)
            self.stats.refused += 1
            raise
        self.stats.done += 1
        return value

    async def _compensate(self, done: list[str], op: str, n: int, cause: Exception) -> None:
        """Undo ``done`` (latest first) by the inverse operation; CompensationFailed naming
        what stays done when an undo is refused."""
        for i in range(len(done) - 1, -1, -1):
            try:
                # global: the rights an undo needs were made here by the step it undoes,
                # unless the background moved them away meanwhile
                await self._call(done[i], _INVERSE[op], n, True)
            except (CounterError, StoreError) as err:
                self.stats.failed_compensations += 1
                raise CompensationFailed(
                    f"{op} {n} refused ({cause}); undoing it on {done[i]} was refused too "
                    f"({err}): {', '.join(done[:i + 1])} keep it", done[:i + 1]) from None
            self.stats.compensations += 1

    async def value(self, key: str) -> int:
        """Return the value of member or sum ``key`` as this DC knows it."""
        return await self.service.value(key)


__all__ = ["CompensationFailed", "JointCounters", "JointStats", "SumInvariant"]

"""The Bounded Counter (seed 004 §III): a state-based CRDT that keeps ``lower <= value``
and/or ``value <= upper`` across replicas without coordinating on every operation.

The slack between the value and a bound is split into *rights* held by the replicas. One
escrow structure per constrained direction records them:

* ``R[i][i]`` — rights created at replica ``i`` (by the operation that moves away from the
  bound); ``R[i][j]`` (``i != j``) — rights ``i`` transferred to ``j``;
* ``U[i]`` — rights consumed at ``i`` (by the operation that moves towards the bound).

Rights of ``i`` = ``R[i][i] + sum_j R[j][i] - sum_j R[i][j] - U[i]`` (``j != i``). Only
replica ``i`` writes row ``i`` of ``R`` and entry ``i`` of ``U``, so its own view of what it
has consumed is exact and what it has received can only be an underestimate: a replica never
spends rights it does not hold, whatever messages were lost, duplicated or reordered. Every
entry only grows, so merge is the pointwise maximum (a join semi-lattice).

A lower-bounded counter has one structure for rights to decrement; an upper-bounded one one
for rights to increment; a two-sided counter has both, and each operation consumes rights in
one and creates them in the other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

FORMAT_VERSION = 1
DIRECTIONS = ("dec", "inc")


class CounterError(ValueError):
    """Invalid use of a Bounded Counter; the message names the problem and the fix."""


class InsufficientRights(CounterError):
    """The replica does not hold the rights an operation needs."""

    def __init__(self, message: str, available: int, needed: int) -> None:
        super().__init__(message)
        self.available = available
        self.needed = needed


class BoundViolation(CounterError):
    """A counter cannot be created with its initial value beyond a bound."""


class UnknownReplica(CounterError):
    """A replica name that is not one of the counter's replicas."""


class MalformedState(CounterError):
    """Serialised state that is not a valid Bounded Counter of this format."""


Matrix = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Escrow:
    """Rights in one direction: ``r`` (n x n) and ``u`` (n), both only ever growing."""

    r: Matrix
    u: tuple[int, ...]

    @classmethod
    def empty(cls, n: int) -> Escrow:
        """Return the structure with no rights anywhere."""
        return cls(tuple((0,) * n for _ in range(n)), (0,) * n)

    def rights(self, i: int) -> int:
        """Return the rights replica ``i`` holds (in counter units)."""
        given = sum(self.r[i]) - self.r[i][i]
        received = sum(row[i] for row in self.r) - self.r[i][i]
        return self.r[i][i] + received - given - self.u[i]

    def slack(self) -> int:
        """Return created minus consumed rights: the distance of the value from the bound."""
        return sum(self.r[i][i] for i in range(len(self.u))) - sum(self.u)

    def add_r(self, i: int, j: int, n: int) -> Escrow:
        """Return this structure with ``r[i][j]`` increased by ``n`` (never overwritten)."""
        row = list(self.r[i])
        row[j] += n
        return Escrow((*self.r[:i], tuple(row), *self.r[i + 1:]), self.u)

    def add_u(self, i: int, n: int) -> Escrow:
        """Return this structure with ``u[i]`` increased by ``n``."""
        u = list(self.u)
        u[i] += n
        return Escrow(self.r, tuple(u))

    def merge(self, other: Escrow) -> Escrow:
        """Return the pointwise maximum."""
        return Escrow(tuple(tuple(map(max, a, b)) for a, b in zip(self.r, other.r, strict=True)),
                      tuple(map(max, self.u, other.u)))

    def leq(self, other: Escrow) -> bool:
        """Return True when every entry is <= the other's (the lattice order)."""
        return (all(x <= y for a, b in zip(self.r, other.r, strict=True)
                    for x, y in zip(a, b, strict=True))
                and all(x <= y for x, y in zip(self.u, other.u, strict=True)))


def _amount(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise CounterError(f"{what} amount {n!r} must be a positive integer")
    return n


@dataclass(frozen=True)
class BoundedCounter:
    """One replica's state of a Bounded Counter; every operation returns a new state."""

    replicas: tuple[str, ...]
    lower: int | None
    upper: int | None
    down: Escrow | None  # rights to decrement (present when there is a lower bound)
    up: Escrow | None  # rights to increment (present when there is an upper bound)

    @property
    def kind(self) -> str:
        """Return "lower", "upper" or "two-sided"."""
        if self.lower is not None and self.upper is not None:
            return "two-sided"
        return "lower" if self.lower is not None else "upper"

    @classmethod
    def create(cls, replicas: Sequence[str], *, initial: int, lower: int | None = 0,
               upper: int | None = None, holder: str | None = None) -> BoundedCounter:
        """Return a new counter with value ``initial``; its slack to each bound goes to
        ``holder``, or is split evenly over the replicas (remainder to the first ones)."""
        names = tuple(replicas)
        if not names or len(set(names)) != len(names) or not all(
                isinstance(x, str) and x for x in names):
            raise CounterError(f"replicas {list(names)!r} must be distinct non-empty names")
        for label, b in (("initial", initial), ("lower", lower), ("upper", upper)):
            if b is not None and (isinstance(b, bool) or not isinstance(b, int)):
                raise CounterError(f"{label} {b!r} must be an integer")
        if lower is None and upper is None:
            raise CounterError("a Bounded Counter needs a lower or an upper bound (or both)")
        if lower is not None and initial < lower:
            raise BoundViolation(f"initial value {initial} is below the lower bound {lower}")
        if upper is not None and initial > upper:
            raise BoundViolation(f"initial value {initial} is above the upper bound {upper}")
        if holder is not None and holder not in names:
            raise UnknownReplica(f"holder {holder!r} is not one of the replicas {list(names)}")
        n = len(names)

        def seeded(slack: int) -> Escrow:
            e = Escrow.empty(n)
            shares = ([slack if x == holder else 0 for x in names] if holder is not None
                      else [slack // n + (1 if i < slack % n else 0) for i in range(n)])
            for i, s in enumerate(shares):
                if s:
                    e = e.add_r(i, i, s)
            return e

        return cls(names, lower, upper,
                   seeded(initial - lower) if lower is not None else None,
                   seeded(upper - initial) if upper is not None else None)

    def index(self, replica: str) -> int:
        """Return the position of ``replica`` (UnknownReplica if it is not one)."""
        try:
            return self.replicas.index(replica)
        except ValueError:
            raise UnknownReplica(f"replica {replica!r} is not one of {list(self.replicas)}"
                                 ) from None

    def _escrow(self, direction: str) -> Escrow | None:
        if direction not in DIRECTIONS:
            raise CounterError(f"direction {direction!r}: use 'dec' or 'inc'")
        return self.down if direction == "dec" else self.up

    def local_rights(self, replica: str, direction: str = "dec") -> int | None:
        """Return the rights ``replica`` holds to move the value in ``direction`` (units);
        None when that direction is unbounded."""
        i = self.index(replica)
        e = self._escrow(direction)
        return None if e is None else e.rights(i)

    def transferred(self, donor: str, to: str, direction: str = "dec") -> int:
        """Return the rights ``donor`` has transferred to ``to`` in total (monotone)."""
        i, j = self.index(donor), self.index(to)
        e = self._escrow(direction)
        if e is None or i == j:
            return 0
        return e.r[i][j]

    def _move(self, replica: str, n: int, consume: str) -> BoundedCounter:
        i = self.index(replica)
        spent, made = (self.down, self.up) if consume == "dec" else (self.up, self.down)
        if spent is not None:
            have = spent.rights(i)
            if have < n:
                raise InsufficientRights(
                    f"replica {replica!r} holds {have} rights to {consume} and needs {n}: "
                    "obtain rights by a transfer, or retry later", have, n)
            spent = spent.add_u(i, n)
        if made is not None:
            made = made.add_r(i, i, n)
        down, up = (spent, made) if consume == "dec" else (made, spent)
        return replace(self, down=down, up=up)

    def inc(self, replica: str, n: int = 1) -> BoundedCounter:
        """Return the state after ``replica`` adds ``n`` (InsufficientRights at an upper
        bound it holds no rights to pass)."""
        return self._move(replica, _amount(n, "increment"), "inc")

    def dec(self, replica: str, n: int = 1) -> BoundedCounter:
        """Return the state after ``replica`` subtracts ``n`` (InsufficientRights when it
        holds fewer than ``n`` rights above the lower bound)."""
        return self._move(replica, _amount(n, "decrement"), "dec")

    def transfer(self, src: str, dst: str, n: int, direction: str = "dec") -> BoundedCounter:
        """Return the state after ``src`` gives ``n`` of its rights in ``direction`` to
        ``dst``."""
        n = _amount(n, "transfer")
        i, j = self.index(src), self.index(dst)
        if i == j:
            # R[i][i] means "created at i": a self-transfer would mint rights out of nothing
            raise CounterError(f"replica {src!r} cannot transfer rights to itself")
        e = self._escrow(direction)
        if e is None:
            raise CounterError(f"this {self.kind}-bounded counter has no rights to {direction}")
        have = e.rights(i)
        if have < n:
            raise InsufficientRights(f"replica {src!r} holds {have} rights to {direction} "
                                     f"and cannot transfer {n}", have, n)
        e = e.add_r(i, j, n)
        return replace(self, **({"down": e} if direction == "dec" else {"up": e}))

    def value(self) -> int:
        """Return the counter's value as this replica knows it (an int, never raw state)."""
        if self.down is not None:
            assert self.lower is not None
            return self.lower + self.down.slack()
        assert self.up is not None and self.upper is not None
        return self.upper - self.up.slack()

    def _same_counter(self, other: BoundedCounter) -> None:
        if (self.replicas, self.lower, self.upper) != (other.replicas, other.lower,
                                                       other.upper):
            raise CounterError("cannot merge states of different counters (replicas or bounds "
                               "differ)")

    def merge(self, other: BoundedCounter) -> BoundedCounter:
        """Return the least upper bound of the two states (pointwise maximum)."""
        self._same_counter(other)
        return replace(self,
                       down=self.down.merge(other.down) if self.down and other.down else None,
                       up=self.up.merge(other.up) if self.up and other.up else None)

    def leq(self, other: BoundedCounter) -> bool:
        """Return True when ``other`` includes everything this state knows."""
        self._same_counter(other)
        return all(a.leq(b) for a, b in ((self.down, other.down), (self.up, other.up))
                   if a is not None and b is not None)

    def to_text(self) -> str:
        """Return the compact, versioned JSON form of this state."""
        doc: dict[str, Any] = {"v": FORMAT_VERSION, "rep": list(self.replicas),
                               "lo": self.lower, "hi": self.upper}
        for key, e in (("d", self.down), ("u", self.up)):
            if e is not None:
                doc[key] = [[x for row in e.r for x in row], list(e.u)]
        return json.dumps(doc, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str | bytes) -> BoundedCounter:
        """Return the state serialised by :meth:`to_text` (MalformedState otherwise)."""
        try:
            doc = json.loads(text)
        except (ValueError, TypeError) as e:
            raise MalformedState(f"counter state is not JSON ({e})") from None
        if not isinstance(doc, dict) or "v" not in doc:
            raise MalformedState("counter state has no format version: not a Bounded Counter")
        if doc["v"] != FORMAT_VERSION:
            raise MalformedState(f"counter state format {doc['v']!r} is not supported "
                                 f"(this replicalab reads format {FORMAT_VERSION})")
        try:
            names = tuple(doc["rep"])
            lower, upper = doc["lo"], doc["hi"]
            n = len(names)
            escrows = []
            for key, bound in (("d", lower), ("u", upper)):
                if bound is None:
                    escrows.append(None)
                    continue
                flat, u = doc[key]
                if len(flat) != n * n or len(u) != n:
                    raise MalformedState(f"counter state '{key}' has the wrong shape for "
                                         f"{n} replicas")
                escrows.append(Escrow(tuple(tuple(flat[i * n:(i + 1) * n]) for i in range(n)),
                                      tuple(u)))
        except MalformedState:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise MalformedState(f"counter state is missing or mistyped field {e}") from None
        c = cls(names, lower, upper, escrows[0], escrows[1])
        c._validate()
        return c

    def _validate(self) -> None:
        def ints(xs: Sequence[Any]) -> bool:
            return all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in xs)

        if not self.replicas or len(set(self.replicas)) != len(self.replicas) or not all(
                isinstance(x, str) and x for x in self.replicas):
            raise MalformedState("counter state has missing or repeated replica names")
        for b in (self.lower, self.upper):
            if b is not None and (isinstance(b, bool) or not isinstance(b, int)):
                raise MalformedState("counter state has a non-integer bound")
        if self.lower is None and self.upper is None:
            raise MalformedState("counter state has no bound")
        for e in (self.down, self.up):
            if e is None:
                continue
            if not ints(e.u) or not all(ints(row) for row in e.r):
                raise MalformedState("counter state has negative or non-integer entries")
            # holds on every reachable state: nobody spends rights it does not hold
            if any(e.rights(i) < 0 for i in range(len(self.replicas))):
                raise MalformedState("counter state gives a replica negative rights: it was "
                                     "not produced by Bounded Counter operations")
        if self.down is not None and self.up is not None and (
                self.lower + self.down.slack() != self.upper - self.up.slack()):  # type: ignore[operator]
            raise MalformedState("counter state's two directions disagree on the value")

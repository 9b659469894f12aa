"""Seed 002's data-migration policies, one access at a time, and the load-balancing filter.

The contract (what the simulator and live migration both drive)::

    policy = make_policy("cog", regions, owner, window_ms=10_000, balance=0.25)
    target = policy.hit(obj, region, t_ms)  # after serving an access to ``obj`` from ``region``
    if target is not None:                  # at ``t_ms`` (ms, non-decreasing): move obj there
        ...migrate...
        policy.moved(obj, target)           # told whenever obj's owner changes, by any cause

* ``hit(obj, region, t_ms) -> int | None``: the access has been served by the current owner;
  return the region id (index into ``regions.regions``) to migrate ``obj`` to, or ``None`` to
  leave it. A policy never returns the current owner. ``hit`` does not change the owner: the
  caller does the move and reports it with ``moved`` (a live store may refuse or delay it; until
  ``moved`` is called the policy keeps the old owner and may return the same target again).
* ``moved(obj, region)``: ``obj``'s owner is now ``region``, whatever moved it.
* ``ranked(obj, target) -> Sequence[int]``: every region, best first, starting with ``target``;
  the load-balancing filter walks it for the next best region with room.

Policies (parameters in units; defaults in brackets):

* ``static``: never migrates (the seed's static random placement).
* ``consecutive`` (n [3] accesses): migrate to a region that made the last ``n`` accesses in a
  row. Next best for the filter: regions by RTT from the target.
* ``majority`` (window_ms [10 000]): per object, accesses per region are counted over periods of
  ``window_ms`` (period ``floor(t_ms / window_ms)``); at the object's first access in a later
  period the closed period decides: the region with the most accesses (the owner if it ties for
  most, else the lowest id). Next best: regions by RTT from the target.
* ``ema`` (alpha [0.1]): the seed's exponential moving average over region *ids*:
  ``e = alpha * region + (1 - alpha) * e`` (``e`` starts at the initial owner's id); when
  ``round(e)`` (half up) differs from the owner, move one id towards it (seed: "EMA can only
  migrate objects to one of the neighboring regions"). Ids follow the matrix order, not
  geography, which is why it does badly (seed 002). Next best: regions by RTT from the target.
* ``cog`` (mode [periodic]; periodic: window_ms [10 000]; continuous: alpha [0.1]): center of
  gravity. L-score of region ``c``: ``L_c = sum_r w_r * rtt_ms[r, c]``, ``w_r`` the weight of
  accesses from ``r``; the region with the lowest score owns the object (the owner if it ties
  for lowest, else the lowest id). Periodic: ``w`` = the closed period's access counts, decided
  as ``majority`` does. Continuous: ``w`` decays, ``w = (1 - alpha) * w + alpha * e_region`` on
  every access, starting as all weight on the initial owner, and is re-decided on every
  access. Next best: regions by L-score.
* ``oracle`` (window_ms [10 000]; needs the whole request stream as ``requests=``): full
  knowledge of the future: for each object and period it places the object where that period's
  accesses cost least (after the object's last access of the previous period with accesses;
  for its first period, after its first access, for the rest of that period). It bounds what a
  policy deciding once per window can get. Next best: regions by RTT from the target.

Every policy takes ``balance`` (a share of the objects, 0 < balance <= 1): the load-balancing
filter. A region may own at most ``floor(balance * objects)`` objects; when the policy's target
is full the object goes to the next best region with room, and stays where it is if its owner
comes first in that order. Placements that start above capacity are not corrected.

A policy is one class (a subclass of :class:`PolicyBase`) carrying its ``name``, its
parameters (``PARAMS``), how it is built from them (``build``), the colour of its curves, the
branch of the compiled loop that replays it (``kernel_code``, see ``kernel.py``; None: the
simulator feeds it one access at a time) with that loop's arguments (``fast_args``), and one
line of :data:`POLICIES` (or :func:`register`). Everything that lists, parses, simulates,
runs live or draws policies reads them from there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from replicalab import plugins
from replicalab.placement import kernel
from replicalab.placement.matrix import RegionMatrix, nearest_order

DEFAULT_WINDOW_MS = 30_000.0
DEFAULT_N = 3
DEFAULT_ALPHA = 0.1


class Policy(Protocol):
    """A migration policy fed one access at a time (see the module docstring)."""

    name: str

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        """Return the region to migrate ``obj`` to after this access, or None."""
        ...

    def moved(self, obj: int, region: int) -> None:
        """Record that ``obj`` is now owned by ``region`` (by any cause)."""
        ...

    def ranked(self, obj: int, target: int) -> Sequence[int]:
        """Return all region ids, best first, starting with ``target``."""
        ...


@dataclass(frozen=True)
class Requests:
    """A request stream: object id, requesting region id and time in ms (non-decreasing)."""

    obj: np.ndarray
    region: np.ndarray
    t_ms: np.ndarray

    def __len__(self) -> int:
        return int(self.obj.shape[0])


class PolicyBase:
    """What every policy class declares and shares (see the module docstring).

    Class attributes: ``name`` (as ``--policies`` spells it), ``PARAMS`` (parameter -> type;
    ``balance`` applies to every policy), ``color`` (of its curves in the reports),
    ``kernel_code`` (its branch of the compiled loop in ``kernel.py``/``jit.py``; None runs it
    on the reference path), ``needs_requests`` (it must see the whole stream in advance, so
    it cannot run live). Instances keep the owner of every object; the defaults of ``hit``,
    ``moved`` and ``ranked`` never migrate, record a move and rank regions by RTT."""

    name: ClassVar[str] = ""
    PARAMS: ClassVar[dict[str, type]] = {}
    color: ClassVar[str] = ""
    kernel_code: ClassVar[int | None] = None
    needs_requests: ClassVar[bool] = False

    def __init__(self, regions: RegionMatrix, owner: Sequence[int] | np.ndarray) -> None:
        self.regions = regions
        self.rtt = regions.rtt_ms
        self.n_regions = regions.size
        self.owner: list[int] = [int(x) for x in owner]
        self._near: list[list[int]] = nearest_order(regions.rtt_ms).tolist()
        self.params: dict[str, Any] = {}

    @classmethod
    def build(cls, regions: RegionMatrix, owner: np.ndarray, kw: dict[str, Any],
              requests: Requests | None) -> PolicyBase:
        """Return the policy with parameters ``kw`` (already of their ``PARAMS`` types);
        ValueError names a bad value."""
        return cls(regions, owner, **kw)

    @classmethod
    def periodic(cls, params: dict[str, str]) -> bool:
        """Return True if, with ``params``, the policy decides once per ``window_ms``."""
        return False

    def fast_args(self) -> dict[str, Any] | None:
        """Return the arguments of ``jit.run_fast`` that replay this policy (``code``
        included), or None if it has no fast path."""
        return None if self.kernel_code is None else {"code": self.kernel_code}

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        """Return the region to migrate ``obj`` to after this access, or None."""
        return None

    def moved(self, obj: int, region: int) -> None:
        """Record that ``obj`` is now owned by ``region`` (by any cause)."""
        self.owner[obj] = region

    def ranked(self, obj: int, target: int) -> Sequence[int]:
        """Return all region ids, best first, starting with ``target``."""
        return self._near[target]


# Every policy below repeats one header (name, PARAMS, color, kernel_code, an __init__ keeping
# its parameters in ``params``): declarations of one extension point, not logic to fold.
class Static(PolicyBase):
    """Never migrates."""

    name = "static"
    color = "#7f7f7f"
    kernel_code = kernel.STATIC


class Consecutive(PolicyBase):
    """Migrate to a region that made the last ``n`` accesses in a row."""

    name = "consecutive"
    PARAMS: ClassVar[dict[str, type]] = {"n": int}
    color = "#ff7f0e"
    kernel_code = kernel.CONSECUTIVE

    def __init__(self, regions: RegionMatrix, owner: Sequence[int] | np.ndarray,
                 n: int = DEFAULT_N) -> None:
        super().__init__(regions, owner)
        self.n = n
        self.params = {"n": n}
        self.last = [-1] * len(self.owner)
        self.run = [0] * len(self.owner)

    @classmethod
    def build(cls, regions: RegionMatrix, owner: np.ndarray, kw: dict[str, Any],
              requests: Requests | None) -> PolicyBase:
        """Return the policy (ValueError if ``n`` < 1)."""
        if kw.get("n", DEFAULT_N) < 1:
            raise ValueError("policy consecutive: n must be at least 1 access")
        return cls(regions, owner, **kw)

    def fast_args(self) -> dict[str, Any] | None:
        """Return the fast path's arguments: the run length ``n``."""
        return {"code": self.kernel_code, "n_consecutive": self.n}

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        if self.last[obj] == region:
            self.run[obj] += 1
        else:
            self.last[obj] = region
            self.run[obj] = 1
        if self.run[obj] >= self.n and region != self.owner[obj]:
            return region
        return None


class _Periodic(PolicyBase):
    """Counts accesses per region over periods of ``window_ms``; decides on a closed period."""

    PARAMS: ClassVar[dict[str, type]] = {"window_ms": float}

    def __init__(self, regions: RegionMatrix, owner: Sequence[int] | np.ndarray,
                 window_ms: float = DEFAULT_WINDOW_MS) -> None:
        super().__init__(regions, owner)
        self.window_ms = window_ms
        self.params = {"window_ms": window_ms}
        self.period = [-1] * len(self.owner)
        self.counts = [[0] * self.n_regions for _ in self.owner]

    @classmethod
    def periodic(cls, params: dict[str, str]) -> bool:
        """Return True: the policy decides once per period."""
        return True

    def fast_args(self) -> dict[str, Any] | None:
        """Return the fast path's arguments: the period ``window_ms``."""
        return {"code": self.kernel_code, "window_ms": self.window_ms}

    def _decide(self, obj: int, counts: list[int]) -> int | None:
        raise NotImplementedError

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        p = math.floor(t_ms / self.window_ms)
        target = None
        if p != self.period[obj]:
            if self.period[obj] >= 0:
                target = self._decide(obj, self.counts[obj])
            self.counts[obj] = [0] * self.n_regions
            self.period[obj] = p
        self.counts[obj][region] += 1
        return target


class Majority(_Periodic):
    """Migrate to the region with the most accesses over the last period."""

    name = "majority"
    color = "#2ca02c"
    kernel_code = kernel.MAJORITY

    def _decide(self, obj: int, counts: list[int]) -> int | None:
        best = max(counts)
        if counts[self.owner[obj]] == best:
            return None
        return counts.index(best)


def l_scores(counts: Sequence[float], rtt_ms: np.ndarray) -> np.ndarray:
    """Return the L-score of every region (ms × weight): ``sum_r counts[r] * rtt_ms[r, c]``,
    summed in region order (so the fast path reproduces it bit for bit)."""
    scores = np.zeros(rtt_ms.shape[1])
    for r, c in enumerate(counts):
        if c:
            scores += c * rtt_ms[r]
    return scores


def _lowest(scores: np.ndarray, owner: int) -> int | None:
    best = scores.min()
    if scores[owner] == best:
        return None
    return int(np.argmin(scores))


class CogPeriodic(_Periodic):
    """Center of gravity on the last period's access counts."""

    name = "cog"
    color = "#1f77b4"
    kernel_code = kernel.COG_PERIODIC

    def __init__(self, regions: RegionMatrix, owner: Sequence[int] | np.ndarray,
                 window_ms: float = DEFAULT_WINDOW_MS) -> None:
        super().__init__(regions, owner, window_ms)
        self.params = {"mode": "periodic", "window_ms": window_ms}
        self.scores: dict[int, np.ndarray] = {}

    def _decide(self, obj: int, counts: list[int]) -> int | None:
        scores = l_scores(counts, self.rtt)
        self.scores[obj] = scores
        return _lowest(scores, self.owner[obj])

    def ranked(self, obj: int, target: int) -> Sequence[int]:
        order = np.argsort(self.scores[obj], kind="stable").tolist()
        return [target, *(c for c in order if c != target)]


class CogContinuous(PolicyBase):
    """Center of gravity on exponentially decaying weights, re-decided on every access."""

    name = "cog"
    PARAMS: ClassVar[dict[str, type]] = {"alpha": float}
    color = "#1f77b4"
    kernel_code = kernel.COG_CONTINUOUS

    def __init__(self, regions: RegionMatrix, owner: Sequence[int] | np.ndarray,
                 alpha: float = DEFAULT_ALPHA) -> None:
        super().__init__(regions, owner)
        self.alpha = alpha
        self.params = {"mode": "continuous", "alpha": alpha}
        # all weight on the initial owner: L_c = rtt_ms[owner, c]
        self.scores = [self.rtt[o].copy() for o in self.owner]

    def fast_args(self) -> dict[str, Any] | None:
        """Return the fast path's arguments: the decay ``alpha``."""
        return {"code": self.kernel_code, "alpha": self.alpha}

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        s = self.scores[obj]
        s *= 1.0 - self.alpha
        s += self.alpha * self.rtt[region]
        return _lowest(s, self.owner[obj])

    def ranked(self, obj: int, target: int) -> Sequence[int]:
        order = np.argsort(self.scores[obj], kind="stable").tolist()
        return [target, *(c for c in order if c != target)]


class Cog(PolicyBase):
    """Center of gravity, periodic (``window_ms``) or continuous (``alpha``) by ``mode``:
    builds a :class:`CogPeriodic` or a :class:`CogContinuous`."""

    name = "cog"
    PARAMS: ClassVar[dict[str, type]] = {"mode": str, "window_ms": float, "alpha": float}
    color = "#1f77b4"

    @classmethod
    def build(cls, regions: RegionMatrix, owner: np.ndarray, kw: dict[str, Any],
              requests: Requests | None) -> PolicyBase:
        """Return the periodic or continuous CoG (ValueError for a parameter of the other
        mode or an unknown mode)."""
        mode = kw.pop("mode", "periodic")
        if mode == "periodic":
            if "alpha" in kw:
                raise ValueError("policy cog: alpha applies to mode=continuous; periodic takes "
                                 "window_ms")
            return CogPeriodic(regions, owner, **kw)
        if mode == "continuous":
            if "window_ms" in kw:
                raise ValueError("policy cog: window_ms applies to mode=periodic; continuous "
                                 "takes alpha")
            return CogContinuous(regions, owner, **kw)
        raise ValueError(f"policy cog: mode {mode!r} must be periodic or continuous")

    @classmethod
    def periodic(cls, params: dict[str, str]) -> bool:
        """Return True unless ``mode=continuous``."""
        return params.get("mode", "periodic") == "periodic"


class Ema(PolicyBase):
    """Exponential moving average of region ids; moves one id at a time towards it."""

    name = "ema"
    PARAMS: ClassVar[dict[str, type]] = {"alpha": float}
    color = "#d62728"
    kernel_code = kernel.EMA

    def __init__(self, regions: RegionMatrix, owner: Sequence[int] | np.ndarray,
                 alpha: float = DEFAULT_ALPHA) -> None:
        super().__init__(regions, owner)
        self.alpha = alpha
        self.params = {"alpha": alpha}
        self.avg = [float(o) for o in self.owner]

    def fast_args(self) -> dict[str, Any] | None:
        """Return the fast path's arguments: the weight ``alpha``."""
        return {"code": self.kernel_code, "alpha": self.alpha}

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        e = self.alpha * region + (1.0 - self.alpha) * self.avg[obj]
        self.avg[obj] = e
        target = math.floor(e + 0.5)
        o = self.owner[obj]
        if target > o:
            return o + 1
        if target < o:
            return o - 1
        return None


def oracle_plan(requests: Requests, rtt_ms: np.ndarray, window_ms: float) -> np.ndarray:
    """Return int64 per request: the region the oracle moves the object to right after that
    access, or -1. Per object and period of ``window_ms`` the best region is the one with the
    lowest total RTT for that period's accesses; the move happens after the object's last
    access of its previous period, and in its first period after its first access (for the
    rest of that period)."""
    obj = np.asarray(requests.obj, dtype=np.int64)
    region = np.asarray(requests.region, dtype=np.int64)
    m, n_regions = obj.shape[0], rtt_ms.shape[0]
    out = np.full(m, -1, dtype=np.int64)
    if m == 0:
        return out
    period = np.floor(np.asarray(requests.t_ms, dtype=np.float64) / window_ms).astype(np.int64)
    order = np.lexsort((np.arange(m), period, obj))  # by object, period, then stream order
    o_s, p_s = obj[order], period[order]
    new_group = np.ones(m, dtype=bool)
    new_group[1:] = (o_s[1:] != o_s[:-1]) | (p_s[1:] != p_s[:-1])
    group = np.cumsum(new_group) - 1
    first_of_obj = np.ones(m, dtype=bool)
    first_of_obj[1:] = o_s[1:] != o_s[:-1]
    # the object's first access is served before the oracle can act: leave it out of the
    # counts of its first period
    counted = ~first_of_obj
    n_groups = int(group[-1]) + 1
    counts = np.bincount(group[counted] * n_regions + region[order][counted],
                         minlength=n_groups * n_regions).reshape(n_groups, n_regions)
    best = np.argmin(counts.astype(np.float64) @ rtt_ms, axis=1)
    empty = counts.sum(axis=1) == 0
    last_of_group = np.ones(m, dtype=bool)
    last_of_group[:-1] = new_group[1:]
    has_next = np.zeros(m, dtype=bool)
    has_next[:-1] = o_s[1:] == o_s[:-1]
    # first access (and more to come in its period): move for the rest of the period
    pos = np.flatnonzero(first_of_obj & ~last_of_group)
    out[order[pos]] = best[group[pos]]
    # last access of a period with a later period of the same object: move for that period
    pos = np.flatnonzero(last_of_group & has_next)
    nxt = group[pos] + 1
    out[order[pos]] = np.where(empty[nxt], -1, best[nxt])
    return out


class Oracle(PolicyBase):
    """Moves each object, ahead of each period, to where that period's accesses cost least."""

    name = "oracle"
    PARAMS: ClassVar[dict[str, type]] = {"window_ms": float}
    color = "#000000"
    kernel_code = kernel.ORACLE
    needs_requests = True

    def __init__(self, regions: RegionMatrix, owner: Sequence[int] | np.ndarray,
                 requests: Requests, window_ms: float = DEFAULT_WINDOW_MS) -> None:
        super().__init__(regions, owner)
        self.window_ms = window_ms
        self.params = {"window_ms": window_ms}
        self.requests = requests
        self.plan: list[int] = oracle_plan(requests, regions.rtt_ms, window_ms).tolist()
        self._objs: list[int] = np.asarray(requests.obj).tolist()
        self.i = 0

    @classmethod
    def build(cls, regions: RegionMatrix, owner: np.ndarray, kw: dict[str, Any],
              requests: Requests | None) -> PolicyBase:
        """Return the oracle (ValueError without the request stream)."""
        if requests is None:
            raise ValueError("policy oracle needs the whole request stream (requests=)")
        return cls(regions, owner, requests, **kw)

    def fast_args(self) -> dict[str, Any] | None:
        """Return the fast path's arguments: the planned target of every request."""
        return {"code": self.kernel_code, "plan": np.asarray(self.plan, np.int64)}

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        i = self.i
        if i >= len(self._objs) or self._objs[i] != obj:
            raise ValueError("the oracle must be fed exactly the request stream it was given")
        self.i = i + 1
        target = self.plan[i]
        if target < 0 or target == self.owner[obj]:
            return None
        return target


class Balanced:
    """The load-balancing filter around any policy: no migration into a full region."""

    def __init__(self, inner: PolicyBase, capacity_share: float) -> None:
        n_objects, n_regions = len(inner.owner), inner.n_regions
        self.inner = inner
        self.name = inner.name
        self.capacity = capacity_objects(capacity_share, n_objects, n_regions)
        self.params = {**inner.params, "balance": capacity_share}
        self.owner = list(inner.owner)
        self.loads = np.bincount(np.asarray(self.owner, dtype=np.int64),
                                 minlength=n_regions).tolist()

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        target = self.inner.hit(obj, region, t_ms)
        if target is None:
            return None
        owner = self.owner[obj]
        for c in self.inner.ranked(obj, target):
            if c == owner:
                return None
            if self.loads[c] < self.capacity:
                return c
        return None

    def moved(self, obj: int, region: int) -> None:
        old = self.owner[obj]
        if old != region:
            self.loads[old] -= 1
            self.loads[region] += 1
            self.owner[obj] = region
        self.inner.moved(obj, region)

    def ranked(self, obj: int, target: int) -> Sequence[int]:
        return self.inner.ranked(obj, target)

    def fast_args(self) -> dict[str, Any] | None:
        """Return the inner policy's fast-path arguments with this filter's capacity."""
        args = self.inner.fast_args()
        return None if args is None else {**args, "capacity": self.capacity}


def capacity_objects(share: float, n_objects: int, n_regions: int) -> int:
    """Return how many objects one region may own under ``share`` (ValueError if the share
    is not in (0, 1] or the regions together could not hold every object)."""
    if not 0 < share <= 1:
        raise ValueError(f"balance {share} must be a share of the objects in (0, 1], "
                         "e.g. 0.25 for at most a quarter of them per region")
    cap = math.floor(share * n_objects + 1e-9)
    if cap * n_regions < n_objects:
        need = math.ceil(n_objects / n_regions) / n_objects
        raise ValueError(f"balance {share} lets {n_regions} regions hold only {cap * n_regions} "
                         f"of {n_objects} objects; use at least {need:.3g}")
    return cap


def _convert(name: str, key: str, value: Any, kind: type) -> Any:
    try:
        v = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"policy {name}: {key}={value!r} is not a valid {kind.__name__}"
                         ) from None
    if kind is float and not math.isfinite(v):
        raise ValueError(f"policy {name}: {key} must be a finite number")
    return v


def _is_policy(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, PolicyBase) and bool(obj.name)


POLICIES: plugins.Registry[type[PolicyBase]] = plugins.Registry(
    plugins.PLACEMENT, "placement policy",
    {cls.name: cls for cls in (Static, Consecutive, Majority, Ema, Cog, Oracle)},
    accept=_is_policy, expected="a PolicyBase subclass with a name")
"""Every policy by name, in the order help and defaults list them: one line per policy
(and one in pyproject.toml's ``replicalab.placement`` entry-point group, where another
package declares its own: ``mine = "mypkg.policy:Mine"``, found when its name is asked
for)."""


def register(cls: type[PolicyBase]) -> None:
    """Make policy ``cls.name`` available to ``--policies``, ``--policy`` and the reports."""
    POLICIES[cls.name] = cls


def names() -> list[str]:
    """Return the name of every policy."""
    return list(POLICIES)


def policy_class(name: str) -> type[PolicyBase]:
    """Return the class of policy ``name`` (ValueError listing the known ones)."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; use one of {', '.join(POLICIES)} "
                         f"{plugins.outside_hint(plugins.PLACEMENT, name)}") from None


def described() -> str:
    """Return every policy with its parameters, for --help: ``static, consecutive (n),
    ...``."""
    return ", ".join(f"{n} ({', '.join(c.PARAMS)})" if c.PARAMS else n
                     for n, c in POLICIES.items())


def make_policy(name: str, regions: RegionMatrix, owner: Sequence[int] | np.ndarray,
                **params: Any) -> Policy:
    """Return policy ``name`` with ``params`` (strings are converted: CLI specs pass them so)
    on ``regions`` with initial owners ``owner`` (one region id per object); wrapped in the
    load-balancing filter when ``balance`` is given. ``oracle`` needs ``requests=``. Raises
    ValueError with one line naming an unknown policy, parameter or bad value."""
    cls = policy_class(name)
    owner_arr = np.asarray(owner)
    if owner_arr.ndim != 1 or owner_arr.size == 0 or (
            owner_arr.size and (owner_arr.min() < 0 or owner_arr.max() >= regions.size)):
        raise ValueError(f"owners must be region ids 0..{regions.size - 1}, one per object")
    params = dict(params)
    balance = params.pop("balance", None)
    requests = params.pop("requests", None)
    allowed = cls.PARAMS
    for key in params:
        if key not in allowed:
            can = ", ".join(allowed) or "no parameters"
            raise ValueError(f"policy {name} has no parameter {key!r}; it takes {can}"
                             f"{' and' if allowed else ', only'} balance")
    kw = {k: _convert(name, k, v, allowed[k]) for k, v in params.items()}
    if "window_ms" in kw and not kw["window_ms"] > 0:
        raise ValueError(f"policy {name}: window_ms must be > 0 (a period in ms)")
    if "alpha" in kw and not 0 < kw["alpha"] <= 1:
        raise ValueError(f"policy {name}: alpha must be in (0, 1] (the weight of the newest "
                         "access)")
    inner = cls.build(regions, owner_arr, kw, requests)
    if balance is None:
        return inner
    return Balanced(inner, _convert(name, "balance", balance, float))


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Return (name, params) from a spec like ``cog:mode=continuous:alpha=0.05`` or
    ``consecutive:n=5`` (values stay strings; ``make_policy`` converts and checks them)."""
    name, *parts = spec.strip().split(":")
    params: dict[str, str] = {}
    for part in parts:
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"policy spec {spec!r}: {part!r} must be key=value, e.g. "
                             "consecutive:n=5 or cog:balance=0.25")
        params[key.strip()] = value.strip()
    policy_class(name.strip())
    return name.strip(), params

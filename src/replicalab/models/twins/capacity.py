"""How a twin measures its own maximum throughput: the highest offered load its queues sustain.

Nothing here reads a model. A twin supplies one function, ``run(load_rps, rounds) -> Trial``:
a run of its own simulation at that offered load, watched by :class:`BacklogWatch`. Then:

1. **Estimate** (the utilisation law U = X S). A pilot run at ``PILOT_RPS`` measures each
   node's busy time per request; ``1000 x workers / (busiest node's ms per request)`` is
   where its queue should stop keeping up. It only places the search.
2. **Stability search.** Runs at offered loads around the estimate, each from the same seed
   (only the load changes, so the verdicts are nearly monotone in load) and with arrivals
   stratified so that the watched half offers exactly the load (``stratify``), sample every
   node's
   queued work per worker (its backlog) at ``SAMPLES`` evenly spaced times over the second
   half of the arrivals. A load is *sustained* when no node's backlog grows faster than
   ``GROWTH_LIMIT`` (least-squares slope: 1 % of elapsed time, 10 ms of work per second).
   The search widens its bracket until the low end is sustained and the high end is not
   (at most ``EXPAND`` times each way), then bisects it geometrically ``STEPS`` times; the
   capacity is the highest load found sustained.

Every trial runs at least ``MIN_ROUNDS`` rounds. Resolution: the bracket ends 1.3 % wide;
the verdict near capacity is noisy by about ``sqrt((Ca^2 + Cs^2) / rounds)`` of the load
(1-4 % at 5 000-20 000 rounds, more for a node that carries only part of the requests). A
queue overloaded by less than 1 % passes the slope limit (the capacity errs up by up to
1 %), and a stable queue still filling from empty near saturation may not (it errs down).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replicalab.runtime.base import NS_PER_MS
from replicalab.runtime.virtual import VirtualRuntime
from replicalab.sim.network import Delay, Node
from replicalab.sim.random import Stream

PILOT_RPS = 1000.0   # any load works: work per request does not depend on it
SAMPLES = 16         # backlog snapshots over the second half of the arrivals
GROWTH_LIMIT = 0.01  # backlog growth (ns of queued work per ns of time) still sustained
SPREAD = 0.1         # first bracket: estimate x (1 -/+ SPREAD)
STEPS = 4            # geometric bisections of the bracket: 20 % -> 1.25 %
EXPAND = 6           # most times the bracket is widened each way
MIN_ROUNDS = 5000    # fewer rounds per trial leave the verdict at the mercy of one burst

def stratify(gaps: np.ndarray, mean: float) -> np.ndarray:
    """Return a copy of ``gaps`` whose first one (the run's start) is kept and whose halves
    after it are each rescaled to sum to exactly their count x ``mean``.

    A capacity trial watches the second half of its arrivals; stratified, that half offers
    exactly the nominal load instead of the nominal load +- sqrt(Ca^2 / n) (4-5 % with the
    seed's bursty clients at 5,000-10,000 rounds, the same for every trial of one seed),
    which would otherwise decide the verdicts near capacity. The gaps' shape, and so the
    clients' burstiness, is kept.
    """
    g = np.asarray(gaps, dtype=np.float64).copy()
    body = g[1:]
    h = body.size // 2
    for part in (body[:h], body[h:]):
        total = float(part.sum())
        if part.size and total > 0:
            part *= part.size * mean / total
    return g


ServiceDraw = Callable[[Delay, Stream], int]
"""A twin's per-message service-time draw: (the Delay it would use, its stream) -> ns."""


def default_draw(delay: Delay, stream: Stream) -> int:
    """Return one service time in ns drawn from ``delay`` (the twins' default)."""
    return delay.draw(stream)


@dataclass(frozen=True)
class Trial:
    """One run of a twin at ``offered_rps``: was it sustained, and what its nodes did.

    ``growth`` is the fastest-growing node's backlog slope (ns of work per ns; > 0 grows);
    ``utilisation`` the busiest node's busy time / (its workers x the arrival span);
    ``work_ms`` the busiest node's work per request per worker (ms).
    """

    offered_rps: float
    sustained: bool
    growth: float
    growing_node: str
    busiest_node: str
    utilisation: float
    work_ms: float

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict (floats rounded for reading)."""
        d = asdict(self)
        for k in ("offered_rps", "growth", "utilisation", "work_ms"):
            d[k] = round(d[k], 6)
        return d


# Data: a list of fields, alike in shape to api/results.py's Results (not logic).
@dataclass(frozen=True)
class Capacity:
    """A twin's measured maximum throughput (req/s) and how it was found.

    ``bottleneck`` is the busiest node at that load and ``utilisation`` its measured busy
    fraction there; ``estimate_rps`` the pilot's utilisation-law estimate and
    ``work_ms`` the busiest node's work per request per worker (ms) it came from;
    ``bracket_rps`` the final (sustained, not sustained) pair; ``trials`` every run.
    """

    max_throughput_rps: float
    bottleneck: str
    utilisation: float
    estimate_rps: float
    work_ms: float
    bracket_rps: tuple[float, float]
    rounds: int
    trials: tuple[Trial, ...]
    method: str = "highest load whose queues do not grow"

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict (inf/NaN never appear: an unbracketed end is None)."""
        return {"max_throughput_rps": round(self.max_throughput_rps, 3),
                "bottleneck": self.bottleneck, "utilisation": round(self.utilisation, 6),
                "estimate_rps": round(self.estimate_rps, 3), "work_ms": round(self.work_ms, 6),
                "bracket_rps": [round(x, 3) if math.isfinite(x) else None
                                for x in self.bracket_rps],
                "rounds": self.rounds, "method": self.method,
                "growth_limit": GROWTH_LIMIT, "trials": [t.to_json() for t in self.trials]}


class BacklogWatch:
    """Snapshots every node's queued work per worker (ns) at ``samples`` evenly spaced
    virtual times from ``max(span_ns / 2, settle_ns)`` to ``span_ns`` (schedule before the
    run starts). ``settle_ns``: how long until every message path carries traffic (a WAN
    twin's longest chain of hops); the window must not start before it."""

    def __init__(self, rt: VirtualRuntime, nodes: Sequence[Node], span_ns: int,
                 samples: int = SAMPLES, settle_ns: int = 0) -> None:
        self.rt = rt
        self.nodes = list(nodes)
        self.times_ns: list[int] = []
        self.backlog_ns: list[list[float]] = []
        start = min(max(span_ns // 2, settle_ns), span_ns)
        for k in range(samples):
            rt.schedule(start + (span_ns - start) * k // (samples - 1), self._snap)

    def _snap(self) -> None:
        now = self.rt.now_ns()
        self.times_ns.append(now)
        self.backlog_ns.append([sum(f - now for f in n.free_at_ns if f > now)
                                / len(n.free_at_ns) for n in self.nodes])

    def growth(self) -> dict[str, float]:
        """Return each node's backlog growth: the least-squares slope of its queued work
        against time (ns per ns; 0 when the samples span no time)."""
        t = np.asarray(self.times_ns, dtype=np.float64)
        b = np.asarray(self.backlog_ns, dtype=np.float64).reshape(len(t), len(self.nodes))
        tc = t - t.mean() if t.size else t
        denom = float(tc @ tc)
        if denom <= 0:
            return {n.name: 0.0 for n in self.nodes}
        slope = tc @ (b - b.mean(axis=0)) / denom
        return {n.name: float(s) for n, s in zip(self.nodes, slope, strict=True)}


def verdict(load_rps: float, watch: BacklogWatch, busy_ns: Mapping[str, float],
            span_ns: float, requests: int, work_ms: float | None = None) -> Trial:
    """Return the Trial of a finished run: sustained unless some node's backlog grew
    faster than ``GROWTH_LIMIT``; utilisation and work per worker of the busiest node
    (``busy_ns`` per node name, over ``requests`` requests arriving in ``span_ns``).
    ``work_ms`` overrides the busiest node's work per request per worker when the twin
    measures it better (the WAN twins correct for each client region's request count)."""
    growth = watch.growth()
    worst = max(growth, key=growth.__getitem__)
    per_worker = {n.name: float(busy_ns.get(n.name, 0)) / len(n.free_at_ns)
                  for n in watch.nodes}
    busiest = max(per_worker, key=per_worker.__getitem__)
    busy = per_worker[busiest]
    if work_ms is None:
        work_ms = busy / max(requests, 1) / NS_PER_MS
    return Trial(load_rps, growth[worst] < GROWTH_LIMIT, growth[worst], worst, busiest,
                 busy / max(span_ns, 1.0), work_ms)


METHODS = ("search", "estimate")


def search(run: Callable[[float, int], Trial], rounds: int, method: str = "search"
           ) -> Capacity:
    """Return the highest offered load (req/s) that ``run(load, rounds)`` finds sustained
    (see the module docstring); trials run ``max(rounds, MIN_ROUNDS)`` rounds.

    ``method="estimate"`` stops after the pilot and returns its utilisation-law estimate
    (still the twin's own measurement, not a check of its queues): for callers that only
    need latencies and must stay fast.
    """
    if method not in METHODS:
        raise ValueError(f"capacity={method!r}: use 'search' (the highest load the queues "
                         "sustain) or 'estimate' (the utilisation law on a pilot run)")
    trials: list[Trial] = []
    rounds = max(rounds, MIN_ROUNDS)

    def go(load: float, n: int = rounds) -> Trial:
        t = run(load, n)
        trials.append(t)
        return t

    pilot = go(PILOT_RPS)
    estimate = 1000.0 / pilot.work_ms if pilot.work_ms > 0 else PILOT_RPS
    if method == "estimate":
        return Capacity(estimate, pilot.busiest_node, estimate * pilot.work_ms / 1000.0,
                        estimate, pilot.work_ms, (estimate, estimate), rounds, (pilot,),
                        "utilisation law on a pilot run")
    lo, hi = estimate * (1 - SPREAD), estimate * (1 + SPREAD)
    best: Trial | None = None
    known_hi = False
    for _ in range(EXPAND + 1):  # lower the low end until its queues keep up
        t = go(lo)
        if t.sustained:
            best = t
            break
        hi, known_hi = lo, True
        lo *= 1 - 2 * SPREAD
    else:
        lo = 0.0
    if best is not None and not known_hi:
        for _ in range(EXPAND + 1):  # raise the high end until some queue grows
            t = go(hi)
            if not t.sustained:
                break
            best, lo = t, hi
            hi *= 1 + 2 * SPREAD
        else:
            hi = math.inf
    if best is not None and math.isfinite(hi):
        for _ in range(STEPS):
            mid = math.sqrt(lo * hi)
            t = go(mid)
            if t.sustained:
                best, lo = t, mid
            else:
                hi = mid
    top = best or pilot
    return Capacity(lo, top.busiest_node, top.utilisation, estimate, pilot.work_ms, (lo, hi),
                    rounds, tuple(trials))

"""A predicted t-visibility curve (PBS) against a measured one, judged by the measurement's
sampling band: the verdict both ``model pbs --against cassandra`` and the recorded evidence
(``docs/data/pbs-cassandra-*.json``, written by ``benchmarks/pbs_cassandra.py``) give. Pure:
no I/O.

What is measured is one draw per write: when it became visible to the reader. Reads after a
write (each judged against the latest write acknowledged before it started) bracket that
moment: it came after the write's last stale read and by its first fresh read after that
(:class:`Visibility`, ms after the writer saw the ack). At a sampled t, a write is visible
(its first fresh read at or before t), not visible (a stale read at or after t) or
undecided (t between the two), so P(consistent at t) is a binomial proportion over the writes
with its own interval: the prediction must lie between the Clopper-Pearson lower bound of the
visible writes and the upper bound of the visible and undecided ones, at every sampled t, each
bound at ``1 - alpha / points`` (Bonferroni over the sampled t, so a right model fails the
whole curve with probability at most ``alpha``). A prediction that knows its own sampling
error (``spread(t)``: PBS's legs come from a few hundred calibration round trips) widens the
band by z times it, in quadrature, z at the band's own level; nothing else widens it: a curve
of 1,000 writes still tells a prediction shifted by 5 ms on a 40 ms-wide transition from
the truth, a curve of 100 does not, and the verdict says which it had.

A judgement has power only with enough sampled t inside the transition (measured strictly
between 2 % and 98 %): a step-shaped curve cannot tell one model from another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from replicalab.checkers.extract import ReadLog, WriteLog
from replicalab.runtime.noise import NoiseFloor

ALPHA = 0.05
"""Chance that a right prediction fails somewhere on the curve (split over the sampled t)."""
STEP_MS = 2.0
"""Sampled t: every STEP_MS from 0 to the end (ms)."""
END_MS = 90.0
"""Last sampled t (ms): before the next write (every 100 ms at R = 1) takes the reads over."""
LOW, HIGH = 0.02, 0.98
"""The transition: a sampled t counts there when its measured fraction is strictly between."""
MIN_TRANSITION_POINTS = 10
"""Sampled t inside the transition a judgement needs to have power."""
MIN_WRITES = 50
"""Writes a sampled t needs to be judged (fewer: shown, not judged)."""


@dataclass(frozen=True)
class Visibility:
    """Per write, when it became visible to the reader (ms after the writer saw its ack):
    after ``last_stale_ms`` (-inf: no stale read) and by ``first_fresh_ms`` (+inf: never
    read fresh before the next write took the reads over)."""

    last_stale_ms: tuple[float, ...]
    first_fresh_ms: tuple[float, ...]
    reads: int = 0
    out_of_order: int = 0  # writes read fresh, then stale again
    ack_ns: tuple[int, ...] = ()  # per write: when its writer saw the ack (monotonic ns)
    write_ms: tuple[float, ...] = ()  # per write: its own latency, invoke to ack (ms)

    @property
    def writes(self) -> int:
        """Return the writes observed."""
        return len(self.last_stale_ms)

    def to_json(self) -> dict[str, object]:
        """Return the observations as plain data (ms; null for an unbounded side)."""
        def side(x: Sequence[float]) -> list[float | None]:
            return [None if not math.isfinite(v) else round(v, 3) for v in x]
        return {"writes": self.writes, "reads": self.reads, "out_of_order": self.out_of_order,
                "last_stale_ms": side(self.last_stale_ms),
                "first_fresh_ms": side(self.first_fresh_ms), "ack_ns": list(self.ack_ns),
                "write_ms": [round(x, 3) for x in self.write_ms]}

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Visibility:
        """Return the observations :meth:`to_json` wrote."""
        lo = [-math.inf if v is None else float(v) for v in d["last_stale_ms"]]  # type: ignore[union-attr]
        hi = [math.inf if v is None else float(v) for v in d["first_fresh_ms"]]  # type: ignore[union-attr]
        return cls(tuple(lo), tuple(hi), int(d.get("reads", 0)),  # type: ignore[call-overload]
                   int(d.get("out_of_order", 0)),  # type: ignore[call-overload]
                   tuple(int(x) for x in d.get("ack_ns", ())),  # type: ignore[attr-defined]
                   tuple(float(x) for x in d.get("write_ms", ())))  # type: ignore[attr-defined]


def with_late_acks(v: Visibility, floor: NoiseFloor | None) -> Visibility:
    """Return ``v`` with each write's first fresh read moved later by what ``floor``
    measured the machine adding while the write was in flight (its invoke to its ack,
    ``NoiseFloor.added_between_ms``): a writer that saw its ack that late counts t from a
    moment after the commit, and its write may look visible earlier after the ack than the
    links allow by that much. The write is then undecided over that span, not visible."""
    if floor is None or not v.ack_ns or len(v.write_ms) != len(v.ack_ns):
        return v
    hi = list(v.first_fresh_ms)
    for i, (ack, took) in enumerate(zip(v.ack_ns, v.write_ms, strict=True)):
        added = floor.added_between_ms(ack - int(took * 1e6), ack)
        if added > 0 and math.isfinite(hi[i]):
            hi[i] += added
    return Visibility(v.last_stale_ms, tuple(hi), v.reads, v.out_of_order, v.ack_ns,
                      v.write_ms)


def of_element(writes: WriteLog, reads: ReadLog) -> Visibility:
    """Return each write's visibility from one element's writes and reads, every read judged
    against the latest write acknowledged before it started (as ``freshness.since_ack``)."""
    order = np.argsort(writes.complete_ns, kind="stable")
    last = np.searchsorted(writes.complete_ns[order], reads.invoke_ns, side="right") - 1
    has = last >= 0
    w = order[last[has]]
    t_ms = (reads.invoke_ns[has] - writes.complete_ns[w]) / 1e6
    return visibility(w, t_ms, reads.version[has] >= writes.version[w], writes.complete_ns,
                      writes.invoke_ns)


def visibility(write_of_read: np.ndarray, t_ms: np.ndarray, fresh: np.ndarray,
               ack_ns: np.ndarray | None = None, invoke_ns: np.ndarray | None = None
               ) -> Visibility:
    """Return each write's visibility from its reads: ``write_of_read`` (the write each read
    is judged against), ``t_ms`` (ms after that write's ack the read started) and ``fresh``
    (the read returned that write or a newer one). A write read fresh and then stale again
    (another replica answered, or a stalled client sent a read late) becomes visible after
    its last stale read, by the first fresh read after it; it is counted in ``out_of_order``.
    ``ack_ns`` and ``invoke_ns`` (per write index) keep when each write was acknowledged
    and how long it took."""
    lo, hi, odd, acks, took = [], [], 0, [], []
    order = np.lexsort((t_ms, write_of_read))
    w, t, f = write_of_read[order], t_ms[order], fresh[order].astype(bool)
    cuts = np.flatnonzero(np.diff(w)) + 1
    for ww, tt, ff in zip(np.split(w, cuts), np.split(t, cuts), np.split(f, cuts),
                          strict=True):
        if len(tt) == 0:
            continue
        if ack_ns is not None:
            acks.append(int(ack_ns[ww[0]]))
            if invoke_ns is not None:
                took.append(float(ack_ns[ww[0]] - invoke_ns[ww[0]]) / 1e6)
        stale = np.flatnonzero(~ff)
        last = float(tt[stale[-1]]) if len(stale) else -math.inf
        after = tt[ff & (tt > last)]
        lo.append(last)
        hi.append(float(after.min()) if len(after) else math.inf)
        if len(stale) and ff[: stale[-1]].any():
            odd += 1
    return Visibility(tuple(lo), tuple(hi), len(t_ms), odd, tuple(acks), tuple(took))


@dataclass(frozen=True)
class Point:
    """One sampled t: of ``writes`` observed, ``visible`` were surely visible by t,
    ``undecided`` may have been; the measured fraction's band [lo, hi], the prediction, and
    the prediction's own standard deviation ``spread`` (0: exact) with the ``z`` it is
    counted at."""

    t_ms: float
    writes: int
    visible: int
    undecided: int
    lo: float
    hi: float
    predicted: float
    spread: float = 0.0
    z: float = 0.0

    @property
    def tol_lo(self) -> float:
        """Return the lowest prediction the point accepts: the band's lower bound, widened
        in quadrature by z times the prediction's spread."""
        if self.spread <= 0:
            return self.lo
        m = self.measured
        return max(0.0, m - math.hypot(m - self.lo, self.z * self.spread))

    @property
    def tol_hi(self) -> float:
        """Return the highest prediction the point accepts (as :attr:`tol_lo`)."""
        if self.spread <= 0:
            return self.hi
        m = self.measured
        return min(1.0, m + math.hypot(self.hi - m, self.z * self.spread))

    @property
    def measured(self) -> float:
        """Return the measured fraction (undecided writes counted half)."""
        return (self.visible + self.undecided / 2) / self.writes if self.writes else math.nan

    @property
    def judged(self) -> bool:
        """Return True if enough writes were observed at t to judge it."""
        return self.writes >= MIN_WRITES

    @property
    def inside(self) -> bool:
        """Return True if the prediction lies within the band (widened by its spread)."""
        return self.tol_lo <= self.predicted <= self.tol_hi

    @property
    def miss(self) -> float:
        """Return how far the prediction lies outside the band (0 inside; a fraction)."""
        return max(self.tol_lo - self.predicted, self.predicted - self.tol_hi, 0.0)

    def to_json(self) -> dict[str, float | int | bool]:
        """Return the point as plain data (ms, counts, fractions)."""
        return {"t_ms": self.t_ms, "writes": self.writes, "visible": self.visible,
                "undecided": self.undecided, "measured": round(self.measured, 6),
                "band_lo": round(self.lo, 6), "band_hi": round(self.hi, 6),
                "predicted": round(self.predicted, 6),
                "prediction_sd": round(self.spread, 6), "tol_lo": round(self.tol_lo, 6),
                "tol_hi": round(self.tol_hi, 6), "judged": self.judged,
                "inside": self.inside}


def _binom_cdf(k: np.ndarray, n: int, p: np.ndarray) -> np.ndarray:
    """Return P(X <= k) for X ~ Binomial(n, p), elementwise over k and p."""
    i = np.arange(n + 1)
    logc = np.array([math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                     for j in range(n + 1)])
    pp = np.clip(p, 1e-300, 1 - 1e-16)[:, None]
    logpmf = logc + i * np.log(pp) + (n - i) * np.log1p(-pp)
    pmf = np.exp(logpmf)
    return np.where(i[None, :] <= k[:, None], pmf, 0.0).sum(axis=1)


def clopper_pearson(k: Sequence[int], n: int, alpha: float, upper: bool) -> np.ndarray:
    """Return the exact binomial bound (two-sided level ``1 - alpha``) on the success
    probability for each count ``k`` of ``n``: the lower bound, or the upper one."""
    k_all = np.asarray(k, dtype=float)
    k_arr, back = np.unique(k_all, return_inverse=True)
    lo, hi = np.zeros(len(k_arr)), np.ones(len(k_arr))
    for _ in range(40):  # bisection to 1e-12: the binomial tail is monotone in p
        mid = (lo + hi) / 2
        if upper:  # largest p with P(X <= k) >= alpha / 2
            ok = _binom_cdf(k_arr, n, mid) >= alpha / 2
        else:  # smallest p with P(X >= k) >= alpha / 2, i.e. P(X <= k - 1) <= 1 - alpha / 2
            ok = _binom_cdf(k_arr - 1, n, mid) > 1 - alpha / 2
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    out = ((lo + hi) / 2)[back]
    if upper:
        return np.where(k_all >= n, 1.0, out)
    return np.where(k_all <= 0, 0.0, out)


def sample_times(step_ms: float = STEP_MS, end_ms: float = END_MS) -> np.ndarray:
    """Return the sampled t (ms)."""
    return np.round(np.arange(0.0, end_ms + 1e-9, step_ms), 6)


@dataclass(frozen=True)
class Judgement:
    """A prediction judged against a measured curve: every sampled t, the verdict and why."""

    points: tuple[Point, ...]
    alpha: float

    @property
    def judged(self) -> list[Point]:
        """Return the points with enough writes to judge."""
        return [p for p in self.points if p.judged]

    @property
    def transition_points(self) -> int:
        """Return the judged points measured strictly inside the transition."""
        return sum(1 for p in self.judged if LOW < p.measured < HIGH)

    @property
    def has_power(self) -> bool:
        """Return True if enough judged points lie inside the transition."""
        return self.transition_points >= MIN_TRANSITION_POINTS

    @property
    def outside(self) -> list[Point]:
        """Return the judged points whose prediction lies outside the band."""
        return [p for p in self.judged if not p.inside]

    @property
    def within(self) -> bool:
        """Return True if the prediction lies in the band at every judged t (and some are)."""
        return bool(self.judged) and not self.outside

    @property
    def worst(self) -> Point | None:
        """Return the judged point farthest outside its band (the largest gap if none is)."""
        if self.outside:
            return max(self.outside, key=lambda p: p.miss)
        return max(self.judged, key=lambda p: abs(p.predicted - p.measured), default=None)

    def line(self) -> str:
        """Return one sentence: how the prediction fared against the band."""
        w = self.worst
        if w is None:
            return "no sampled t had enough writes to judge"
        spread = ("" if w.spread <= 0 else
                  f"; with the prediction's own spread {100 * w.tol_lo:.1f}-"
                  f"{100 * w.tol_hi:.1f} %")
        where = (f"at {w.t_ms:g} ms predicted {100 * w.predicted:.1f} %, measured "
                 f"{100 * w.measured:.1f} % (band {100 * w.lo:.1f}-{100 * w.hi:.1f} %"
                 f"{spread}, {w.writes} writes)")
        if self.outside:
            return (f"outside the sampling band at {len(self.outside)} of {len(self.judged)} "
                    f"sampled t; farthest {where}")
        return f"inside the sampling band at all {len(self.judged)} sampled t; widest gap {where}"

    def to_json(self) -> dict[str, object]:
        """Return the judgement as plain data."""
        w = self.worst
        return {"alpha": self.alpha, "points": [p.to_json() for p in self.points],
                "judged": len(self.judged), "outside": len(self.outside),
                "transition_points": self.transition_points, "has_power": self.has_power,
                "within": self.within, "worst": None if w is None else w.to_json(),
                "line": self.line()}


def judge(predict: Callable[[np.ndarray], np.ndarray], v: Visibility,
          t_ms: Sequence[float] | None = None, alpha: float = ALPHA) -> Judgement:
    """Return ``predict`` (P(consistent) at each t, ms after the ack) judged against the
    writes' visibility ``v`` at every sampled t (default :func:`sample_times`). A
    ``predict`` with a ``spread(t)`` (its own standard deviation, e.g. from resampling its
    calibration) widens each band in quadrature by z times it, z at the band's level."""
    ts = np.asarray(sample_times() if t_ms is None else t_ms, dtype=float)
    lo_t, hi_t = np.asarray(v.last_stale_ms), np.asarray(v.first_fresh_ms)
    visible = (hi_t[None, :] <= ts[:, None]).sum(axis=1)
    hidden = (lo_t[None, :] >= ts[:, None]).sum(axis=1)
    n = v.writes
    undecided = n - visible - hidden
    judged = max(int(n >= MIN_WRITES) * len(ts), 1)
    a = alpha / judged
    lo = clopper_pearson(visible.tolist(), n, a, upper=False) if n else np.zeros(len(ts))
    hi = (clopper_pearson((visible + undecided).tolist(), n, a, upper=True) if n
          else np.ones(len(ts)))
    pred = np.asarray(predict(ts), dtype=float)
    spread_of = getattr(predict, "spread", None)
    sd = (np.zeros(len(ts)) if spread_of is None
          else np.asarray(spread_of(ts), dtype=float))
    z = NormalDist().inv_cdf(1 - a / 2)
    return Judgement(tuple(Point(float(t), n, int(x), int(u), float(a_), float(b_), float(p),
                                 float(s_), z if s_ > 0 else 0.0)
                           for t, x, u, a_, b_, p, s_ in zip(ts, visible, undecided, lo, hi,
                                                             pred, sd, strict=True)), alpha)


@dataclass(frozen=True)
class WindowJudgement:
    """Every write's visibility against a window the links' delays allow: visible at most
    ``hi`` ms after its ack, at least ``lo`` ms after it less however late its ack came back
    (its latency beyond the links' least write path): a write read stale at or after ``hi``
    is late, one read fresh earlier than that is early; each is explained only
    by a stall or echo excess the run's noise floor measured while it ran, at least as long
    as it missed by (``explained``: (write, missed by ms, the machine added ms)); the rest
    are ``unexplained``."""

    lo_ms: float
    hi_ms: float
    writes: int
    median_ms: float
    explained: tuple[tuple[int, float, float], ...]
    unexplained: tuple[tuple[int, float, float], ...]
    noise_p99_ms: float = 0.0  # what the machine added at p99 while the run ran
    bearable_ms: float = 0.0  # the noise the verdict can bear: the window's own slack
    median_late_ack_ms: float = math.nan  # the same, plus how late each write's ack was
    noise_max_ms: float = math.inf  # the most the machine added to one measurement

    @property
    def median_inside(self) -> bool:
        """Return True if the median write became visible inside the window: at most
        ``hi`` after its ack, at least ``lo`` after its ack once the ack's own lateness
        (its latency beyond the links' least write path) is added back (the gross check: a
        hop too many or too few moves it out)."""
        return self.median_ms <= self.hi_ms and self.median_late_ack_ms >= self.lo_ms

    @property
    def exact(self) -> bool:
        """Return True if every write became visible inside the window, or missed it by no
        more than the machine measurably added while it ran."""
        return not self.unexplained

    @property
    def verdict(self) -> str:
        """Return "exact", "inconclusive" (writes missed the window while the machine added
        more than the window's slack at p99: no verdict on the store) or "missed" (also
        when a write missed it by more than the machine added to any one measurement of the
        run: no noise it measured can explain that miss)."""
        if self.exact:
            return "exact"
        worst = max(x[1] for x in self.unexplained)
        noisy = self.noise_p99_ms > self.bearable_ms and worst <= self.noise_max_ms
        return "inconclusive" if noisy else "missed"

    def line(self) -> str:
        """Return one sentence: the median window and the writes outside the window."""
        out = (f"median visible {self.median_ms:.1f} ms after the ack, "
               f"{self.median_late_ack_ms:.1f} ms with the ack's lateness added back "
               f"(window {self.lo_ms:g}-{self.hi_ms:g} ms, {self.writes} writes)")
        if self.explained:
            worst = max(self.explained, key=lambda x: x[1])
            out += (f"; {len(self.explained)} outside it while the machine stalled (worst "
                    f"{worst[1]:.1f} ms over, {worst[2]:.1f} ms added)")
        if self.unexplained:
            worst = max(self.unexplained, key=lambda x: x[1])
            out += (f"; {len(self.unexplained)} outside it with less noise measured during "
                    f"them (worst write {worst[0]}: {worst[1]:.1f} ms over, the machine "
                    f"added {worst[2]:.1f} ms)")
        if self.verdict == "inconclusive":
            out += (f": inconclusive, the machine added {self.noise_p99_ms:.1f} ms at p99, "
                    f"over the {self.bearable_ms:g} ms the window can bear")
        return out

    def to_json(self) -> dict[str, object]:
        """Return the judgement as plain data (ms)."""
        return {"lo_ms": self.lo_ms, "hi_ms": self.hi_ms, "writes": self.writes,
                "median_ms": round(self.median_ms, 3),
                "median_late_ack_ms": round(self.median_late_ack_ms, 3),
                "median_inside": self.median_inside, "exact": self.exact,
                "verdict": self.verdict, "noise_p99_ms": self.noise_p99_ms,
                "bearable_ms": self.bearable_ms, "noise_max_ms": self.noise_max_ms,
                "explained": [list(x) for x in self.explained],
                "unexplained": [list(x) for x in self.unexplained], "line": self.line()}


def judge_window(v: Visibility, lo_ms: float, hi_ms: float, floor: NoiseFloor | None,
                 bearable_ms: float = 0.0, write_path_ms: float = 0.0) -> WindowJudgement:
    """Return each write of ``v`` judged against the window [lo, hi] ms after its ack, a miss
    explained only by what ``floor`` measured while the write and its reads ran;
    ``bearable_ms``: the noise (p99) beyond which misses make the verdict inconclusive;
    ``write_path_ms``: the least a write takes over the links (an ack later than that came
    back late, after the write had started on its way to the reader)."""
    explained, unexplained = [], []
    mids, from_invoke = [], []
    for i, (a, b) in enumerate(zip(v.last_stale_ms, v.first_fresh_ms, strict=True)):
        # a write whose ack took longer than the links' least write path came back late:
        # it was on its way to the reader for that much before the ack, so it may become
        # visible that much earlier than lo after the ack
        late = max((v.write_ms[i] if i < len(v.write_ms) else 0.0) - write_path_ms, 0.0)
        if math.isfinite(a) and math.isfinite(b):
            mids.append((a + b) / 2)
            from_invoke.append((a + b) / 2 + late)
        lo_i = lo_ms - late
        miss = max(a - hi_ms if a >= hi_ms else 0.0, lo_i - b if b < lo_i else 0.0)
        if miss <= 0:
            continue
        added = 0.0
        if floor is not None and i < len(v.ack_ns):
            end_ms = max(x for x in (a, b) if math.isfinite(x))
            added = floor.added_between_ms(v.ack_ns[i], v.ack_ns[i] + int(end_ms * 1e6))
        entry = (i, round(miss, 3), round(added, 3))
        (explained if added >= miss else unexplained).append(entry)
    return WindowJudgement(lo_ms, hi_ms, v.writes, float(np.median(mids)) if mids else math.nan,
                           tuple(explained), tuple(unexplained),
                           0.0 if floor is None else floor.added_p99_ms, bearable_ms,
                           float(np.median(from_invoke)) if from_invoke else math.nan,
                           0.0 if floor is None else floor.added_max_ms)

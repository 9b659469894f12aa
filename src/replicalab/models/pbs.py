"""Probabilistically Bounded Staleness (Bailis et al., VLDB 2012) for N/R/W quorum stores.

The WARS model: a write is sent to all N replicas; replica i applies it after ``W_i`` and
its ack takes ``A_i``; the coordinator commits at the W-th fastest ``W_i + A_i``. A read
issued ``t`` ms after the commit reaches replica i after ``R_i`` and its reply takes
``S_i``; the coordinator returns the newest of the R fastest replies. Replica i answers
fresh if the write reached it first: ``W_i <= commit + t + R_i``.

So a trial is consistent at t exactly when ``t >= tau = min over the R fastest responders
of (W_i - commit - R_i)``, and t-visibility is the CDF of tau: one Monte Carlo pass gives
the whole curve. Legs are sums of simple distributions, per replica.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from replicalab.history import History
from replicalab.models.base import require
from replicalab.regions import region_set


@dataclass(frozen=True)
class Dist:
    """A latency distribution in ms: ``normal`` (a=mean, b=sd), ``exponential`` (a=mean),
    ``lognormal`` (a=mu, b=sigma of the log), ``constant`` (a), or ``empirical`` (samples).

    Draws are floored at ``floor_ms`` (a network delay is never negative)."""

    kind: str
    a: float = 0.0
    b: float = 0.0
    samples: tuple[float, ...] = ()
    floor_ms: float = 0.0

    def __post_init__(self) -> None:
        require(self.kind in ("normal", "exponential", "lognormal", "constant", "empirical"),
                f"distribution kind {self.kind!r}: use normal, exponential, lognormal, "
                "constant or empirical")
        require(self.kind == "empirical" or (math.isfinite(self.a) and math.isfinite(self.b)),
                "distribution parameters must be finite numbers")
        require(self.kind != "empirical" or len(self.samples) > 0,
                "an empirical distribution needs at least one sample (ms)")
        require(self.kind in ("lognormal",) or (self.a >= 0 and self.b >= 0),
                f"{self.kind} distribution: mean and sd in ms must not be negative")

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Return draws in ms with the given shape."""
        if self.kind == "normal":
            x = rng.normal(self.a, self.b, shape)
        elif self.kind == "exponential":
            x = rng.exponential(self.a, shape) if self.a > 0 else np.zeros(shape)
        elif self.kind == "lognormal":
            x = rng.lognormal(self.a, self.b, shape)
        elif self.kind == "constant":
            x = np.full(shape, self.a)
        else:
            x = rng.choice(np.asarray(self.samples, dtype=float), size=shape)
        return np.maximum(x, self.floor_ms)


Leg = tuple[Dist, ...]
"""One replica's delay for one WARS step: the sum of its distributions."""


@dataclass(frozen=True)
class Wars:
    """Per-replica legs (each list has N entries): write arrival W, write ack A, read
    request R and read response S, all in ms."""

    w: tuple[Leg, ...]
    a: tuple[Leg, ...]
    r: tuple[Leg, ...]
    s: tuple[Leg, ...]

    def __post_init__(self) -> None:
        n = len(self.w)
        require(n >= 1 and len(self.a) == len(self.r) == len(self.s) == n,
                "W, A, R and S need one leg per replica (the same N for all four)")

    @property
    def n(self) -> int:
        """Return the number of replicas N."""
        return len(self.w)

    def draw(self, rng: np.random.Generator, trials: int) -> tuple[np.ndarray, ...]:
        """Return (W, A, R, S) arrays of shape (trials, N) in ms."""
        out = []
        for legs in (self.w, self.a, self.r, self.s):
            cols = [sum((d.sample(rng, (trials,)) for d in leg), np.zeros(trials))
                    for leg in legs]
            out.append(np.stack(cols, axis=1))
        return tuple(out)


def _check_quorum(n: int, r: int, w: int) -> None:
    require(1 <= r <= n, f"read quorum r={r} must be between 1 and N={n}")
    require(1 <= w <= n, f"write quorum w={w} must be between 1 and N={n}")


def visibility_thresholds(m: Wars, r: int, w: int, trials: int, seed: int) -> np.ndarray:
    """Return tau per trial (ms after commit from which a read is consistent; <= 0: always)."""
    _check_quorum(m.n, r, w)
    require(trials >= 1, f"trials={trials} must be at least 1")
    rng = np.random.default_rng(seed)
    W, A, R, S = m.draw(rng, trials)
    commit = np.sort(W + A, axis=1)[:, w - 1]
    first = np.argsort(R + S, axis=1, kind="stable")[:, :r]
    lag = np.take_along_axis(W - commit[:, None] - R, first, axis=1)
    return lag.min(axis=1)


def t_visibility(m: Wars, r: int, w: int, t_ms: Sequence[float], trials: int = 100_000,
                 seed: int = 1) -> np.ndarray:
    """Return P(a read issued t ms after the write committed returns it), for each t."""
    tau = np.sort(visibility_thresholds(m, r, w, trials, seed))
    return np.searchsorted(tau, np.asarray(t_ms, dtype=float), side="right") / len(tau)


def t_for_probability(m: Wars, r: int, w: int, p: float, trials: int = 100_000,
                      seed: int = 1) -> float:
    """Return the ms after commit from which reads are consistent with probability >= p."""
    require(0 < p <= 1, f"probability p={p} must be in (0, 1]")
    tau = visibility_thresholds(m, r, w, trials, seed)
    return max(0.0, float(np.quantile(tau, p)))


def k_staleness(n: int, r: int, w: int, k: int) -> float:
    """Return P(a read returns one of the last k versions), quorums not expanding (Bailis
    et al. eq. 3): 1 - (C(N-W, R) / C(N, R))^k."""
    _check_quorum(n, r, w)
    require(k >= 1, f"k={k} must be at least 1")
    miss = math.comb(n - w, r) / math.comb(n, r)
    return 1.0 - miss**k


def wars_for_sim_quorum(n: int = 3, regions: str = "lan", client_rtt_ms: float = 0.427,
                        client_sd_ms: float = 0.0476, apply_ms: float = 10.0,
                        client_region: str | None = None) -> Wars:
    """Return the WARS legs that ``sim://quorum`` with these parameters draws from.

    One-way legs are normal (RTT/2, sd/sqrt(2)) floored at a tenth of the mean, as in
    the simulator; W adds the replica's exponential apply delay.
    """
    rs = region_set(regions)
    client = client_region or rs.regions[0]
    legs = []
    for i in range(n):
        node = rs.regions[i % len(rs.regions)]
        if node == client:
            mean, sd = client_rtt_ms / 2, client_sd_ms / math.sqrt(2)
        else:
            mean, sd = rs.one_way_ms(client, node)
        legs.append(Dist("normal", mean, sd, floor_ms=mean / 10))
    one_way = tuple((d,) for d in legs)
    apply = Dist("exponential", apply_ms)
    return Wars(w=tuple((d, apply) for d in legs), a=one_way, r=one_way, s=one_way)


def _invert_order_stat_cdf(g: np.ndarray, n: int, k: int) -> np.ndarray:
    """Return F with P(k-th smallest of n iid <= x) = g, solved per point by bisection."""
    lo, hi = np.zeros_like(g), np.ones_like(g)
    for _ in range(40):
        mid = (lo + hi) / 2
        total = sum(math.comb(n, j) * mid**j * (1 - mid) ** (n - j) for j in range(k, n + 1))
        below = total < g
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def _leg_from_order_stat(lat_ms: np.ndarray, n: int, k: int) -> np.ndarray:
    """Return samples of one replica's round trip given samples of the k-th fastest of n."""
    x = np.sort(lat_ms)
    g = (np.arange(1, len(x) + 1) - 0.5) / len(x)
    f = _invert_order_stat_cdf(g, n, k)
    grid = np.linspace(0.0005, 0.9995, 2000)
    # F is only observed up to where it reaches the largest sample; beyond that, repeat it
    return np.interp(grid, f, x)


def fit_wars(h: History, n: int, r: int, w: int) -> Wars:
    """Return WARS legs fitted from the ok read and write latencies of a history.

    Assumes iid replicas and symmetric one-way legs: the read latency is the r-th fastest
    of n round trips R+S, so its CDF is inverted through the order-statistic formula to
    get one round trip, split evenly into R and S; likewise writes give W+A, and W is
    that minus a one-way draw. Good when replicas are alike (one region), rough otherwise.
    """
    _check_quorum(n, r, w)
    types, f = h.types(), h.column("f")
    lat = (h.column("complete_ns") - h.column("invoke_ns")) / 1e6
    reads = lat[(types == 1) & (f == h.f_code("read"))]
    writes = lat[(types == 1) & (f == h.f_code("write"))]
    require(len(reads) >= 100 and len(writes) >= 100,
            "fitting PBS needs at least 100 ok reads and 100 ok writes in the history")
    rtt = _leg_from_order_stat(reads, n, r)
    one_way = Dist("empirical", samples=tuple(np.round(rtt / 2, 6)))
    write_rt = _leg_from_order_stat(writes, n, w)
    apply = Dist("empirical", samples=tuple(np.round(np.maximum(write_rt - rtt, 0), 6)))
    legs_w = tuple((one_way, apply) for _ in range(n))
    legs = tuple((one_way,) for _ in range(n))
    return Wars(w=legs_w, a=legs, r=legs, s=legs)


LEG_BIN_MS = 0.5
"""The grid of a deconvolved one-way leg (ms): well under the 5 ms a verdict resolves, and
coarse enough that 400 round trips put a few samples in most of the round trip's bins."""
LEG_QUANTILES = 2_000
"""How many evenly spaced quantiles of a deconvolved leg its empirical ``Dist`` keeps."""
_SMOOTH = np.array([0.25, 0.5, 0.25])
_EMS_ITERATIONS = 3_000
_EMS_TOLERANCE = 1e-7


def one_way_from_round_trips(round_trips_ms: Sequence[float],
                             bin_ms: float = LEG_BIN_MS) -> np.ndarray:
    """Return samples (ms, ``LEG_QUANTILES`` evenly spaced quantiles, sorted) of the one-way
    leg L whose sum with an independent copy of itself, L + L', is distributed as the
    measured round trips: the round trip's two directions taken as independent and alike.

    The deconvolution assumes no shape for L. L is a probability vector on a grid of
    ``bin_ms`` from half the fastest round trip to half the slowest (L + L' cannot leave
    the range the round trips cover), fitted by maximum likelihood to the round trips binned
    on the same grid with EM: the two directions of each round trip are the missing data, so
    one step moves each leg's weight by how often the round trips it can take part in were
    seen against how often the current L * L makes them,
    ``p(x) <- p(x) * sum_y q(x + y) p(y) / (p * p)(x + y)``, which keeps the weights
    non-negative and summing to one. Each step then averages neighbouring bins 1:2:1 (the
    EMS of Silverman, Jones, Wilson and Nychka, JRSS B 1990): plain EM converges to a few
    spikes (the discrete maximum-likelihood solution), which follow the sample's noise; the
    smoothing, 0.35 ms wide, keeps a leg from resolving detail finer than its grid and
    nothing coarser, so a uniform leg keeps its edges.

    Not the square root of the round trips' characteristic function: where that crosses
    zero (a uniform leg's sinc does, periodically) the root's sign is lost, the principal
    root is not the leg, and the empirical one is noise there. Not the round trip halved
    around its mean with deviations divided by sqrt 2 (the model until 2026-11-29): that
    keeps the variance but also the round trip's shape, the sum of two legs: on links
    delaying each message uniformly by 40 +- 20 ms it gave legs reaching 40 +- 28 ms.
    A round trip spread less than one bin gives half of each round trip (constant: half).
    """
    x = np.maximum(np.asarray(round_trips_ms, dtype=float), 0.0)
    require(x.size >= 1 and bool(np.isfinite(x).all()),
            "every replica needs at least one finite round trip (ms)")
    lo = float(x.min()) / 2
    k = math.ceil((float(x.max()) / 2 - lo) / bin_ms) + 1
    if k <= 1:
        return np.sort(x / 2)
    seen_bins = np.clip(np.rint((x - 2 * lo) / bin_ms).astype(int), 0, 2 * k - 2)
    q = np.bincount(seen_bins, minlength=2 * k - 1) / x.size
    seen = q > 0
    p = np.full(k, 1.0 / k)
    for _ in range(_EMS_ITERATIONS):
        made = np.convolve(p, p)
        ratio = np.where(seen, q / np.where(seen, made, 1.0), 0.0)
        step = np.convolve(p * np.correlate(ratio, p, "valid"), _SMOOTH)[1:-1]
        step /= step.sum()
        done = float(np.abs(step - p).sum()) < _EMS_TOLERANCE
        p = step
        if done:
            break
    # each bin's weight spread evenly over the bin: the leg's CDF is piecewise linear
    edges = lo + bin_ms * (np.arange(k + 1) - 0.5)
    cdf = np.concatenate([[0.0], np.cumsum(p)])
    u = (np.arange(LEG_QUANTILES) + 0.5) / LEG_QUANTILES
    return np.maximum(np.interp(u, cdf / cdf[-1], edges), 0.0)


def wars_from_round_trips(write_rt_ms: Sequence[Sequence[float]],
                          read_rt_ms: Sequence[Sequence[float]], warmup: int = 0) -> Wars:
    """Return WARS legs from measured round trips per replica (ms, one list per replica).

    ``write_rt_ms[i]``: the write coordinator to replica i and back (the request, the apply,
    the ack); ``read_rt_ms[i]``: the read coordinator to replica i and back. Black-box round
    trips cannot tell the way there from the way back, so W and A (R and S) are independent
    draws of the one-way leg whose self-convolution is the round trips' distribution
    (``one_way_from_round_trips``). In the freshness condition ``W_i <= commit + t + R_i``
    the mean legs there cancel (W and R both go out to replica i), so the split moves only
    the spread, not the mean; an asymmetric link (dc3: US-E -> US-W 40 ms, back 41.5 ms)
    puts its way there off by half the difference. The first ``warmup`` round trips of
    every list are left out (connections and the server's code still warming up).
    """
    require(len(write_rt_ms) == len(read_rt_ms) and len(write_rt_ms) >= 1,
            "give one list of write and one of read round trips per replica")
    require(warmup >= 0 and all(len(s) > warmup for s in (*write_rt_ms, *read_rt_ms)),
            f"every list of round trips needs more than warmup={warmup}")
    write_rt_ms = [s[warmup:] for s in write_rt_ms]
    read_rt_ms = [s[warmup:] for s in read_rt_ms]

    def one_way(samples: Sequence[float]) -> Leg:
        legs = one_way_from_round_trips(samples)
        return (Dist("empirical", samples=tuple(np.round(legs, 6).tolist())),)

    w = tuple(one_way(s) for s in write_rt_ms)
    r = tuple(one_way(s) for s in read_rt_ms)
    return Wars(w=w, a=w, r=r, s=r)


def t_visibility_after_ack(m: Wars, r: int, w: int, t_ms: Sequence[float], hop_ms: float,
                           trials: int = 100_000, seed: int = 1,
                           added: Callable[[np.random.Generator, int], np.ndarray] | None
                           = None) -> np.ndarray:
    """Return P(consistent) for a read a client sends t ms after another client saw the
    write acknowledged, for each t: PBS's t counts from the coordinator's commit, which is
    ``hop_ms`` (the ack's way back to the writer plus the read's way to its coordinator)
    before the read reaches its coordinator, so the model is evaluated at t + hop_ms.
    ``added(rng, n)``: n draws (ms) of a delay the machine adds to a write's visibility
    (``NoiseFloor.draw_added``), one per trial on top of the legs' threshold."""
    tau = thresholds_after_ack(m, r, w, trials, seed, added)
    return np.searchsorted(tau, np.asarray(t_ms, dtype=float) + hop_ms, side="right") / len(tau)


def thresholds_after_ack(m: Wars, r: int, w: int, trials: int = 100_000, seed: int = 1,
                         added: Callable[[np.random.Generator, int], np.ndarray] | None
                         = None) -> np.ndarray:
    """Return the sorted thresholds (ms after commit) of :func:`t_visibility_after_ack`,
    each trial's ``added`` delay included: P(consistent) at t is the share at most t +
    hop."""
    tau = visibility_thresholds(m, r, w, trials, seed)
    if added is not None:
        tau = tau + added(np.random.default_rng(seed + 1), trials)
    return np.sort(tau)

"""Order statistics of reply round-trip times: how long a leader waits for a quorum.

A leader that sends to ``n`` followers and needs ``k`` replies waits for the k-th fastest of
``n`` reply RTTs, the k-th order statistic ``X_(k)`` of ``n`` iid draws (for a majority quorum
of ``N`` nodes: ``k = q - 1`` of ``n = N - 1``, the leader votes for itself).

Its density is ``k * C(n, k) * F(x)^(k-1) * (1 - F(x))^(n-k) * f(x)``. The exact mean integrates
``x`` against it; for the normal and lognormal families we substitute ``x = g(z)`` with ``z``
standard normal (``F(x) = Phi(z)``) and integrate over ``z`` by composite Gauss-Legendre
quadrature, which is accurate to about 1e-12 relative and needs only numpy. For an empirical
distribution (an array of measured RTTs, each with mass 1/m) the order statistic is discrete
and its mean is an exact finite sum. Quantiles follow from
``P(X_(k) <= x) = P(Binomial(n, F(x)) >= k)``. A seeded Monte Carlo estimate checks all three.

All times are in milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist
from typing import Protocol

import numpy as np

from replicalab.models.base import require

_Z_LIMIT = 12.0        # Phi(-12) ~ 2e-33: the integrand is negligible beyond +-12 sd
_PANELS = 96           # composite Gauss-Legendre: 96 panels of 16 nodes over [-12, 12]
_NODES = 16
_STD = NormalDist()
_MC_CHUNK = 1 << 21    # values drawn per Monte Carlo chunk (bounds memory at ~16 MB)


class RttDistribution(Protocol):
    """A distribution of round-trip times in ms."""

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Return iid draws in ms with the given shape."""
        ...

    def ppf(self, u: float) -> float:
        """Return the quantile (ms) at probability ``u`` in [0, 1]."""
        ...


@dataclass(frozen=True)
class NormalRtt:
    """Normal RTT with ``mean_ms`` and ``sd_ms`` (not truncated: with the LAN figures the mass
    below zero is under 1e-20)."""

    mean_ms: float
    sd_ms: float

    def __post_init__(self) -> None:
        require(math.isfinite(self.mean_ms),
                f"mean_ms={self.mean_ms} must be a finite number of ms")
        require(math.isfinite(self.sd_ms) and self.sd_ms >= 0,
                f"sd_ms={self.sd_ms} must be a finite standard deviation >= 0 ms")

    def from_z(self, z: np.ndarray) -> np.ndarray:
        """Return the RTTs (ms) at standard-normal scores ``z``."""
        return self.mean_ms + self.sd_ms * z

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Return iid normal draws in ms."""
        return rng.normal(self.mean_ms, self.sd_ms, size)

    def ppf(self, u: float) -> float:
        """Return the quantile (ms) at probability ``u``."""
        return float(self.from_z(np.array(_std_ppf(u))))


@dataclass(frozen=True)
class LogNormalRtt:
    """Lognormal RTT given by its own ``mean_ms`` and ``sd_ms`` (not the log-space ones):
    ``log X ~ N(m, s^2)`` with ``s^2 = log(1 + sd^2/mean^2)``, ``m = log(mean) - s^2/2``."""

    mean_ms: float
    sd_ms: float

    def __post_init__(self) -> None:
        require(math.isfinite(self.mean_ms) and self.mean_ms > 0,
                f"mean_ms={self.mean_ms} must be a positive number of ms for a lognormal RTT")
        require(math.isfinite(self.sd_ms) and self.sd_ms >= 0,
                f"sd_ms={self.sd_ms} must be a finite standard deviation >= 0 ms")

    @property
    def log_sigma(self) -> float:
        """Return s, the sd of log X."""
        return math.sqrt(math.log1p((self.sd_ms / self.mean_ms) ** 2))

    @property
    def log_mu(self) -> float:
        """Return m, the mean of log X (log ms)."""
        return math.log(self.mean_ms) - self.log_sigma ** 2 / 2

    def from_z(self, z: np.ndarray) -> np.ndarray:
        """Return the RTTs (ms) at standard-normal scores ``z``."""
        return np.exp(self.log_mu + self.log_sigma * z)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Return iid lognormal draws in ms."""
        return rng.lognormal(self.log_mu, self.log_sigma, size)

    def ppf(self, u: float) -> float:
        """Return the quantile (ms) at probability ``u``."""
        return float(self.from_z(np.array(_std_ppf(u))))


@dataclass(frozen=True, eq=False)
class EmpiricalRtt:
    """The empirical distribution of measured RTTs ``samples_ms`` (each has mass 1/m)."""

    samples_ms: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        xs = np.sort(np.asarray(self.samples_ms, dtype=float).ravel())
        require(xs.size > 0, "samples_ms is empty; pass at least one measured RTT in ms")
        require(bool(np.isfinite(xs).all()),
                "samples_ms holds NaN or infinite values; pass finite RTTs in ms")
        object.__setattr__(self, "samples_ms", xs)  # kept sorted: sums and quantiles need it

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Return iid draws (with replacement) from the samples, in ms."""
        return self.samples_ms[rng.integers(0, self.samples_ms.size, size)]

    def ppf(self, u: float) -> float:
        """Return the smallest sample x with F(x) >= u (ms)."""
        m = self.samples_ms.size
        i = min(max(math.ceil(u * m - 1e-12) - 1, 0), m - 1)
        return float(self.samples_ms[i])


@dataclass(frozen=True)
class OrderStatEstimate:
    """A Monte Carlo estimate of the k-th order statistic (all ms)."""

    mean_ms: float
    stderr_ms: float
    p50_ms: float
    p99_ms: float
    draws: int


def _check_kn(k: int, n: int) -> None:
    require(isinstance(n, int | np.integer) and n >= 1,
            f"n={n} must be a whole number of draws (replies) >= 1")
    require(isinstance(k, int | np.integer) and 1 <= k <= n,
            f"k={k} must be a whole number in 1..n={n} (k-th fastest of n replies)")


def _std_ppf(u: float) -> float:
    if u <= 0.0:
        return -_Z_LIMIT
    if u >= 1.0:
        return _Z_LIMIT
    return _STD.inv_cdf(u)


_erfc = np.frompyfunc(math.erfc, 1, 1)


def _phi_cdf(z: np.ndarray) -> np.ndarray:
    """Standard normal CDF, accurate in both tails (numpy has no erf)."""
    return 0.5 * _erfc(-z / math.sqrt(2.0)).astype(float)


@lru_cache(maxsize=1)
def _z_grid() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (z, weight * phi(z), Phi(z), 1 - Phi(z), log phi) on the quadrature grid."""
    x, w = np.polynomial.legendre.leggauss(_NODES)
    edges = np.linspace(-_Z_LIMIT, _Z_LIMIT, _PANELS + 1)
    half = (edges[1:] - edges[:-1])[:, None] / 2
    mid = (edges[1:] + edges[:-1])[:, None] / 2
    z = (mid + half * x).ravel()
    weights = (half * w).ravel()
    pdf = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    return z, weights * pdf, _phi_cdf(z), _phi_cdf(-z), np.log(pdf)


def _log_order_weight(k: int, n: int, cdf: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """log of k*C(n,k)*F^(k-1)*(1-F)^(n-k), computed in logs so large n does not overflow."""
    log_c = math.log(k) + math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    with np.errstate(divide="ignore"):
        return log_c + (k - 1) * np.log(cdf) + (n - k) * np.log(sf)


def _binom_at_least(k: int, n: int, u: np.ndarray) -> np.ndarray:
    """Return P(Binomial(n, u) >= k) for each u in [0, 1] (= P(X_(k) <= x) when u = F(x))."""
    u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
    j = np.arange(k, n + 1)[:, None]
    log_c = (math.lgamma(n + 1) - np.array([math.lgamma(v + 1) for v in j.ravel()])[:, None]
             - np.array([math.lgamma(n - v + 1) for v in j.ravel()])[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.exp(log_c + j * np.log(u) + (n - j) * np.log1p(-u))
    terms = np.nan_to_num(terms, nan=0.0)
    out = terms.sum(axis=0)
    out = np.where(u >= 1.0, 1.0, np.where(u <= 0.0, 0.0, out))
    return np.clip(out, 0.0, 1.0)


def order_stat_mean_ms(dist: RttDistribution, k: int, n: int) -> float:
    """Return the exact mean (ms) of the k-th smallest of ``n`` iid draws from ``dist``.

    Normal/lognormal: numerical integration of ``x`` times the order-statistic density;
    empirical: the exact finite sum over the sorted samples.
    """
    _check_kn(k, n)
    if isinstance(dist, EmpiricalRtt):
        xs = dist.samples_ms
        m = xs.size
        g = _binom_at_least(k, n, np.arange(m + 1) / m)
        return float(np.dot(xs, np.diff(g)))
    from_z = getattr(dist, "from_z", None)
    require(from_z is not None,
            f"{type(dist).__name__} has no exact integration; use NormalRtt, LogNormalRtt "
            "or EmpiricalRtt, or order_stat_monte_carlo")
    z, wpdf, cdf, sf, _ = _z_grid()
    weight = np.exp(_log_order_weight(k, n, cdf, sf))
    return float(np.sum(from_z(z) * weight * wpdf))


def order_stat_quantile_ms(dist: RttDistribution, k: int, n: int, q: float) -> float:
    """Return the ``q``-quantile (ms, q in [0, 1]) of the k-th smallest of ``n`` draws.

    Solves ``P(Binomial(n, u) >= k) = q`` for u by bisection and returns ``dist.ppf(u)``.
    """
    _check_kn(k, n)
    require(0.0 <= q <= 1.0, f"q={q} must be a probability in [0, 1] (0.99 for p99)")
    lo, hi = 0.0, 1.0
    for _ in range(80):  # 80 halvings: u to ~1e-24, far below float resolution of the RTT
        mid = (lo + hi) / 2
        if _binom_at_least(k, n, np.array([mid]))[0] < q:
            lo = mid
        else:
            hi = mid
    return dist.ppf(hi)


def order_stat_monte_carlo(dist: RttDistribution, k: int, n: int, draws: int,
                           rng: np.random.Generator | int) -> OrderStatEstimate:
    """Return a Monte Carlo estimate (ms) of the k-th smallest of ``n`` draws from ``dist``:
    mean, its standard error, median and p99 over ``draws`` repetitions (seeded)."""
    _check_kn(k, n)
    require(draws >= 2, f"draws={draws} must be at least 2 repetitions")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    per_chunk = max(1, _MC_CHUNK // n)
    parts = []
    left = draws
    while left > 0:
        m = min(per_chunk, left)
        x = dist.sample(gen, (m, n))
        parts.append(np.partition(x, k - 1, axis=1)[:, k - 1])
        left -= m
    v = np.concatenate(parts)
    return OrderStatEstimate(float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)),
                             float(np.percentile(v, 50)), float(np.percentile(v, 99)),
                             int(v.size))


def quorum_rtt_mean_ms(dist: RttDistribution, contacted: int, needed: int) -> float:
    """Return the mean wait (ms) for the ``needed``-th fastest reply of ``contacted`` peers;
    0 when no reply is needed (the leader's own vote is enough)."""
    require(isinstance(needed, int | np.integer) and 0 <= needed <= contacted,
            f"needed={needed} replies must be in 0..contacted={contacted}")
    return 0.0 if needed == 0 else order_stat_mean_ms(dist, needed, contacted)

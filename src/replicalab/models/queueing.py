"""Marchal's G/G/1 mean waiting time, the queue formula of seed 002's Paxos models (part 2),
written once for every model that uses it (pure).

Marchal's approximation scales the M/M/1 wait by how variable arrivals and service are:
``w = rho s / (1 - rho) * marchal_factor``, which for Poisson arrivals and exponential
service (both squared coefficients of variation 1) is exactly M/M/1. ``paxos_lan`` and
``pigpaxos`` take the single-server wait; ``paxos_wan`` scales Erlang C's M/M/c wait by the
same factor.
"""

from __future__ import annotations

import math


def marchal_factor(rho: float, *, ca2: float, cs2: float) -> float:
    """Return Marchal's variability factor (dimensionless) at utilisation ``rho``:
    ``(1 + Cs2)(Ca2 + Cs2 rho^2) / (2 (1 + Cs2 rho^2))``; ``ca2``/``cs2`` are the squared
    coefficients of variation of inter-arrival and service times (1 and 1: M/M/1)."""
    return (1 + cs2) * (ca2 + cs2 * rho * rho) / (2 * (1 + cs2 * rho * rho))


def marchal_wait_ms(*, rate_per_ms: float, service_ms: float, ca2: float, cs2: float) -> float:
    """Return Marchal's G/G/1 mean wait in ms before service (inf at utilisation >= 1, 0
    when nothing arrives) for ``rate_per_ms`` arrivals per ms of mean service ``service_ms``
    ms: ``w = rho^2 (1 + Cs2)(Ca2 + Cs2 rho^2) / (2 R (1 - rho)(1 + Cs2 rho^2))`` with
    ``rho = R * service_ms``, i.e. the M/M/1 wait times :func:`marchal_factor`."""
    rho = rate_per_ms * service_ms
    if rho <= 0:
        return 0.0
    if rho >= 1:
        return math.inf
    return rho * service_ms / (1 - rho) * marchal_factor(rho, ca2=ca2, cs2=cs2)

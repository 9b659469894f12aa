"""The ``toy-mm1`` protocol model: one M/M/1 server, its closed form and a discrete-event
twin (``replicalab model toy-mm1``, ``replicalab model validate --model toy-mm1``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from replicalab.models.base import Curve, point
from replicalab.models.registry import ModelSpec


@dataclass(frozen=True)
class MM1Params:
    """Poisson arrivals, exponential service of mean ``service_ms``."""

    service_ms: float = 1.0

    def __post_init__(self) -> None:
        if not self.service_ms > 0:
            raise ValueError(f"service_ms {self.service_ms} must be positive")


def curve(p: MM1Params, loads: list[float]) -> Curve:
    """Return the mean time in system s / (1 - rho) (ms) at each load (requests/s)."""
    pts = [point(lam, p.service_ms / (1 - rho) if rho < 1 else math.inf, rho)
           for lam in loads for rho in [lam * p.service_ms / 1000]]
    return Curve(f"M/M/1 s={p.service_ms:g} ms", pts, 1000 / p.service_ms)


def _sojourn_ms(p: MM1Params, lam: float, n: int, rng: np.random.Generator
                ) -> tuple[np.ndarray, float]:
    arrive = np.cumsum(rng.exponential(1000 / lam, n))
    service = rng.exponential(p.service_ms, n)
    done, last = np.empty(n), 0.0
    for i in range(n):  # FIFO: each departs at max(arrival, last departure) + service
        last = max(arrive[i], last) + service[i]
        done[i] = last
    return done - arrive, last


def twin(p: MM1Params, loads: list[float], seed: int, rounds: int) -> Curve:
    """Return the simulated curve: mean time in system per load, and the throughput the
    server sustains under ten times its capacity."""
    rng = np.random.default_rng(seed)
    pts = [point(lam, float(_sojourn_ms(p, lam, rounds, rng)[0].mean()),
                 lam * p.service_ms / 1000) for lam in loads]
    _, end_ms = _sojourn_ms(p, 10_000 / p.service_ms, rounds, rng)
    return Curve(f"M/M/1 twin s={p.service_ms:g} ms", pts, rounds / end_ms * 1000)


SPEC = ModelSpec("toy-mm1", "A toy: one M/M/1 server", "replicalab model toy-mm1",
                 MM1Params, curve, twin,
                 lambda: [("s=1 ms", MM1Params(1.0), [100.0, 300.0, 500.0, 900.0])])

"""Seed 002's request streams for the placement simulator, seeded and deterministic.

Every stream has ``requests`` accesses at uniformly random times over ``duration_s`` (a
Poisson stream conditioned on its count), each from a region to an object:

* ``locality``: a region ``z`` (uniform) draws object ids from N(z * s, s / 2) with
  ``s = objects / regions`` (seed: N(200z, 100) for 3,000 objects, 15 regions), redrawn when
  outside the ids: each region mostly uses its own band of objects; objects between two bands
  are shared by regions with adjacent ids.
* ``shared``: each object is used equally by 1 to 3 random regions (seed: "shared equally with
  up to 3 random regions"); an access picks an object, then one of its sharers.
* ``drift``: ``locality`` whose means move, linearly from 20 % to 80 % of the run, to the band
  of each region's geographically nearest region (lowest RTT): by the end region ``z`` uses
  the objects its nearest neighbour used at the start. Neighbours are geographic, not by id, so
  a region may move several ids away (ap-south-1 to ap-southeast-1) and two regions may end on
  one band (us-east-2 and ca-central-1 both on us-east-1's): the shapes an id-ordered EMA
  cannot follow, which is the seed's drift result.
* ``skew``: 80 % of accesses come from the first region, the rest evenly from the others,
  objects uniform (seed: 5 regions, 1,000 objects, capacity 25 % per region).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replicalab.placement.matrix import RegionMatrix, nearest_order
from replicalab.placement.policies import Requests

WORKLOADS = ("locality", "shared", "drift", "skew")
SKEW_REGIONS = "aws15:us-east-1,us-west-2,us-west-1,eu-west-1,ap-northeast-1"
DRIFT_START, DRIFT_END = 0.2, 0.8  # fractions of the run over which the bands move
HOT_SHARE = 0.8  # skew: share of accesses from the first region
MAX_SHARERS = 3
_REDRAWS = 64  # bounded: a draw outside the ids is redrawn at most this often, then clipped


@dataclass(frozen=True)
class WorkloadSpec:
    """One experiment's stream: workload name, regions (a ``region_matrix`` spec), objects,
    requests, duration in s, seed, and the balance share its default policy list uses."""

    name: str
    regions: str
    objects: int
    requests: int
    duration_s: float
    seed: int
    balance: float | None = None


DEFAULTS: dict[str, WorkloadSpec] = {
    "locality": WorkloadSpec("locality", "aws15", 3000, 1_000_000, 300.0, 1),
    "shared": WorkloadSpec("shared", "aws15", 3000, 1_000_000, 300.0, 1),
    "drift": WorkloadSpec("drift", "aws15", 3000, 1_000_000, 300.0, 1),
    "skew": WorkloadSpec("skew", SKEW_REGIONS, 1000, 1_000_000, 300.0, 1, balance=0.25),
}


def check(name: str) -> None:
    """Raise ValueError naming the workloads if ``name`` is not one."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; use one of {', '.join(WORKLOADS)}")


def _banded(rng: np.random.Generator, z: np.ndarray, shift: np.ndarray | float,
            n_objects: int, n_regions: int) -> np.ndarray:
    spacing = n_objects / n_regions
    mean = (z + shift) * spacing
    obj = np.rint(rng.normal(mean, spacing / 2))
    for _ in range(_REDRAWS):
        bad = np.flatnonzero((obj < 0) | (obj >= n_objects))
        if bad.size == 0:
            break
        mean_bad = mean[bad] if np.ndim(mean) else mean
        obj[bad] = np.rint(rng.normal(mean_bad, spacing / 2))
    return np.clip(obj, 0, n_objects - 1).astype(np.int64)


@dataclass(frozen=True)
class Stream:
    """A generated stream and, for ``shared``, each object's sharing regions (int64
    objects × 3, -1 where an object has fewer than 3)."""

    requests: Requests
    sharers: np.ndarray | None = None


def drift_targets(regions: RegionMatrix) -> np.ndarray:
    """Return int64 per region: the region whose band it uses at the end of ``drift``, its
    nearest other region by RTT (itself when it is the only one)."""
    order = nearest_order(regions.rtt_ms)
    return order[:, 1] if regions.size > 1 else order[:, 0]


def generate(name: str, regions: RegionMatrix, n_objects: int, n_requests: int,
             duration_s: float, seed: int) -> Stream:
    """Return the request stream of workload ``name`` over ``regions`` (times in ms,
    sorted)."""
    check(name)
    n_regions = regions.size
    if n_objects < 1 or n_requests < 0 or n_regions < 1 or not duration_s > 0:
        raise ValueError("a workload needs at least 1 object and region, requests >= 0 and a "
                         "positive duration")
    rng = np.random.default_rng([seed, WORKLOADS.index(name)])
    t_ms = np.sort(rng.uniform(0.0, duration_s * 1000.0, n_requests))
    sharers = None
    if name in ("locality", "drift"):
        z = rng.integers(0, n_regions, n_requests)
        shift: np.ndarray | float = 0.0
        if name == "drift":
            frac = t_ms / (duration_s * 1000.0)
            moved = np.clip((frac - DRIFT_START) / (DRIFT_END - DRIFT_START), 0.0, 1.0)
            shift = moved * (drift_targets(regions)[z] - z)
        obj = _banded(rng, z, shift, n_objects, n_regions)
        region = z
    elif name == "shared":
        k = rng.integers(1, min(MAX_SHARERS, n_regions) + 1, n_objects)
        order = np.argsort(rng.random((n_objects, n_regions)), axis=1)[:, :MAX_SHARERS]
        obj = rng.integers(0, n_objects, n_requests)
        pick = np.floor(rng.random(n_requests) * k[obj]).astype(np.int64)
        region = order[obj, pick]
        sharers = np.where(np.arange(order.shape[1]) < k[:, None], order, -1)
    else:  # skew
        obj = rng.integers(0, n_objects, n_requests)
        hot = rng.random(n_requests) < HOT_SHARE
        others = rng.integers(1, max(n_regions, 2), n_requests) if n_regions > 1 else 0
        region = np.where(hot | (n_regions == 1), 0, others)
    reqs = Requests(np.asarray(obj, np.int64), np.asarray(region, np.int64), t_ms)
    return Stream(reqs, sharers)


def initial_owners(n_regions: int, n_objects: int, seed: int) -> np.ndarray:
    """Return each object's starting region: uniformly random (seed: "initially assigned to a
    random region"), the same for every policy of a run."""
    rng = np.random.default_rng([seed, 99])
    return rng.integers(0, n_regions, n_objects).astype(np.int64)

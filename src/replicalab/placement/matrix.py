"""The region matrix the placement policies and simulator work on.

A ``RegionMatrix`` is a region set (``regions.py``) as a numpy array: ``rtt_ms[a, b]`` is the
round trip from a client in region ``a`` to an owner in region ``b``, so an access from ``a``
to an object owned in ``b`` costs ``rtt_ms[a, b]`` ms. The diagonal is the intra-region round
trip: the matrix's own diagonal where it has one (``aws15``), else the set's intra-region RTT.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replicalab.regions import RegionSet, region_set


@dataclass(frozen=True, eq=False)
class RegionMatrix:
    """Region names in id order and their RTTs in ms (``rtt_ms[from, to]``, float64 R×R)."""

    name: str
    regions: tuple[str, ...]
    rtt_ms: np.ndarray

    @property
    def size(self) -> int:
        """Return the number of regions."""
        return len(self.regions)

    @classmethod
    def from_set(cls, rs: RegionSet, subset: tuple[str, ...] | None = None) -> RegionMatrix:
        """Return the matrix of ``rs`` (or of the regions ``subset`` of it, in that order);
        ValueError names a region missing from the set."""
        names = rs.regions if subset is None else subset
        if len(set(names)) != len(names) or not names:
            raise ValueError(f"regions of {rs.name!r} must be distinct and at least one; "
                             f"use names from {', '.join(rs.regions)}")
        idx = []
        for r in names:
            if r not in rs.regions:
                raise ValueError(f"region {r!r} is not in the {rs.name} matrix; use one of "
                                 f"{', '.join(rs.regions)}")
            idx.append(rs.regions.index(r))
        full = np.asarray(rs.rtt_ms, dtype=np.float64)
        m = full[np.ix_(idx, idx)].copy()
        diag = np.diagonal(m).copy()
        np.fill_diagonal(m, np.where(diag > 0, diag, rs.intra_rtt_ms))
        m.setflags(write=False)
        name = rs.name if subset is None else f"{rs.name}:{','.join(names)}"
        return cls(name, tuple(names), m)

    @classmethod
    def of(cls, rtt_ms: np.ndarray | list[list[float]], name: str = "custom") -> RegionMatrix:
        """Return a matrix from raw RTTs in ms (regions named r0, r1, ...); for tests."""
        m = np.array(rtt_ms, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0 or (m < 0).any():
            raise ValueError("an RTT matrix must be square, non-empty and non-negative")
        m.setflags(write=False)
        return cls(name, tuple(f"r{i}" for i in range(m.shape[0])), m)


def region_matrix(spec: str) -> RegionMatrix:
    """Return the matrix named by ``spec``: a region set (``aws15``) or a set with a subset of
    its regions (``aws15:us-east-1,eu-west-1``). ValueError names unknown sets and regions."""
    name, _, rest = spec.partition(":")
    rs = region_set(name.strip())
    if not rest:
        return RegionMatrix.from_set(rs)
    subset = tuple(r.strip() for r in rest.split(",") if r.strip())
    return RegionMatrix.from_set(rs, subset)


def nearest_order(rtt_ms: np.ndarray) -> np.ndarray:
    """Return int64 R×R: row ``t`` is ``t`` followed by the other regions by RTT from ``t``,
    nearest first, ties by region id (the load-balancing filter's "next best" after ``t``)."""
    key = np.array(rtt_ms, dtype=np.float64)
    np.fill_diagonal(key, -np.inf)  # the target itself always comes first
    return np.argsort(key, axis=1, kind="stable").astype(np.int64)

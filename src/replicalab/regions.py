"""Named region sets and their round-trip-time matrices (data, with sources).

One-way delay from region ``a`` to ``b`` is taken as half the RTT measured from ``a``
(asymmetric matrices keep their asymmetry), with standard deviation ``sd / sqrt(2)`` so
that a round trip of two independent one-way delays has the stated RTT deviation; inside
one region the set's intra-region figures (``lan`` by default) apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, slots=True)
class RegionSet:
    """Regions in a fixed order with RTTs in ms (``rtt_ms[i][j]``: measured from i to j)."""

    name: str
    regions: tuple[str, ...]
    rtt_ms: tuple[tuple[float, ...], ...]
    sd_ms: float
    source: str
    intra_rtt_ms: float = 0.427
    intra_sd_ms: float = 0.0476

    @classmethod
    def from_matrix(cls, name: str, regions: tuple[str, ...] | list[str],
                    rtt_ms: list[list[float]] | tuple[tuple[float, ...], ...],
                    sd_ms: float = 0.0, source: str = "user supplied",
                    intra_rtt_ms: float = 0.427, intra_sd_ms: float = 0.0476) -> RegionSet:
        """Return a validated RegionSet (ValueError names a non-square or negative matrix)."""
        n = len(regions)
        if len(set(regions)) != n or n == 0:
            raise ValueError(f"region set {name!r}: region names must be unique and non-empty")
        if len(rtt_ms) != n or any(len(row) != n for row in rtt_ms):
            raise ValueError(f"region set {name!r}: the RTT matrix must be {n}x{n}, "
                             "one row and one column per region")
        flat = [float(x) for row in rtt_ms for x in row]
        if any(not x >= 0 for x in flat) or sd_ms < 0 or intra_rtt_ms <= 0 or intra_sd_ms < 0:
            raise ValueError(f"region set {name!r}: RTTs and standard deviations must be "
                             "non-negative numbers (intra-region RTT positive)")
        return cls(name, tuple(regions), tuple(tuple(float(x) for x in row) for row in rtt_ms),
                   float(sd_ms), source, float(intra_rtt_ms), float(intra_sd_ms))

    def index(self, region: str) -> int:
        """Return the position of ``region`` (raises ValueError naming the valid ones)."""
        try:
            return self.regions.index(region)
        except ValueError:
            raise ValueError(
                f"unknown region {region!r} in region set {self.name!r}; "
                f"use one of {', '.join(self.regions)}") from None

    def one_way_ms(self, src: str, dst: str) -> tuple[float, float]:
        """Return (mean, sd) of the one-way delay src -> dst in ms."""
        if src == dst:
            return self.intra_rtt_ms / 2, self.intra_sd_ms / math.sqrt(2)
        return self.rtt_ms[self.index(src)][self.index(dst)] / 2, self.sd_ms / math.sqrt(2)


LAN_RTT_MS = 0.427
LAN_SD_MS = 0.0476
# Source: seed 002 (Cloud Latency Tester, intra-region AWS measurements): mean 0.427 ms, sd 0.0476.

_AWS5 = (
    # VA     OR     CA     IR     JP    -- seed 002, "Modeling Paxos Performance" part 3 (WAN)
    (0.0, 86.0, 65.0, 80.0, 156.0),
    (86.0, 0.0, 28.0, 154.0, 131.0),
    (65.0, 28.0, 0.0, 137.0, 115.0),
    (80.0, 154.0, 137.0, 0.0, 218.0),
    (156.0, 131.0, 115.0, 218.0, 0.0),
)

_DC3 = (
    # US-E   US-W   EU    -- seed 004, Table I (measured on EC2, asymmetric; row = from)
    (0.0, 80.0, 96.0),
    (83.0, 0.0, 163.0),
    (93.0, 161.0, 0.0),
)



def _csv_region_set(name: str, filename: str, sd_ms: float) -> RegionSet:
    """Return the region set in ``replicalab/data/<filename>``: ``#`` header lines (the
    source, kept as the set's ``source``), a ``from,<region>...`` header row, then one row of
    RTTs in ms per region (row = from). The diagonal keeps the file's intra-region RTT."""
    text = resources.files("replicalab").joinpath("data", filename).read_text(encoding="utf-8")
    lines = text.splitlines()
    source = " ".join(x.lstrip("#").strip() for x in lines if x.startswith("#"))
    rows = [x.split(",") for x in lines if x.strip() and not x.startswith("#")]
    regions = tuple(rows[0][1:])
    if [r[0] for r in rows[1:]] != list(regions):
        raise ValueError(f"{filename}: row labels must repeat the header's regions in order")
    return RegionSet.from_matrix(name, regions, [[float(x) for x in r[1:]] for r in rows[1:]],
                                 sd_ms, source)


REGION_SETS: dict[str, RegionSet] = {
    "aws5": RegionSet("aws5", ("VA", "OR", "CA", "IR", "JP"), _AWS5, 2.0,
                      "seed 002, Paxos WAN model; sd 2 ms per pair"),
    "dc3": RegionSet("dc3", ("US-E", "US-W", "EU"), _DC3, 2.0,
                     "seed 004, Table I (measured, asymmetric); sd 2 ms assumed"),
    "lan": RegionSet("lan", ("local",), ((0.0,),), LAN_SD_MS,
                     "seed 002, intra-region RTT mean 0.427 ms, sd 0.0476 ms"),
    # seed 002, data migration (15 AWS regions); the file's header names its source. sd 0:
    # the sample gives means only, and the placement simulator uses means.
    "aws15": _csv_region_set("aws15", "aws15-rtt.csv", 0.0),
}


def region_set(name: str) -> RegionSet:
    """Return the region set called ``name`` (ValueError lists the known names)."""
    try:
        return REGION_SETS[name]
    except KeyError:
        raise ValueError(
            f"unknown region set {name!r}; use one of {', '.join(sorted(REGION_SETS))}") from None

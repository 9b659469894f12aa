"""What each store's documentation promises, property by property, with where it says so.

The promises of a store kind are part of its record (``cluster/kinds.py``); this module adds
seed 001's goals (latency, geography) and the simulated store's rules, and answers "what
does this store promise for this property?" for a scorecard cell. A cell shows the measured
value beside the promise; the colour says whether the value meets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from replicalab.cluster.kinds import DurabilityVariant, Promise, StoreKind

_SEED003 = "seed 003 §4.3 (SimpleDB as hypothesised) and docs/simulator.md"
SIM = Promise("the simulated scheme's own rules (no documentation to promise more)", _SEED003)
LATENCY = Promise("seed 001's goals: reads p99 under 50 ms, writes p99 under 500 ms",
                  "seed 001 (object-store microbenchmarks)")
GEOGRAPHY = Promise("replicas in every region serve local reads; a write pays the round "
                    "trips its replication protocol needs", "seed 001 (geographic "
                    "distribution) and docs/real-stores.md")
UNDOCUMENTED = Promise("no documented promise recorded for this store", "its store kind record")


@dataclass(frozen=True)
class SimRules:
    """What a sim:// scheme's own rules (docs/simulator.md) promise where a store kind's
    record would: whether an eventual read is served by a replica in the client's region
    (so a cut-off region keeps reading), and what node 0, the node a "leader crash" takes,
    is to the scheme."""

    local_reads: bool
    leader_role: str
    leaderless: bool


def sim_rules(params: Mapping[str, Any], regions: tuple[str, ...]) -> SimRules:
    """Return the rules of a simulated store from its effective parameters (``StoreInfo.
    params``) and the regions it spans: ``primary`` reads at the nearest node behind a
    primary (local where every region holds a node); ``quorum`` has no leader (the client
    coordinates) and reads locally only with r=1 and a replica in every region (replicas
    go round-robin over the regions); ``simpledb`` reads at a replica chosen at random
    behind a primary."""
    scheme = params.get("scheme")
    if scheme == "quorum":
        return SimRules(params.get("r") == 1 and params.get("n", 0) >= len(regions),
                        "replica", True)
    if scheme == "primary":
        return SimRules(set(regions) <= set(params.get("nodes", {}).values()), "primary",
                        False)
    return SimRules(False, "primary", False)


def kind_promise(kind: StoreKind | None, prop: str) -> Promise:
    """Return what ``kind`` (None: a sim:// store) promises for a property graded against
    its documentation."""
    if kind is None:
        return SIM
    return kind.promise(prop) or UNDOCUMENTED


__all__ = ["GEOGRAPHY", "LATENCY", "SIM", "DurabilityVariant", "Promise", "SimRules",
           "kind_promise", "sim_rules"]

"""What each store's documentation promises, property by property, with where it says so.

The promises of a store kind are part of its record (``cluster/kinds.py``); this module adds
seed 001's goals (latency, geography) and the simulated store's rules, and answers "what
does this store promise for this property?" for a scorecard cell. A cell shows the measured
value beside the promise; the colour says whether the value meets it.
"""

from __future__ import annotations

from replicalab.cluster.kinds import DurabilityVariant, Promise, StoreKind

_SEED003 = "seed 003 §4.3 (SimpleDB as hypothesised) and docs/simulator.md"
SIM = Promise("the simulated scheme's own rules (no documentation to promise more)", _SEED003)
LATENCY = Promise("seed 001's goals: reads p99 under 50 ms, writes p99 under 500 ms",
                  "seed 001 (object-store microbenchmarks)")
GEOGRAPHY = Promise("replicas in every region serve local reads; a write pays the round "
                    "trips its replication protocol needs", "seed 001 (geographic "
                    "distribution) and docs/real-stores.md")
UNDOCUMENTED = Promise("no documented promise recorded for this store", "its store kind record")


def kind_promise(kind: StoreKind | None, prop: str) -> Promise:
    """Return what ``kind`` (None: a sim:// store) promises for a property graded against
    its documentation."""
    if kind is None:
        return SIM
    return kind.promise(prop) or UNDOCUMENTED


__all__ = ["GEOGRAPHY", "LATENCY", "SIM", "DurabilityVariant", "Promise", "kind_promise"]

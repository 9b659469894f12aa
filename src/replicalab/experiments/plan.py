"""What a scorecard runs: the stores it takes (resolved once from ``--kinds``) and how long
each run lasts in a quick and a full scorecard. The properties are in
``experiments/properties/``."""

from __future__ import annotations

from dataclasses import dataclass

from replicalab.cluster import kinds
from replicalab.cluster.kinds import StoreKind
from replicalab.errors import ParameterError

READ_GOAL_P99_MS = 50.0
WRITE_GOAL_P99_MS = 500.0
"""Seed 001's goals: reads under 50 ms and writes under 500 ms at the 99th percentile."""
RENAME = "give the scorecard another --name"
"""What a scorecard can do when a running cluster has the name of one it starts."""


@dataclass(frozen=True)
class Plan:
    """Durations (s) and sizes of every run behind a scorecard."""

    quick: bool
    staleness_s: float  # each staleness probe (eventual, consistent, same client)
    staleness_write_interval_s: float  # between the writes of those probes
    register_s: float  # each register test (eventual and consistent reads)
    latency_ops: int  # operations per variant per region
    fault_probe_s: float  # each availability probe
    fault_at_s: float  # when its fault starts
    fault_for_s: float  # how long it lasts
    txn_s: float  # each list-append run (per isolation level) of transactionality
    txn_clients: int  # its concurrent clients
    txn_keys: int  # its hot key set (fewer keys, more contention)
    durability_s: float  # writes before the kill -9 / power loss (it comes at the end)
    durability_write_interval_s: float
    all_cut_regions: bool  # cut off each region in turn (else the readers' region only)

    def to_json(self) -> dict[str, float | int | bool]:
        """Return the plan as saved in scorecard.json."""
        return dict(self.__dict__)


QUICK = Plan(quick=True, staleness_s=4.0, staleness_write_interval_s=0.5, register_s=3.0,
             latency_ops=8, fault_probe_s=6.0,
             fault_at_s=1.5, fault_for_s=3.0, txn_s=5.0, txn_clients=6, txn_keys=6,
             durability_s=3.0, durability_write_interval_s=0.005, all_cut_regions=False)
FULL = Plan(quick=False, staleness_s=20.0, staleness_write_interval_s=1.0, register_s=15.0,
            latency_ops=50,
            fault_probe_s=20.0, fault_at_s=5.0, fault_for_s=8.0, txn_s=20.0,
            txn_clients=6, txn_keys=6, durability_s=5.0, durability_write_interval_s=0.005,
            all_cut_regions=True)


@dataclass(frozen=True)
class Subject:
    """One row of the chart, resolved once from ``--kinds``: a store kind replicalab starts
    as a cluster, or (``kind`` None) a simulated store given by its sim:// URL."""

    label: str  # the row's name: the kind's display name or the sim:// URL
    kind: StoreKind | None = None

    @property
    def simulated(self) -> bool:
        """Return whether this is a sim:// store (no cluster, no disk)."""
        return self.kind is None


def resolve_store(text: str) -> Subject:
    """Return the store ``text`` names: a sim:// URL or a kind in any accepted spelling
    (ValueError naming what is accepted)."""
    if text.startswith("sim://"):
        return Subject(text)
    try:
        kind = kinds.resolve(text)
    except ValueError:
        raise ParameterError("kinds", f"{text!r} is not a store the scorecard knows; use "
                                      f"{kinds.help_text()} or a sim:// URL such as "
                                      "'sim://primary?regions=dc3'") from None
    return Subject(kind.name, kind)


def parse_kinds(text: str) -> tuple[Subject, ...]:
    """Return the stores in ``--kinds``: cluster kinds and ``sim://`` URLs (ValueError naming
    an unknown one and what is accepted)."""
    out = [resolve_store(k) for k in (x.strip() for x in text.split(",")) if k]
    if not out:
        raise ParameterError("kinds", f"is empty; give e.g. {','.join(kinds.names())}")
    if len({s.label for s in out}) != len(out):
        raise ParameterError("kinds", "names a store twice; name each once")
    return tuple(out)

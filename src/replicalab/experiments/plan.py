"""What a scorecard measures: its properties, the stores it may take, and how long each run
lasts in a quick and a full scorecard."""

from __future__ import annotations

from dataclasses import dataclass

PROPERTIES = ("latency", "durability", "availability", "consistency", "transactionality",
              "geography")
"""The columns of seed 001's chart, in its order (consistency added from seed 003)."""

CLUSTER_KINDS = ("redis", "postgres", "etcd", "zookeeper", "cassandra")
"""Real stores the scorecard starts as 3-node clusters."""

READ_GOAL_P99_MS = 50.0
WRITE_GOAL_P99_MS = 500.0
"""Seed 001's goals: reads under 50 ms and writes under 500 ms at the 99th percentile."""


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
    increments_s: float  # concurrent conditional increments
    inter_element_s: float  # atomic multi-element writes read back
    durability_s: float  # writes before the kill -9 / power loss (it comes at the end)
    durability_write_interval_s: float
    all_cut_regions: bool  # cut off each region in turn (else the readers' region only)

    def to_json(self) -> dict[str, float | int | bool]:
        """Return the plan as saved in scorecard.json."""
        return dict(self.__dict__)


QUICK = Plan(quick=True, staleness_s=4.0, staleness_write_interval_s=0.5, register_s=3.0,
             latency_ops=8, fault_probe_s=6.0,
             fault_at_s=1.5, fault_for_s=3.0, increments_s=3.0, inter_element_s=4.0,
             durability_s=3.0, durability_write_interval_s=0.005, all_cut_regions=False)
FULL = Plan(quick=False, staleness_s=20.0, staleness_write_interval_s=1.0, register_s=15.0,
            latency_ops=50,
            fault_probe_s=20.0, fault_at_s=5.0, fault_for_s=8.0, increments_s=10.0,
            inter_element_s=15.0, durability_s=5.0, durability_write_interval_s=0.005,
            all_cut_regions=True)


def parse_only(text: str | None) -> tuple[str, ...]:
    """Return the properties named in ``--only`` (all when None; ValueError naming an
    unknown one and the valid names)."""
    if text is None:
        return PROPERTIES
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise ValueError(f"--only is empty; name some of {', '.join(PROPERTIES)}")
    for p in names:
        if p not in PROPERTIES:
            raise ValueError(f"--only {p!r} is not a property; use some of "
                             f"{', '.join(PROPERTIES)}")
    return tuple(p for p in PROPERTIES if p in names)


def parse_kinds(text: str) -> tuple[str, ...]:
    """Return the stores in ``--kinds``: cluster kinds and ``sim://`` URLs (ValueError naming
    an unknown one and what is accepted)."""
    out: list[str] = []
    for k in (x.strip() for x in text.split(",")):
        if not k:
            continue
        if not k.startswith("sim://") and k not in CLUSTER_KINDS:
            raise ValueError(f"--kinds {k!r} is not a store the scorecard knows; use "
                             f"{', '.join(CLUSTER_KINDS)} or a sim:// URL such as "
                             "'sim://primary?regions=dc3'")
        out.append(k)
    if not out:
        raise ValueError(f"--kinds is empty; give e.g. {','.join(CLUSTER_KINDS)}")
    if len(set(out)) != len(out):
        raise ValueError("--kinds names a store twice; name each once")
    return tuple(out)


def expected_steps(store: str, props: tuple[str, ...], plan: Plan, regions: int) -> int:
    """Return how many runs (and cluster starts) a store's row takes: the progress bar's
    scale."""
    from replicalab.experiments.promises import DURABILITY

    real = not store.startswith("sim://")
    n = 1 if any(p != "durability" for p in props) else 0
    if "latency" in props or "geography" in props:
        n += regions
    if "durability" in props and real:
        variants = [v for v in DURABILITY[store] if v.quick or not plan.quick]
        n += 3 * len(variants)
    if "availability" in props:
        n += 2 * ((regions if plan.all_cut_regions else 1) + 1)
    n += 5 * ("consistency" in props) + 2 * ("transactionality" in props)
    return n

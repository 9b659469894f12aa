"""What replicalab offers, by name, for a front end's help and checks: store URL schemes and
kinds, workloads and their options, scorecard properties, queue schemes, protocol models,
placement policies, region sets. Each answer comes from the registry that holds it (so a
store kind or workload added there shows here), read when asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def store_schemes(installed: bool = False) -> list[str]:
    """Return the store URL schemes (``sim``, ``redis``, ...); ``installed``: with those of
    adapters installed as plugins."""
    from replicalab.stores.registry import schemes

    return schemes(installed)


def redact_url(url: str) -> str:
    """Return ``url`` without its password (what a front end may print)."""
    from replicalab.stores.base import redact_url as redact

    return redact(url)


def url_parameter_hint(option: str) -> str:
    """Return, for an option a command does not have that is a store URL parameter
    (``--isolation``), the one line saying where it goes instead; "" for any other."""
    from replicalab.stores.url import url_parameter_hint as hint

    return hint(option)


def store_kinds() -> list[str]:
    """Return the store kinds replicalab starts as clusters (``cluster up KIND``)."""
    from replicalab.cluster.kinds import names

    return names()


def store_kinds_help() -> str:
    """Return the store kinds as one phrase for ``--help`` (names and what they are)."""
    from replicalab.cluster.kinds import help_text

    return help_text()


def workloads() -> list[str]:
    """Return the probe workloads' names."""
    from replicalab.workloads.registry import names

    return names()


@dataclass(frozen=True)
class WorkloadOption:
    """One workload option as a front end declares it: ``name`` (Python), ``option``
    (``--readers``), ``type`` (int, float, str: text when workloads disagree or it is a
    duration), ``help`` (each workload taking it, with its default)."""

    name: str
    option: str
    type: type
    help: str


def workload_options() -> list[WorkloadOption]:
    """Return every workload's own options, each once, with the workloads that take it."""
    from replicalab.api.request import flags_by_name
    from replicalab.workloads import registry

    out = []
    for name, uses in flags_by_name().items():
        parts = []
        for workload, flag in uses:
            shown = registry.get(workload).default_text(flag)
            parts.append(f"{workload}: {flag.help}"
                         + ("" if shown is None else f" (default {shown})"))
        types = {str if f.duration else f.type for _, f in uses}
        out.append(WorkloadOption(name, uses[0][1].option,
                                  types.pop() if len(types) == 1 else str,
                                  "; ".join(parts) + "."))
    return out


def properties_help() -> str:
    """Return the scorecard's properties as one phrase for ``--help``."""
    from replicalab.experiments.properties import help_text

    return help_text()


def queue_schemes() -> list[str]:
    """Return the queue URL schemes."""
    from replicalab.queues.registry import schemes

    return schemes()


def protocol_models() -> tuple[dict[str, Any], dict[str, str]]:
    """Return the protocol models by name (``ModelSpec``: title, example, params_cls), the
    shipped ones then those of installed packages, and the installed names that fail to
    load, with their one-line error."""
    from replicalab.models.registry import MODELS

    return MODELS.installed(), dict(MODELS.broken)


def against_offers() -> str:
    """Return the models that can be measured against a real store, and the store, as one
    phrase: "paxos-wan (against etcd) and pbs (against cassandra)" (PBS, which the registry
    does not hold, is measured against Cassandra)."""
    offers = [f"{name} (against {', '.join(s.against)})"
              for name, s in protocol_models()[0].items() if s.against]
    offers.append("pbs (against cassandra)")
    return ", ".join(offers[:-1]) + " and " + offers[-1] if len(offers) > 1 else offers[0]


def placement_policies() -> str:
    """Return the placement policies with their parameters, as one phrase for ``--help``."""
    from replicalab.placement.policies import described

    return described()


def placement_workloads() -> list[str]:
    """Return the access patterns of ``placement simulate``."""
    from replicalab.placement.workloads import WORKLOADS

    return list(WORKLOADS)


def placement_defaults() -> tuple[str, str]:
    """Return ``placement simulate``'s default policies, and those of its skew workload."""
    from replicalab.placement import simulate

    return simulate.DEFAULT_POLICIES, simulate.SKEW_POLICIES


def counter_configs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return the Bounded Counter bench's configurations and experiments."""
    from replicalab.counters.bench import CONFIGS, EXPERIMENTS

    return tuple(CONFIGS), tuple(EXPERIMENTS)

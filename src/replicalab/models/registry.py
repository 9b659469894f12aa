"""The models the CLI offers: parameters, analytic curve, twin, validation grid, tables.

A model is one :class:`ModelSpec`, a line of :data:`MODELS` here (and of pyproject.toml's
``replicalab.models`` entry-point group, where another package declares its own:
``mm1 = "mypkg.mm1:SPEC"``, found when a name that is not here is asked for, or when
``replicalab model`` lists every model)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replicalab import plugins
from replicalab.models import epaxos, paxos_lan, paxos_wan, pigpaxos, wpaxos
from replicalab.models.base import Curve
from replicalab.models.twins import paxos_lan as lan_twin
from replicalab.models.twins import pigpaxos as pig_twin
from replicalab.models.twins import wan as wan_twin


def _no_tables(_params: Any) -> list[dict[str, Any]]:
    return []


@dataclass(frozen=True)
class ModelSpec:
    """One protocol model as the CLI sees it."""

    name: str
    title: str
    example: str
    params_cls: type
    curve: Callable[[Any, list[float]], Curve]
    twin: Callable[[Any, list[float], int, int], Curve]
    grid: Callable[[], list[tuple[str, Any, list[float]]]]
    tables: Callable[[Any], list[dict[str, Any]]] = field(default=_no_tables)
    # the real store kinds ``model NAME --against KIND`` measures it against (its
    # experiment: ``experiments/against.py``); () for a model with no real counterpart
    against: tuple[str, ...] = ()


def _wan_tables(p: Any) -> list[dict[str, Any]]:
    from replicalab.models import paxos_wan

    table = paxos_wan.leader_table(p)
    best = paxos_wan.best_leader(p)
    return [{"caption": "Mean client latency at low load by leader region (best marked)",
             "header": ["leader", "mean latency (ms)"],
             "rows": [[r + (" (best)" if r == best else ""), f"{v:.1f}"]
                      for r, v in table.items()]}]


def _epaxos_tables(p: Any) -> list[dict[str, Any]]:
    from dataclasses import replace

    from replicalab.models import epaxos, paxos_wan

    paxos = paxos_wan.max_throughput_rps(p.wan)
    rows = [[f"{100 * c:g}%", f"{rps:,.0f}", f"{rps / paxos:.2f}x"]
            for c, rps in epaxos.max_throughput_vs_conflict(replace(p),
                                                            (0.0, 0.02, 0.1, 0.25, 0.5, 1.0))]
    return [{"caption": "Aggregate maximum throughput vs conflict (and vs Paxos)",
             "header": ["conflict", "max throughput (req/s)", "vs Paxos"], "rows": rows}]


def _pig_tables(p: Any) -> list[dict[str, Any]]:
    from replicalab.models import pigpaxos

    rows = pigpaxos.scaling_table()
    header = list(rows[0])
    def cell(v: Any) -> str:
        return f"{v:,.1f}" if isinstance(v, float) else str(v)

    return [{"caption": "PigPaxos vs Paxos maximum throughput by cluster size",
             "header": header, "rows": [[cell(r[h]) for h in header] for r in rows]}]


def _lan_tables(p: Any) -> list[dict[str, Any]]:
    from dataclasses import replace

    from replicalab.models import paxos_lan

    rows = []
    for n in (3, 4, 5, 6, 7, 9):
        q = replace(p, n=n, q2=None)
        rows.append([n, f"{paxos_lan.network_only_latency_ms(q):.4f}",
                     f"{paxos_lan.throughput_one_client_rps(q):,.0f}",
                     f"{paxos_lan.max_throughput_rps(q):,.0f}"])
    return [{"caption": "By cluster size: network-only round latency and one client's "
                        "throughput (part 1), saturation throughput with queueing (part 2)",
             "header": ["N", "network-only latency (ms)", "one client (rounds/s)",
                        "max throughput (rounds/s)"], "rows": rows}]


PAXOS_LAN = ModelSpec(
    "paxos-lan", "Multi-Paxos on a LAN with processing queues (and FPaxos)",
    "replicalab model paxos-lan --compare n=3,5,7,9 "
    "(FPaxos: --set n=9 --set q2=3 --compare talk_to=all,quorum)",
    paxos_lan.PaxosLanParams, paxos_lan.refined_curve, lan_twin.simulate,
    paxos_lan.validation_grid, _lan_tables)
PAXOS_WAN = ModelSpec(
    "paxos-wan", "Multi-Paxos over WAN regions (one node per region)",
    "replicalab model paxos-wan --compare leader=VA,CA,JP",
    paxos_wan.WanParams, paxos_wan.curve, wan_twin.simulate_paxos_wan,
    paxos_wan.validation_grid, _wan_tables, against=("etcd",))
EPAXOS = ModelSpec(
    "epaxos", "EPaxos over WAN regions",
    "replicalab model epaxos --compare conflict=0.02,0.5,1.0",
    epaxos.EPaxosParams, epaxos.curve, wan_twin.simulate_epaxos,
    epaxos.validation_grid, _epaxos_tables)
WPAXOS = ModelSpec(
    "wpaxos", "WPaxos: per-zone leaders, grid quorums, object stealing",
    "replicalab model wpaxos --compare locality=0.5,0.7,0.9",
    wpaxos.WPaxosParams, wpaxos.curve, wan_twin.simulate_wpaxos,
    wpaxos.validation_grid)
PIGPAXOS = ModelSpec(
    "pigpaxos", "PigPaxos: relay groups between the leader and followers",
    "replicalab model pigpaxos --compare n=9,25,99",
    pigpaxos.PigPaxosParams, pigpaxos.curve, pig_twin.simulate,
    pigpaxos.validation_grid, _pig_tables)

MODELS: plugins.Registry[ModelSpec] = plugins.Registry(
    plugins.MODELS, "protocol model",
    {s.name: s for s in (PAXOS_LAN, PAXOS_WAN, EPAXOS, WPAXOS, PIGPAXOS)},
    accept=lambda o: isinstance(o, ModelSpec), expected="a ModelSpec")
"""Every model by name, the shipped ones in the order ``replicalab model`` lists them;
``MODELS.installed()`` adds those of installed packages."""


def register(spec: ModelSpec) -> ModelSpec:
    """Add ``spec``, a protocol model from elsewhere (another package, a test), to what
    ``replicalab model`` offers (``model validate`` runs it against its twin); return it."""
    MODELS[spec.name] = spec
    return spec

"""The scorecard's properties, one module each, in the chart's column order. A property is
one module exporting ``PROPERTY`` (an ``experiments.property.Property``) and one line here
(and in pyproject.toml's ``replicalab.properties`` entry-point group, where another package
declares its own: ``echo = "mypkg.echo:PROPERTY"``, a column after the shipped ones); one
registered at run time (a test) is one :func:`register` call."""

from __future__ import annotations

from replicalab import plugins
from replicalab.errors import ParameterError
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.properties import (
    availability,
    consistency,
    durability,
    geography,
    latency,
    transactionality,
)
from replicalab.experiments.property import Property

_REGISTRY: plugins.Registry[Property] = plugins.Registry(
    plugins.PROPERTIES, "scorecard property", accept=lambda o: isinstance(o, Property),
    expected="a replicalab.experiments.property.Property")


def register(prop: Property) -> Property:
    """Add ``prop`` as the chart's last column (or replace the one of its name, in place);
    return it."""
    _REGISTRY[prop.name] = prop
    return prop


for _module in (latency, durability, availability, consistency, transactionality, geography):
    register(_module.PROPERTY)  # seed 001's columns in its order (consistency from seed 003)


def names(installed: bool = False) -> tuple[str, ...]:
    """Return the property names in the chart's column order; with ``installed``, also
    those of installed packages (reading their metadata; one that fails to load is left
    out: naming it shows why)."""
    return tuple(_REGISTRY.installed() if installed else _REGISTRY)


def get(name: str) -> Property:
    """Return the property called ``name`` (ValueError naming the valid ones)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a property; use some of {', '.join(names())} "
                         f"{plugins.outside_hint(plugins.PROPERTIES, name)}") from None


def parse_only(text: str | None) -> tuple[str, ...]:
    """Return the properties named in ``--only`` in column order (all when None, installed
    packages' included; ValueError naming an unknown one and the valid names, or the
    package that fails to load it)."""
    if text is None:
        return names(installed=True)
    asked = [p.strip() for p in text.split(",") if p.strip()]
    if not asked:
        raise ParameterError("only", f"is empty; name some of {', '.join(names())}")
    for p in asked:
        if p not in _REGISTRY:
            raise ParameterError("only", f"{p!r} is not a property; use some of "
                                         f"{', '.join(names())} "
                                         f"{plugins.outside_hint(plugins.PROPERTIES, p)}")
    return tuple(p for p in names() if p in asked)


def expected_steps(subject: Subject, props: tuple[str, ...], plan: Plan, regions: int) -> int:
    """Return how many runs (and cluster starts) a store's row takes: the progress bar's
    scale (one cluster start when any asked property needs the store's cluster)."""
    asked = [get(p) for p in props]
    n = 1 if any(p.needs_cluster for p in asked) else 0
    return n + sum(p.steps(subject, plan, regions, props) for p in asked)


def help_text() -> str:
    """Return the properties as ``--only``'s help lists them."""
    return ", ".join(names())

"""Entry-point groups: how installed packages add names to replicalab's extension points.

Each extension point is a group of entry points (``name = "module:attribute"``):

======================  ==================================  ==============================
group                   a name is                           the object it names
======================  ==================================  ==============================
replicalab.stores       a URL scheme                        ``opener(url, seed) -> Store``
replicalab.store_kinds  a store kind (``cluster up NAME``)  a ``cluster.kinds.StoreKind``
replicalab.queues       a queue URL scheme                  ``opener(url, seed) -> Queue``
replicalab.workloads    a probe workload (``--workload``)   a ``workloads.base.Workload``
replicalab.checkers     a checker model (``check --model``) a linearizability ``Model`` class
replicalab.properties   a scorecard property (``--only``)   an ``experiments.property.Property``
replicalab.models       a protocol model (``model NAME``)   a ``models.registry.ModelSpec``
replicalab.placement    a placement policy (``--policies``) a ``placement.policies.PolicyBase``
                                                            subclass
======================  ==================================  ==============================

replicalab declares its own built-ins in the same groups (pyproject.toml), as pytest does,
so ``importlib.metadata.entry_points(group=...)`` lists them beside everyone's. Each registry
also lists its built-ins in code, and tests/test_entry_points.py holds the two lists
equal: a built-in name resolves without reading any package's metadata, which costs
0.05-0.2 s (importing importlib.metadata, then scanning every installed distribution) —
more than a short ``replicalab check`` may spend. A registry reads a group only for a name
it does not know, or when it is asked to list everything installed, once per process.

A package that fails to import breaks only its own names: loading one of them raises
:class:`PluginError`, one line naming the package and how to fix it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Generic, NamedTuple, TypeVar

STORES = "replicalab.stores"
STORE_KINDS = "replicalab.store_kinds"
QUEUES = "replicalab.queues"
WORKLOADS = "replicalab.workloads"
CHECKERS = "replicalab.checkers"
PROPERTIES = "replicalab.properties"
MODELS = "replicalab.models"
PLACEMENT = "replicalab.placement"
GROUPS = (STORES, STORE_KINDS, QUEUES, WORKLOADS, CHECKERS, PROPERTIES, MODELS, PLACEMENT)
"""Every extension point's group, in the order docs/your-store.md shows them."""

OWN = "replicalab"
"""The distribution whose entries are the built-ins."""


class PluginError(ValueError):
    """An installed package's entry point cannot be used (the message is one line naming
    the package and the fix)."""


class Declared(NamedTuple):
    """One entry point of a group: its name, its ``module:attribute`` target and the
    distribution that declares it."""

    group: str
    name: str
    value: str
    package: str

    @property
    def builtin(self) -> bool:
        """Return True for replicalab's own entries."""
        return self.package == OWN


def declared(group: str) -> dict[str, Declared]:
    """Return the entry points of ``group`` by name, replicalab's own first (for a name
    two packages declare, the first found). Reads every installed package's metadata once
    per process and ``sys.path``."""
    import sys

    return _declared(group, tuple(sys.path))


@functools.cache
def _declared(group: str, path: tuple[str, ...]) -> dict[str, Declared]:
    from importlib.metadata import entry_points  # 0.05-0.2 s: only when a group is read

    found: dict[str, Declared] = {}
    entries = [Declared(group, ep.name, ep.value, _package(ep))
               for ep in entry_points(group=group)]  # one per distribution name
    for entry in sorted(entries, key=lambda d: not d.builtin):  # else in the path's order
        found.setdefault(entry.name, entry)
    return found


def _package(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    return str(dist.name) if dist is not None else "an installed package"


def forget() -> None:
    """Read the groups again on their next use (after a package was installed into or
    removed from a directory already on ``sys.path``)."""
    _declared.cache_clear()


def import_target(value: str) -> Any:
    """Return the object ``"module:attribute.path"`` names (ImportError, AttributeError
    as Python raises them)."""
    import importlib

    module, _, attr = value.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def load(entry: Declared, what: str, accept: Callable[[Any], bool] | None = None,
         expected: str = "") -> Any:
    """Return the object ``entry`` names. PluginError, one line, when its package fails
    to import it or (``accept`` given) it is not ``expected``; ``what`` says what it is,
    e.g. "store adapter"."""
    try:
        obj = import_target(entry.value)
    except Exception as err:  # whatever the outside package raises while importing
        detail = " ".join(f"{type(err).__name__}: {err}".split())
        raise PluginError(f"the {what} {entry.name!r} from {entry.package} ({entry.value}) "
                          f"failed to load: {detail}; fix or reinstall {entry.package}, or "
                          f"remove it (pip uninstall {entry.package})") from None
    if accept is not None and not accept(obj):
        raise PluginError(f"the {what} {entry.name!r} from {entry.package} names "
                          f"{entry.value}, which is not {expected}; fix {entry.package}")
    return obj


def find(group: str, name: str, what: str, accept: Callable[[Any], bool] | None = None,
         expected: str = "") -> Any | None:
    """Return the object an installed package declares as ``name`` in ``group``, None when
    none does (PluginError when its package is broken: see :func:`load`)."""
    entry = declared(group).get(name)
    return None if entry is None else load(entry, what, accept, expected)


def outside_hint(group: str, name: str) -> str:
    """Return the clause an "unknown name" error ends with: how a package adds one."""
    return f"(or install a package that adds {name!r} in the {group} entry-point group)"


V = TypeVar("V")


class Registry(MutableMapping[str, V], Generic[V]):
    """Names -> objects of one extension point: the built-ins and the names registered at
    run time (a dict, in the order they were added), then, for a name it does not hold,
    the group's entry points (loaded and kept). Iterating lists only what it holds (no
    metadata is read); :meth:`installed` lists every installed package's names too.

    ``accept``/``expected`` check what an entry point names (PluginError otherwise)."""

    def __init__(self, group: str, what: str, items: dict[str, V] | None = None,
                 accept: Callable[[Any], bool] | None = None, expected: str = "") -> None:
        self.group, self.what = group, what
        self.accept, self.expected = accept, expected
        self._items: dict[str, V] = dict(items or {})
        self.broken: dict[str, str] = {}
        """Installed names that failed to load, with the one-line error (see installed)."""

    def _find(self, name: str) -> V | None:
        obj = find(self.group, name, self.what, self.accept, self.expected)
        if obj is not None:
            self._items[name] = obj
            self.broken.pop(name, None)
        return obj

    def __getitem__(self, name: str) -> V:
        if name in self._items:
            return self._items[name]
        obj = self._find(name)
        if obj is None:
            raise KeyError(name)
        return obj

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._items or self._find(name) is not None)

    def __setitem__(self, name: str, value: V) -> None:
        self._items[name] = value

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.group!r}, {list(self._items)!r})"

    def installed(self) -> dict[str, V]:
        """Return every name that loads: those held, then those installed packages declare.
        A name whose package fails to load is left out and kept in :attr:`broken` with its
        error (looking it up raises that error), so a broken package hides only its own
        names."""
        for name in declared(self.group):
            if name not in self._items:
                try:
                    self._find(name)
                except PluginError as err:
                    self.broken[name] = str(err)
        return dict(self._items)

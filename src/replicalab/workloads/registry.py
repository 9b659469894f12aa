"""Probe workloads by name: each workload module exports one ``WORKLOAD`` object.

A new workload is one module with a config dataclass, ``generate`` and ``check``, and one
line here (and in pyproject.toml's ``replicalab.workloads`` entry-point group, where
another package declares its own: ``echo = "mypkg.echo:WORKLOAD"``).
"""

from __future__ import annotations

import importlib

from replicalab import plugins
from replicalab.errors import ParameterError
from replicalab.workloads.base import Workload

GROUP = plugins.WORKLOADS

_MODULES = {
    "staleness": "replicalab.workloads.staleness",
    "monotonic-writes": "replicalab.workloads.monotonic_writes",
    "inter-element": "replicalab.workloads.inter_element",
    "latency": "replicalab.workloads.latency",
    "sweep": "replicalab.workloads.sweep",
    "register": "replicalab.workloads.register",
    "increments": "replicalab.workloads.increments",
    "list-append": "replicalab.workloads.list_append",
    "rw-register": "replicalab.workloads.rw_register",
    "list-after-write": "replicalab.workloads.list_after_write",
}
"""The shipped workloads' modules (pyproject.toml declares each as ``MODULE:WORKLOAD``)."""

_INSTALLED: dict[str, Workload] = {}


def register(name: str, module: str) -> None:
    """Make ``--workload name`` run the ``WORKLOAD`` that ``module`` exports."""
    _MODULES[name] = module


def names(installed: bool = False) -> list[str]:
    """Return the names of every probe workload, in the order the docs list them; with
    ``installed``, also those installed packages declare (reading their metadata; a
    package that fails to load is left out)."""
    if installed:
        for name in plugins.declared(GROUP):
            if name not in _MODULES:
                try:
                    _installed(name)
                except plugins.PluginError:
                    continue  # its own name says so when asked for
    return [*_MODULES, *(n for n in _INSTALLED if n not in _MODULES)]


def _installed(name: str) -> Workload | None:
    if name not in _INSTALLED:
        wl = plugins.find(GROUP, name, "workload", lambda o: isinstance(o, Workload),
                          "a replicalab.workloads.base.Workload")
        if wl is None:
            return None
        _INSTALLED[name] = wl
    return _INSTALLED[name]


def get(name: str) -> Workload:
    """Return the workload called ``name`` (ValueError listing the known ones, or naming
    the installed package that fails to load it)."""
    module = _MODULES.get(name)
    if module is not None:
        return importlib.import_module(module).WORKLOAD  # type: ignore[no-any-return]
    wl = _installed(name)
    if wl is None:
        raise ParameterError("workload", f"{name!r}: use one of {', '.join(names(True))}")
    return wl

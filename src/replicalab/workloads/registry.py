"""Probe workloads by name: each workload module exports one ``WORKLOAD`` object.

A new workload is one module with a config dataclass, ``generate`` and ``check``, and one
line here.
"""

from __future__ import annotations

import importlib

from replicalab.workloads.base import Workload

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
}


def register(name: str, module: str) -> None:
    """Make ``--workload name`` run the ``WORKLOAD`` that ``module`` exports."""
    _MODULES[name] = module


def names() -> list[str]:
    """Return the names of every probe workload, in the order the docs list them."""
    return list(_MODULES)


def get(name: str) -> Workload:
    """Return the workload called ``name`` (ValueError listing the known ones)."""
    try:
        module = _MODULES[name]
    except KeyError:
        raise ValueError(f"--workload {name!r}: use one of {', '.join(_MODULES)}") from None
    return importlib.import_module(module).WORKLOAD

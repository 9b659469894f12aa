"""Which report section a workload's probe report shows: the report registers its sections
here, by workload name, so workloads (a layer below) never name a report module.

A shipped workload's section is one line of ``_SECTIONS`` (``"module:function"`` inside
``report/``, imported when a report needs it); one from elsewhere is one
:func:`register` call. A workload outside replicalab may instead name its section in
``Workload.report_section``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from replicalab.report.page import Page

Section = Callable[[Page, Mapping[str, Any]], None]

_SECTIONS: dict[str, str | Section] = {
    "staleness": "replicalab.report.staleness:staleness_section",
    "latency": "replicalab.report.latency_variants:latency_variants_section",
    "register": "replicalab.report.linearizability:linearizability_section",
    "inter-element": "replicalab.report.inter_element:inter_element_section",
    "monotonic-writes": "replicalab.report.monotonic_writes:monotonic_writes_section",
    "sweep": "replicalab.report.sweep:sweep_section",
    "list-append": "replicalab.report.txn_workload:txn_workload_section",
    "rw-register": "replicalab.report.txn_workload:txn_workload_section",
}


def register(workload: str, section: str | Section) -> None:
    """Make ``workload``'s probe report show ``section`` (a function or
    ``"module:function"``)."""
    _SECTIONS[workload] = section


def section(workload: str, declared: str = "") -> Section | None:
    """Return the section registered for ``workload`` (else the one it ``declared``, a
    ``"module:function"``), or None."""
    ref = _SECTIONS.get(workload) or declared
    if not ref:
        return None
    if not isinstance(ref, str):
        return ref
    module, function = ref.split(":")
    found: Section = getattr(importlib.import_module(module), function)
    return found

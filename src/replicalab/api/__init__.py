"""replicalab from Python and notebooks (docs/python-api.md): the product, of which the
command line is a shell.

``probe`` runs a probe and returns a :class:`Run` (config, typed results, the history as an
Arrow table and a pandas DataFrame, matplotlib figures, an HTML summary in notebooks);
``open_run`` opens a saved run; ``check`` decides a history under any checker model
(linearizability or transactions) and returns a :class:`CheckReport`; ``export`` and
``read_history`` write and read Jepsen's EDN and JSON lines; ``compare`` runs one probe on
several stores; ``scorecard`` measures seed 001's chart; ``model`` gives a protocol model's
latency against offered load; ``tradeoff`` runs seed 003 §4 (eventual against consistent
reads under paced load). Every other verb is a function of a module of this package
returning an :class:`~replicalab.api.outcome.Outcome` (``comparing``, ``modelling``,
``counting``, ``queueing``, ``placing``, ``latency_tester``, ``clocks``, ``watching``,
``clustering``, ``loading``, ``batches``, ``reporting``).

Names are loaded on first use, so ``import replicalab`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "probe": "replicalab.api.runs",
    "open_run": "replicalab.api.runs",
    "Run": "replicalab.api.runs",
    "check": "replicalab.api.checking",
    "open_history": "replicalab.api.checking",
    "CheckReport": "replicalab.api.checking",
    "export": "replicalab.api.exporting",
    "read_history": "replicalab.api.exporting",
    "Export": "replicalab.api.exporting",
    "compare": "replicalab.api.adapters",
    "scorecard": "replicalab.api.adapters",
    "model": "replicalab.api.adapters",
    "Comparison": "replicalab.api.adapters",
    "ScorecardRun": "replicalab.api.adapters",
    "Results": "replicalab.api.results",
    "Outcome": "replicalab.api.outcome",
    "Table": "replicalab.api.outcome",
    "ParameterError": "replicalab.api.errors",
    "HistoryTable": "replicalab.api.history",
    "tradeoff": "replicalab.api.tradeoff",
    "TradeoffRun": "replicalab.api.tradeoff",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])

"""Operation records: one row per client operation, invoke and completion, stored columnar.

The names below are imported on first use (PEP 562): ``from replicalab.history.read
import ...`` or ``.values`` does not pull in numpy and pyarrow, which a short
``replicalab check FILE`` would otherwise pay for at start-up.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "CONDITION_FAILED": "core", "CONSISTENCY_NAMES": "core", "F_NAMES": "core",
    "NEMESIS": "core", "TYPE_NAMES": "core", "History": "core", "OpType": "core",
    "to_edn": "export", "to_jsonl": "export",
    "load_history": "io", "save_history": "io",
    "ProbeValue": "values", "decode_value": "values", "encode_value": "values",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])

"""Operation records: one row per client operation, invoke and completion, stored columnar.

The names below are imported on first use (PEP 562): ``from replicalab.history.read
import ...`` or ``.values`` does not pull in numpy and pyarrow, which a short
``replicalab check FILE`` would otherwise pay for at start-up.
"""

from __future__ import annotations

from replicalab import lazy_exports

_WHERE = {
    "CONDITION_FAILED": "core", "CONSISTENCY_NAMES": "core", "F_NAMES": "core",
    "NEMESIS": "core", "TYPE_NAMES": "core", "History": "core", "OpType": "core",
    "to_edn": "export", "to_jsonl": "export",
    "load_history": "io", "save_history": "io",
    "ProbeValue": "values", "decode_value": "values", "encode_value": "values",
}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

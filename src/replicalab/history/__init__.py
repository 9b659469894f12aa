"""Operation records: one row per client operation, invoke and completion, stored columnar."""

from replicalab.history.core import (
    CONDITION_FAILED,
    CONSISTENCY_NAMES,
    F_NAMES,
    NEMESIS,
    TYPE_NAMES,
    History,
    OpType,
)
from replicalab.history.export import to_edn, to_jsonl
from replicalab.history.io import load_history, save_history
from replicalab.history.values import ProbeValue, decode_value, encode_value

__all__ = [
    "CONDITION_FAILED",
    "CONSISTENCY_NAMES",
    "F_NAMES",
    "NEMESIS",
    "TYPE_NAMES",
    "History",
    "OpType",
    "ProbeValue",
    "decode_value",
    "encode_value",
    "load_history",
    "save_history",
    "to_edn",
    "to_jsonl",
]

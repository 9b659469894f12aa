"""Transactional isolation, Elle style: list-append and rw-register histories checked
for Adya's anomalies through a dependency graph, with the consistency models each
history rules out. Pure functions, no I/O (but :func:`check_file`, which reads one).

Entry points: :func:`check` (native core when built, else the pure-Python reference),
:func:`check_txns` (the reference), :func:`check_file` (a Jepsen/Elle history file),
:func:`check_history` (a replicalab History), :func:`from_history` /
:func:`from_file_ops` (transactions from what was recorded), :func:`result_json`
(Elle's result map, also ``TxnCheckResult.to_json()``).
"""

from __future__ import annotations

from replicalab.checkers.txn.check import TXN_MODELS, check_result, check_txns
from replicalab.checkers.txn.models import MODELS, verdict
from replicalab.checkers.txn.prepare import from_file_ops, from_history
from replicalab.checkers.txn.run import check, check_file, check_history, result_json
from replicalab.checkers.txn.types import (
    Anomaly,
    Options,
    Step,
    Txn,
    TxnCheckResult,
    TxnInputError,
    Unfinished,
)

__all__ = ["MODELS", "TXN_MODELS", "Anomaly", "Options", "Step", "Txn", "TxnCheckResult",
           "TxnInputError", "Unfinished", "check", "check_file", "check_history",
           "check_result", "check_txns", "from_file_ops", "from_history", "result_json",
           "verdict"]

"""Transactional isolation, Elle style: list-append and rw-register histories checked
for Adya's anomalies through a dependency graph, with the consistency models each
history rules out. Pure functions, no I/O.

Entry points: :func:`check` (native core when built, else the pure-Python reference),
:func:`check_txns` (the reference), :func:`from_history` / :func:`from_file_ops`
(transactions from what was recorded), :func:`result_json` (Elle's result map).
"""

from __future__ import annotations

from replicalab.checkers.txn.check import TXN_MODELS, check_result, check_txns
from replicalab.checkers.txn.models import MODELS, verdict
from replicalab.checkers.txn.prepare import from_file_ops, from_history
from replicalab.checkers.txn.run import check, check_history, result_json
from replicalab.checkers.txn.types import (
    Anomaly,
    Step,
    Txn,
    TxnCheckResult,
    TxnInputError,
    Unfinished,
)

__all__ = ["MODELS", "TXN_MODELS", "Anomaly", "Step", "Txn", "TxnCheckResult",
           "TxnInputError", "Unfinished", "check", "check_history", "check_result",
           "check_txns", "from_file_ops", "from_history", "result_json", "verdict"]

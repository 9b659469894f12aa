"""Elle's list-append workload: transactions that read lists and append values unique per
key; checked for Adya's anomalies (see ``workloads/txn.py`` for the knobs)."""

from __future__ import annotations

from replicalab.workloads.txn import make_workload

WORKLOAD = make_workload("list-append", "list-append", "list-append", "append", "append")

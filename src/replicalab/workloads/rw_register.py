"""Elle's rw-register workload: transactions that read and write registers with values
unique per key; checked for Adya's anomalies (see ``workloads/txn.py`` for the knobs)."""

from __future__ import annotations

from replicalab.workloads.txn import make_workload

WORKLOAD = make_workload("rw-register", "rw-register", "rw-register", "w", "write")

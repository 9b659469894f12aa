"""The report section of a list-append or rw-register run: the transactions by outcome,
then the checker's verdict with its cycles drawn (``report/transactions.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replicalab.report.page import Page
from replicalab.report.transactions import transactions_section
from replicalab.workloads.txn import anomaly_rows


def txn_workload_section(page: Page, results: Mapping[str, Any]) -> None:
    """Add the transactional run's section to ``page``: transactions by outcome, the
    anomalies found per class (the counts ``replicalab check --json`` gives) with the
    committed transactions taking part in one, and the verdict (``results["txn"]``, Elle's
    result map)."""
    t = results["transactions"]
    ok = t["ok"]
    page.heading("Transactions")
    page.para(f"{ok + t['fail'] + t['info']:,} transactions: {ok:,} committed, {t['fail']:,} "
              f"failed (refused by the store: serialization failure, failed guard, lock "
              f"wait over its limit), {t['info']:,} with an unknown outcome.")
    rows = [(name, value) for name, value in anomaly_rows(dict(results))]
    page.table(["finding", "value"], rows,
               caption="An anomaly is one dependency cycle, or one other finding, of its "
                       "class, counted as `replicalab check --json` counts them (a cycle "
                       "class: at most one cycle per strongly connected component); the "
                       "committed transactions in an anomaly are counted exactly")
    transactions_section(page, results["txn"], "Isolation")

"""The report section of a list-append or rw-register run: the transactions by outcome,
then the checker's verdict with its cycles drawn (``report/transactions.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replicalab.report.page import Page
from replicalab.report.transactions import transactions_section


def txn_workload_section(page: Page, results: Mapping[str, Any]) -> None:
    """Add the transactional run's section to ``page``: counts, anomalous transactions per
    1,000 committed by class, and the verdict (``results["txn"]``, Elle's result map)."""
    t = results["transactions"]
    ok = t["ok"]
    page.heading("Transactions")
    page.para(f"{ok + t['fail'] + t['info']:,} transactions: {ok:,} committed, {t['fail']:,} "
              f"refused by the store (serialization failure, failed guard), {t['info']:,} "
              "with an unknown outcome.")
    rates = [(k, f"{n:,}", f"{1000.0 * n / ok:.1f}" if ok else "-")
             for k, n in sorted(t.get("anomalous", {}).items()) if n]
    if rates:
        page.table(["anomaly class", "transactions", "per 1,000 committed"], rates,
                   caption="Committed transactions taking part in a reported anomaly (at "
                           "most one cycle per class and strongly connected component: a "
                           "lower bound)")
    transactions_section(page, results["txn"], "Isolation")

"""A consumer process SIGSTOPped past its lease on real Redis and PostgreSQL queues (issue 22):
``central-lease`` commits a message twice when the stopped consumer is continued, ``central``
refuses its stale commit (the fencing token was superseded) and commits every message once,
losing none. Consumer processes (``--processes``), central store on the same server; every
count comes from the merged record through the delivery checker."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from replicalab.checkers.deliveries import check_deliveries
from replicalab.cluster import process
from replicalab.faults.schedule import parse_fault
from replicalab.queues.runner import run_workload
from replicalab.queues.spec import QueueSpec

integration = pytest.mark.integration

# 4 consumer processes, 96 messages of 800 ms in batches of 2 processed side by side (about
# 13 s of work); a visibility timeout of 6 s makes a lease of 3 s, renewed every 1 s, so a
# processing of 800 ms is never renewed. Consumer 1, stopped 1.5 s into the run for 8 s, wakes
# up holding a delivery the others have taken over (redelivered by 7.5 s, its claim expired at
# 4.5 s at the latest). The stop lands while it processes, where a consumer spends most of its
# time; between two deliveries (store round trips, longer on a loaded machine: 200 ms
# processing left it holding nothing taken in a CI run) there would be nothing to commit twice.
RUN = dict(consumers=4, messages=96, producers=2, batch=2, process_ms=800.0,
           process_sigma=0.0, slow_fraction=0.0, visibility_s=6.0, empty_poll_ms=50.0,
           max_duration_s=120.0, processes=True)
PAUSES = ("at=1.5s pause consumer=1 for=8s",)


def _run(cluster: tuple[Any, Any], strategy: str) -> tuple[dict[str, Any], dict[str, Any]]:
    c, _ = cluster
    url = c.url + ("&" if "?" in c.url else "?") + f"queue=n{uuid.uuid4().hex[:10]}"
    o = run_workload(QueueSpec(queue=url, strategy=strategy, central=c.url,
                               faults=tuple(parse_fault(f) for f in PAUSES), **RUN))
    assert not o.notes, o.notes
    assert not process.owned() or all("queue consumer" not in label
                                      for label in process.owned().values())
    cols = o.log.columns()
    return check_deliveries(cols, o.dead_letters)["summary"], cols


def _both_outcomes(cluster: tuple[Any, Any]) -> None:
    lease, cols = _run(cluster, "central-lease")
    pauses = [i for i, k in enumerate(cols["kind"]) if k == "pause"]
    assert len(pauses) == 1
    assert "SIGSTOP" in cols["note"][pauses[0]]
    assert 7.5e9 < cols["complete_ns"][pauses[0]] - cols["invoke_ns"][pauses[0]] < 9.5e9
    assert lease["messages"] == 96 and lease["lost"] == 0
    assert lease["duplicate_results"] > 0 and not lease["exactly_once"]
    fenced, cols = _run(cluster, "central")
    assert fenced["messages"] == 96 and fenced["lost"] == 0
    assert fenced["duplicate_results"] == 0 and fenced["uncertain_results"] == 0
    assert fenced["exactly_once"] and fenced["results"] == 96
    assert fenced["fenced_commits"] > 0  # the stopped consumer's commits were refused
    assert all(cols["process"][i] == 1 for i, (k, o) in
               enumerate(zip(cols["kind"], cols["outcome"], strict=True))
               if k == "commit" and o == "fail")


@integration
def test_sigstopped_consumer_redis(redis_dc3):
    _both_outcomes(redis_dc3)


@integration
def test_sigstopped_consumer_postgres(postgres_dc3):
    _both_outcomes(postgres_dc3)

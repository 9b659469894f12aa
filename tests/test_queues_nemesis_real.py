"""A consumer process SIGSTOPped past its lease on real Redis and PostgreSQL queues (issue 22):
``central-lease`` commits a message twice when the stopped consumer is continued, ``central``
refuses its stale commit (the fencing token was superseded) and commits every message once,
losing none. Consumer processes (``--processes``), central store on the same server; every
result is counted from the effect lists on the server (read back after the run, and read
again here by a client of the test's own), cross-checked with the merged record."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from replicalab.checkers.deliveries import check_deliveries
from replicalab.cluster import process
from replicalab.faults.schedule import parse_fault
from replicalab.queues.effects import effects_key, entries
from replicalab.queues.runner import run_workload
from replicalab.queues.spec import QueueSpec
from replicalab.stores import open_store

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


def effects_on_server(url: str, domain: str, tags: list[str]) -> dict[str, list[str]]:
    """Return the effect lists of ``tags`` as an observer reads them from the server at
    ``url`` with a store client of its own (not the run's)."""
    async def read() -> dict[str, list[str]]:
        store = open_store(url, 1)
        try:
            c = await store.connect()
            got = {t: entries((await c.read([effects_key(domain, t)], consistent=True))
                              .values[0]) for t in tags}
            await c.close()
            return got
        finally:
            await store.close()

    return asyncio.run(read())


def _run(cluster: tuple[Any, Any], strategy: str) -> tuple[dict[str, Any], dict[str, Any]]:
    c, _ = cluster
    url = c.url + ("&" if "?" in c.url else "?") + f"queue=n{uuid.uuid4().hex[:10]}"
    o = run_workload(QueueSpec(queue=url, strategy=strategy, central=c.url,
                               faults=tuple(parse_fault(f) for f in PAUSES), **RUN))
    assert not o.notes, o.notes
    assert not process.owned() or all("queue consumer" not in label
                                      for label in process.owned().values())
    cols = o.log.columns()
    s = check_deliveries(cols, o.dead_letters)["summary"]
    # counted from the effects on the server, which the consumers' own record agrees with
    assert s["results_from"] == "effect store" and s["effects_agree_with_log"], s
    assert s["effects_read_back"] == 96
    # ... and a client of our own reads the same effect lists from the server
    read = {t: n for k, t, n in zip(cols["kind"], cols["tag"], cols["note"], strict=True)
            if k == "effect"}
    assert effects_on_server(c.url, o.effects_domain, sorted(read)) == {
        t: entries(n) for t, n in read.items()}
    return s, cols


def _both_outcomes(cluster: tuple[Any, Any]) -> None:
    lease, cols = _run(cluster, "central-lease")
    pauses = [i for i, k in enumerate(cols["kind"]) if k == "pause"]
    assert len(pauses) == 1
    assert "SIGSTOP" in cols["note"][pauses[0]]
    assert 7.5e9 < cols["complete_ns"][pauses[0]] - cols["invoke_ns"][pauses[0]] < 9.5e9
    assert lease["messages"] == 96 and lease["lost"] == 0
    assert lease["duplicate_results"] > 0 and not lease["exactly_once"]
    assert lease["committed_more_than_once"] > 0  # an observer finds two effects
    assert max(n for k, n in zip(cols["kind"], cols["count"], strict=True)
               if k == "effect") == 2
    fenced, cols = _run(cluster, "central")
    assert fenced["committed_once"] == 96 and max(
        n for k, n in zip(cols["kind"], cols["count"], strict=True) if k == "effect") == 1
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

"""``python -m replicalab.queues.consumer``: a consumer process of the queue workload on real
Redis, SIGKILLed mid-processing; another process gets the redelivery, takes the expired
claim over and the central strategy processes every message once. The records the two
processes streamed are read back and checked together."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from replicalab.checkers.deliveries import check_deliveries
from replicalab.cluster import process
from replicalab.queues.record import PRODUCER, QueueLog, merge, read_jsonl
from replicalab.queues.registry import open_queue

integration = pytest.mark.integration


def _consumer(url: str, central: str, claims: str, record: Path, index: int,
              *extra: str) -> list[str]:
    return [sys.executable, "-m", "replicalab.queues.consumer", "--queue", url, "--strategy",
            "central", "--central", central, "--claims", claims, "--record", str(record),
            "--index", str(index), "--batch", "1", "--visibility-s", "1", *extra]


def _send(url: str, n: int) -> QueueLog:
    log = QueueLog()

    async def go() -> None:
        q = open_queue(url, 1)
        c = await q.connect()
        try:
            for k in range(n):
                i = log.invoke("send", PRODUCER, time.monotonic_ns(), tag=f"k{k}")
                log.done(i, time.monotonic_ns(), msg_id=await c.send(f"k{k}|payload"))
        finally:
            await c.close()
            await q.close()

    asyncio.run(go())
    return log


def test_bad_input_exits_2_in_one_line(tmp_path: Path):
    p = subprocess.run([sys.executable, "-m", "replicalab.queues.consumer", "--queue",
                        "sim://sqs", "--record", str(tmp_path / "r.jsonl")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr.startswith("error: a simulated queue") and p.stderr.count("\n") == 1


@integration
def test_sigkilled_consumer_process_central_processes_each_message_once(redis_dc3,
                                                                        tmp_path: Path):
    cluster, _ = redis_dc3
    base = cluster.url
    url = base + ("&" if "?" in base else "?") + f"queue=c{uuid.uuid4().hex[:10]}"
    claims = f"claims-{uuid.uuid4().hex[:8]}"
    sends = _send(url, 5)
    rec_a, rec_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    # A takes one message and "processes" it for a minute: killed long before
    pid = process.start(_consumer(url, base, claims, rec_a, 0, "--process-ms", "60000",
                                  "--process-sigma", "0"), tmp_path / "a.log", label="consumer")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = [json.loads(x) for x in rec_a.read_text().splitlines()] \
                if rec_a.exists() else []
            if any(r["kind"] == "process" and r["outcome"] == "invoke" for r in rows):
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"consumer A never started processing: {(tmp_path / 'a.log')}")
    finally:
        process.kill9(pid)
    b = subprocess.run(_consumer(url, base, claims, rec_b, 1, "--process-ms", "20",
                                 "--idle-s", "4", "--max-duration-s", "60"),
                       capture_output=True, text=True, timeout=180)
    assert b.returncode == 0, b.stderr
    a_rows, b_rows = read_jsonl(rec_a), read_jsonl(rec_b)
    assert "killed" in a_rows["note"]  # A's processing, never closed, is info
    s = check_deliveries(merge(sends.columns(), a_rows, b_rows))["summary"]
    assert s["messages"] == 5 and s["lost"] == 0
    assert s["interrupted_processing"] == 1 and s["max_receive_count"] >= 2
    assert s["duplicate_processing"] == 0 and s["exactly_once"]
    assert b_rows["kind"].count("claim_takeover") >= 1  # B took A's expired claim over


def test_processes_need_a_real_queue():
    from replicalab.queues.spec import QueueSpec

    with pytest.raises(ValueError, match="drop processes or"):
        QueueSpec(processes=True).check()


@integration
def test_queue_run_with_consumer_processes_survives_a_sigkill(redis_dc3):
    from replicalab.faults.schedule import parse_fault
    from replicalab.queues.runner import run_workload
    from replicalab.queues.spec import QueueSpec

    cluster, _ = redis_dc3
    base = cluster.url
    url = base + ("&" if "?" in base else "?") + f"queue=p{uuid.uuid4().hex[:10]}"
    o = run_workload(QueueSpec(queue=url, strategy="central", central=base, consumers=4,
                               messages=40, batch=1, process_ms=500, process_sigma=0.0,
                               slow_fraction=0.0, visibility_s=2.0, empty_poll_ms=50,
                               max_duration_s=120, processes=True,
                               faults=(parse_fault("at=4s crash node=1 for=2s"),)))
    assert not o.notes, o.notes
    cols = o.log.columns()
    assert "crash" in cols["kind"] and any("SIGKILL" in n for n in cols["note"])
    s = check_deliveries(cols, o.dead_letters)["summary"]
    assert s["messages"] == 40 and s["lost"] == 0
    assert s["duplicate_processing"] == 0 and s["exactly_once"]
    # every consumer process recorded its work: four of them plus the restarted one
    assert {p for p in cols["process"] if p >= 0} == {0, 1, 2, 3}

"""A streaming query follows a live Cloud Latency Tester run (issue 6): the agents' HLC
traces are queried while they are being written, and the followed query finds exactly
what the batch query finds on the finished logs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "replicalab.cli.main"]
QUERY = "SELECT rtt_us FROM log WHEN EXISTS v IN rtt_us : v >= 0"


def _traces(out: Path, nodes: int, deadline_s: float) -> list[Path]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = sorted(out.glob("*/traces/n*.jsonl"))
        if len(found) == nodes:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the CLT run wrote no {nodes} trace logs in {deadline_s} s")


def test_streaming_query_over_a_live_clt_run(tmp_path):
    out = tmp_path / "runs"
    run = subprocess.Popen([*CLI, "clt", "local", "--nodes", "3", "--duration", "6s",
                            "--rate", "40", "--out", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        logs = _traces(out, 3, 60)
        assert run.poll() is None, "the run ended before the query could follow it"
        followed = subprocess.run([*CLI, "hlc", "query", QUERY, *map(str, logs), "--follow",
                                   "--max-seconds", "90", "--idle-seconds", "3", "--json"],
                                  capture_output=True, text=True, timeout=120)
        assert run.wait(timeout=60) == 0, run.stderr.read() if run.stderr else ""
    finally:
        if run.poll() is None:
            run.kill()
    assert followed.returncode == 0, followed.stderr
    lines = [json.loads(x) for x in followed.stdout.splitlines() if x.strip()]
    matches, summary = lines[:-1], lines[-1]
    assert len(matches) > 100
    batch = subprocess.run([*CLI, "hlc", "query", QUERY, *map(str, logs), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert batch.returncode == 0, batch.stderr
    whole = json.loads(batch.stdout)
    assert summary and len(matches) == len(whole["matches"])
    assert [(m["l_us"], m["c"]) for m in matches] == [(m["l_us"], m["c"]) for m in whole["matches"]]
    assert summary["summary"]["matched"] == whole["matched"]

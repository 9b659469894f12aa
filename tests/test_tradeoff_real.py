"""Seed 003 §4's experiment on a real store: the shared dc3 Redis, each client group on a
worker process of its own, paced in real time."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicalab.experiments.tradeoff import TradeoffPlan, run_tradeoff
from replicalab.report.tradeoff import render_tradeoff_report

pytestmark = pytest.mark.integration


def test_the_tradeoff_runs_on_real_redis_with_a_worker_process_per_group(redis_dc3,
                                                                        tmp_path: Path):
    c, _ = redis_dc3
    plan = TradeoffPlan(store=c.url, groups=(2,), clients_per_group=3, client_rate_per_s=5.0,
                        read_ratios=(0.9,), repeats=1, step_duration_s=3.0,
                        timeout_ms=2000.0)
    run = run_tradeoff(plan, tmp_path, workers=2)
    assert not run.error, run.error
    cells = run.results["cells"]
    assert [x["consistency"] for x in cells] == ["eventual", "consistent"]
    for cell in cells:
        step = cell["step"]
        # 6 clients, first slots within 200 ms: 15 slots each inside 3 s
        assert step["counts"]["offered"] == 6 * 15
        assert step["counts"]["sent"] >= 0.9 * 6 * 15  # a loaded machine may skip a few
        assert step["failure_rate"] == 0.0
        workers = step["workers"]
        assert len({w["pid"] for w in workers}) == 2  # one group on each process
        assert all(w["counts"]["sent"] > 0 and w["runtime"] == "real" for w in workers)
        read = step["latency"]["service/read"]
        assert read["count"] == step["counts"]["ok_reads"] > 0
    report = render_tradeoff_report(run.results, run.run_dir)
    assert (run.run_dir / "figures" / "tradeoff-read-latency.png").exists() and report.exists()

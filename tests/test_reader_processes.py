"""The staleness probe with its readers in processes of their own (seed 003 §2.1.2), on the
shared dc3 Redis: the readers run in other processes, their reads land on the writer's
timeline, and they see the remote replica's staleness as readers in the same process do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from freshcheck import done_before_ms
from replicalab.checkers import visibility
from replicalab.checkers.extract import element_ops
from replicalab.history.io import load_history
from replicalab.workloads import reader_processes
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig


def test_separate_processes_on_a_simulated_store_is_one_line_and_exit_2(tmp_path: Path):
    p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "probe", "--workload",
                        "staleness", "--store", "sim://simpledb", "--placement",
                        "separate-processes", "--duration", "2s", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip() == ("error: --placement separate-processes needs a real store (a "
                                "simulated one lives in one process); use separate-clients "
                                "on sim://")
    assert not list(tmp_path.iterdir())


@pytest.mark.integration
def test_readers_in_separate_processes_see_the_remote_replica_stale(redis_dc3, tmp_path: Path,
                                                                    monkeypatch):
    c, _ = redis_dc3
    made: list = []
    real = reader_processes.ReaderProcesses

    def spy(*args, **kw):
        made.append(real(*args, **kw))
        return made[-1]

    monkeypatch.setattr(reader_processes, "ReaderProcesses", spy)
    one_way_ms = next(x for x in c.links if x.dst_region == "US-E"
                      and x.src_region == "US-W").downstream_ms  # 40 ms to the replica
    spec = ProbeSpec(store=c.url, workload="staleness",
                     options=ProbeOptions(consistency="eventual", duration_s=8,
                                          write_interval_s=0.5, read_rate=50),
                     config=StalenessConfig(placement="separate-processes", readers=2,
                                            writer_region="US-E", reader_region="US-W",
                                            ranges="0-25,60-500"))
    run = run_probe(spec, tmp_path)
    assert not run.error, run.error
    (procs,) = made
    assert len(set(procs.pids.values())) == 2 and os.getpid() not in procs.pids.values()
    r = run.results
    early, late = r["fresh_by_range"]
    assert early["total"] > 20 and late["total"] > 100  # both readers' reads were judged
    assert early["p"] < 0.05 and late["p"] >= 0.99, (early, late)
    # the gross check: one replication hop, not none, not two. Not none: every read
    # answered within 0.8 x the hop of a write's start was stale (the last stale read's
    # time cannot say it: it trails the hop by up to a gap between reads, 20 ms here, and
    # read 27 ms once in CI). Not two: the median write visible within 1.3 x the hop of
    # its ack (midway between its last stale and first fresh read). The run's
    # `last_lt_100_median_ms`, which this test read until 2026-11-30, is the median over
    # periods of the curve's last stale t: with one period, the worst write, counted
    # from its start (beside a CPU hog, 73 ms where the median write took 38.5 ms)
    early_n, stale_n = done_before_ms(run.run_dir, 0.8 * one_way_ms)
    assert early_n >= 10 and stale_n == early_n, (early_n, stale_n)
    h, _ = load_history(run.run_dir)
    vis = visibility.of_element(*element_ops(h, KEY))
    got = visibility.judge_window(vis, 0.0, 1.3 * one_way_ms, None)
    assert vis.writes >= 10 and got.median_ms <= 1.3 * one_way_ms, got.line()
    print(f"{got.line()}; one way {one_way_ms} ms")
    assert r["config"]["placement"] == "separate-processes"
    assert "store_url" not in str(r["config"])  # the URL (and a password) is not saved

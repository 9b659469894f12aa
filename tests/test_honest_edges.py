"""Figures that stay true at the edges: a queue run stopped by Ctrl-C reports what it never
got to as not reached (never lost) and marks its figures partial; a fault-free register run
is available 1.0 (a compare-and-set whose condition was false is an answer); progress never
claims 100 % for a run that was cut short."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from replicalab.checkers.deliveries import check_deliveries
from replicalab.cli.progress import Tick
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe

CLI = [sys.executable, "-m", "replicalab.cli.main"]


def test_ctrl_c_in_a_queue_run_reports_not_reached_never_lost(tmp_path: Path):
    p = subprocess.Popen([*CLI, "queue", "run", "--messages", "200000", "--out",
                          str(tmp_path / "runs")], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        first = p.stderr.readline()  # piped progress: its first line once the run is going
        assert "done" in first, first
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    (run_dir,) = (tmp_path / "runs").iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    s = results["summary"]
    assert s["partial"] is True and s["lost"] == 0
    assert s["not_reached"] > 0 and s["not_reached"] + len(
        {t for t in results["checker"]["duplicated"]}) <= s["messages"]
    assert s["exactly_once"] is not True  # not decided, or a duplicate already seen
    assert any(n.startswith("PARTIAL: the run was cut short") for n in results["notes"])
    # the terminal and the report say so
    assert "PARTIAL" in out and "not reached (run cut short first)" in out
    assert re.search(r"lost \(acknowledged, never committed\)\s+0 ", " ".join(out.split("│")))
    assert "100% done" not in err and "stopped before the end" in err
    html = (run_dir / "report.html").read_text()
    assert "PARTIAL" in html and "not reached" in html


def test_deliveries_of_a_run_cut_short():
    cols = {"kind": ["send", "send", "deliver", "process", "commit"],
            "tag": ["a", "b", "a", "a", "a"], "msg_id": ["1", "2", "1", "1", "1"],
            "receipt": ["", "", "r1", "r1", "r1"], "outcome": ["ok"] * 5,
            "invoke_ns": [0, 1, 2, 3, 4], "complete_ns": [1, 2, 3, 4, 5],
            "lease_ns": [0, 0, 10, 0, 0], "count": [0, 0, 1, 0, 0], "process": [0] * 5,
            "note": [""] * 5}
    whole = check_deliveries(cols)["summary"]
    assert (whole["lost"], whole["not_reached"], whole["exactly_once"]) == (1, 0, False)
    cut = check_deliveries(cols, cut_short=True)
    s = cut["summary"]
    assert (s["lost"], s["not_reached"], s["partial"], s["exactly_once"]) == (0, 1, True, None)
    assert cut["not_reached"] == ["b"] and cut["lost"] == []


def test_a_fault_free_register_run_is_available_one(tmp_path: Path):
    run = run_probe(ProbeSpec(store="sim://primary", workload="register",
                              options=ProbeOptions(duration_s=30),
                              config=RegisterConfig(mix="read=50,cas=50")), tmp_path)
    failed_cas = run.results["ops"]["failed"]
    assert failed_cas > 100  # conditions that were false: answers, not refusals
    a = run.results["availability"]
    assert a["overall"] == 1.0 and a["overall_ops"] == 1.0
    assert a["by_f"]["write"]["overall_ops"] == 1.0 and a["ok_count"] == a["count"]


def test_progress_of_a_run_cut_short_never_says_finished(capsys):
    now = [0.0]
    tick = Tick("probe", None, clock=lambda: now[0])
    tick(0.1)
    now[0] = 4.0
    tick(0.2)  # 4 s in: the piped line appears
    tick.interrupted()
    tick.finish()
    err = capsys.readouterr().err
    assert "stopped before the end (20% done, 4s elapsed)" in err
    assert "finished" not in err and "100%" not in err and "left" not in err.splitlines()[-1]


def test_saving_is_not_cut_short_by_an_interrupt():
    from replicalab.cluster.process import interrupts_deferred

    with interrupts_deferred() as late:
        signal.raise_signal(signal.SIGINT)
        time.sleep(0.01)
        saved = True  # still here: the interrupt waited
    assert saved and late == [True]

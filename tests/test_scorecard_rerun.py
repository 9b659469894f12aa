"""Issue 40's sequence on a real Redis: a scorecard Ctrl-C'd in its durability cell removes
what it started, records included; a record left with its processes gone (a scorecard
killed before it could remove it, what the issue met) does not stop the re-run, which
measures the durability cell; a cell that cannot be measured (a running cluster holds the
scorecard's cluster name) makes the command exit 1 with advice the user can follow.

Wrong products these fail: a re-run that greys the cell because of the stale record and
exits 0 (the issue), a teardown cut by the Ctrl-C that leaves the record, an exit 0 for a
scorecard with a cell not measured, advice naming an option the command does not have."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicalab.cluster import powerloss, process
from replicalab.cluster.base import driver
from servers import server_missing

pytestmark = pytest.mark.integration

EXE = [sys.executable, "-m", "replicalab.cli.main"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "REPLICALAB_STATE_DIR": str(tmp_path / ".replicalab"),
            "COLUMNS": "200"}


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=_env(tmp_path))


def _clusters(tmp_path: Path) -> list[str]:
    return sorted(p.parent.name for p in
                  (tmp_path / ".replicalab" / "clusters").glob("*/cluster.json"))


def _pids(record: Path) -> list[int]:
    c = json.loads(record.read_text())
    return [n["pid"] for n in c["nodes"] if n["pid"]] + [c["toxiproxy_pid"]]


def _need_redis() -> None:
    try:
        driver("redis").check_installed()
    except ValueError as err:
        server_missing("redis-server", err)


def test_a_ctrl_c_scorecard_cleans_up_and_a_stale_record_does_not_stop_the_rerun(
        tmp_path: Path):
    _need_redis()
    why = powerloss.unavailable_reason()
    if why:
        server_missing("the power-loss file system", why)
    name = "scorecard-redis-durability-0"
    record = tmp_path / ".replicalab" / "clusters" / name / "cluster.json"
    argv = [*EXE, "scorecard", "--kinds", "redis", "--quick", "--only", "durability",
            "--out", str(tmp_path / "runs")]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (record.exists() and list(tmp_path.glob("runs/*/runs/*-staleness-*"))):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the durability cluster never ran"
            time.sleep(0.05)
        pids = _pids(record)  # the cluster is up and a run on it is going
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert _clusters(tmp_path) == [], err  # no record left
    assert not [p for p in pids if process.alive(p)], err  # nor a process

    # the state: a record whose processes are gone (a command killed outright)
    up = _cli(tmp_path, "cluster", "up", "redis", "--nodes", "1", "--regions", "lan",
              "--name", name, "--json")
    if up.returncode != 0:
        server_missing("a redis cluster", up.stderr)
    for pid in _pids(record):
        process.kill9(pid)
    assert "process gone" in _cli(tmp_path, "cluster", "status", name).stdout

    again = _cli(tmp_path, *argv[3:])  # the same command, as the user re-ran it
    assert again.returncode == 0, again.stderr
    (run_dir,) = sorted((tmp_path / "runs").glob("*-scorecard-redis"))[-1:]
    (cell,) = json.loads((run_dir / "scorecard.json").read_text())["cells"]
    assert cell["grade"] != "grey" and not cell["failed"], cell
    assert _clusters(tmp_path) == []


def test_a_cell_that_cannot_be_measured_exits_1_with_advice_that_works(tmp_path: Path):
    _need_redis()
    up = _cli(tmp_path, "cluster", "up", "redis", "--nodes", "1", "--regions", "lan",
              "--name", "scorecard-redis", "--json")
    if up.returncode != 0:
        server_missing("a redis cluster", up.stderr)
    try:
        p = _cli(tmp_path, "scorecard", "--kinds", "redis", "--quick", "--only", "latency",
                 "--out", str(tmp_path / "runs"))
    finally:
        down = _cli(tmp_path, "cluster", "down", "scorecard-redis")
    assert p.returncode == 1, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 cell could not be measured"), last
    assert "a cluster named 'scorecard-redis' exists (it is running)" in last, last
    assert "`replicalab cluster down scorecard-redis`" in last, last
    assert "another --name" in last and "--only latency" in last, last
    assert "Traceback" not in p.stderr
    assert down.returncode == 0, down.stderr  # the advice works
    help_text = _cli(tmp_path, "scorecard", "--help").stdout
    assert "--name" in help_text  # the option the advice names exists
    saved = json.loads(next((tmp_path / "runs").glob("*/scorecard.json")).read_text())
    assert [c["failed"] for c in saved["cells"]] == [True]

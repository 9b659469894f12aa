"""report, export and check on every kind of run with a history, and export never destroys
what a run recorded: a probe run, a queue run and a placement-live run (simulated)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicalab.cli.main import app


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "100"})
    return res.exit_code, res.stdout, res.stderr


def digest(run_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("runs")
    made = {}
    for name, args in (("probe", ["probe", "--workload", "register", "--duration", "5s"]),
                       ("queue", ["queue", "run", "--messages", "400"]),
                       ("live", ["placement", "live", "--duration", "3s", "--objects", "10"])):
        code, _, stderr = cli(*args, "--out", out / name)
        assert code == 0, (name, stderr)
        (made[name],) = (out / name).iterdir()
    return made


def test_export_over_a_runs_own_history_is_refused_and_the_run_untouched(runs):
    for run_dir in runs.values():
        before = digest(run_dir)
        for target in ("history.parquet", "queue.parquet", "results.json", "config.json"):
            for extra in ([], ["--force"]):
                code, _, err = cli("export", run_dir, "--out", run_dir / target, "--format",
                                   "jsonl", *extra)
                assert code == 2 and err.startswith("error: ") and len(err.splitlines()) == 1
                assert "never writes over what a run saved" in err
        code, _, err = cli("export", run_dir, "--output", run_dir / "history.parquet")
        assert code == 2 and len(err.splitlines()) == 1  # bad input: the error alone
        assert digest(run_dir) == before
    code, _, err = cli("export", runs["probe"], "--output", runs["probe"].parent / "old.edn")
    assert code == 0 and "note: --output is deprecated; use --out" in err
    code, out, err = cli("report", runs["probe"])
    assert code == 0 and "agrees with the saved results" in out, err


def test_export_asks_before_replacing_a_file_or_writing_into_a_run(runs, tmp_path: Path):
    run_dir = runs["probe"]
    target = tmp_path / "h.jsonl"
    assert cli("export", run_dir, "--format", "jsonl", "--out", target)[0] == 0
    code, _, err = cli("export", run_dir, "--format", "jsonl", "--out", target)
    assert code == 2 and "exists; pass --force" in err
    assert cli("export", run_dir, "--format", "jsonl", "--out", target, "--force")[0] == 0
    code, _, err = cli("export", run_dir, "--out", runs["queue"] / "mine.edn")
    assert code == 2 and "inside the run directory" in err


def test_report_and_export_work_on_a_queue_run(runs):
    run_dir = runs["queue"]
    code, out, err = cli("report", run_dir)
    assert code == 0, err
    assert "report: " in out and "agrees with the saved results" in out
    code, out, err = cli("export", run_dir, "--format", "jsonl")
    assert code == 0, err
    events = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    sends = [e for e in events if e["f"] == "send" and e["type"] == "ok"]
    assert len(sends) == json.loads((run_dir / "results.json").read_text())["summary"][
        "messages"]
    assert {e["f"] for e in events} >= {"send", "deliver", "process", "delete"}
    assert cli("export", run_dir, "--format", "edn", "--out", run_dir.parent / "q.edn")[0] == 0
    code, _, err = cli("check", run_dir)
    assert code == 2 and f"replicalab report {run_dir}` re-checks it" in err


def test_report_and_export_work_on_a_placement_live_run(runs):
    run_dir = runs["live"]
    code, out, err = cli("report", run_dir)
    assert code == 0, err
    assert "agrees with the saved results" in out
    code, out, err = cli("export", run_dir, "--format", "edn")
    assert code == 0, err
    assert (run_dir / "history.edn").read_text().count(":f :write") > 10
    code, _, err = cli("check", run_dir)
    assert code == 2 and "re-checks its history for lost writes" in err


def test_a_refused_or_interrupted_command_leaves_no_empty_run_directory(tmp_path: Path):
    import subprocess
    import sys

    from tests.parked import Parked

    code, _, err = cli("load", "run", "--workers", "0", "--out", tmp_path / "load")
    assert code == 2 and "--workers 0" in err
    assert not list((tmp_path / "load").glob("*"))
    # Ctrl-C while the simulation waits at its first progress line (a second into it)
    run = Parked([sys.executable, "-m", "replicalab.cli.main", "placement", "simulate",
                  "--objects", "20000", "--requests", "5000000", "--out", str(tmp_path / "sim")],
                 stdout=subprocess.PIPE)
    err = run.interrupt()
    assert run.proc.returncode == 130, err
    assert "% done" in err and "finished" not in err, err
    assert not list((tmp_path / "sim").glob("*"))

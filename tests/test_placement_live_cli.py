"""``replicalab placement live``: a run on simulated regions with --json and its run directory,
and bad input refused in one line with exit code 2, before any run directory is made."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from replicalab.cli.placement import attach


def _app() -> typer.Typer:
    # the placement group as cli/placement.py makes it, with only this command attached
    app = typer.Typer()
    group = typer.Typer(no_args_is_help=True)
    attach(group)
    app.add_typer(group, name="placement")
    return app


def run(*args: str):
    return CliRunner().invoke(_app(), ["placement", "live", *args])


def test_sim_run_prints_json_and_saves_history_and_results(tmp_path: Path):
    r = run("--store", "sim", "--policy", "cog:window_ms=10000", "--duration", "40s",
            "--json", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    managed, static = doc["policies"]
    assert managed["policy"] == "cog:window_ms=10000" and static["policy"] == "static"
    assert managed["mean_latency_ms"] < static["mean_latency_ms"]
    assert doc["lost_writes"] == 0 and doc["migrations_moved"] > 0
    assert len(doc["windows"]) == 10
    run_dir = Path(doc["run_dir"])
    assert {"history.parquet", "results.json", "config.json"} <= {p.name for p in
                                                                   run_dir.iterdir()}
    rows = pq.read_table(run_dir / "history.parquet").num_rows
    assert rows == sum(doc["ops"].values()) + 60 + sum(doc["migrations"].values())
    assert doc["tables"][0]["caption"].startswith("Mean access latency over time")
    # the report: three figures, the summary with the measured means, no lost writes
    assert {"latency.png", "migrations.png", "share.png"} <= {
        p.name for p in (run_dir / "figures").iterdir()}
    html = (run_dir / "report.html").read_text()
    assert "no acknowledged write was lost" in html
    assert f"{managed['mean_latency_ms']:.1f}" in html and 'id="fig-latency"' in html
    # `report` re-checks it as a placement-live run, not as a probe's
    from replicalab.api.runkind import PLACEMENT_LIVE, kind

    assert kind(run_dir, "report") == PLACEMENT_LIVE


def test_a_periodic_policy_without_a_window_gets_one_and_says_so(tmp_path: Path):
    r = run("--policy", "majority", "--duration", "12s", "--objects", "6", "--out",
            str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "note: majority decides every window_ms=2000" in r.stdout
    assert "lost writes" in r.stdout


@pytest.mark.parametrize(("args", "needle"), [
    (("--policy", "nope"), "unknown policy 'nope'"),
    (("--policy", "oracle"), "placement simulate"),
    (("--policy", "cog:x=1"), "no parameter 'x'"),
    (("--regions", "aws15:us-east-1,mars"), "'mars' is not in the aws15 matrix"),
    (("--regions", "dc9"), "unknown region set 'dc9'"),
    (("--store", "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3"),
     "cannot reach Redis at 127.0.0.1:1"),
    (("--store", "redis://127.0.0.1:1"), "1 store URLs for 3 regions"),
    (("--store", "cassandra"), "--store 'cassandra'"),
    (("--duration", "0s"), "--duration"),
    (("--objects", "0"), "at least 1"),
])
def test_bad_input_is_one_line_exit_2_and_leaves_no_run_directory(tmp_path: Path, args,
                                                                 needle):
    r = run(*args, "--out", str(tmp_path / "runs"))
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_subset_of_aws15_runs_on_those_regions(tmp_path: Path):
    r = run("--regions", "aws15:us-east-1,eu-west-1,ap-northeast-1", "--duration", "20s",
            "--objects", "9", "--json", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["deployment"]["regions"] == ["us-east-1", "eu-west-1", "ap-northeast-1"]
    assert doc["lost_writes"] == 0 and doc["ops"]["ok"] > 0

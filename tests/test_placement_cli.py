"""``replicalab placement simulate``: --json, the run directory and report, determinism, and
bad input (one line, exit 2, nothing left behind)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from replicalab.cli import placement
from replicalab.placement import simulate as sim

app = typer.Typer()
placement.register(app)
SMALL = ["--objects", "300", "--requests", "30000", "--duration", "60s"]


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    r = CliRunner().invoke(app, ["placement", *args])
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def one_line_error(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in p.stderr + p.stdout
    for n in needles:
        assert n in lines[0], lines[0]


def test_simulate_json_run_directory_and_report(tmp_path: Path):
    p = invoke("simulate", "--workload", "shared", "--policy",
               "static,consecutive,majority,ema,cog,oracle", "--regions", "aws15", *SMALL,
               "--out", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [e["policy"] for e in out["policies"]] == [
        "static", "consecutive", "majority", "ema", "cog", "oracle"]
    for e in out["policies"]:
        assert {"policy", "mean_latency_ms", "p99_latency_ms", "migrations_per_1k",
                "max_share"} <= set(e)
        assert 0 < e["max_share"] <= 1 and e["p99_latency_ms"] >= e["mean_latency_ms"] > 0
    assert out["policies"][0]["migrations_per_1k"] == 0  # static never moves
    run_dir = Path(out["run_dir"])
    assert json.loads((run_dir / "results.json").read_text())["config"]["workload"] == "shared"
    html = (run_dir / "report.html").read_text()
    for fig in ("latency", "migrations", "imbalance"):
        assert (run_dir / "figures" / f"{fig}.png").stat().st_size > 5000
        assert f'id="fig-{fig}"' in html
    assert "owner is a sharer" in html


def test_same_seed_same_results_and_balance_for_every_policy():
    def run(**kw) -> list[dict]:
        exp = sim.experiment("skew", policies="static,cog", objects=100, requests=30_000,
                             duration_s=60.0, **kw)
        entries = sim.run_experiment(exp)["policies"]
        for e in entries:
            e.pop("wall_s"), e.pop("requests_per_s")
        return entries

    a = run(seed=4)
    assert a == run(seed=4)
    assert a != run(seed=5)
    capped = run(seed=4, balance=0.3)
    assert [e["policy"] for e in capped] == ["static:balance=0.3", "cog:balance=0.3"]
    assert capped[1]["max_share"] <= 0.3 < a[1]["max_share"]


def test_table_output(tmp_path: Path):
    p = invoke("simulate", "--workload", "locality", "--policy", "static,cog", *SMALL,
               "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "steady_ms" in p.stdout and "report:" in p.stdout


def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path: Path):
    out = tmp_path / "runs"
    cases = [
        (["--policy", "static,gravity"], ("unknown policy", "gravity")),
        (["--policy", "cog:balance=0"], ("balance",)),
        (["--balance", "0"], ("balance",)),
        (["--balance", "1.5"], ("balance",)),
        (["--regions", "aws15:us-east-1,mars-north-1"], ("mars-north-1", "aws15")),
        (["--regions", "aws99"], ("aws99",)),
        (["--workload", "bursty"], ("bursty", "locality")),
        (["--policy", "consecutive:window_ms=5"], ("no parameter",)),
        (["--duration", "soon"], ("--duration",)),
        (["--balance", "0.05"], ("at least",)),  # 15 regions x 5 % cannot hold every object
    ]
    for args, needles in cases:
        one_line_error(invoke("simulate", *args, "--out", str(out)), *needles)
    assert not out.exists()


def test_skew_defaults_and_balance_errors_name_the_policy():
    exp = sim.experiment("skew", balance=0.4)
    assert [s.label for s in exp.policies] == ["static", "cog", "cog:balance=0.4", "oracle"]
    exp = sim.experiment("skew", objects=1, requests=10)
    with pytest.raises(ValueError, match=r"^policy cog:balance=0\.25: balance 0\.25 lets 5"):
        sim.check(exp)

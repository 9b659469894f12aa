"""Batches of probes (``probe --repeats/--sweep --workers``): the plan (seeds, sweep points,
labels), the spread statistics, a batch on two processes equal to the same batch on one
and to the same runs made one by one, the command line (JSON, report, bad input) and
Ctrl-C (what was done is kept)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from replicalab.checkers.spread import merge_figures, pooled, spread, t975
from replicalab.errors import ParameterError
from replicalab.runtime.parallel import JobFailed, Workers
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.batch import parse_axis, plan_runs, run_batch
from replicalab.workloads.runner import ProbeSpec, run_probe


def _build(point: dict[str, str]) -> ProbeSpec:
    url = "sim://simpledb" + (f"?flush_ms={point['flush_ms']}" if "flush_ms" in point else "")
    return ProbeSpec(store=url, workload="staleness",
                     options=ProbeOptions(duration_s=float(point.get("duration", 40))))


def test_plan_runs_every_point_with_the_same_seeds():
    plan = plan_runs(_build, [parse_axis("flush_ms=300,500"), parse_axis("duration=20,40")],
                     3, 7)
    assert len(plan) == 12
    assert [r.seed for r in plan[:3]] == [7, 8, 9]
    assert plan[0].point == (("flush_ms", "300"), ("duration", "20"))
    assert plan[0].label == "flush_ms-300_duration-20_seed-7"
    assert plan[0].spec.store.endswith("flush_ms=300") and plan[0].spec.options.seed == 7
    assert len({r.label for r in plan}) == 12


@pytest.mark.parametrize("text", ["flush_ms", "=1,2", "a b=1", "x=1,1", "x="])
def test_a_malformed_sweep_is_named(text):
    with pytest.raises(ParameterError, match=r"^sweep ") as err:  # --sweep on the CLI
        parse_axis(text)
    assert err.value.parameter == "sweep"


def test_spread_and_pooled_figures():
    assert t975(1) == 12.7062 and t975(19) == 2.093
    assert abs(t975(60) - 2.0003) < 1e-3 and abs(t975(1000) - 1.9623) < 1e-3
    s = spread([1.0, 2.0, 3.0, None])
    assert s["n"] == 3 and s["mean"] == 2.0 and s["sd"] == 1.0 and s["median"] == 2.0
    half = 4.3027 / math.sqrt(3)
    assert s["ci95"] == [round(2 - half, 6), round(2 + half, 6)]
    assert spread([5.0])["ci95"] is None and spread([])["mean"] is None
    p = pooled([(1, 4), (3, 4), None])
    assert (p["count"], p["total"], p["p"]) == (4, 8, 0.5) and p["ci95"][0] < 0.5 < p["ci95"][1]
    m = merge_figures([{"f": (1, 4), "x": 1.0}, {"f": (3, 4), "x": 3.0}])
    assert m["f"]["pooled"]["p"] == 0.5 and m["f"]["spread"]["mean"] == 0.5
    assert "pooled" not in m["x"] and m["x"]["spread"]["mean"] == 2.0


def test_a_batch_on_two_processes_is_the_batch_on_one_and_the_runs_made_one_by_one(tmp_path):
    plan = plan_runs(_build, [], 3, 1)
    with Workers(2) as pool:
        two = run_batch(plan, tmp_path / "two", pool)
    with Workers(1) as pool:
        one = run_batch(plan, tmp_path / "one", pool)
    batch_json = "batch.json"
    assert (two.batch_dir / batch_json).read_bytes() == (one.batch_dir / batch_json).read_bytes()
    config = json.loads((two.batch_dir / "config.json").read_text())
    assert config["workers"]["kind"] == "process" and not config["interrupted"]
    for r in plan:  # each run is the probe with that seed, byte for byte
        alone = run_probe(r.spec, tmp_path / "alone")
        saved = (two.batch_dir / "runs" / r.label / "results.json").read_bytes()
        assert saved == (alone.run_dir / "results.json").read_bytes()
    point = two.summary["points"][0]
    assert [r["seed"] for r in point["runs"]] == [1, 2, 3]
    fresh = point["merged"]["fresh in [0, 450) ms"]
    counts = [r["figures"]["fresh in [0, 450) ms"] for r in point["runs"]]
    assert fresh["pooled"]["count"] == sum(c[0] for c in counts)
    assert fresh["pooled"]["total"] == sum(c[1] for c in counts)
    first = point["series"]["first time >= 99 % fresh (ms)"]
    assert len(first) == 3 and all(len(x) == 1 for x in first)  # one point per run


def _boom(x: int) -> int:
    if x == 2:
        raise RuntimeError("job two failed")
    return x


def test_a_failing_job_is_named():
    with Workers(2) as pool, pytest.raises(JobFailed, match="job two failed"):
        pool.map(_boom, [(1,), (2,), (3,)])
    with Workers(2) as pool:
        assert pool.map(_boom, [(1,), (3,), (4,)]) == [1, 3, 4]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replicalab.cli.main", "probe", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_probe_repeats_on_two_workers_prints_the_batch_and_writes_its_report(tmp_path):
    p = _cli("--duration", "20s", "--workers", "2", "--sweep", "read_rate=25,50", "--json",
             "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["runs_done"] == 2 and [pt["point"] for pt in out["points"]] == [
        {"read_rate": "25"}, {"read_rate": "50"}]
    assert out["points"][0]["merged"]["reads"]["spread"]["mean"] < (
        out["points"][1]["merged"]["reads"]["spread"]["mean"])
    batch = Path(out["batch_dir"])
    assert Path(out["report"]).read_text().count("<svg") == 2  # Figure 3 per point
    for label in ("read_rate-25_seed-1", "read_rate-50_seed-1"):
        assert (batch / "runs" / label / "report.html").exists()


@pytest.mark.parametrize(("args", "said"), [
    (["--workers", "2"], "add --repeats N"),
    (["--repeats", "2", "--sweep", "nosuch_ms=1,2"], "nosuch_ms"),
    (["--repeats", "2", "--sweep", "readers"], "KEY=V1,V2"),
    (["--repeats", "0"], "--repeats 0"),
    (["--store", "redis://127.0.0.1:1", "--repeats", "2", "--workers", "2"], "real store"),
])
def test_bad_batch_options_are_one_line(args, said, tmp_path):
    from typer.testing import CliRunner

    from replicalab.cli.main import app

    r = CliRunner().invoke(app, ["probe", *args, "--out", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert said in r.output and "Traceback" not in r.output
    assert not list(tmp_path.iterdir())  # nothing made before the input was checked


def test_model_validate_on_two_workers_gives_the_verdicts_of_one():
    from typer.testing import CliRunner

    from replicalab.cli.main import app

    # two of the grid's six entries (the cheapest); validate starts the dearer N=5 first
    args = ["model", "validate", "--model", "paxos-lan", "--rounds", "100", "--json",
            "--entry", "Paxos N=3", "--entry", "Paxos N=5"]
    one = CliRunner().invoke(app, args)
    two = CliRunner().invoke(app, [*args, "--workers", "2"])
    assert one.exit_code == two.exit_code and one.exit_code in (0, 1), one.output
    rows = json.loads(one.stdout)["rows"]
    assert [r["label"] for r in rows] == ["Paxos N=3", "Paxos N=5"]
    assert json.loads(two.stdout)["rows"] == rows  # same order too


def test_model_validate_refuses_an_entry_not_in_the_grid_naming_its_entries():
    from typer.testing import CliRunner

    from replicalab.cli.main import app

    r = CliRunner().invoke(app, ["model", "validate", "--model", "paxos-lan", "--entry",
                                 "Paxos N=4"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "--entry 'Paxos N=4' is no grid entry" in r.output and "'Paxos N=3'" in r.output

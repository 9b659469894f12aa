"""``replicalab model`` on the command line: output, report, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import _one_line_error, run


def test_model_pbs_json_and_report(tmp_path: Path):
    p = run("model", "pbs", "--n", "3", "--r", "1", "--w", "1", "--trials", "20000", "--json",
            "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    vis = out["t_visibility"]["p"]
    assert vis[0] < 0.5 and vis[-1] > 0.99 and vis == sorted(vis)
    assert out["k_staleness"]["1"] == round(1 / 3, 6)
    assert Path(out["report"]).is_file()
    assert (Path(out["run_dir"]) / "figures" / "visibility.png").is_file()


def test_model_pbs_fitted_from_a_probe_run(tmp_path: Path):
    p = run("probe", "--store", "sim://quorum?n=3&r=1&w=1", "--duration", "2m",
            "--read-rate", "200", "--write-interval", "200ms", "--json", "--out", str(tmp_path),
            cwd=tmp_path)
    run_dir = json.loads(p.stdout)["run_dir"]
    p = run("model", "pbs", "--from-run", run_dir, "--trials", "20000", "--json",
            "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "fitted from" in json.loads(p.stdout)["params"]["legs"]


def test_model_pbs_bad_input(tmp_path: Path):
    _one_line_error(run("model", "pbs", "--r", "4", cwd=tmp_path), 2, "r=4", "N=3")
    _one_line_error(run("model", "pbs", "--apply-ms", "-1", cwd=tmp_path), 2, "negative")
    _one_line_error(run("model", "pbs", "--t-max-ms", "0", cwd=tmp_path), 2, "--t-max-ms")
    _one_line_error(run("model", "pbs", "--from-run", str(tmp_path), cwd=tmp_path), 2,
                    "not a run directory")


# The twin's capacity search is what costs (14 runs of at least 5,000 requests plus twice
# the longest chain of WAN hops at the load tried): on three regions 10-20 ms apart with 10x
# the message cost (capacity ~2,300 req/s, not aws5's ~21,000) each run stays near its floor.
SMALL_WAN_TOML = """[wan]
mu_md_ms = 0.25
[wan.regions]
name = "tri"
regions = ["A", "B", "C"]
rtt_ms = [[0, 10, 20], [10, 0, 15], [20, 15, 0]]
sd_ms = 1.0
"""


def test_model_command_compare_and_twin(tmp_path: Path):
    (tmp_path / "tri.toml").write_text(SMALL_WAN_TOML)
    p = run("model", "epaxos", "--params", "tri.toml", "--set", "wan.leader=C",
            "--compare", "conflict=0.02,0.5", "--points", "5", "--twin", "--rounds", "2000",
            "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    labels = [c["label"] for c in out["curves"]]
    assert labels == ["conflict=0.02", "conflict=0.02 (twin)", "conflict=0.5",
                      "conflict=0.5 (twin)"]
    low, high = out["curves"][0], out["curves"][2]
    assert low["max_throughput_rps"] > 1.3 * high["max_throughput_rps"]
    assert out["tables"][0]["header"][0] == "conflict"
    assert (Path(out["run_dir"]) / "figures" / "curves.png").is_file()


def test_model_validate_one_model(tmp_path: Path):
    # two of the grid's five leaders (each entry's capacity search takes ~10 s)
    p = run("model", "validate", "--model", "paxos-wan", "--rounds", "1000", "--json",
            "--entry", "paxos-wan leader=VA", "--entry", "paxos-wan leader=JP", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert [r["label"] for r in rows] == ["paxos-wan leader=VA", "paxos-wan leader=JP"]
    assert all(r["ok"] for r in rows)
    # capacity: the model's formula beside the twin's own measurement, within 10 %
    for r in rows:
        assert r["capacity_ok"] and r["capacity_gap"] <= 0.10, r
        assert r["twin_capacity_rps"] != r["model_capacity_rps"]  # measured, not copied
        assert r["twin_bottleneck"] == "n" + r["label"].split("=")[1]  # the leader
    header = json.loads(p.stdout)["tables"][0]["header"]
    assert "capacity twin (req/s)" in header and "capacity gap" in header


def test_model_bad_parameters(tmp_path: Path):
    _one_line_error(run("model", "wpaxos", "--set", "locality=2", cwd=tmp_path), 2,
                    "locality")
    _one_line_error(run("model", "epaxos", "--set", "wan.nope=1", cwd=tmp_path), 2,
                    "unknown parameter 'nope'")
    _one_line_error(run("model", "epaxos", "--set", "conflict", cwd=tmp_path), 2, "KEY=VALUE")
    _one_line_error(run("model", "validate", "--model", "raft", cwd=tmp_path), 2,
                    "--model 'raft'")
    bad = tmp_path / "p.toml"
    bad.write_text("[params\n")
    _one_line_error(run("model", "pigpaxos", "--params", str(bad), cwd=tmp_path), 2,
                    "not valid TOML")
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes("n = 5\n# caf\u00e9\n".encode("latin-1"))
    _one_line_error(run("model", "paxos-lan", "--params", str(latin1), "--out",
                        str(tmp_path / "runs"), cwd=tmp_path), 2,
                    f"--params {latin1} is not UTF-8 text", "save it as UTF-8")
    assert not (tmp_path / "runs").exists()
    _one_line_error(run("model", "paxos-lan", "--set", "n=many", cwd=tmp_path), 2,
                    "--set n='many': must be a int", "with --params if")


def test_against_is_offered_only_where_it_works(tmp_path: Path):
    """``--against`` is in the help of the models with a real counterpart only; the others
    refuse it (and --duration) at parse time, in one line naming the models that take it,
    before any model runs and without a run directory."""
    helped = run("model", "pigpaxos", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "--against" not in helped.stdout
    for model, opt, value in (("epaxos", "--against", "etcd"), ("pigpaxos", "--against", "etcd"),
                              ("paxos-lan", "--duration", "5s")):
        p = run("model", model, opt, value, "--points", "1",  # --points 1 would fail later
                cwd=tmp_path)
        _one_line_error(p, 2, model, "paxos-wan (against etcd)", "pbs (against cassandra)")
    assert not (tmp_path / "runs").exists()
    wan = run("model", "paxos-wan", "--help", cwd=tmp_path)
    assert "--against" in wan.stdout and "etcd" in wan.stdout
    top = run("model", "--help", cwd=tmp_path)
    assert "paxos-wan (etcd)" in top.stdout and "pbs (cassandra)" in top.stdout

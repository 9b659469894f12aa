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

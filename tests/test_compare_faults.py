"""``replicalab compare --fault``: every store's staleness probes run under the same fault
schedule and the table gains availability and lost acknowledged writes; faults the
3-node clusters cannot take are refused before any cluster starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicalab.cli.main import app


def compare(*args: str):
    return CliRunner().invoke(app, ["compare", *args])


@pytest.mark.parametrize("fault, extra, message", [
    ("at=2s crash node=3 for=1s", (), "nodes 0..2"),
    ("at=2s partition region=Mars for=1s", (), "US-E, US-W, EU"),
    ("at=30s crash node=1 for=1s", ("--duration", "10"), "starts after the 10 s probe"),
    ("at=2s crash node=1 for=1s", ("--workload", "latency"), "--workload staleness"),
    ("at=2s explode node=1 for=1s", (), "crash, pause, partition, slow"),
])
def test_faults_the_comparison_cannot_take_are_one_line_errors(tmp_path: Path, fault, extra,
                                                               message):
    res = compare("--kinds", "redis", "--fault", fault, "--out", str(tmp_path / "runs"),
                  *extra)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr
    assert not (tmp_path / "runs").exists()  # nothing started, nothing written


@pytest.mark.integration
def test_a_partition_shows_as_staleness_and_availability_per_store(tmp_path: Path):
    res = compare("--kinds", "redis", "--duration", "10", "--ops", "20", "--json",
                  "--fault", "at=3s partition region=US-W for=4s", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    (row,) = out["rows"]
    assert out["params"]["faults"] == ["partition region US-W at 3s for 4s"]
    # the US-W replica is cut off from the primary for 4 of the 10 s: its reads go stale,
    # but it keeps answering, and consistent reads at the primary are unaffected
    assert row["eventual_stale_fraction"] > 0.2
    assert row["eventual_availability"] == 1.0 and row["consistent_stale_fraction"] == 0.0
    # ... every read answered: a read that timed out or was refused fails its op. (The share
    # of client time served inside the fault is no check of that: time a busy machine held
    # a read counts against it, 0.998 beside a CPU hog with six test workers)
    assert row["eventual_availability_ops"] == 1.0, row
    assert row["eventual_read_ops"] > 100, row
    assert row["eventual_lost_writes"] == row["consistent_lost_writes"] == 0
    header = out["tables"][0]["header"]
    assert ("eventual: read time available during the fault / whole run (reads ok)"
            in header)
    assert "lost acknowledged writes" in header
    assert "under partition region US-W" in out["tables"][0]["caption"]
    run_dir = Path(out["report"]).parent
    probes = sorted((run_dir / "runs").glob("*-staleness-*"))
    assert len(probes) == 2
    for p in probes:  # each probe recorded the fault it ran under
        faults = json.loads((p / "results.json").read_text())["faults"]
        assert [f["label"] for f in faults] == ["partition region US-W"]

"""The scorecard on simulated stores (virtual time, seconds): every cell filled or saying why
not, cells that agree with the workloads run alone with the same seed, bad input refused in
one line, an interrupted scorecard keeping its cells and drawing a partial chart."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicalab.cluster.kinds import resolve
from replicalab.experiments import cells
from replicalab.experiments.plan import QUICK, parse_kinds
from replicalab.experiments.properties import get, names, parse_only
from replicalab.experiments.run import Scorecard, run
from replicalab.report.scorecard import render_scorecard
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import StalenessConfig

PROPERTIES = names()
EXE = [sys.executable, "-m", "replicalab.cli.main"]
SIM = "sim://primary?replication=async&regions=dc3"
TINY = dataclasses.replace(QUICK, staleness_s=20.0, register_s=10.0, latency_ops=20,
                           fault_probe_s=20.0, fault_at_s=5.0, fault_for_s=8.0,
                           txn_s=5.0)


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "100", **env})


@pytest.fixture(scope="module")
def sim_scorecard(tmp_path_factory: pytest.TempPathFactory) -> Scorecard:
    d = tmp_path_factory.mktemp("scorecard")
    (d / "runs").mkdir()
    sc = Scorecard(d, (SIM,), PROPERTIES, "dc3", TINY, seed=7)
    return run(sc, lambda what: None)


def test_every_cell_is_measured_or_says_why(sim_scorecard: Scorecard):
    got = {(c.store, c.prop): c for c in sim_scorecard.cells}
    assert set(got) == {(SIM, p) for p in PROPERTIES}
    assert not sim_scorecard.interrupted and not sim_scorecard.errors
    for c in got.values():
        assert c.grade in cells.GRADES
        assert c.value and c.promise and c.source
        # the chart's cell: at most 12 words naming what decides its grade (issue 40)
        assert c.headline and len(c.headline.split()) <= cells.HEADLINE_WORDS, c.headline
        if c.grade == "grey":
            assert c.reason and c.reason in c.value  # n/a only with its reason in the cell
        else:
            assert c.runs and all((sim_scorecard.run_dir / r / "results.json").exists()
                                  for r in c.runs)
    assert got[(SIM, "durability")].grade == "grey"  # the simulator keeps no disk
    # asynchronous replication: eventual reads at the remote replica are stale and not
    # linearizable, consistent reads at the primary are; the cell says so and shows why
    cons = got[(SIM, "consistency")]
    assert cons.grade == "yellow"
    assert cons.figures["register_eventual"]["valid"] is False
    assert cons.figures["register_consistent"]["valid"] is True
    assert "read" in cons.counterexample
    trans = got[(SIM, "transactionality")]
    # micro-operations one by one: no isolation promised, anomalies seen (as documented)
    assert trans.grade == "yellow" and trans.figures["variants"][0]["model"] == "none"
    assert trans.figures["variants"][0]["check"]["valid"] is False and trans.counterexample
    saved = json.loads((sim_scorecard.run_dir / "scorecard.json").read_text())
    assert len(saved["cells"]) == len(PROPERTIES)


def test_consistency_cell_agrees_with_a_probe_built_by_hand_as_compare_runs_it(
        sim_scorecard: Scorecard, tmp_path: Path):
    """The cell against a staleness probe written out here field by field, as `compare`
    builds its own (writer in the first region, reader at the second's replica, 50 reads
    a second, 1 s periods) with the scorecard's seed and write interval, i.e. `replicalab
    probe --store SIM --workload staleness --placement separate-clients --writer-region
    US-E --reader-region US-W --read-rate 50 --period 1s --write-interval 0.5s --seed 7
    --duration 20s`: not through the scorecard's own ``staleness_spec``, so a scorecard that
    measured something else would disagree."""
    cons = next(c for c in sim_scorecard.cells if c.prop == "consistency").figures
    by_hand = ProbeSpec(store=SIM, workload="staleness", options=ProbeOptions(
        consistency="eventual", duration_s=20.0, write_interval_s=0.5, read_rate=50,
        period_s=1.0, seed=7),
        config=StalenessConfig(placement="separate-clients", writer_region="US-E",
                               reader_region="US-W"))
    assert (TINY.staleness_s, TINY.staleness_write_interval_s) == (20.0, 0.5)
    alone = run_probe(by_hand, tmp_path).results
    f = alone["freshness"]
    assert cons["eventual"]["stale_fraction"] == 1 - sum(f["fresh"]) / sum(f["total"])
    assert cons["eventual"]["stale_window_ms"] == alone["periods"]["last_lt_100_median_ms"]
    reg = run_probe(ProbeSpec(store=SIM, workload="register", options=ProbeOptions(
        consistency="eventual", duration_s=TINY.register_s, seed=7),
        config=RegisterConfig(keys=3, clients=6, writer_region="US-E", reader_region="US-W",
                              check_timeout_s=30.0)), tmp_path).results["linearizability"]
    assert cons["register_eventual"]["valid"] == reg["valid"]
    assert cons["register_eventual"]["ops"] == reg["ops"]


def test_availability_cell_measures_the_cut_off_region(sim_scorecard: Scorecard):
    av = next(c for c in sim_scorecard.cells if c.prop == "availability")
    cut = next(f for f in av.figures["faults"] if "cut off" in f["fault"])
    assert cut["region"] == "US-W"
    # the US-W replica keeps serving eventual reads; consistent reads and writes need the
    # US-E primary: unavailable while the region is cut off (the cell's figure), and so for
    # the 8 s of the 20 s run and their recovery (the whole run's figure beside it)
    assert cut["eventual"]["reads"] > 0.95
    assert cut["consistent"]["reads"] < 0.05 and cut["eventual"]["writes"] < 0.05
    assert 0.4 < cut["consistent"]["reads_run"] < 0.7
    assert 0.4 < cut["eventual"]["writes_run"] < 0.7


def test_chart_has_one_row_per_store_and_a_clickable_cell_per_property(
        sim_scorecard: Scorecard):
    html = render_scorecard(sim_scorecard.to_json(), sim_scorecard.run_dir).read_text()
    assert html.count('<button class="cell ') == len(PROPERTIES)
    # self-contained: no script, style or image fetched from anywhere
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=', html)


def test_interrupted_scorecard_keeps_its_cells_and_draws_a_partial_chart(tmp_path: Path):
    (tmp_path / "runs").mkdir()
    sc = Scorecard(tmp_path, (SIM, "sim://simpledb"), ("transactionality", "consistency"),
                   "dc3", TINY, seed=1)
    calls = []

    def tick(what: str) -> None:
        calls.append(what)
        if "staleness" in what:  # Ctrl-C in the middle of the first consistency run
            raise KeyboardInterrupt

    run(sc, tick)
    assert sc.interrupted
    saved = json.loads((tmp_path / "scorecard.json").read_text())
    assert saved["interrupted"] is True
    assert [(c["store"], c["prop"]) for c in saved["cells"]] == [(SIM, "transactionality")]
    html = render_scorecard(saved, tmp_path).read_text()
    assert html.count('class="cell pending"') == 3 and "Interrupted" in html


def test_parse_kinds_and_properties():
    assert [s.label for s in parse_kinds("redis, sim://simpledb")] == ["redis", "sim://simpledb"]
    # one display name, other spellings accepted
    assert [s.label for s in parse_kinds("zk,postgresql")] == ["zookeeper", "postgres"]
    with pytest.raises(ValueError, match="twice"):
        parse_kinds("zk,zookeeper")
    assert parse_only("geography,latency") == ("latency", "geography")
    for bad in ("redis,mongodb", ""):
        with pytest.raises(ValueError, match=r"^kinds "):
            parse_kinds(bad)
    with pytest.raises(ValueError, match=r"durabilty.*latency, durability"):
        parse_only("durabilty")


def test_durability_cell_grades_against_the_documented_setting():
    def variant(label, kill, power, keeps_kill, keeps_power):
        return {"label": label, "keeps_on_kill": keeps_kill, "keeps_on_power_loss": keeps_power,
                **{k: {"checked": True, "lost": n, "acknowledged": 100, "run": "r"}
                   for k, n in (("kill", kill), ("power_loss", power))}}

    p = get("durability").promise_for(resolve("redis"))
    safe = variant("appendfsync always", 0, 0, True, True)
    lab = variant("appendonly no", 100, 100, False, False)
    assert cells.durability_cell("redis", {"variants": [lab, safe], "runs": []}, p).grade \
        == "yellow"
    broken = variant("appendfsync always", 0, 3, True, True)
    c = cells.durability_cell("redis", {"variants": [lab, broken], "runs": []}, p)
    assert c.grade == "red" and "power loss" in c.caveat
    assert cells.durability_cell("redis", {"variants": [safe], "runs": []}, p).grade == "green"
    gone = variant("forceSync=no", 0, 0, True, False)
    gone["power_loss"].update(checked=False, complaints=["n0: Caused by: EOFException"])
    c = cells.durability_cell("zookeeper", {"variants": [safe, gone], "runs": []}, p)
    assert c.grade == "yellow" and "did not come back" in c.caveat  # documented risk
    assert any("EOFException" in d for d in c.details)
    gone["keeps_on_power_loss"] = True  # had it promised to keep them: red
    assert cells.durability_cell("zookeeper", {"variants": [safe, gone], "runs": []},
                                 p).grade == "red"


@pytest.mark.parametrize(("args", "env", "needle"), [
    (("--kinds", "redis,mongodb"), {}, "mongodb"),
    (("--kinds", "sim://simpledb", "--only", "latency,speed"), {}, "'speed' is not a property"),
    (("--kinds", "redis", "--only", "durability"), {"REPLICALAB_FUSE_DEVICE": "/nonexistent"},
     "power-loss file system"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args, env, needle):
    p = _cli("scorecard", *args, "--out", str(tmp_path / "runs"), cwd=tmp_path, **env)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert "Traceback" not in p.stderr + p.stdout
    assert not (tmp_path / "runs").exists()  # bad input leaves nothing behind


def test_cli_json_on_a_simulated_store(tmp_path: Path):
    p = _cli("scorecard", "--kinds", "sim://simpledb", "--quick", "--only",
             "consistency,transactionality", "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [c["prop"] for c in doc["cells"]] == ["consistency", "transactionality"]
    assert Path(doc["report"]).exists() and Path(doc["run_dir"], "scorecard.json").exists()


def test_sigterm_keeps_the_cells_measured_and_writes_a_partial_chart(tmp_path: Path):
    proc = subprocess.Popen([*EXE, "scorecard", "--kinds", f"{SIM},sim://simpledb", "--out",
                             str(tmp_path)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "100"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            saved = list(tmp_path.glob("*/scorecard.json"))
            if saved and json.loads(saved[0].read_text() or "{}").get("cells"):
                break  # a first cell is measured: interrupt the run (SIGTERM = Ctrl-C)
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "partial chart" in err.strip().splitlines()[-1]
    run_dir = next(tmp_path.glob("*-scorecard-*"))
    saved = json.loads((run_dir / "scorecard.json").read_text())
    assert saved["interrupted"] is True and 1 <= len(saved["cells"]) < 12
    html = (run_dir / "report.html").read_text()
    assert "Interrupted" in html and 'class="cell pending"' in html


def test_compare_and_scorecard_read_one_history_alike(tmp_path: Path):
    """One probe's history, the one ``replicalab compare --fault "at=5s partition
    region=US-W for=8s" --duration 20s`` runs (spec written out by hand from compare's
    command), gives the same staleness and availability figures read as compare reads it
    (its table row) and as the scorecard reads it (its cells' figures); the figures are
    neither 0 nor 1, so agreeing is not agreeing on a constant."""
    from replicalab.experiments.compare import staleness_row
    from replicalab.experiments.measure import fault_figures, staleness_figures
    from replicalab.faults.schedule import Fault

    fault = Fault("partition", 5.0, 8.0, region="US-W")
    for consistency in ("eventual", "consistent"):
        spec = ProbeSpec(store=SIM, workload="staleness", options=ProbeOptions(
            consistency=consistency, duration_s=20.0, write_interval_s=1.0, read_rate=50,
            period_s=1.0, seed=3), config=StalenessConfig(
                placement="separate-clients", writer_region="US-E", reader_region="US-W"),
            faults=(fault,))
        r = run_probe(spec, tmp_path).results
        row = staleness_row(r, consistency)
        st, av = staleness_figures(r), fault_figures(r)
        assert row[f"{consistency}_stale_fraction"] == st["stale_fraction"]
        assert row[f"{consistency}_stale_window_ms"] == st["stale_window_ms"]
        assert row[f"{consistency}_availability"] == av["reads_run"]
        assert row[f"{consistency}_availability_during"] == av["reads"]
        assert row[f"{consistency}_availability_ops"] == av["reads_ops"]
        if consistency == "eventual":  # the remote replica lags: some reads stale
            assert 0 < st["stale_fraction"] < 1
        else:  # consistent reads need the cut-off primary: served before and after only
            assert 0 < av["reads_run"] < 1 and av["reads"] < 0.05

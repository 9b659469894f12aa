"""The Python API (replicalab.api): one implementation with the command line (same seed, same
bytes), runs opened as ``replicalab report`` re-checks them, the history as a DataFrame with
its documented columns, typed results, figures, the notebook summary and progress bar."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import replicalab
from replicalab.api.history import COLUMNS
from replicalab.api.progress import bar_html
from replicalab.cli.main import app

REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "120"})
    assert res.exit_code == 0, (args, res.output, res.exception)
    return res.stdout


def _only_run(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


@pytest.mark.parametrize("workload, extra", [("staleness", {}),
                                             ("latency", {"ops": 40})])
def test_the_command_line_and_the_api_give_the_same_bytes(tmp_path: Path, workload: str,
                                                          extra: dict[str, int]) -> None:
    """probe through the CLI and through replicalab.probe with the same seed and options:
    results.json byte for byte, the history table equal, the same summary rows."""
    flags = [f"--{k}={v}" for k, v in extra.items()]
    doc = json.loads(_cli("probe", "--store", "sim://quorum?n=3&r=1&w=1", "--workload",
                          workload, "--duration", "90s", "--period", "30s", "--seed", "7",
                          "--out", str(tmp_path / "cli"), "--json", *flags))
    run = replicalab.probe("sim://quorum?n=3&r=1&w=1", workload=workload, duration=90,
                           period="30s", seed=7, out=tmp_path / "api", progress=False,
                           **extra)
    cli_dir = _only_run(tmp_path / "cli")
    assert (cli_dir / "results.json").read_bytes() == (run.path / "results.json").read_bytes()
    assert pq.read_table(cli_dir / "history.parquet").equals(
        pq.read_table(run.path / "history.parquet"))
    cli_config = json.loads((cli_dir / "config.json").read_text())
    assert cli_config["spec"] == run.config["spec"]
    assert doc["tables"][0]["rows"] == [list(r) for r in run.summary()]
    # a different seed gives other bytes: the comparison above can fail
    other = replicalab.probe("sim://quorum?n=3&r=1&w=1", workload=workload, duration=90,
                             period="30s", seed=8, out=tmp_path / "api8", progress=False,
                             **extra)
    assert (other.path / "results.json").read_bytes() != (run.path / "results.json").read_bytes()


def test_open_run_on_a_cli_run_gives_what_replicalab_report_gives(tmp_path: Path) -> None:
    _cli("probe", "--duration", "2m", "--period", "1m", "--seed", "4", "--out", str(tmp_path))
    run_dir = _only_run(tmp_path)
    saved = json.loads((run_dir / "results.json").read_text())
    (run_dir / "results.json").unlink()  # report must compute them from the history
    printed = _cli("report", str(run_dir))
    assert "report:" in printed
    reported = json.loads((run_dir / "results.json").read_text())
    assert reported == saved
    opened = replicalab.open_run(run_dir)
    assert opened.results.raw == reported
    again = replicalab.open_run(run_dir, recheck_history=True)
    assert again.results.raw == reported
    assert opened.results.ops.reads == reported["ops"]["reads"] > 0
    assert opened.spec.options.seed == 4


def test_an_hour_on_the_simulated_simpledb_as_a_dataframe(tmp_path: Path) -> None:
    """The issue's example: one row per operation, the documented columns, times in ns and
    as timestamps that agree with them."""
    run = replicalab.probe("sim://simpledb", workload="staleness", duration="1h",
                           out=tmp_path, progress=False)
    df = run.history.to_pandas()
    ops = run.results.ops
    assert list(df.columns) == list(COLUMNS)
    client = df[df["process"] >= 0]
    assert len(client) == ops.reads + ops.writes + ops.failed + ops.info
    assert len(df) == pq.read_metadata(run.path / "history.parquet").num_rows
    assert df["index"].tolist() == list(range(len(df)))
    assert ops.writes == 1200  # one write every 3 s for an hour
    done = df["complete_ns"] >= 0
    assert (df.loc[done, "latency_ns"] == df.loc[done, "complete_ns"]
            - df.loc[done, "invoke_ns"]).all()
    since = (df["invoke_time"] - df["invoke_time"].iloc[0]).dt.total_seconds()
    assert since.iloc[-1] == pytest.approx((df["invoke_ns"].iloc[-1]
                                            - df["invoke_ns"].iloc[0]) / 1e9)
    assert since.iloc[-1] == pytest.approx(3600, abs=5)
    start = pd_timestamp_ns(run.config["started_unix_ns"])
    assert df["invoke_time"].iloc[0] >= start
    assert set(df["type"].astype(str)) <= {"ok", "fail", "info", "invoke"}
    # every column the table holds is documented in docs/python-api.md
    doc = (REPO / "docs" / "python-api.md").read_text()
    assert all(f"`{c}`" in doc for c in COLUMNS)


def pd_timestamp_ns(ns: int) -> object:
    """Return ``ns`` (Unix ns) as a pandas UTC Timestamp."""
    import pandas as pd

    return pd.Timestamp(ns, unit="ns", tz="UTC")


def test_typed_results_figures_and_the_notebook_summary(tmp_path: Path) -> None:
    run = replicalab.probe("sim://simpledb", duration="3m", period="1m", seed=2, out=tmp_path,
                           progress=False)
    r = run.results
    assert r.workload == "staleness" and r.seed == 2 and r.duration_s == 180.0
    read = r.latency["read/eventual"]
    assert read.count == r.ops.reads and 15 < read.p50_ms < 40  # seed 000: ~22 ms reads
    assert r.freshness is not None and r.periods is not None
    assert r.availability is not None and r.availability.overall == 1.0 and r.faults == ()
    frame = r.freshness.to_pandas()
    assert frame["total"].sum() > 0 and frame["p"].between(0, 1).all()
    assert len(r.periods.start_s) == 3
    assert 400 < r.periods.first_ge_99_median_ms < 700  # seed 003: ~500 ms
    from matplotlib.figure import Figure

    assert {"staleness", "periods", "latency"} <= set(run.figures)
    assert all(isinstance(f, Figure) for f in run.figures.values())
    page = run._repr_html_()
    assert "<table>" in page and "fresh in [0, 450) ms" in page
    assert str(run.path) in page and "\x1b" not in page
    bar = bar_html("staleness on <sim>", 0.5, "running", 1.25)
    assert bar.count("<progress") == 1 and 'value="50.0"' in bar and "&lt;sim&gt;" in bar


def test_a_fault_run_has_typed_fault_windows(tmp_path: Path) -> None:
    run = replicalab.probe("sim://primary", duration="40s", period="10s", out=tmp_path,
                           faults=["at=10s crash node=0 for=10s"], progress=False)
    (fault,) = run.results.faults
    assert "crash" in fault.label
    assert fault.start_ms == pytest.approx(10_000, abs=50)
    assert fault.end_ms == pytest.approx(20_000, abs=50)
    assert run.results.availability.during_faults is not None
    assert any(m.startswith("fault: ") for m, _ in run.summary())


def test_bad_input_is_a_value_error_naming_the_fix(tmp_path: Path) -> None:
    # named as Python spells them (the command line says --consistency, --duration)
    with pytest.raises(ValueError, match=r"^consistency 'strong'"):
        replicalab.probe(consistency="strong", out=tmp_path, progress=False)
    with pytest.raises(ValueError, match="not an option of any workload"):
        replicalab.probe(duration="1m", out=tmp_path, progress=False, readerz=3)
    with pytest.raises(ValueError, match=r"^duration 'soon'"):
        replicalab.probe(duration="soon", out=tmp_path, progress=False)
    with pytest.raises(ValueError, match="not a probe run directory"):
        replicalab.open_run(tmp_path)
    assert not any(tmp_path.iterdir())  # bad input leaves nothing behind


def test_compare_model_and_check(tmp_path: Path) -> None:
    cmp = replicalab.compare(["sim://simpledb", "sim://quorum?n=3&r=1&w=1"],
                             workload="latency", duration="1m", ops=30, out=tmp_path,
                             progress=False)
    table = cmp.latency_table()
    assert set(table["store"]) == {"sim://simpledb", "sim://quorum?n=3&r=1&w=1"}
    assert (table["p99_ms"] >= table["p50_ms"]).all() and (table["count"] > 0).all()
    curve = replicalab.model("paxos-lan", points=5)
    assert len(curve.points) == 5 and curve.max_throughput_rps > 0
    lat = [p.latency_ms for p in curve.points]
    assert lat == sorted(lat)  # latency grows with offered load
    reg = replicalab.probe("sim://primary", workload="register", duration="5s",
                           out=tmp_path / "reg", progress=False)
    verdict = replicalab.check(reg, model="kv")
    assert verdict.valid in (True, False) and verdict.model == "kv"
    assert verdict.ops > 0
    assert replicalab.check(reg.path).valid == verdict.valid  # kv: the run's own model


def test_the_catalog_names_the_models_measured_against_a_real_store() -> None:
    """What `model epaxos --against etcd` is told takes --against (docs/models.md: paxos-wan
    against etcd, PBS against Cassandra), as prose: no model without a real counterpart."""
    from replicalab.api import catalog

    assert catalog.against_offers() == "paxos-wan (against etcd) and pbs (against cassandra)"


def test_speed_keeps_ten_samples_a_second_over_the_last_window() -> None:
    """The ETA's samples: ticks 10 ms apart are one sample, not ten; after a minute at 1 %
    a second only the last 20 s (and one sample before them) are kept, and 40 % left at
    that speed is 40 s."""
    from replicalab.api.progress import SPEED_WINDOW_S, Speed

    speed = Speed(0.0)
    for k in range(1, 11):
        speed.add(0.01 * k, 0.001 * k)
    assert len(speed.samples) == 2 and speed.samples[-1][1] == pytest.approx(0.01)
    for t in range(1, 61):
        speed.add(float(t), t / 100)
    assert speed.samples[0][0] < 60 - SPEED_WINDOW_S <= speed.samples[1][0]
    assert len(speed.samples) == SPEED_WINDOW_S + 2
    assert speed.eta_s(60.0) == pytest.approx(40.0)


def test_the_watch_says_a_freshness_window_as_a_line_and_as_json() -> None:
    """`watch`'s freshness line (piped) and JSON line (--json): each region's share of fresh
    reads as a percent, the median time to fresh in ms, "–" for a region with no reads."""
    from replicalab.api import watching
    from replicalab.watch.staleness import FreshnessRow

    rows = [FreshnessRow("redis", "US-W", 100.0, 10.0, 200, 150, 0, 10, 1, 12.34, 80.0),
            FreshnessRow("redis", "EU", 100.0, 10.0, 0, 0, 3, 10, 0, None, None)]
    assert watching.freshness_text(rows) == (
        "redis freshness: US-W 75.0% fresh, time to fresh 12.3 ms, EU – fresh, time to "
        "fresh – ms")
    doc = json.loads(json.dumps(watching.freshness_json(rows)))
    assert doc["backend"] == "redis" and [r["region"] for r in doc["freshness"]] == ["US-W", "EU"]
    assert doc["freshness"][0]["fresh_fraction"] == 0.75
    assert doc["freshness"][0]["ttf_p50_ms"] == 12.34 and doc["freshness"][1]["errors"] == 3
    assert doc["freshness"][1]["fresh_fraction"] is None


def test_tradeoff_labels_its_own_progress_bar(tmp_path: Path) -> None:
    """`tradeoff` takes `progress` as every verb does: an object with `bar(label)` is asked
    for the bar of "load tradeoff on STORE" and told the fraction done up to 1; and a
    comma-separated consistency may have spaces."""
    import contextlib

    labels: list[str] = []
    ticks: list[float] = []

    class Bars:
        def bar(self, label: str) -> contextlib.AbstractContextManager[Any]:
            labels.append(label)
            return contextlib.nullcontext(lambda f, what=None: ticks.append(f))

    run = replicalab.tradeoff("sim://simpledb", groups="1", clients=10, read_ratios="0.99",
                              consistency="eventual, consistent", repeats=1,
                              step_duration="1s", out=tmp_path, progress=Bars())
    assert labels == ["load tradeoff on sim://simpledb"]
    assert ticks and ticks[-1] == 1.0
    assert sorted(c["consistency"] for c in run.results["cells"]) == ["consistent", "eventual"]

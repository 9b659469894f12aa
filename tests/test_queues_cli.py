"""``replicalab queue run|compare``: the JSON summary, the run directory and its report with
figures, and bad input refused in one line with exit code 2 and nothing left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from replicalab.cli import queue
from replicalab.queues.record import load_log

runner = CliRunner()
# the queue commands on an app of their own, as cli/main.py registers them
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
queue.register(app)


@app.callback()
def _root() -> None:
    """Root, so ``queue`` stays a sub-command."""


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_run_json_summary_and_run_directory(tmp_path: Path):
    r = invoke("queue", "run", "--consumers", "6", "--strategy", "central", "--messages",
               "300", "--fault", "at=10s crash node=1 for=20s", "--out", str(tmp_path),
               "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    s = doc["summary"]
    for key in ("messages", "deliveries", "duplicate_deliveries", "duplicate_processing",
                "duplicate_results", "lost", "throughput_per_s"):
        assert key in s
    assert s["messages"] == 300 and s["duplicate_processing"] == 0 and s["lost"] == 0
    run_dir = Path(doc["run_dir"])
    assert {p.name for p in run_dir.iterdir()} >= {"config.json", "queue.parquet",
                                                  "results.json", "report.html", "figures"}
    log = load_log(run_dir)
    assert log["kind"].count("deliver") == s["deliveries"]
    assert "crash" in log["kind"]
    assert (run_dir / "figures" / "queue-deliveries.png").stat().st_size > 1000


def test_compare_figures_and_ratios(tmp_path: Path):
    r = invoke("queue", "compare", "--consumers", "1,8", "--strategy", "none", "--strategy",
               "central", "--messages", "200", "--out", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert len(doc["runs"]) == 4
    ratios = {(x["strategy"], x["consumers"]): x["ratio"] for x in doc["ratios"]}
    assert ratios[("none", 8)] == 1.0 and 0 < ratios[("central", 8)] < 1.5
    figures = Path(doc["run_dir"]) / "figures"
    for name in ("queue-duplicates.png", "queue-strategies.png"):
        assert (figures / name).stat().st_size > 1000
    html = (Path(doc["run_dir"]) / "report.html").read_text()
    assert "Duplicate deliveries against consumers" in html


def test_compare_under_a_pause_shows_duplicate_results_and_fenced_commits(tmp_path: Path):
    r = invoke("queue", "compare", "--consumers", "8", "--strategy", "none,central-lease,central",
               "--messages", "200", "--visibility", "4s", "--process", "500ms", "--seed", "3",
               "--fault", "at=3s pause consumer=1 for=10s", "--out", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    runs = {x["strategy"]: x for x in doc["runs"]}
    assert runs["central-lease"]["summary"]["duplicate_results"] > 0
    fenced = runs["central"]["summary"]
    assert fenced["duplicate_results"] == 0 and fenced["lost"] == 0 and fenced["exactly_once"]
    assert fenced["fenced_commits"] > 0 and fenced["duplicate_processing"] > 0
    assert [f["kind"] for f in runs["central"]["faults"]] == ["pause"]
    table = doc["tables"][0]
    assert "fenced" in table["header"] and "dup results" in table["header"]
    html = (Path(doc["run_dir"]) / "report.html").read_text()
    assert "refused by the fence" in html and "fig-queue-timeline" in html


def test_a_store_fault_is_left_out_of_strategies_without_a_store(tmp_path: Path):
    r = invoke("queue", "compare", "--consumers", "4", "--strategy", "none,central",
               "--messages", "60", "--fault", "at=2s errors store=central for=2s",
               "--out", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    faults = {x["strategy"]: x["faults"] for x in json.loads(r.stdout)["runs"]}
    assert faults == {"none": [], "central": [faults["central"][0]]}
    assert faults["central"][0]["kind"] == "store_fault"


@pytest.mark.parametrize(("args", "words"), [
    (["--queue", "kafka://127.0.0.1:9092"], "unknown queue URL scheme"),
    (["--strategy", "central", "--central", "sim://quorum"], "no conditional writes"),
    (["--consumers", "0"], "at least 1 consumer"),
    (["--visibility", "soon"], "--visibility"),
    (["--fault", "at=1s crash node=99 for=1s"], "pick one of them"),
    (["--fault", "at=1s pause consumer=8 for=1s"], "pick one of them"),
    (["--fault", "at=1s slow node=1 for=1s ms=5"], "faults on a consumer"),
    (["--fault", "at=1s timeouts store=central for=1s"], "uses no central store"),
    (["--fault", "skew consumer=1 ms=0"], "skew ms=0"),
    (["--queue", "redis://127.0.0.1:1"], "cannot reach"),  # nothing listens on port 1
    (["--queue", "sim://sqs", "--strategy", "central", "--central", "redis://127.0.0.1:1"],
     "different clocks"),
])
def test_bad_input_one_line_exit_2_nothing_made(tmp_path: Path, args, words):
    r = invoke("queue", "run", *args, "--messages", "10", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert err.startswith("error:") and words in err and "\n" not in err
    assert not (tmp_path / "o").exists()


CATEGORIES = {"committed_once": "· committed once",
              "committed_more_than_once": "· committed more than once",
              "dead_lettered_without_commit": "· dead-lettered without a commit",
              "lost": "· lost (acknowledged, never committed)",
              "not_reached": "· not reached (run cut short first)"}
ISSUE_29 = ("--queue", "sim://sqs", "--consumers", "16", "--messages", "1000", "--visibility",
            "4s", "--process", "500ms", "--fault", "at=3s pause consumer=0 for=10s")


@pytest.mark.parametrize("strategy", ["tag", "central"])
def test_the_accounting_closes_on_issue_29s_run(tmp_path: Path, strategy: str):
    r = invoke("queue", "run", "--strategy", strategy, *ISSUE_29, "--out", str(tmp_path),
               "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    s, table = doc["summary"], dict(doc["tables"][0]["rows"])
    # five categories that add up to the messages sent, in the JSON and in the table
    assert sum(s[k] for k in CATEGORIES) == s["messages"] == 1000
    assert sum(int(table[label]) for label in CATEGORIES.values()) == 1000
    assert s["results_from"] == "effect store" and s["effects_agree_with_log"]
    # the only fault is a pause: nothing is called a crash
    assert not any("crash" in why for why in s["interrupted_processing_by"])
    assert "crash" not in table["processing cut short"]
    # the table's most deliveries is the largest k of the report's deliveries chart
    assert int(table["most deliveries of one message"]) == max(
        int(k) for k in doc["checker"]["histograms"]["deliveries"])
    if strategy == "tag":
        # the pause held messages past their last receive: dead-lettered while consumer 0
        # still worked on them. The run waits for that work, which commits each once (it
        # stopped first, until 2026-11-30, and recorded one "dead-lettered without a
        # commit", which no consumer outside the lab would leave undone)
        assert s["dead_lettered"] > 0 and s["dead_lettered_without_commit"] == 0
    assert s["committed_once"] == 1000
    assert table["exactly once"] == "yes" and s["exactly_once"] is True

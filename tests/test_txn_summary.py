"""A transactional run is summarised as transactions (issue 40): the summary, the report
and the JSON say what isolation was asked for and promised, how many transactions
committed, failed and ended unknown (counted here from the saved history), the anomalies
per class with the meaning ``replicalab check --json`` gives them (the same numbers), and
how long the run really ran (here from the history's own clock), never the reads and
writes of a read/write probe or the duration it was allowed.

Wrong products these fail: "reads / writes 0 / 0" and "(eventual)" for a transactional run
(in the summary, the report or results.json),
the 600 s allowed shown as its duration, anomaly counts of another meaning than check's
(distinct transactions of the anomalies kept), a report card "Operations ... 0 reads".
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

EXE = [sys.executable, "-m", "replicalab.cli.main"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("txn")
    p = _cli("probe", "--store", "sim://primary", "--workload", "list-append", "--keys", "3",
             "--length", "4", "--clients", "8", "--txns", "2000", "--duration", "10m",
             "--json", "--out", str(d), cwd=d)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _rows(run: dict[str, Any]) -> dict[str, str]:
    (table,) = run["tables"]
    return dict(table["rows"])


def test_the_summary_counts_transactions_not_reads_and_writes(run: dict[str, Any]):
    rows = _rows(run)
    assert "reads / writes" not in rows
    assert "(eventual)" not in run["tables"][0]["caption"]
    assert run["tables"][0]["caption"].endswith("(isolation none)")
    assert rows["isolation"] == "none promised"
    types = pq.read_table(Path(run["run_dir"]) / "history.parquet",
                          columns=["type"])["type"].to_pylist()
    counted = [types.count(t) for t in ("ok", "fail", "info")]
    assert rows["transactions committed / failed / unknown"] == \
        " / ".join(f"{n:,}" for n in counted)
    assert sum(counted) == 2000


def test_the_duration_is_the_time_the_run_ran(run: dict[str, Any]):
    t = pq.read_table(Path(run["run_dir"]) / "history.parquet",
                      columns=["invoke_ns", "complete_ns"])
    span_s = (max(t["complete_ns"].to_pylist()) - min(t["invoke_ns"].to_pylist())) / 1e9
    assert 0 < run["ran_s"] < 600 and abs(run["ran_s"] - span_s) < 0.05 * span_s + 0.01
    assert _rows(run)["duration"] == f"{run['ran_s']:.3g} s simulated of the 600 s allowed"
    config = json.loads((Path(run["run_dir"]) / "config.json").read_text())
    assert config["ran_s"] == run["ran_s"]


def test_the_anomaly_counts_are_those_check_gives(run: dict[str, Any], tmp_path: Path):
    p = _cli("check", run["run_dir"], "--model", "list-append", "--json", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads(p.stdout)
    found = doc["results"][0] if "results" in doc else doc  # one file checked
    counts = {k: n for k, n in found["counts"].items() if n}
    shown = _rows(run)["anomalies found, by class"]
    top = re.findall(r"([\w-]+) ([\d,]+)", shown.split(" (+")[0])
    assert len(top) == min(4, len(counts)) and top
    for name, n in top:
        assert counts[name] == int(n.replace(",", "")), (name, n, counts)
    assert int(shown.split("(+")[1].split()[0]) == len(counts) - 4
    anomalous = run["transactions"]["anomalous"]["any"]
    assert _rows(run)["committed transactions in an anomaly"].startswith(
        f"{anomalous:,} of {run['transactions']['ok']:,}")


def test_the_report_shows_transactions_isolation_and_the_real_duration(run: dict[str, Any]):
    page = html.unescape(Path(run["report"]).read_text())
    cards = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", page))
    assert "Operations" not in cards and "Consistency" not in cards
    assert cards["Isolation"] == "none promised"
    assert cards["Duration"] == _rows(run)["duration"]
    ok, fail, info = (run["transactions"][k] for k in ("ok", "fail", "info"))
    assert cards["Transactions"] == (f"{ok + fail + info:,}: {ok:,} committed, {fail:,} "
                                     f"failed, {info:,} unknown")


def test_results_json_says_isolation_and_transactions_never_reads_or_eventual(
        run: dict[str, Any]):
    """results.json agrees with the summary and the report: no read and write counts and
    no consistency (the probe's default, eventual, was never asked for), the isolation
    asked for and promised, the transactions by outcome counted from the history; the
    Python API's typed results say the same."""
    import replicalab
    from replicalab.api.results import Isolation, TxnCounts

    doc = json.loads((Path(run["run_dir"]) / "results.json").read_text())
    assert "ops" not in doc and "consistency" not in doc
    assert "consistency" not in doc["config"]
    assert '"eventual"' not in json.dumps(doc)
    assert (doc["isolation"]["requested"], doc["isolation"]["promised"]) == (None, "none")
    types = pq.read_table(Path(run["run_dir"]) / "history.parquet",
                          columns=["type"])["type"].to_pylist()
    counted = {k: types.count(k) for k in ("ok", "fail", "info")}
    assert {k: doc["transactions"][k] for k in counted} == counted
    typed = replicalab.open_run(run["run_dir"]).results
    assert (typed.ops, typed.consistency) == (None, None)
    assert typed.transactions == TxnCounts(**counted)
    assert typed.isolation == Isolation(None, "none", doc["isolation"]["source"])


@pytest.mark.parametrize(("url", "words"), [
    ("postgresql://u@h/db?isolation=serializable",
     "serializable requested, serializable promised"),
    ("postgresql://u@h/db?isolation=repeatable-read",
     "repeatable-read requested, snapshot isolation promised"),
    ("postgresql://u@h/db", "read committed promised"),
    ("etcd://h:2379", "strict serializable promised"),
])
def test_the_isolation_asked_for_and_promised_in_words(url: str, words: str):
    from replicalab.workloads.txn import isolation, isolation_words

    assert isolation_words(isolation(url)) == words

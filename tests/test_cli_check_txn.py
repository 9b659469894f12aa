"""``replicalab check --model list-append|rw-register``: Elle EDN files (read natively
and by the Python reader), run directories (Parquet), --json as Elle's result map, exit
codes, and bad input (exit 2, one line naming the line); the report section."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from replicalab.checkers.txn import Options, check_txns, result_json
from replicalab.checkers.txn.synth import gadget
from replicalab.cli import check as check_cli
from replicalab.history import History, save_history, to_edn
from replicalab.history.txn import invoke_txn, ok_txn

app = typer.Typer()


@app.callback()
def _root() -> None:
    """The command as main.py registers it, under a root app of its own."""


check_cli.register(app)

ENGINES = ["native", "python"]

WRITE_SKEW = """\
{:type :invoke, :f :txn, :value [[:append 5 1] [:r 6 nil]], :process 0, :time 1}
{:type :invoke, :f :txn, :value [[:append 6 1] [:r 5 nil]], :process 1, :time 2}
{:type :ok, :f :txn, :value [[:append 5 1] [:r 6 []]], :process 0, :time 3}
{:type :ok, :f :txn, :value [[:append 6 1] [:r 5 []]], :process 1, :time 4}
"""

SERIAL = """\
{:type :invoke, :f :txn, :value [[:append 5 1] [:r 6 nil]], :process 0}
{:type :ok, :f :txn, :value [[:append 5 1] [:r 6 nil]], :process 0}
{:type :invoke, :f :txn, :value [[:append 6 1] [:r 5 nil]], :process 1}
{:type :ok, :f :txn, :value [[:append 6 1] [:r 5 [1]]], :process 1}
{:type :invoke, :f :txn, :value [[:r 5 nil] [:r 6 nil]], :process 0}
{:type :ok, :f :txn, :value [[:r 5 [1]] [:r 6 [1]]], :process 0}
"""


def run(monkeypatch, engine, *args):
    monkeypatch.setenv("REPLICALAB_TXN_ENGINE", engine)
    return CliRunner().invoke(app, ["check", *args])


@pytest.fixture(params=ENGINES)
def engine(request):
    if request.param == "native":
        from replicalab.checkers.txn.run import native_core

        if native_core() is None:
            pytest.skip("native core built without the transaction checker")
    return request.param


def test_write_skew_is_g2_item(tmp_path, monkeypatch, engine):
    p = tmp_path / "h.edn"
    p.write_text(WRITE_SKEW)
    r = run(monkeypatch, engine, str(p), "--model", "list-append")
    assert r.exit_code == 1, r.output
    assert "anomalies: G2-item" in r.output and "ruled out: repeatable-read" in r.output
    assert ("T1 < T2: T1 read key 6 as the empty list, without T2's append of 1 (rw)"
            in r.output)
    r = run(monkeypatch, engine, str(p), "--model", "list-append", "--json")
    doc = json.loads(r.output)["results"][0]
    assert doc["valid"] is False and doc["anomaly_types"] == ["G2-item"]
    assert doc["not"] == ["repeatable-read"] and "strong-serializable" in doc["also_not"]
    assert doc["anomalies"]["G2-item"][0]["cycle"][0]["type"] == "rw"
    assert "snapshot-isolation" in doc["possible"]


def test_serial_history_without_times_is_valid(tmp_path, monkeypatch, engine):
    p = tmp_path / "h.edn"
    p.write_text(SERIAL)
    r = run(monkeypatch, engine, str(p), "--model", "list-append", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)["results"][0]
    assert doc["valid"] is True and doc["txns"] == 3 and doc["not"] == []


@pytest.mark.parametrize(("text", "line", "words"), [
    ("{:type :invoke, :f :txn, :value [[:append 5 1]], :process 0}\n"
     "{:type :ok, :f :txn, :value [[:append 5 1]], :process 0}\n"
     "{:type :invoke, :f :txn, :value [[:append 5 1]], :process 1}\n"
     "{:type :ok, :f :txn, :value [[:append 5 1]], :process 1}\n", 3, "appended too"),
    ("{:type :invoke, :f :txn, :value [[:r 5 nil]], :process 0}\n"
     "{:type :ok, :f :txn, :value [[:r 5 3]], :process 0}\n", 1, "return a list"),
    ("{:type :invoke, :f :txn, :value [[:r 5 nil]], :process 0}\n"
     "{:type :invoke, :f :txn, :process 1}\n", 2, "without a :value"),
    ("this is not EDN {\n", 1, ""),
])
def test_bad_input_is_one_line_naming_the_line(tmp_path, monkeypatch, engine, text, line,
                                               words):
    p = tmp_path / "bad.edn"
    p.write_text(text)
    r = run(monkeypatch, engine, str(p), "--model", "list-append")
    assert r.exit_code == 2, r.output
    out = r.output.strip()
    assert "\n" not in out and "Traceback" not in out
    assert f"bad.edn:{line}" in out and words in out


def test_register_history_from_a_run_directory(tmp_path, monkeypatch, engine):
    h = History()
    for t in gadget("G-single-item", model="rw-register"):
        i = invoke_txn(h, t.process, t.mops, t.invoke)
        ok_txn(h, i, t.mops, t.complete)
    save_history(h, tmp_path / "run", {"workload": "rw-register"})
    r = run(monkeypatch, engine, str(tmp_path / "run"), "--model", "rw-register", "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)["results"][0]
    assert doc["anomaly_types"] == ["G-single-item"]
    assert doc["not"] == ["consistent-view", "repeatable-read"]
    to_edn(h, tmp_path / "h.edn")  # the export reads back the same
    r = run(monkeypatch, engine, str(tmp_path / "h.edn"), "--model", "rw-register", "--json")
    assert json.loads(r.output)["results"][0]["anomaly_types"] == ["G-single-item"]


def test_report_section_draws_each_cycle():
    from replicalab.report.page import Page
    from replicalab.report.transactions import transactions_section

    txns = gadget("G-single-item") + gadget("G1a", index=2, process=5, key="<b>")
    doc = result_json(check_txns(txns, "list-append"))
    page = Page()
    transactions_section(page, doc)
    html = "\n".join(page.parts)
    assert html.count("<svg") == 1 and "G-single-item: a cycle of 2" in html
    assert "consistent-view" in html and "G1a" in html
    assert "&lt;b&gt;" in html and "<b>-a" not in html  # keys are escaped


def test_run_directory_read_natively_equals_the_reference(tmp_path):
    import random

    import pyarrow.parquet as pq

    from replicalab.checkers.txn import check_history
    from replicalab.checkers.txn.run import native_core
    from replicalab.checkers.txn.synth import sloppy

    nat = native_core()
    if nat is None or not hasattr(nat, "txn_check2_rows"):
        pytest.skip("native core built without the transaction checker")
    from replicalab.checkers.txn.native import check_table

    for seed in range(20):
        model = ("list-append", "rw-register")[seed % 2]
        h = History()
        for t in sloppy(random.Random(seed), 30, 3, 4, model):
            i = invoke_txn(h, t.process, t.mops, t.invoke)
            if t.outcome == "ok":
                ok_txn(h, i, t.mops, t.complete)
            elif t.outcome == "fail":
                h.fail(i, t.complete, "aborted")
            else:
                h.info(i, t.invoke + 1, "timeout")
        h.invoke(7, "read", ("x",), (None,), "eventual", 5)  # not a transaction: left out
        save_history(h, tmp_path / str(seed), {})
        py = check_history(h, model, engine="python")
        nt = check_table(pq.read_table(tmp_path / str(seed) / "history.parquet"), model,
                         Options(), None)
        assert (nt.anomaly_types, nt.counts, nt.txns) == (py.anomaly_types, py.counts, py.txns)
        for typ in py.anomaly_types:
            assert ([a.explanation for a in nt.anomalies[typ]]
                    == [a.explanation for a in py.anomalies[typ]])


def test_run_directory_with_a_bad_row_names_it(tmp_path, monkeypatch, engine):
    h = History()
    h.invoke(0, "txn", ("k",), ("r [1,x]",), "none", 1)
    h.ok(0, 2)
    save_history(h, tmp_path / "run", {})
    r = run(monkeypatch, engine, str(tmp_path / "run"), "--model", "list-append")
    assert r.exit_code == 2 and "row 0" in r.output and "micro-op" in r.output

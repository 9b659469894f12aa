"""``replicalab check``: Jepsen EDN (a map per line, or one vector), JSON lines, run
directories; exit codes 0 / 1 / 3 and bad input (2, one line naming file and line)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from replicalab.cli import check as check_cli
from replicalab.history import History, save_history, to_edn, to_jsonl
from replicalab.history.read import HistoryFileError, parse_edn, read_ops

app = typer.Typer()


@app.callback()
def _root() -> None:
    """The command as main.py registers it, under a root app of its own."""


check_cli.register(app)


def run(*args: str):
    return CliRunner().invoke(app, ["check", *args])


STALE_EDN = """\
{:type :invoke, :f :write, :value 1, :process 0, :time 0, :index 0}
{:type :ok, :f :write, :value 1, :process 0, :time 1000000, :index 1}
{:type :invoke, :f :write, :value 2, :process 0, :time 2000000, :index 2}
{:type :ok, :f :write, :value 2, :process 0, :time 3000000, :index 3}
{:type :invoke, :f :read, :value nil, :process 1, :time 4000000, :index 4}
{:type :info, :f :start, :value nil, :process :nemesis, :time 4100000}
{:type :ok, :f :read, :value 1, :process 1, :time 5000000, :index 5}
"""


def test_edn_line_per_op_stale_read_exits_1_with_the_explanation(tmp_path):
    path = tmp_path / "stale.edn"
    path.write_text(STALE_EDN)
    r = run(str(path), "--model", "register")
    assert r.exit_code == 1, r.output
    assert "NOT linearizable" in r.output
    assert ("process 1 read 1 at 4.0 ms although the write of 2 by process 0 completed at "
            "3.0 ms") in r.output
    r = run(str(path), "--model", "register", "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)["results"][0]
    assert doc["valid"] is False and doc["ops"] == 3 and doc["keys"] == 1
    assert doc["model"] == "register" and doc["check_s"] >= 0
    # nanoseconds, unrounded (a benchmark sums them over a hundred histories)
    assert isinstance(doc["check_ns"], int) and abs(doc["check_ns"] / 1e9 - doc["check_s"]) <= 5e-4
    ce = doc["counterexample"][0]
    # ops are named by the line of their invoke; the write of 1 is not needed (it
    # completed before the write of 2 began, whether or not it took effect)
    assert [o["index"] for o in ce["ops"]] == [3, 5]
    assert ce["ops"][1] == {"index": 5, "process": 1, "f": "read", "key": None, "value": 1,
                            "outcome": "ok", "invoke_ms": 4.0, "complete_ms": 5.0}


def test_edn_vector_of_independent_tuples_with_cas(tmp_path):
    ops = [
        "{:type :invoke, :f :write, :value [0 1], :process 0, :time 0}",
        "{:type :ok, :f :write, :value [0 1], :process 0, :time 10}",
        "{:type :invoke, :f :cas, :value [0 [1 2]], :process 1, :time 20}",
        "{:type :info, :f :cas, :value [0 [1 2]], :process 1, :time 30}",
        "{:type :invoke, :f :read, :value [0 nil], :process 2, :time 40}",
        "{:type :ok, :f :read, :value [0 2], :process 2, :time 50}",
        "{:type :invoke, :f :write, :value [1 5], :process 3, :time 0}",
        "{:type :ok, :f :write, :value [1 5], :process 3, :time 5}",
    ]
    path = tmp_path / "kv.edn"
    path.write_text("[" + "\n ".join(ops) + "]\n")
    r = run(str(path), "--json")  # kv is the default model
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)["results"][0]
    assert doc["valid"] is True and doc["keys"] == 2 and doc["counterexample"] is None
    fh = read_ops(path, tuples=True)
    assert [o.line for o in fh.ops] == [1, 3, 5, 7]  # each op's invoke line
    assert fh.ops[1].key == 0 and fh.ops[1].value == (1, 2) and fh.timed
    # the same ops read as a single register cannot be independent tuples
    r = run(str(path), "--model", "cas-register")
    assert r.exit_code == 2
    assert "kv.edn:1: a write of [0 1]; expected one value" in r.stderr  # EDN, not (0, 1)


def test_jsonl_and_run_directory_round_trip(tmp_path):
    h = History()
    for value, t0, t1 in [("1.0@0", 0, 10), ("2.0@20", 20, 30)]:
        w = h.invoke(0, "write", ("k",), (value,), "none", t0 * 10**6)
        h.ok(w, t1 * 10**6)
    c = h.invoke(1, "cas", ("k",), ("3.1@35",), "none", 35 * 10**6, ("2.0@20",))
    h.ok(c, 36 * 10**6)
    r_ = h.invoke(2, "read", ("k",), (None,), "eventual", 40 * 10**6)
    h.ok(r_, 41 * 10**6, ("2.0@20",))  # stale: the cas of 3.1 completed before
    run_dir = tmp_path / "runs" / "20260101T000000Z-register-sim-primary"
    save_history(h, run_dir, {"workload": "register"})
    to_edn(h, tmp_path / "h.edn")
    to_jsonl(h, tmp_path / "h.jsonl")
    r = run(str(run_dir), str(tmp_path / "h.edn"), str(tmp_path / "h.jsonl"), "--json")
    assert r.exit_code == 1, r.output
    docs = json.loads(r.stdout)["results"]
    assert [d["valid"] for d in docs] == [False, False, False]
    explanations = {d["counterexample"][0]["explanation"] for d in docs}
    assert len(explanations) == 1  # the same reading from all three
    assert explanations.pop().startswith(
        "process 2 read 2.0 at 40.0 ms although process 1's cas 2.0 -> 3.1 completed at "
        "36.0 ms: 2.0, written once, was already overwritten.")
    # without the stale read all three are linearizable
    h2 = History()
    w = h2.invoke(0, "write", ("k",), ("1.0@0",), "none", 0)
    h2.ok(w, 10)
    save_history(h2, tmp_path / "ok-run", {})
    to_jsonl(h2, tmp_path / "ok.jsonl")
    r = run(str(tmp_path / "ok-run"), str(tmp_path / "ok.jsonl"))
    assert r.exit_code == 0, r.output
    assert r.output.count(": linearizable") == 2


def _hard_edn(path: Path, writers: int = 28) -> None:
    """Writes of distinct values all overlapping, reads of each, then two reads of
    different values one after the other: the search must try every order of the writes
    (hours for 28)."""
    lines = []
    for i in range(writers):
        lines.append(f"{{:type :invoke, :f :write, :value {i + 1}, :process {i}, :time 0}}")
    for j in range(writers):
        lines.append(f"{{:type :invoke, :f :read, :value nil, :process {100 + j}, "
                     f":time 500000000}}")
    for i in range(writers):
        lines.append(f"{{:type :ok, :f :write, :value {i + 1}, :process {i}, :time 1000000000}}")
    for j in range(writers):
        lines.append(f"{{:type :ok, :f :read, :value {j + 1}, :process {100 + j}, "
                     f":time 1000000000}}")
    # after every write, two reads of different values: the search must try every order
    # of the writes before it fails
    lines.append("{:type :invoke, :f :read, :value nil, :process 999, :time 2000000000}")
    lines.append("{:type :ok, :f :read, :value 1, :process 999, :time 2001000000}")
    lines.append("{:type :invoke, :f :read, :value nil, :process 998, :time 2002000000}")
    lines.append("{:type :ok, :f :read, :value 2, :process 998, :time 2003000000}")
    path.write_text("\n".join(lines) + "\n")


def test_timeout_gives_unknown_partial_results_and_exit_3_quickly(tmp_path):
    hard = tmp_path / "hard.edn"
    _hard_edn(hard)
    easy = tmp_path / "easy.edn"
    easy.write_text(STALE_EDN.replace(":value 1, :process 1", ":value 2, :process 1"))
    t = time.monotonic()
    r = run(str(hard), str(easy), "--model", "register", "--timeout", "1s", "--json")
    took = time.monotonic() - t
    assert r.exit_code == 3, r.output
    assert took < 5
    hard_doc, easy_doc = json.loads(r.stdout)["results"]
    assert hard_doc["valid"] == "unknown" and easy_doc["valid"] is True
    partial = hard_doc["partial"][0]
    assert partial["prefix_ops"] > 0 and "longest linearizable prefix" in partial["explanation"]
    # a history that is not linearizable outranks an unknown one: exit 1
    stale = tmp_path / "stale.edn"
    stale.write_text(STALE_EDN)
    r = run(str(hard), str(stale), "--model", "register", "--timeout", "500ms")
    assert r.exit_code == 1
    assert "unknown" in r.output and "NOT linearizable" in r.output


@pytest.mark.parametrize(("text", "args", "needle"), [
    ("{:type :invoke, :f :read, :process 0}\n{:type :ok :f :read :process 0 :value [1}\n",
     (), "bad.edn:2: '}' closes the [ opened on line 2; expected ']'"),
    ("{:type :invoke, :f :read, :process 0, :value nil}\n{:f :read, :process 0}\n",
     (), "bad.edn:2: no :type; expected :invoke, :ok, :fail or :info"),
    ("{:type :invoke, :f :incr, :process 0, :value 1}\n", (),
     "bad.edn:1: a incr; the register model has read, write"),
    ("\n\n{:type :ok, :f :read, :process 3, :value 1}\n", (),
     "bad.edn:3: a :ok of process 3 with no :invoke before it"),
    ("{:type :invoke, :f :read, :process 0, :value nil}\n"
     "{:type :invoke, :f :read, :process 0, :value nil}\n", (),
     "bad.edn:2: process 0 invokes again before its op on line 1 completed"),
    ("{:type :invoke, :f :write, :process 0, :value 1}\n", ("--model", "kv"),
     "--model 'kv' does not fit "),
    ("{:type :invoke, :f :write, :process 0, :value 1}\n", ("--model", "kv"),
     "bad.edn:1: :value 1; kv expects jepsen.independent [key value] tuples (or a :key "
     "field); for one register use --model register or cas-register"),
    ("[1 2 3]\n", (), "bad.edn:1: expected an op map like"),
    ("; a comment and no op\n", (), "bad.edn:1: no events"),
])
def test_bad_edn_is_one_line_naming_file_and_line_exit_2(tmp_path, text, args, needle):
    path = tmp_path / "bad.edn"
    path.write_text(text)
    r = run(str(path), "--model", "register", *args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.output


def test_other_bad_input_exit_2(tmp_path):
    good = tmp_path / "ok.edn"
    good.write_text(STALE_EDN)
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"type": "invoke", "f": "read", "process": 0}\n{"type": \n')
    for args, needle in [
        ((str(tmp_path / "missing.edn"),), "does not exist"),
        ((str(good), "--model", "sets"), "--model 'sets': use one of kv, cas-register"),
        ((str(good), "--timeout", "soon"), "--timeout 'soon' must be a positive duration"),
        ((str(bad_json),), "bad.jsonl:2: not JSON"),
        ((str(tmp_path),), "is not a run directory"),
        ((str(good), "--model", "kv"), "ok.edn:1: :value 1; kv expects"),
    ]:
        r = run(*args)
        assert r.exit_code == 2, (args, r.output)
        assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


def test_edn_reader_forms():
    forms = parse_edn('; a comment\n{:a 1, :b [1 2.5 "x\\"y"], #_ :gone :c #{:s} :d (nil true)}\n'
                      '#jepsen.history.Op{:type :ok} \\a -3 1/2 sym')
    (m, line), (tagged, line2), *rest = forms
    assert line == 2 and line2 == 3
    assert m == {"a": 1, "b": [1, 2.5, 'x"y'], "c": frozenset({"s"}), "d": (None, True)}
    assert tagged.tag == "jepsen.history.Op" and tagged.value == {"type": "ok"}
    assert [f for f, _ in rest] == ["a", -3, 0.5, "sym"]
    with pytest.raises(HistoryFileError, match=r"x.edn:1: the file ends inside"):
        parse_edn("{:a [1 2", "x.edn")


def test_edn_reader_errors_and_lines():
    forms = parse_edn("[{:a 1}\n #_ {:gone 2}\n {:b\n 3}]")
    assert forms == [([{"a": 1}, {"b": 3}], 1)]
    for text, needle in [("{:a 1 :b}", "x.edn:1: a map needs an even number of forms"),
                         ("[1 2}\n", "x.edn:1: '}' closes the [ opened on line 1"),
                         ("\n]", "x.edn:2: unexpected ']'"),
                         ("{:a 1e}", "x.edn:1: bad number '1e'"),
                         ("[#_]", "x.edn:1: unexpected ']'"),
                         ("[1 #tag", "x.edn:1: the file ends inside #_ or a tag")]:
        with pytest.raises(HistoryFileError, match=re.escape(needle)):
            parse_edn(text, "x.edn")

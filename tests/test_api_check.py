"""``replicalab.check`` for every model from Python (linearizability and transactions, from a
run directory, a History object, a Jepsen/Elle EDN file), a model that fits the history or
a refusal naming ``model`` (and, on the command line, ``--model`` with exit 2), and every
model listed when one does not exist. Expected verdicts are Elle's (its README's write
skew is G2-item) and the construction's (a stale read after a completed write)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import replicalab
from replicalab.api.errors import ParameterError
from replicalab.history import History, save_history
from replicalab.history.txn import invoke_txn, ok_txn

# Elle's README: T1 appends 1 to x and reads y empty; T2 appends 1 to y and reads x empty
WRITE_SKEW = """\
{:type :invoke, :f :txn, :value [[:append 5 1] [:r 6 nil]], :process 0, :time 1}
{:type :invoke, :f :txn, :value [[:append 6 1] [:r 5 nil]], :process 1, :time 2}
{:type :ok, :f :txn, :value [[:append 5 1] [:r 6 []]], :process 0, :time 3}
{:type :ok, :f :txn, :value [[:append 6 1] [:r 5 []]], :process 1, :time 4}
"""
RW_SERIAL = """\
{:type :invoke, :f :txn, :value [[:w 1 1]], :process 0, :time 1}
{:type :ok, :f :txn, :value [[:w 1 1]], :process 0, :time 2}
{:type :invoke, :f :txn, :value [[:r 1 nil]], :process 1, :time 3}
{:type :ok, :f :txn, :value [[:r 1 1]], :process 1, :time 4}
"""


def _stale_register(path: Path) -> History:
    """A write of a completes, then a write of b completes, then a read returns a: not
    linearizable (values are written once)."""
    h = History()
    for value, t0, t1 in (("1.0@0", 0, 10), ("2.0@20", 20, 30)):
        h.ok(h.invoke(0, "write", ("k",), (value,), "none", t0), t1)
    h.ok(h.invoke(1, "read", ("k",), (None,), "eventual", 40), 50, ("1.0@0",))
    save_history(h, path, {"workload": "register"})
    return h


def _list_append_run(path: Path) -> None:
    h = History()
    a = invoke_txn(h, 0, [("append", "5", 1), ("r", "6", None)], 1)
    b = invoke_txn(h, 1, [("append", "6", 1), ("r", "5", None)], 2)
    ok_txn(h, a, [("append", "5", 1), ("r", "6", [])], 3)
    ok_txn(h, b, [("append", "6", 1), ("r", "5", [])], 4)
    save_history(h, path, {"workload": "list-append"})


def test_list_append_from_an_elle_file_with_and_without_the_model(tmp_path: Path) -> None:
    path = tmp_path / "write-skew.edn"
    path.write_text(WRITE_SKEW)
    r = replicalab.check(path, model="list-append")
    assert r.valid is False and r.transactional and r.ops == 2
    assert r.result.anomaly_types == ["G2-item"]
    assert r.to_json()["not"] == ["repeatable-read"]
    assert list(r.to_pandas()["type"]) == ["G2-item"]
    own = replicalab.check(str(path))  # the file's own model: it holds appends
    assert own.model == "list-append" and own.valid is False
    rw = tmp_path / "rw.edn"
    rw.write_text(RW_SERIAL)
    r = replicalab.check(rw)
    assert r.model == "rw-register" and r.valid is True and r.ops == 2


def test_a_run_is_checked_with_its_own_model_and_refuses_one_that_does_not_fit(tmp_path):
    _list_append_run(tmp_path / "la")
    r = replicalab.check(tmp_path / "la")
    assert r.model == "list-append" and r.valid is False
    with pytest.raises(ParameterError, match=r"^model 'kv' checks single operations, but "
                                             r".*la holds transactions") as err:
        replicalab.check(tmp_path / "la", model="kv")
    assert err.value.parameter == "model"
    _stale_register(tmp_path / "reg")
    r = replicalab.check(tmp_path / "reg")
    assert r.model == "kv" and r.valid is False and r.ops == 3
    assert "1.0" in r.to_json()["counterexample"][0]["explanation"]
    assert list(r.to_pandas()["valid"]) == [False]
    with pytest.raises(ParameterError, match=r"^model 'list-append' checks transactions, "
                                             r"but .*reg holds single operations"):
        replicalab.check(tmp_path / "reg", model="list-append")


def test_a_history_object_and_bad_input(tmp_path: Path) -> None:
    h = _stale_register(tmp_path / "reg")
    r = replicalab.check(h, model="register")
    assert r.valid is False and r.path is None and r.model == "register"
    empty = tmp_path / "empty.edn"
    empty.write_text("\n")
    for model in (None, "kv", "list-append"):
        with pytest.raises(ValueError, match="holds no operations"):
            replicalab.check(empty, model=model)
    with pytest.raises(ParameterError) as err:
        replicalab.check(empty, model="nope")
    assert err.value.parameter == "model"
    listed = str(err.value)
    for name in ("kv", "cas-register", "register", "set", "fifo-queue", "counter", "mutex",
                 "list-append", "rw-register"):
        assert f" {name}" in listed
    with pytest.raises(ParameterError, match=r"^timeout .soon. must be a positive duration"):
        replicalab.check(h, timeout="soon")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "replicalab.cli.main", "check", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_command_refuses_in_one_line_with_exit_2(tmp_path: Path) -> None:
    _list_append_run(tmp_path / "la")
    _stale_register(tmp_path / "reg")
    empty = tmp_path / "empty.edn"
    empty.write_text("")
    for args, needle in [
        ((str(tmp_path / "la"), "--model", "kv"), "--model 'kv' checks single operations"),
        ((str(tmp_path / "reg"), "--model", "list-append"),
         "--model 'list-append' checks transactions"),
        ((str(empty),), "holds no operations"),
        ((str(tmp_path / "reg"), "--model", "nope"), "list-append, rw-register"),
    ]:
        p = _cli(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and p.stdout == "", (args, p.stderr)
    p = _cli(str(tmp_path / "la"), "--json")  # its own model: list-append
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["results"][0]["anomaly_types"] == ["G2-item"]


def test_elles_options_reach_the_checker_from_python_and_from_both_parsers(tmp_path: Path):
    """Elle's :consistency-models decide what the write skew (G2-item) means: forbidden
    under its default, strict serializability; allowed under snapshot isolation (Elle's
    consistency-model table), where the history is valid. An unknown name is refused naming
    the parameter; the command says the same through its own parser and through Typer."""
    from typer.testing import CliRunner

    from replicalab.cli.check import fast
    from replicalab.cli.main import app

    path = tmp_path / "write-skew.edn"
    path.write_text(WRITE_SKEW)
    assert replicalab.check(path).valid is False
    si = replicalab.check(path, consistency_models=["snapshot-isolation"])
    assert si.valid is True and si.result.options.consistency_models == ("snapshot-isolation",)
    assert si.result.anomaly_types == [] and "G2-item" in si.result.counts
    assert replicalab.check(path, consistency_models="snapshot-isolation",
                            anomalies="G2-item").valid is False
    with pytest.raises(ParameterError) as err:
        replicalab.check(path, anomalies="G-bogus")
    assert err.value.parameter == "anomalies"
    for args, code in (([str(path), "--consistency-models", "snapshot-isolation"], 0),
                       ([str(path), "--consistency-models=snapshot-isolation", "--anomalies",
                         "G2-item", "--json"], 1),
                       ([str(path), "--anomalies", "G-bogus"], 2)):
        assert fast(args) is not None, args
        p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "check", *args],
                           capture_output=True, text=True, timeout=60)
        r = CliRunner().invoke(app, ["check", *args])
        assert p.returncode == r.exit_code == code, (args, p.stderr, r.output)
        if code == 2:
            assert p.stderr.startswith("error: --anomalies") and p.stderr == r.stderr

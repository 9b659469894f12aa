"""Issue 29's smaller items, each as a newcomer met it: one line and exit 2 for a store that
does not answer and for an empty history, Porcupine's JSON accepted, EDN wording in
messages, a counter's refutation that is true, help for a verb given alone, docs that agree
with --help, compound durations, progress while a cluster starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicalab.api.clustering import start_phase
from replicalab.api.durations import parse_duration
from replicalab.cli.main import app
from replicalab.cluster.ports import allocate
from replicalab.faults.schedule import parse_fault
from replicalab.history.read import Keyword, Tagged, edn_text, read_ops
from replicalab.runtime.durations import parse_seconds
from servers import server_missing

EXE = [sys.executable, "-m", "replicalab.cli.main"]
DOCS = Path(__file__).resolve().parents[1] / "docs"


def _cli(*args: str, cwd: Path | None = None, timeout: float = 120
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, "COLUMNS": "120"})


def _one_line_exit_2(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# -- one line and exit 2 ----------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["redis", "postgresql"])
def test_the_conformance_suite_on_a_closed_port_says_so_once(scheme: str):
    (port,) = allocate(1)  # free: nothing listens there
    url = f"{scheme}://127.0.0.1:{port}" + ("/postgres" if scheme == "postgresql" else "")
    p = subprocess.run([sys.executable, "-m", "replicalab.testing", url], capture_output=True,
                       text=True, timeout=120, check=False)
    line = _one_line_exit_2(p, url, "does not answer", "no check can run")
    assert line.count("does not answer") == 1  # the cause once, not once per check
    assert "passed" not in p.stdout and "FAIL" not in p.stdout, p.stdout


@pytest.mark.parametrize("text", ["", "\n  \n"])
@pytest.mark.parametrize("suffix", [".edn", ".jsonl", ".json"])
def test_check_on_an_empty_history_is_one_line_exit_2(tmp_path: Path, text: str, suffix: str):
    path = tmp_path / f"empty{suffix}"
    path.write_text(text)
    line = _one_line_exit_2(_cli("check", str(path)), str(path), "holds no operations")
    assert "linearizable" not in line


# -- Porcupine's JSON ---------------------------------------------------------------------------

def _porcupine(tmp_path: Path, ops: list[dict], name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(ops, indent=1))
    return path


def _kv(client: int, op: int, key: str, value: str, out: str, call: int, ret: int) -> dict:
    return {"ClientId": client, "Input": {"Op": op, "Key": key, "Value": value},
            "Call": call, "Output": {"Value": out}, "Return": ret}


def test_porcupine_operations_are_checked(tmp_path: Path):
    """Porcupine's kv test shape (Op 0 get, 1 put, 2 append): a stale read after a
    completed put is not linearizable; reading it while the put runs is."""
    stale = _porcupine(tmp_path, [_kv(0, 1, "x", "1", "", 0, 10), _kv(1, 0, "x", "", "1", 20, 30),
                                  _kv(2, 0, "x", "", "", 40, 50)], "stale.json")
    p = _cli("check", str(stale), "--json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)["results"][0]
    assert doc["valid"] is False and doc["ops"] == 3
    fine = _porcupine(tmp_path, [_kv(0, 1, "x", "1", "", 0, 30), _kv(1, 0, "x", "", "", 5, 8),
                                 _kv(2, 0, "x", "", "1", 10, 20), _kv(0, 2, "y", "a", "", 40, 41),
                                 _kv(1, 0, "y", "", "a", 42, 43)], "fine.json")
    p = _cli("check", str(fine), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["results"][0]["keys"] == 2


def test_porcupine_events_unknown_outcomes_and_the_register_shape(tmp_path: Path):
    events = [{"ClientId": 0, "Kind": 0, "Value": {"Op": "put", "Key": "k", "Value": 7},
               "Id": 1},
              {"ClientId": 1, "Kind": 0, "Value": {"Op": "get", "Key": "k"}, "Id": 2},
              {"ClientId": 0, "Kind": 1, "Value": {}, "Id": 1},
              {"ClientId": 1, "Kind": 1, "Value": {"Value": 7}, "Id": 2},
              {"ClientId": 2, "Kind": 0, "Value": {"Op": "put", "Key": "k", "Value": 9},
               "Id": 3}]  # never returned: may have happened
    fh = read_ops(_porcupine(tmp_path, events, "events.json"), tuples=True)
    assert not fh.timed and [(o.f, o.key, o.value, o.outcome) for o in fh.ops] == [
        ("write", "k", 7, "ok"), ("read", "k", 7, "ok"), ("write", "k", 9, "info")]
    # the register test's Input: Op true = get, false = put; a Return of 2^63-1 unknown
    reg = [{"ClientId": 0, "Input": {"Op": False, "Value": 3}, "Call": 0, "Output": {},
            "Return": 2**63 - 1},
           {"ClientId": 1, "Input": {"Op": True}, "Call": 5, "Output": 3, "Return": 6}]
    p = _cli("check", str(_porcupine(tmp_path, reg, "reg.json")), "--model", "register",
             "--json")
    assert p.returncode == 0, p.stderr  # the unknown write may have happened first
    bad = [{"ClientId": 0, "Input": {"Op": 9, "Key": "k"}, "Call": 0, "Output": {},
            "Return": 1}]
    _one_line_exit_2(_cli("check", str(_porcupine(tmp_path, bad, "bad.json"))),
                     "operation 1", "Input", '"Op"')


def test_a_json_array_of_jepsen_events_is_read_too(tmp_path: Path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps([
        {"type": "invoke", "f": "write", "process": 0, "value": 1, "time": 0},
        {"type": "ok", "f": "write", "process": 0, "value": 1, "time": 10},
        {"type": "invoke", "f": "read", "process": 1, "value": None, "time": 20},
        {"type": "ok", "f": "read", "process": 1, "value": 1, "time": 30}]))
    p = _cli("check", str(path), "--model", "register", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["results"][0]["ops"] == 2
    path.write_text("[1, 2]")
    _one_line_exit_2(_cli("check", str(path)), "a JSON array of 1", "Porcupine operations")


# -- EDN wording, true refutations --------------------------------------------------------------

def test_values_in_messages_are_written_as_edn():
    assert [edn_text(v) for v in (None, True, "a", Keyword("ok"), (0, None), frozenset({1}),
                                  {"k": [1, 2]}, Tagged("inst", "x"), 2.5)] == [
        "nil", "true", '"a"', ":ok", "[0 nil]", "#{1}", '{"k" [1 2]}', '#inst "x"', "2.5"]


def test_check_messages_name_values_as_jepsen_writes_them(tmp_path: Path):
    kv = tmp_path / "kv.edn"
    kv.write_text("{:type :invoke, :f :read, :process 0, :value nil}\n"
                  "{:type :ok, :f :read, :process 0, :value nil}\n")
    line = _one_line_exit_2(_cli("check", str(kv)), ":value nil;")
    assert "None" not in line
    sets = tmp_path / "set.edn"
    sets.write_text("{:type :invoke, :f :read, :process 0, :value nil}\n"
                    "{:type :ok, :f :read, :process 0, :value 5}\n")
    line = _one_line_exit_2(_cli("check", str(sets), "--model", "set"), "got 5")
    missing = tmp_path / "missing.edn"
    missing.write_text("{:f :read, :process 0}\n")
    _one_line_exit_2(_cli("check", str(missing)), "missing.edn:1: no :type;")


def test_a_counters_refutation_says_something_true(tmp_path: Path):
    path = tmp_path / "counter.edn"
    path.write_text("{:type :invoke, :f :add, :process 0, :value 1}\n"
                    "{:type :ok, :f :add, :process 0, :value 1}\n"
                    "{:type :invoke, :f :add, :process 2, :value 5}\n"
                    "{:type :invoke, :f :read, :process 1, :value nil}\n"
                    "{:type :ok, :f :read, :process 1, :value 3}\n"
                    "{:type :info, :f :add, :process 2, :value 5}\n")
    p = _cli("check", str(path), "--model", "counter")
    assert p.returncode == 1, p.stderr
    text = " ".join(p.stdout.split())
    assert "wrote" not in text  # nothing writes a counter's 3: adds reach it, or not
    assert ("process 1 read 3 at line 4, a total no set of adds gives: the 1 add completed "
            "before it began totals 1, and with the 1 add that may have taken effect by its "
            "end the total could only be 1 or 6.") in text, text


# -- help, docs ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("verb", "subs"), [("cluster", ("up", "status", "down")),
                                            ("queue", ("run", "compare"))])
def test_a_verb_alone_or_with_help_lists_its_subcommands(verb: str, subs: tuple[str, ...]):
    for args in ((verb,), (verb, "--help")):
        p = _cli(*args)
        assert p.returncode == 0 and not p.stderr.strip(), (args, p.stderr)
        assert "error" not in p.stdout.lower() and "Commands:" in p.stdout, p.stdout
        listed = p.stdout.split("Commands:", 1)[1].split()
        assert all(s in listed for s in subs), p.stdout
        assert len(p.stdout.strip().splitlines()) > 5  # help as written, not one line


def test_the_scorecard_docs_agree_with_its_help_on_cassandra():
    r = CliRunner().invoke(app, ["scorecard", "--help"], env={"COLUMNS": "200"})
    assert "cassandra" in r.output
    text = " ".join((DOCS / "scorecard.md").read_text().split())
    assert "not a scorecard kind" not in text
    assert "Cassandra is a scorecard kind" in text


# -- durations ------------------------------------------------------------------------------------

def test_compound_durations_are_read_everywhere(tmp_path: Path):
    assert parse_seconds("1m30s") == 90.0 and parse_seconds("1h05m") == 3900.0
    assert parse_seconds("2m 500ms") == 120.5 and parse_seconds("1d2h") == 93600.0
    for bad in ("30s1m", "1m1m", "1m30", "m", ""):
        assert parse_seconds(bad) is None, bad
    assert parse_duration("1m30s", "--duration") == 90.0
    with pytest.raises(ValueError, match="1m30s"):
        parse_duration("30s1m", "--duration")
    f = parse_fault("at=1m30s partition region=US-W for=1m5s")
    assert (f.at_s, f.for_s) == (90.0, 65.0)
    p = _cli("probe", "--store", "sim://simpledb", "--duration", "1m30s", "--json", "--out",
             str(tmp_path))
    assert p.returncode == 0, p.stderr
    (run_dir,) = tmp_path.glob("*-staleness-*")
    config = json.loads((run_dir / "config.json").read_text())
    assert config["spec"]["options"]["duration_s"] == 90.0


# -- progress while a cluster starts -------------------------------------------------------------

def test_the_start_phases_move_on():
    nodes = [{"index": i, "region": r, "pid": 0} for i, r in enumerate(("US-E", "US-W", "EU"))]
    seen = [start_phase(None, 0)]
    seen.append(start_phase({"nodes": nodes, "toxiproxy_pid": 0}, 0))
    for k in range(4):
        started = [{**n, "pid": 100 + n["index"] if n["index"] < k else 0} for n in nodes]
        seen.append(start_phase({"nodes": started, "toxiproxy_pid": 99}, 0))
    seen += [start_phase({"nodes": [{**n, "pid": 7} for n in nodes], "toxiproxy_pid": 9}, s)
             for s in (5.0, 30.0)]
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] < 1.0
    assert len(set(fractions)) == len(fractions)  # every step moves the bar
    assert seen[2][1] == "starting node n0 (US-E), 0 of 3 started"
    assert seen[-2][1] == "3 of 3 started; waiting until they answer, 5s so far"
    assert seen[-1][1] == "3 of 3 started; waiting until they answer, 30s so far"


@pytest.mark.integration
def test_cluster_up_piped_says_what_it_does_while_jvms_start(tmp_path: Path):
    """ZooKeeper's JVMs take seconds: piped, `cluster up` prints progress lines before the
    cluster's, not seconds of silence."""
    env = {**os.environ, "REPLICALAB_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen([*EXE, "cluster", "up", "zookeeper", "--nodes", "3", "--regions",
                             "lan", "--name", "zk-progress"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        down = subprocess.run([*EXE, "cluster", "down", "zk-progress"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        server_missing("a ZooKeeper cluster", err)
    assert down.returncode == 0, down.stderr
    lines = [ln for ln in err.splitlines() if ln.startswith("cluster up zookeeper: ")]
    assert lines and lines[-1].startswith("cluster up zookeeper: finished"), err
    assert any("started" in ln or "starting" in ln for ln in lines[:-1]), err
    assert "cluster zk-progress: 3 zookeeper nodes" in out


@pytest.mark.integration
def test_cluster_up_on_a_terminal_moves_its_bar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """On a terminal the bar moved from 0.0 % only at the end; now it moves while the JVMs
    start, naming what it waits for."""
    import re

    from test_cli_newcomer import run_pty

    monkeypatch.setenv("REPLICALAB_STATE_DIR", str(tmp_path / "state"))
    try:
        text, _, code = run_pty(["cluster", "up", "zookeeper", "--nodes", "3", "--regions",
                                 "lan", "--name", "zk-bar"], tmp_path, columns=160,
                                timeout=180)
    finally:
        _cli("cluster", "down", "zk-bar", cwd=tmp_path)
    if code != 0:
        server_missing("a ZooKeeper cluster", text[-300:])
    shown = {float(p) for p in re.findall(r"(\d+\.\d)%", text)}
    assert len({p for p in shown if 0 < p < 100}) >= 2, text[-2000:]  # it moved
    assert "waiting until they answer" in text or "starting node" in text, text[-2000:]
    assert "ETA" not in text  # a JVM's start says nothing of the next one's

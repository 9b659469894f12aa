"""Bad input to the Python API names the parameter the Python way, never a command-line
option ("duration '1 hour' ...", not "--duration '1 hour' ..."), wherever the bad value is
found (the probe's options, a workload's config, the fault schedule, the run directory);
the command line says the same with its options (``cli/errors.py`` ``said``)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

import replicalab
from replicalab.cli.errors import said
from replicalab.errors import ParameterError

PROBE_FLAGS = {"faults_file": "--faults", "faults": "--fault"}
"""How ``replicalab probe`` spells the parameters whose option is not ``--`` + name."""

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, probe arguments, the Python message starts, the command line's starts)
    ("duration", {"duration": "1 hour"}, "duration '1 hour' must be a positive duration",
     "--duration '1 hour' must be a positive duration"),
    ("read_rate", {"read_rate": -1}, "read_rate must be positive",
     "--read-rate must be positive"),
    ("workload", {"workload": "nope"}, "workload 'nope': use one of",
     "--workload 'nope': use one of"),
    ("ops", {"workload": "latency", "ops": 1}, "ops 1 must be at least 2",
     "--ops 1 must be at least 2"),
    ("placement", {"placement": "nowhere"}, "placement 'nowhere': use same-client",
     "--placement 'nowhere': use same-client"),
    ("readers", {"readers": 3},
     "readers has no effect with placement same-client (the writer does the reads); add "
     "placement separate-clients or drop it",
     "--readers has no effect with --placement same-client (the writer does the reads); add "
     "--placement separate-clients or drop it"),
    ("writer_region", {"workload": "latency", "writer_region": "US-E"},
     "writer_region has no effect with workload latency",
     "--writer-region has no effect with --workload latency"),
    ("length", {"workload": "list-append", "length": 2, "min_length": 1},
     "length sets both min_length and max_length; give either length or those two",
     "--length sets both --min-length and --max-length; give either --length or those two"),
    ("mix", {"workload": "register", "mix": "read=10"}, "mix 'read=10': without writes",
     "--mix 'read=10': without writes"),
    ("fault", {"faults": ["at=1s explode"]}, "faults 'at=1s explode': action 'explode'",
     "--fault 'at=1s explode': action 'explode'"),
    ("fault_late", {"duration": "10s", "faults": ["at=30s crash node=1 for=1s"]},
     "duration 10 s: fault 'crash n1' at 30s starts after the 10 s probe ends; make at= "
     "smaller or duration longer",
     "--duration 10 s: fault 'crash n1' at 30s starts after the 10 s probe ends; make at= "
     "smaller or --duration longer"),
    ("faults_file", {"faults_file": "no-such-faults.toml"},
     "faults_file no-such-faults.toml: no such file",
     "--faults no-such-faults.toml: no such file"),
    ("prefix", {"prefix": "/abs/"}, "prefix '/abs/': a key prefix may not start",
     "--prefix '/abs/': a key prefix may not start"),
    ("sweep_clients", {"workload": "sweep", "clients": "1,two"},
     "clients '1,two': give comma-separated whole numbers",
     "--clients '1,two': give comma-separated whole numbers"),
    ("sweep_items", {"workload": "sweep", "items": ","}, "items is empty: give",
     "--items is empty: give"),
]


@pytest.mark.parametrize("given, python, command_line", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_probe_errors_name_parameters_the_python_way(
        given: dict[str, Any], python: str, command_line: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = "sim://primary" if "faults" in given else "sim://simpledb"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecation would be a warning, not this error
        with pytest.raises(ParameterError) as caught:
            replicalab.probe(store, **{"duration": "5s", **given}, out=tmp_path / "runs",
                             progress=False)
    message = str(caught.value)
    assert "--" not in message
    assert message.startswith(python), message
    assert said(caught.value, PROBE_FLAGS).startswith(command_line)
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def test_other_verbs_and_the_run_directory_name_parameters_the_python_way(
        tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    bad_calls = [
        lambda: replicalab.compare(["sim://simpledb"], duration="soon"),
        lambda: replicalab.probe("sim://simpledb", duration="2s", out=a_file / "runs",
                                 progress=False),
        lambda: replicalab.probe("sim://simpledb", workload="sweep", variants="get",
                                 duration="2s", out=tmp_path, progress=False),
        lambda: replicalab.probe("sim://primary", duration="2s", out=tmp_path,
                                 faults=["at=1s power-loss node=1 for=1s"], progress=False),
    ]
    messages = []
    for call in bad_calls:
        with pytest.raises(ParameterError) as caught:
            call()
        messages.append(str(caught.value))
    assert [m for m in messages if "--" in m] == []
    assert [m.split()[0] for m in messages] == ["duration", "out", "variants", "faults"]


def _refused(call: Any) -> ParameterError:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecation would be a warning, not this error
        with pytest.raises(ParameterError) as caught:
            call()
    assert "--" not in str(caught.value), str(caught.value)
    return caught.value


LOAD_FLAGS = {"sla_p99_ms": "--sla-p99", "step_duration": "--step-duration"}
"""How ``replicalab load`` spells the parameters whose option is not ``--`` + name."""

LOAD_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, load_run arguments, the Python message starts, the command line's starts)
    ("arrivals", {"arrivals": "bursty"}, "arrivals 'bursty': use uniform or poisson",
     "--arrivals 'bursty': use uniform or poisson"),
    ("rate_x_duration", {"rate": 1e6, "duration": "1h"},
     "rate x duration = 3,600,000,000 requests is more than",
     "--rate x --duration = 3,600,000,000 requests is more than"),
    ("read_ratio", {"read_ratio": 1.5}, "read_ratio 1.5 must be between 0 and 1",
     "--read-ratio 1.5 must be between 0 and 1"),
    ("client", {"client": "fast"},
     "client fast speaks Redis only; use a redis:// store or client store",
     "--client fast speaks Redis only; use a redis:// store or --client store"),
    ("groups", {"groups": 2, "clients": 0},
     "groups 2 and clients 0 must be at least 1 (e.g. groups 5 clients 100)",
     "--groups 2 and --clients 0 must be at least 1 (e.g. --groups 5 --clients 100)"),
    ("paced_fast", {"groups": 2, "client": "fast"},
     "client fast drives an open-loop schedule; paced clients (groups) use client store",
     "--client fast drives an open-loop schedule; paced clients (--groups) use --client "
     "store"),
    ("workers", {"groups": 2, "workers": 3}, "workers 3 is more than groups 2",
     "--workers 3 is more than --groups 2"),
    ("ramp", {"mode": "ramp", "ramp": "200:100:10"},
     "ramp 200:100:10 needs 0 < start <= stop and step > 0, e.g. ramp 100:1000:100",
     "--ramp 200:100:10 needs 0 < start <= stop and step > 0, e.g. --ramp 100:1000:100"),
    ("ramp_text", {"mode": "ramp", "ramp": "100:50"}, "ramp '100:50' must be start:stop:step",
     "--ramp '100:50' must be start:stop:step"),
    ("step_duration", {"mode": "ramp", "ramp": "1:2:1", "step_duration": 0},
     "step_duration", "--step-duration"),
    ("sla_p99_ms", {"mode": "sla", "ramp": "1:2:1", "sla_p99_ms": 0},
     "sla_p99_ms 0ms must be positive", "--sla-p99 0ms must be positive"),
    ("refine", {"mode": "sla", "ramp": "1:2:1", "sla_p99_ms": 5, "refine": 50},
     "refine 50 must be 0..20", "--refine 50 must be 0..20"),
]


@pytest.mark.parametrize("given, python, command_line", [c[1:] for c in LOAD_CASES],
                         ids=[c[0] for c in LOAD_CASES])
def test_load_errors_name_parameters_the_python_way(
        given: dict[str, Any], python: str, command_line: str, tmp_path: Path) -> None:
    from replicalab.api.loading import load_run

    err = _refused(lambda: load_run("sim://simpledb", **{"duration": "2s", **given},
                                    out=tmp_path / "runs"))
    assert str(err).startswith(python), str(err)
    assert said(err, LOAD_FLAGS).startswith(command_line), said(err, LOAD_FLAGS)
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def test_a_missing_ray_names_the_parameter_once(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle
    import sys

    from replicalab.api.loading import load_run

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray: ImportError
    err = _refused(lambda: load_run("sim://simpledb", duration="1s", ray="local",
                                    out=tmp_path / "runs"))
    assert str(err).startswith("ray needs Ray: pip install 'replicalab[ray]' (or run "
                               "without ray for"), str(err)
    assert said(err).startswith("--ray needs Ray: pip install 'replicalab[ray]' (or run "
                                "without --ray for"), said(err)
    again = pickle.loads(pickle.dumps(err))  # as a worker process would send it back
    assert (type(again), str(again), said(again)) == (type(err), str(err), said(err))
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made
    err = _refused(lambda: replicalab.tradeoff(groups=(1,), read_ratios=(0.99,), repeats=1,
                                               step_duration="1s", ray="local",
                                               out=tmp_path / "tradeoff"))
    assert said(err).startswith("--ray needs Ray: pip install 'replicalab[ray]'"), said(err)
    assert not (tmp_path / "tradeoff").exists()


COUNTER_FLAGS = {"stores": "--store", "allow_global": "--global", "kind": "--kind"}
"""How ``replicalab counter`` spells the parameters whose option is not ``--`` + name."""

COUNTER_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, counter_bench arguments, the Python message starts, the command line's starts)
    ("kind", {"kind": "nope"}, "kind 'nope': use one of", "--kind 'nope': use one of"),
    ("configs", {"configs": "nope"}, "configs 'nope': unknown configuration",
     "--configs 'nope': unknown configuration"),
    ("clients", {"clients": "0"}, "clients [0]: give positive client counts",
     "--clients [0]: give positive client counts"),
    ("sync_ms", {"sync_ms": 0}, "sync_ms 0 must be positive", "--sync-ms 0 must be positive"),
    ("inc_fraction", {"inc_fraction": 2},
     "think_ms must not be negative and inc_fraction must be in [0, 1]",
     "--think-ms must not be negative and --inc-fraction must be in [0, 1]"),
    ("exhaust_clients", {"exhaust_clients": 0},
     "low_load_clients and exhaust_clients must be at least 1",
     "--low-load-clients and --exhaust-clients must be at least 1"),
    ("cassandra", {"kind": "cassandra", "experiments": "partition"},
     "experiments partition: faults between data centres need one store per DC; use kind "
     "redis", "--experiments partition: faults between data centres need one store per DC; "
     "use --kind redis"),
    ("middleware", {"experiments": "partition", "configs": "weak"},
     "experiments partition fault the Bounded Counter's middlewares: add one of "
     "client-based, server-based, server-based+batch to configs",
     "--experiments partition fault the Bounded Counter's middlewares: add one of "
     "client-based, server-based, server-based+batch to --configs"),
    ("fault_dc", {"experiments": "partition", "fault_dc": "Mars"}, "fault_dc 'Mars': use one of",
     "--fault-dc 'Mars': use one of"),
    ("fault_window", {"experiments": "partition", "fault_at": "100s", "fault_for": "30s"},
     "fault_at + fault_for (130 s) must end before exhaust_max (120 s)",
     "--fault-at + --fault-for (130 s) must end before --exhaust-max (120 s)"),
]


@pytest.mark.parametrize("given, python, command_line", [c[1:] for c in COUNTER_CASES],
                         ids=[c[0] for c in COUNTER_CASES])
def test_counter_bench_errors_name_parameters_the_python_way(
        given: dict[str, Any], python: str, command_line: str, tmp_path: Path) -> None:
    from replicalab.api.counting import counter_bench

    err = _refused(lambda: counter_bench(**{"kind": "sim", **given}, out=tmp_path / "runs"))
    assert str(err).startswith(python), str(err)
    assert said(err, COUNTER_FLAGS).startswith(command_line), said(err, COUNTER_FLAGS)
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def test_counter_recover_names_the_lost_data_centre_the_python_way() -> None:
    from replicalab.api.counting import counter_recover

    err = _refused(lambda: counter_recover(["k"], "Mars", ["US-E=redis://127.0.0.1:1",
                                                           "EU=redis://127.0.0.1:2"]))
    assert str(err).startswith("lost 'Mars' is not one of the data centres given (US-E, EU)")
    assert said(err, COUNTER_FLAGS).startswith("--lost 'Mars' is not one of")


QUEUE_FLAGS = {"faults": "--fault", "faults_file": "--faults", "queues": "--queue",
               "strategies": "--strategy"}
"""How ``replicalab queue`` spells the parameters whose option is not ``--`` + name."""

QUEUE_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, queue_run arguments, the Python message starts, the command line's starts)
    ("strategy", {"strategy": "magic"}, "strategy 'magic': use one of",
     "--strategy 'magic': use one of"),
    ("batch", {"batch": 11}, "batch 11 must be between 1 and 10",
     "--batch 11 must be between 1 and 10"),
    ("readers", {"consumers": 4, "readers": 5},
     "readers 5: between 1 and consumers (4), or 0 for one per consumer",
     "--readers 5: between 1 and --consumers (4), or 0 for one per consumer"),
    ("central", {"central": "sim://simpledb"},
     "central is used by the central strategies only, not 'none'; drop it or pick strategy "
     "central", "--central is used by the central strategies only, not 'none'; drop it or "
     "pick --strategy central"),
    ("processes", {"processes": True}, "processes runs consumers as processes",
     "--processes runs consumers as processes"),
    ("central_fault", {"faults": ["at=1s errors store=central for=1s"]},
     "strategy none uses no central store, which fault 'errors central store' acts on; pick "
     "strategy central", "--strategy none uses no central store, which fault 'errors "
     "central store' acts on; pick --strategy central"),
    ("needs_central", {"queue": "redis://127.0.0.1:1", "strategy": "central"},
     "strategy central needs central URL", "--strategy central needs --central URL"),
]


@pytest.mark.parametrize("given, python, command_line", [c[1:] for c in QUEUE_CASES],
                         ids=[c[0] for c in QUEUE_CASES])
def test_queue_errors_name_parameters_the_python_way(
        given: dict[str, Any], python: str, command_line: str, tmp_path: Path) -> None:
    from replicalab.api.queueing import queue_run

    err = _refused(lambda: queue_run(**{"messages": 10, **given}, out=tmp_path / "runs"))
    assert str(err).startswith(python), str(err)
    assert said(err, QUEUE_FLAGS).startswith(command_line), said(err, QUEUE_FLAGS)
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def test_experiments_name_parameters_the_python_way(tmp_path: Path) -> None:
    """The scorecard, the tradeoff grid and the models against a real store: each refusal
    names its Python parameter, and the command line says it with its options."""
    from replicalab.api.modelling import model_against, pbs_against

    out = tmp_path / "runs"
    model_flags = {"sets": "--set", "params": "--params", "t_max_ms": "--t-max-ms",
                   "writer": "--client-region", "reader": "--reader-region",
                   "jitter_ms": "--jitter"}  # cli/model.py's
    cases = [  # (call, the Python message starts, the command line's, its flags)
        (lambda: replicalab.scorecard(["mongodb"], out=out), "kinds 'mongodb' is not a store",
         "--kinds 'mongodb' is not a store", {}),
        (lambda: replicalab.scorecard(["sim://simpledb"], only=["speed"], out=out),
         "only 'speed' is not a property", "--only 'speed' is not a property", {}),
        (lambda: replicalab.tradeoff(consistency="strong", out=out),
         "consistency strong: use eventual, consistent or both",
         "--consistency strong: use eventual, consistent or both", {}),
        (lambda: replicalab.tradeoff(repeats=0, out=out), "repeats 0 must be at least 1",
         "--repeats 0 must be at least 1", {}),
        (lambda: model_against("paxos-wan", "etcd", loads="9000", out=out),
         "loads '9000': every offered rate", "--loads '9000': every offered rate", {}),
        (lambda: model_against("paxos-wan", "etcd", compare="pipelines=1,2", out=out),
         "compare pipelines=...: with against only the leader can vary (compare "
         "leader=VA,CA,JP)", "--compare pipelines=...: with --against only the leader can "
         "vary (--compare leader=VA,CA,JP)", {}),
        (lambda: model_against("paxos-wan", "etcd", sets=["persist_ms=3"], out=out),
         "against 'etcd' fits persist_ms and forward_ms",
         "--against 'etcd' fits persist_ms and forward_ms", {}),
        (lambda: pbs_against(n=9, out=out),
         "n 9: against cassandra places one node per region",
         "--n 9: --against cassandra places one node per region", {}),
        (lambda: pbs_against(pairs="5:1", out=out),
         "pairs 5:1: R and W must each be between 1 and N=3",
         "--pairs 5:1: R and W must each be between 1 and N=3", {}),
        (lambda: pbs_against(writer="Mars", out=out), "writer 'Mars': use one of",
         "--client-region 'Mars': use one of", model_flags),
        (lambda: pbs_against(jitter_ms=900, out=out), "jitter_ms 900ms: at most the shortest",
         "--jitter 900ms: at most the shortest", model_flags),
    ]
    for call, python, command_line, flags in cases:
        err = _refused(call)
        assert str(err).startswith(python), str(err)
        assert said(err, flags).startswith(command_line), said(err, flags)
    assert not out.exists()  # each refused before a run directory was made


@pytest.mark.parametrize("call, python, command_line", [
    (lambda out: _clt().clt_run("a=127.0.0.1:1,a=127.0.0.1:2", out=out),
     "agents has duplicate node names: a, a", "--agents has duplicate node names: a, a"),
    (lambda out: _clt().clt_run("127.0.0.1:1", rate=10_000, duration="10h", out=out),
     "duration x rate exceeds 50 million rounds", "--duration x --rate exceeds 50 million"),
    (lambda out: _clt().clt_run("127.0.0.1:1", trace_every=-1, out=out),
     "trace_every must be >= 0", "--trace-every must be >= 0"),
    (lambda out: _clt().clt_local(nodes=0, out=out), "nodes 0 must be between 1 and",
     "--nodes 0 must be between 1 and"),
    (lambda out: _clt().clt_local(nodes=2, skew_ms="1,2,3", out=out),
     "skew_ms gives 3 values for 2 nodes", "--skew-ms gives 3 values for 2 nodes"),
], ids=["agents", "duration_x_rate", "trace_every", "nodes", "skew_ms"])
def test_latency_tester_errors_name_parameters_the_python_way(
        call: Any, python: str, command_line: str, tmp_path: Path) -> None:
    err = _refused(lambda: call(tmp_path / "runs"))
    assert str(err).startswith(python), str(err)
    assert said(err).startswith(command_line), said(err)
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def _clt() -> Any:
    from replicalab.api import latency_tester

    return latency_tester


@pytest.mark.parametrize("given, python, command_line", [
    ({"stores": ["ftp://x"]}, "stores 'ftp://x': unknown or missing URL scheme",
     "--store 'ftp://x': unknown or missing URL scheme"),
    ({"records": 0}, "records must be >= 1 and record_bytes >= 16",
     "--records must be >= 1 and --record-bytes >= 16"),
    ({"reads": 0, "writes": 0}, "reads and writes must be >= 0 and not both 0",
     "--reads and --writes must be >= 0 and not both 0"),
    ({"max_rounds": 0}, "max_rounds must be at least 1", "--max-rounds must be at least 1"),
    ({"metrics_port": 70000}, "metrics_port 70000 is not a TCP port",
     "--metrics-port 70000 is not a TCP port"),
    ({"staleness_read_rate": 0}, "staleness_read_rate must be positive",
     "--staleness-read-rate must be positive"),
], ids=["stores", "records", "reads", "max_rounds", "metrics_port", "staleness_read_rate"])
def test_watch_errors_name_parameters_the_python_way(
        given: dict[str, Any], python: str, command_line: str, tmp_path: Path) -> None:
    from replicalab.api.watching import watch

    db = tmp_path / "samples.sqlite"
    err = _refused(lambda: watch(**{"stores": ["sim://simpledb"], "max_rounds": 1, **given},
                                 db=db, announce=lambda _: None))
    assert str(err).startswith(python), str(err)
    assert said(err, {"stores": "--store"}).startswith(command_line)  # cli/watch.py's flags


def test_model_parameters_name_the_python_way(tmp_path: Path) -> None:
    from replicalab.api.modelling import model_run

    flags = {"sets": "--set", "params": "--params"}  # cli/model.py's
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes("n = 5\n# caf\u00e9\n".encode("latin-1"))  # the é at offset 11
    cases = [
        ({"sets": ["x"]}, "sets 'x': write it as KEY=VALUE, e.g. sets n=5",
         "--set 'x': write it as KEY=VALUE, e.g. --set n=5"),
        ({"compare": "x"}, "compare 'x': write it as KEY=V1,V2", "--compare 'x': write it"),
        ({"params": tmp_path / "none.toml"}, "params ", "--params "),
        ({"sets": ["pipelines=many"]}, "sets pipelines='many': must be a int; set it in a "
         "TOML file with params if it is not a plain number or word", "--set pipelines='many':"
         " must be a int; set it in a TOML file with --params if it is not a plain number or "
         "word"),
        ({"sets": ["nope=1"]}, "sets nope='1': unknown parameter 'nope'; valid: ",
         "--set nope='1': unknown parameter 'nope'; valid: "),
        ({"compare": "pipelines=3,x"}, "compare pipelines='x': must be a int",
         "--compare pipelines='x': must be a int"),
        ({"params": latin1}, f"params {latin1} is not UTF-8 text (byte 0xe9 at offset 11); "
         "save it as UTF-8", f"--params {latin1} is not UTF-8 text"),
        ({"params": tmp_path}, f"params {tmp_path} is a directory; pass a TOML file",
         f"--params {tmp_path} is a directory"),
    ]
    for given, python, command_line in cases:
        err = _refused(lambda given=given: model_run("paxos-wan", **given,
                                                     out=tmp_path / "runs"))
        assert str(err).startswith(python), str(err)
        assert said(err, flags).startswith(command_line), said(err, flags)


def test_placement_names_parameters_the_python_way(tmp_path: Path) -> None:
    from replicalab.api.placing import placement_simulate

    cases = [
        ({"policy": ","}, "policy names no policy; pass e.g. static,cog",
         "--policy names no policy; pass e.g. static,cog"),
        ({"balance": 2.0}, "balance 2.0 must be a share of the objects",
         "--balance 2.0 must be a share of the objects"),
        ({"requests": 0}, "requests must be at least 1", "--requests must be at least 1"),
    ]
    for given, python, command_line in cases:
        err = _refused(lambda given=given: placement_simulate(**given, out=tmp_path / "runs"))
        assert str(err).startswith(python), str(err)
        assert said(err).startswith(command_line), said(err)
    assert not (tmp_path / "runs").exists()


def test_clusters_name_parameters_the_python_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replicalab.api.clustering import cluster_up

    monkeypatch.setenv("REPLICALAB_STATE_DIR", str(tmp_path / "state"))
    cases = [
        (lambda: cluster_up("redis", nodes=0), "nodes 0 must be between 1 and 15",
         "--nodes 0 must be between 1 and 15"),
        (lambda: cluster_up("redis", base_port=80), "base_port 80 must be between 1024",
         "--base-port 80 must be between 1024"),
        (lambda: cluster_up("redis", hosts=tmp_path / "none.toml"),
         "hosts ", "--hosts "),
    ]
    for call, python, command_line in cases:
        err = _refused(call)
        assert str(err).startswith(python), str(err)
        assert said(err).startswith(command_line), said(err)
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())


def test_a_busy_dashboard_port_is_named_the_python_way(tmp_path: Path) -> None:
    import socket

    from replicalab.api.watching import dashboard
    from replicalab.watch.db import SampleDB

    db = tmp_path / "samples.sqlite"
    SampleDB(db).close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = _refused(lambda: dashboard(db, port, lambda _: None))
    assert str(err).startswith(f"port {port}: cannot listen on 127.0.0.1"), str(err)
    assert said(err).startswith(f"--port {port}: cannot listen on 127.0.0.1"), said(err)


_PAIR = "{{:type :{t}, :f :{f}, :process {p}, :value {v}{k}}}\n"


def _op(f: str, value: str, process: int = 0, key: str = "") -> str:
    """Return an invoke and its ok completion as two EDN lines."""
    k = f", :key {key}" if key else ""
    return "".join(_PAIR.format(t=t, f=f, p=process, v=value, k=k) for t in ("invoke", "ok"))


MISFITS: list[tuple[str, str, str | None, str, str]] = [
    # (id, the history (EDN), the model asked (None: its own), the Python message holds,
    # the command line's)
    ("keys", _op("write", "1", key='"a"') + _op("write", "1", 1, '"b"'), "register",
     "the register model checks one object: use model kv, or one key per history",
     "the register model checks one object: use --model kv, or one key per history"),
    ("cas", _op("cas", "[1 2]"), "register",
     "a cas; the register model has read, write (use model cas-register or kv)",
     "a cas; the register model has read, write (use --model cas-register or kv)"),
    ("pair", _op("write", "[1 2]"), "cas-register",
     "history? use model kv)", "history? use --model kv)"),
    ("append", _op("append", "1"), "register", "(use model kv)", "(use --model kv)"),
    ("no_tuple", _op("write", "1"), "kv",
     ":value 1; kv expects jepsen.independent [key value] tuples (or a :key field); for one "
     "register use model register or cas-register",
     ":value 1; kv expects jepsen.independent [key value] tuples (or a :key field); for one "
     "register use --model register or cas-register"),
    ("porcupine", '[{"ClientId": 0, "Input": {"Op": 1, "Value": "x"}, "Call": 0, '
     '"Output": {}, "Return": 5}]\n', "kv",
     'has no "Key"; kv checks one register per key (for one register use model register or '
     "cas-register)", 'has no "Key"; kv checks one register per key (for one register use '
     "--model register or cas-register)"),
    ("list_append", _op("txn", "[[:append :x 1] [:w :y 2]]"), "list-append",
     ":w; list-append takes :append and :r (for :w use model rw-register)",
     ":w; list-append takes :append and :r (for :w use --model rw-register)"),
    ("rw_register", _op("txn", "[[:w :y 2] [:append :x 1]]"), None,
     ":append; rw-register takes :w and :r (for :append use model list-append)",
     ":append; rw-register takes :w and :r (for :append use --model list-append)"),
]


@pytest.mark.parametrize("text, model, python, command_line, engine", [
    (*c[1:], engine) for c in MISFITS
    for engine in (("python", "native") if ":f :txn" in c[1] else ("python",))],
    ids=[f"{c[0]}-{engine}" for c in MISFITS
         for engine in (("python", "native") if ":f :txn" in c[1] else ("python",))])
def test_a_history_the_model_cannot_take_names_the_model_the_python_way(
        text: str, model: str | None, python: str, command_line: str, engine: str,
        tmp_path: Path) -> None:
    """Below the API, the checkers and the history reader name the model that would take a
    history as ``{model}``; the API says it as a ParameterError naming ``model`` (where the
    input is, then the fix), the command line with ``--model``; both transactional engines
    alike."""
    from replicalab.api.checking import check

    path = tmp_path / "h.edn"
    path.write_text(text)
    err = _refused(lambda: check(path, model, engine=engine))
    asked = model or "rw-register"
    own = "" if model else " (not given: the history's own)"
    assert str(err).startswith(f"model {asked!r}{own} does not fit {path}"), str(err)
    assert python in str(err), str(err)
    assert said(err).startswith(f"--model {asked!r}{own} does not fit {path}"), said(err)
    assert command_line in said(err), said(err)


def _eventual_only(url: str, seed: int) -> Any:
    """A store adapter (the ``replicalab.stores`` extension point) over the simulated
    SimpleDB that declares no consistent reads: a store a load with consistent reads
    cannot run on."""
    from replicalab.stores import Feature, open_store

    store = open_store("sim://simpledb", seed)
    store.info.url, store.info.kind = url, "eventual-only"
    store.info.features = store.info.features - {Feature.CONSISTENT_READ}
    return store


REFUSED = ("consistency 'consistent': eventual-only://x cannot do consistent-read; use "
           "eventual or another store")


def test_a_load_the_store_cannot_read_is_refused_before_its_run_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reads a load asks for are checked against the store's features before a run
    directory is made: a ParameterError naming ``consistency``, said ``--consistency`` by
    the command line."""
    from replicalab.api.loading import load_run
    from replicalab.stores import registry

    monkeypatch.setitem(registry._OPENERS, "eventual-only", _eventual_only)
    err = _refused(lambda: load_run("eventual-only://x", rate=10, duration="1s",
                                    consistency="consistent", out=tmp_path / "runs"))
    assert str(err) == REFUSED
    assert said(err) == "--" + REFUSED
    assert not (tmp_path / "runs").exists()


def test_a_load_worker_records_the_reads_it_cannot_do_the_python_way(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker handed such a load (its own caller skipped the check) records the refusal
    as its error, which results.json keeps: in the API's words, never an option."""
    from replicalab.stores import registry
    from replicalab.workloads.load import LoadSpec, run_worker

    monkeypatch.setitem(registry._OPENERS, "eventual-only", _eventual_only)
    done = run_worker(LoadSpec("eventual-only://x", rate_per_s=10, duration_s=1.0,
                               consistency="consistent"))
    assert done.error == REFUSED
    assert len(done.history) == 0  # refused before any request


@pytest.mark.parametrize("given, python, command_line", [
    ({"clients": 0}, "groups 1 and clients 0 must be at least 1",
     "--groups 1 and --clients 0 must be at least 1"),
    ({"client_rate": 0}, "client_rate 0 must be positive", "--client-rate 0 must be positive"),
    ({"step_duration": "0s"}, "step_duration '0s' must be a positive duration",
     "--step-duration '0s' must be a positive duration"),
    ({"consistency": "eventual,strong"}, "consistency strong: use eventual, consistent or both",
     "--consistency strong: use eventual, consistent or both"),
], ids=["clients", "client_rate", "step_duration", "consistency"])
def test_tradeoff_takes_and_names_its_parameters_as_load_run_and_the_command_line(
        given: dict[str, Any], python: str, command_line: str, tmp_path: Path) -> None:
    """``tradeoff`` takes the names ``load_run`` and ``replicalab load tradeoff`` use
    (clients, client_rate, consistency, step_duration), and a refusal names one of its
    own parameters."""
    import inspect

    err = _refused(lambda: replicalab.tradeoff(**{"groups": (1,), **given},
                                               out=tmp_path / "runs"))
    assert err.parameter in inspect.signature(replicalab.tradeoff).parameters
    assert str(err).startswith(python), str(err)
    assert said(err).startswith(command_line), said(err)
    assert not (tmp_path / "runs").exists()


def test_the_documented_tradeoff_signature_is_the_function_s() -> None:
    """docs/python-api.md's ``tradeoff(...)`` line names the parameters the function takes,
    in its order, with its defaults."""
    import inspect

    doc = (Path(__file__).parent.parent / "docs" / "python-api.md").read_text()
    shown = "store=" + doc.split("`tradeoff(store=", 1)[1].split(")` runs seed 003", 1)[0]
    documented = dict(re.findall(r"(\w+)=((?:\([^)]*\))|[^,]+)", " ".join(shown.split())))
    params = inspect.signature(replicalab.tradeoff).parameters
    assert list(documented) == [p for p in params if p != "progress"]
    for name, text in documented.items():  # the documented defaults are literals
        assert eval(text, {"Path": Path}) == params[name].default, name

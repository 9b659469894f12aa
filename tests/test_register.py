"""The register workload on the simulated stores: what the clients do (mix, unique values,
per-key concurrency, placement, Jepsen's process rule after an unknown outcome)."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest

from registerhist import register_history
from replicalab.history import History
from replicalab.stores import open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.register import RegisterConfig, generate, parse_mix

PRIMARY_DC3 = "sim://primary?replication=async&regions=dc3"




def test_mix_parsing_and_bad_options():
    assert parse_mix("read=50,write=25,cas=25") == {"read": 0.5, "write": 0.25, "cas": 0.25}
    assert parse_mix("write=1") == {"read": 0.0, "write": 1.0, "cas": 0.0}
    for bad, msg in (("read=50,delete=5", "op=weight pairs"), ("read=x", "not a number"),
                     ("read=-1,write=2", "non-negative"), ("read=0,write=0", "positive"),
                     ("read=10", "nothing to check")):
        with pytest.raises(ValueError, match=msg):
            parse_mix(bad)
    # each names its parameter the Python way (the command line says --keys, --op-rate, ...)
    for cfg, msg in ((RegisterConfig(keys=0), "^keys 0"), (RegisterConfig(clients=0), "^clients"),
                     (RegisterConfig(rate=-1), "^op_rate"), (RegisterConfig(ops=-1), "^ops -1"),
                     (RegisterConfig(keys=2, clients=10, per_key=2), "must hold all"),
                     (RegisterConfig(check_timeout_s=0), "^check_timeout")):
        with pytest.raises(ValueError, match=msg):
            cfg.check()
    RegisterConfig().check()
    assert RegisterConfig(keys=5, clients=10).key_bound == 2
    assert RegisterConfig(keys=3, clients=10).key_bound == 4


def _max_overlap(intervals: list[tuple[int, int]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    most = cur = 0
    for _, d in events:
        cur += d
        most = max(most, cur)
    return most


def test_clients_follow_the_mix_write_unique_values_and_respect_the_key_bound():
    cfg = RegisterConfig(keys=3, clients=9, writer_region="US-E", reader_region="EU", rate=20)
    h = register_history(PRIMARY_DC3, cfg, duration_s=20)
    ops = list(h)
    assert len(ops) > 2500
    kinds = collections.Counter(o.f for o in ops)
    assert abs(kinds["read"] / len(ops) - 0.5) < 0.04
    assert abs((kinds["write"] + kinds["cas"]) / len(ops) - 0.5) < 0.04
    assert kinds["cas"] > 0.15 * len(ops)  # cas falls back to a write only on a fresh key
    written = [o.values[0] for o in ops if o.f in ("write", "cas")]
    assert len(written) == len(set(written))
    # a cas keeps the value it expected (one written before it), for the checker
    cas = [o for o in ops if o.f == "cas"]
    assert all(len(o.expects) == 1 and o.expects[0] in written for o in cas)
    assert all(not o.expects for o in ops if o.f != "cas")
    assert len({o.keys[0] for o in ops}) == 3
    for key in {o.keys[0] for o in ops}:
        spans = [(o.invoke_ns, o.complete_ns) for o in ops if o.keys[0] == key]
        assert _max_overlap(spans) <= cfg.key_bound
    # reads at the EU replica (n2), writes and cas at the primary n0 in US-E
    assert {o.node for o in ops if o.f == "read"} == {"n2"}
    assert {o.node for o in ops if o.f != "read" and o.type == "ok"} == {"n0"}
    assert {o.consistency for o in ops if o.f == "read"} == {"eventual"}
    # the same seed gives the same history; another seed another one
    again = register_history(PRIMARY_DC3, cfg, duration_s=20)
    assert [(o.process, o.f, o.values, o.invoke_ns) for o in again] == [
        (o.process, o.f, o.values, o.invoke_ns) for o in ops]
    other = register_history(PRIMARY_DC3, cfg, duration_s=20, seed=2)
    assert [o.values for o in other] != [o.values for o in ops]


def test_op_budget_and_back_to_back_clients():
    h = register_history("sim://simpledb", RegisterConfig(clients=4, keys=2, rate=0, ops=300),
                  duration_s=3600)
    assert len(h) == 300
    assert {o.consistency for o in h if o.f == "read"} == {"eventual"}


def test_after_an_unknown_outcome_the_client_carries_on_as_a_new_process():
    cfg = RegisterConfig(keys=2, clients=4, mix="read=20,write=40,cas=40", rate=20)
    h = register_history(PRIMARY_DC3 + "&timeout_ms=500", cfg, duration_s=12,
                  faults=("at=3s crash node=0 for=4s",))
    ops = [o for o in h if o.process >= 0]
    info = [o for o in ops if o.type == "info"]
    assert len(info) >= 4
    by_process = collections.defaultdict(list)
    for o in ops:
        by_process[o.process].append(o)
    for o in info:  # an info op is its process's last op
        assert by_process[o.process][-1].index == o.index
    assert max(by_process) >= cfg.clients  # ... and the client went on under a new id
    assert {p % cfg.clients for p in by_process} == set(range(cfg.clients))


def test_a_store_without_conditional_writes_gets_writes_for_cas():
    h = register_history("sim://quorum?n=3&r=1&w=1", RegisterConfig(keys=2, clients=4),
                         duration_s=5)
    kinds = collections.Counter(o.f for o in h)
    assert kinds["cas"] == 0 and kinds["write"] > 0 and kinds["read"] > 0


def _cli(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "replicalab.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize(("args", "needle"), [
    (("probe", "--workload", "register", "--mix", "read=5"), "nothing to check"),
    (("probe", "--workload", "register", "--clients", "1,2"), "--clients '1,2'"),
    (("compare", "--workload", "register", "--kinds", "redis",
      "--fault", "at=1s crash node=7 for=1s"), "nodes 0..2"),
])
def test_bad_register_options_are_one_line_exit_2(args, needle, tmp_path):
    p = _cli(*args, "--out", str(tmp_path), cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_a_client_refused_at_start_connects_again_and_the_run_goes_on():
    """A scheduled crash may begin before a slow machine got every client connected (an
    etcd crash run beside a CPU hog ended with "cannot reach etcd"): a refused session
    is tried again after ``info_backoff_s``, as a reconnecting client would."""
    store = open_store("sim://simpledb", 1)
    refused = {"left": 3}
    connect = store.connect

    async def flaky(region: str | None = None):
        if refused["left"] > 0:
            refused["left"] -= 1
            raise ValueError("cannot reach the node: connection refused")
        return await connect(region)

    store.connect = flaky
    h = History()
    cfg = RegisterConfig(keys=2, clients=4, rate=20, info_backoff_s=0.5)
    opts = ProbeOptions(duration_s=5.0, seed=1)
    t0 = store.runtime.now_ns()
    store.runtime.run(generate(store, h, opts, cfg, Recorder(h, store.runtime)))
    first = {}
    for o in h:
        first.setdefault(o.process % cfg.clients, o.invoke_ns - t0)
    assert set(first) == set(range(cfg.clients))  # every client got on
    late = sorted(first.values())[-3:]
    assert all(t >= 0.5e9 for t in late)  # the three refused waited one backoff


def test_a_client_that_never_connects_issues_nothing_and_ends_with_the_run():
    store = open_store("sim://simpledb", 1)

    async def refuse(region: str | None = None):
        raise ValueError("cannot reach the node: connection refused")

    store.connect = refuse
    h = History()
    store.runtime.run(generate(store, h, ProbeOptions(duration_s=2.0, seed=1),
                               RegisterConfig(keys=2, clients=2), Recorder(h, store.runtime)))
    assert len(h) == 0

"""``replicalab counter ...``: operations on per-DC stores, the bench, and bad input (one
line, exit code 2, no traceback, nothing changed in the store)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from replicalab.cli.main import app
from replicalab.cluster import datacentres as topology
from replicalab.cluster.ports import allocate, wait_listening

EXE = [sys.executable, "-m", "replicalab.cli.main", "counter"]
SIM = "sim://primary?clock=real"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "160"})


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``counter *args`` in this process (fast) and return it as a finished process."""
    r = CliRunner().invoke(app, ["counter", *args])
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def one_line_error(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in p.stderr + p.stdout
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_bad_input_is_one_line_exit_2(tmp_path: Path):
    # through the real entry point once; the other cases in-process
    one_line_error(run("value", "k", cwd=tmp_path), "--store US-E=")
    one_line_error(invoke("value", "k", "--store", "nourl"), "use DC=URL")
    one_line_error(invoke("value", "k", "--store", f"A={SIM}", "--config", "eventual"),
                   "--config", "client-based")
    one_line_error(invoke("value", "k", "--store", "A=redis://127.0.0.1:1", "--dc", "Mars"),
                   "Mars")
    # a simulated store would vanish with the command: refused, naming counter serve
    # (an unknown counter and a bound violated at create, through a served simulated DC, are
    # in test_cli_newcomer.py)
    one_line_error(invoke("value", "nosuch", "--store", f"US-E={SIM}", "--store", f"EU={SIM}"),
                   "lives only inside one process", "--server")
    # an unreachable data centre: nothing listens on this port
    (port,) = allocate(1)
    one_line_error(invoke("value", "k", "--store", f"US-E=redis://127.0.0.1:{port}"),
                   "unreachable", "US-E")
    one_line_error(invoke("bench", "--kind", "mongodb"), "redis, postgresql, cassandra, sim")
    one_line_error(invoke("bench", "--clients", "3,x"), "--clients")
    one_line_error(invoke("bench", "--experiments", "latency"), "throughput")
    one_line_error(invoke("serve", "--dc", "Mars", "--store", f"US-E={SIM}"), "Mars")
    one_line_error(invoke("serve", "--dc", "US-E"), "--store US-E=")


def test_bench_on_simulated_dcs_json_and_report(tmp_path: Path):
    p = run("bench", "--store", "sim", "--configs", "weak,server-based+batch",
            "--experiments", "throughput", "--clients", "3", "--counters", "1",
            "--duration", "1.5", "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "--store sim is deprecated here; use --kind sim" in p.stderr  # still works
    out = json.loads(p.stdout)
    assert [q["spec"]["config"] for q in out["points"]] == ["weak", "server-based+batch"]
    for q in out["points"]:
        assert q["outcomes"]["ok"] > 0 and q["throughput_ops_s"] > 0
        assert set(q["latency_by_region_ms"]) == {"US-E", "US-W", "EU"}
    run_dir = Path(out["run_dir"])
    assert json.loads((run_dir / "results.json").read_text())["points"] == out["points"]
    assert (run_dir / "figures" / "throughput-1.png").is_file()
    assert "fig-throughput-1" in Path(out["report"]).read_text()


@pytest.mark.integration
def test_operations_on_real_redis_dcs(tmp_path: Path):
    with topology.start("redis", tmp_path, f"clic{os.getpid()}") as t:
        stores = [a for dc in t.dcs for a in ("--store", f"{dc}={t.url(dc)}")]

        def cmd(*args: str) -> subprocess.CompletedProcess[str]:
            return invoke(*args, *stores, "--json")

        p = cmd("create", "stock", "--initial", "30")
        assert p.returncode == 0, p.stderr
        one_line_error(cmd("create", "stock", "--initial", "5"), "already exists")
        assert json.loads(cmd("dec", "stock", "--by", "4", "--dc", "US-W").stdout)["value"] == 26
        # each command pushes its change to the other DCs before it returns
        assert json.loads(cmd("inc", "stock", "--by", "2", "--dc", "EU").stdout)["value"] == 28
        # US-W holds 10 - 4 rights: 7 more needs rights from the others
        one_line_error(cmd("dec", "stock", "--by", "7", "--dc", "US-W"), "retry with --global")
        assert json.loads(cmd("dec", "stock", "--by", "7", "--dc", "US-W", "--global").stdout
                          )["value"] == 21
        assert json.loads(cmd("value", "stock", "--dc", "US-E").stdout)["value"] == 21
        # an upper bound: 9 seats, 3 rights to increment per DC
        p = cmd("create", "seats", "--upper", "9")
        assert p.returncode == 0 and json.loads(p.stdout)["upper"] == 9, p.stderr
        assert json.loads(cmd("inc", "seats", "--by", "3", "--dc", "EU").stdout)["value"] == 3
        one_line_error(cmd("inc", "seats", "--dc", "EU"), "rights to inc", "--global")
        assert json.loads(cmd("inc", "seats", "--dc", "EU", "--global").stdout)["value"] == 4
        one_line_error(cmd("create", "u", "--initial", "5", "--upper", "2"),
                       "above the upper bound 2")
        one_line_error(cmd("create", "u", "--upper", "2", "--config", "weak"),
                       "lower bound only")
        # the baselines through the same command
        assert cmd("create", "w", "--initial", "3", "--config", "weak").returncode == 0
        assert json.loads(cmd("dec", "w", "--config", "weak", "--dc", "EU").stdout
                          )["value"] == 2
        assert cmd("create", "s", "--initial", "1", "--config", "strong").returncode == 0
        assert json.loads(cmd("dec", "s", "--config", "strong", "--dc", "EU").stdout
                          )["value"] == 0
        one_line_error(cmd("dec", "s", "--config", "strong"), "exhausted")
        # malformed state in a store: a clear error, and the store is left as it was
        port = int(t.url("US-E").rsplit(":", 1)[1].split("?")[0].split("/")[0])
        r = redis.Redis(port=port)
        r.set("counters/bad/state", "{not json")
        one_line_error(cmd("value", "bad", "--dc", "US-E"), "counters/bad/state")
        one_line_error(cmd("dec", "bad", "--dc", "US-E"), "counters/bad/state")
        assert r.get("counters/bad/state") == b"{not json"
        r.close()


def test_serve_stops_cleanly_on_ctrl_c_with_a_client_connected(tmp_path: Path):
    (port,) = allocate(1)
    proc = subprocess.Popen([*EXE, "serve", "--dc", "US-E", "--store", f"US-E={SIM}",
                             "--port", str(port)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_listening(port, 30), proc.stderr
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b'{"id": 1, "op": "ping"}\n')
            assert json.loads(s.makefile().readline())["ok"] is True
            proc.send_signal(signal.SIGINT)  # the client is still connected
            out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert err == "", err  # no traceback from the connection being cut
    assert "listening on" in out

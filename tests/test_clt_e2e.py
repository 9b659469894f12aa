"""CLT end to end: real agent processes on 127.0.0.1, with and without a Toxiproxy WAN link,
an unreachable agent, and an agent that dies mid-run (partial results kept)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from replicalab.clt import analysis, local, records, runner
from replicalab.clt.offsets import recovered_offsets
from replicalab.cluster import process
from replicalab.cluster.ports import allocate, wait_listening

EXE = [sys.executable, "-m", "replicalab.cli.main"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "120"})


def _one_line_error(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.integration
def test_three_local_agents_direct_with_skewed_clocks(tmp_path: Path):
    cfg = runner.RunConfig(rate_hz=50, payload_bytes=1024, duration_s=3, self_loop=True,
                           timeout_s=1.0)
    # skews far larger than the spread of the agents' start (each starts when its "start"
    # message arrives, which on a busy machine can differ by several ms)
    outcome, setup = local.run_local(3, None, cfg, tmp_path, skews_ms=[0.0, 200.0, -100.0])
    assert outcome.errors == []
    assert not any(process.alive(p) for p in setup.pids)  # everything started is stopped
    rec = outcome.records
    assert len(rec) == 3 * 3 * 150  # every node pinged every node, itself included, each round
    assert set(zip(rec.node.tolist(), rec.remote.tolist(), strict=True)) == {
        (a, b) for a in ("n1", "n2", "n3") for b in ("n1", "n2", "n3")}
    assert rec.timed_out.mean() < 0.01
    ok = ~rec.timed_out
    assert np.all(rec.end_us[ok] > rec.start_us[ok])
    # reported times carry each agent's skew: n2's clock runs 200 ms ahead of n1's, n3's 100
    # behind (the tolerance is for the start spread, not for the skew)
    t0 = {n: rec.start_us[rec.node == n].min() for n in ("n1", "n2", "n3")}
    assert 150_000 < t0["n2"] - t0["n1"] < 250_000
    assert 50_000 < t0["n1"] - t0["n3"] < 150_000
    s = analysis.Settings(nodes=["n1", "n2", "n3"], rate_hz=50, timeout_ms=1000,
                          self_loop=True, planned_rounds={n: 150 for n in ("n1", "n2", "n3")})
    r = analysis.analyse(rec, s)
    assert r["quorum"]["by_k"][1]["label"] == "Q2/3"
    assert r["lag"]["nodes"]["n1"]["rounds_sent"] == 150
    # the HLC trace logs align back to the injected skews (true offset = skew(driver) - skew)
    off = recovered_offsets(outcome.traces, setup.skews_ms)
    assert off["driver"] == "n2" and off["messages"] > 1000
    for row in off["nodes"]:
        assert abs(row["error_ms"]) < 3.0, row


@pytest.mark.integration
def test_three_local_agents_behind_dc3_toxiproxy_links(tmp_path: Path):
    cfg = runner.RunConfig(rate_hz=20, payload_bytes=1024, duration_s=4, timeout_s=2.0,
                           trace_every=0)
    outcome, setup = local.run_local(3, "dc3", cfg, tmp_path)
    assert outcome.errors == []
    assert not any(process.alive(p) for p in setup.pids)
    assert setup.regions == {"n1": "US-E", "n2": "US-W", "n3": "EU"}
    s = analysis.Settings(nodes=["n1", "n2", "n3"], rate_hz=20, timeout_ms=2000,
                          self_loop=False, regions=setup.regions,
                          injected_rtt_ms=setup.injected_rtt_ms)
    r = analysis.analyse(outcome.records, s)
    assert setup.injected_rtt_ms["n1->n2"] == 80 and setup.injected_rtt_ms["n2->n1"] == 83
    for row in r["matrix"]["rows"]:
        # never faster than injected; a loaded 2-core machine adds a few ms at most
        assert row["injected_ms"] <= row["measured_p50_ms"] <= row["injected_ms"] + 6, row
    # the asymmetric matrix survives: US-W pinging US-E sees a longer RTT than the reverse
    assert r["pairs"]["n2->n1"]["p"]["p50"] > r["pairs"]["n1->n2"]["p"]["p50"] + 1.5
    po = r["proxy_overhead"]
    assert po is not None and po["pinger"] == "n1" and po["peer"] == "n2"
    assert 9.5 <= po["emulated_10ms_p50_ms"] <= 16
    assert r["groups"].keys() == {"cross region"}


def test_unreachable_agent_exits_2(tmp_path: Path):
    port = allocate(1)[0]  # nothing listens there
    p = _cli("clt", "run", "--agents", f"127.0.0.1:{port}", "--duration", "1s",
             "--out", str(tmp_path), cwd=tmp_path)
    _one_line_error(p, "unreachable", f"127.0.0.1:{port}", "clt agent --listen")


def test_bad_options_exit_2(tmp_path: Path):
    _one_line_error(_cli("clt", "run", "--agents", "nohost", "--out", str(tmp_path),
                         cwd=tmp_path), "HOST:PORT")
    _one_line_error(_cli("clt", "local", "--regions", "mars", "--out", str(tmp_path),
                         cwd=tmp_path), "unknown region set")
    _one_line_error(_cli("clt", "local", "--duration", "-3", "--out", str(tmp_path),
                         cwd=tmp_path), "--duration")


@pytest.mark.integration
def test_agent_dying_mid_run_keeps_the_others_rows(tmp_path: Path):
    ports = allocate(3)
    pids = [process.start([sys.executable, "-m", "replicalab.clt.agent", "--listen",
                           f"127.0.0.1:{p}"], tmp_path / f"agent{p}.log") for p in ports]
    try:
        assert all(wait_listening(p, 30) for p in ports)

        def kill_n3_mid_run() -> None:
            # the run's traces directory is made once every agent has answered: the run has
            # begun then (however long the command took to start), and 1.5 s into its 4 s
            # n3 dies mid-run
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not list(
                    (tmp_path / "runs").glob("*/traces")):
                time.sleep(0.05)
            time.sleep(1.5)
            process.kill9(pids[2])

        timer = threading.Thread(target=kill_n3_mid_run)
        timer.start()
        p = _cli("clt", "run", "--agents", ",".join(f"127.0.0.1:{x}" for x in ports),
                 "--duration", "4s", "--rate", "20", "--timeout", "500ms", "--json",
                 "--out", str(tmp_path / "runs"), cwd=tmp_path)
        timer.join()
    finally:
        for pid in pids:
            process.stop(pid)
    _one_line_error(p, "agent n3", "partial results saved")
    run_dir = next((tmp_path / "runs").iterdir())
    rec = records.read_csv(run_dir / "clt.csv")
    assert set(rec.node.tolist()) == {"n1", "n2"}  # n3's rows are lost, the others kept
    to_n3 = rec.select(rec.remote == "n3")
    assert to_n3.timed_out.sum() > 0  # pings to the dead agent are censored, not dropped
    assert len(to_n3) == 2 * 80
    assert (run_dir / "report.html").exists() and (run_dir / "results.json").exists()

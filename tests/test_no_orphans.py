"""No orphans (issue 14, item 4): every command that starts processes stops them all on
SIGTERM and on Ctrl-C (SIGINT) mid-run, frees their ports, and on Ctrl-C ends the run within
a second with what it recorded saved.

Each test launches the real CLI as a subprocess (``python -m replicalab.cli.main``) with short
settings, in a directory of its own (cluster state goes to its ``.replicalab``, named by
``REPLICALAB_STATE_DIR``), watches its
descendants and their listening sockets through /proc while it runs, sends the signal to the
CLI process alone (as ``timeout``, a CI runner or ``kill`` does), and then checks that every
process it saw is gone and every port it saw listening is free.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import redis

from replicalab.cluster import process
from replicalab.cluster.ports import is_free
from servers import running_cluster, server_missing

pytestmark = pytest.mark.integration

SIGNALS = [signal.SIGTERM, signal.SIGINT]
RUN_END_S = 1.0
"""Ctrl-C must end the run (no operation invoked later) within this many seconds."""
EXIT_S = 15.0
"""Bound on the whole orderly shutdown: stop servers, save, render the report, exit."""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def listening_ports(pid: int) -> set[int]:
    """Return the TCP ports ``pid`` listens on (its socket inodes matched in /proc/net)."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


@dataclass
class Watched:
    """What a signalled CLI run left: its processes, ports, times and output."""

    seen: dict[int, str] = field(default_factory=dict)
    ports: set[int] = field(default_factory=set)
    signal_mono_ns: int = 0
    signal_wall_ns: int = 0
    exit_s: float = 0.0
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""

    def left(self) -> dict[int, str]:
        """Return the processes seen that are still alive."""
        return {p: c for p, c in self.seen.items() if process.alive(p)}

    def check_nothing_left(self) -> None:
        """Assert every process seen is gone and every port seen is free."""
        deadline = time.monotonic() + 2.0  # exited children are reaped by init meanwhile
        while self.left() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not self.left(), f"left running: {self.left()}\n{self.stderr}"
        busy = sorted(p for p in self.ports if not is_free(p) and not self._taken_since(p))
        assert not busy, f"ports still bound: {busy}"

    def _taken_since(self, port: int) -> bool:
        """Return True if whoever listens on ``port`` now started after the signal: another
        test's server that took the freed port (3 workers start servers on free ports), not
        an orphan of this run (which was started before the signal)."""
        import psutil

        owners = [c.pid for c in psutil.net_connections(kind="tcp")
                  if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                  and c.pid is not None]
        try:
            return bool(owners) and all(
                psutil.Process(pid).create_time() * 1e9 > self.signal_wall_ns
                for pid in owners)
        except psutil.NoSuchProcess:
            return True  # it went away as we looked: nothing of ours holds the port


def run_and_signal(argv: list[str], cwd: Path, sig: int,
                   ready: Callable[[dict[int, str]], bool], settle_s: float,
                   limit_s: float = 90.0) -> Watched:
    """Run the CLI with ``argv``; once ``ready(descendants)`` holds, wait ``settle_s``
    (mid-run), send ``sig`` to the CLI and wait for it to exit."""
    w = Watched()
    out, err = cwd / "stdout.txt", cwd / "stderr.txt"
    with out.open("w") as fo, err.open("w") as fe:
        proc = subprocess.Popen([sys.executable, "-m", "replicalab.cli.main", *argv], cwd=cwd,
                                stdout=fo, stderr=fe, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONFAULTHANDLER": "1",
                                     "REPLICALAB_STATE_DIR": str(cwd / ".replicalab")})
    try:
        deadline = time.monotonic() + limit_s
        fire_at = None
        while True:
            for pid in process.descendants(proc.pid):
                if pid not in w.seen:
                    w.seen[pid] = _cmdline(pid)
                w.ports |= listening_ports(pid)
            if fire_at is None and ready(w.seen):
                fire_at = time.monotonic() + settle_s
            if fire_at is not None and time.monotonic() >= fire_at:
                break
            if proc.poll() is not None:
                said = err.read_text()
                if "not installed" in said:
                    server_missing(" ".join(argv[:2]), said.strip())
                raise AssertionError(f"the command ended before the signal (exit "
                                     f"{proc.returncode}): {said}")
            assert time.monotonic() < deadline, f"never ready; saw {w.seen}"
            time.sleep(0.05)
        w.signal_wall_ns, w.signal_mono_ns = time.time_ns(), time.monotonic_ns()
        proc.send_signal(sig)
        try:
            w.returncode = proc.wait(EXIT_S)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # faulthandler prints where it hangs
            proc.wait(5)
            raise AssertionError(f"no exit {EXIT_S} s after the signal: "
                                 f"{err.read_text()[-4000:]}") from None
        w.exit_s = (time.monotonic_ns() - w.signal_mono_ns) / 1e9
    finally:
        if proc.poll() is None:  # the test failed: do not leave it (or its servers) behind
            proc.kill()
            proc.wait()
            process.stop_many(list(w.seen))
    w.stdout, w.stderr = out.read_text(), err.read_text()
    return w


def _count(seen: dict[int, str], word: str) -> int:
    return sum(word in c for c in seen.values())


_UP_SINCE: dict[str, float] = {}


def _counters_in_use(seen: dict[int, str]) -> bool:
    """True once every data centre's redis-server holds the bench's counter (the clients
    start right after every DC knows it), or 8 s after the servers and links are up (the
    30 s point is then surely running; a busy machine can slow a DBSIZE past its timeout)."""
    servers = [p for p, c in seen.items() if "redis-server" in c]
    if len(servers) < 3 or _count(seen, "toxiproxy-server") < 4:
        return False
    key = ",".join(map(str, sorted(servers)))
    if time.monotonic() - _UP_SINCE.setdefault(key, time.monotonic()) > 8.0:
        return True
    for pid in servers:
        for port in listening_ports(pid):
            try:
                with redis.Redis(port=port, socket_timeout=0.5) as r:
                    if r.dbsize() == 0:
                        return False
            except redis.RedisError:
                return False
    return True


def _run_dir(out: Path, pattern: str) -> Path:
    found = sorted(out.glob(pattern))
    assert found, f"no run directory {pattern} under {out}"
    return found[-1]


def _check_interrupted(w: Watched, sig: int) -> None:
    w.check_nothing_left()
    assert w.returncode == 130, (w.returncode, w.stderr)
    assert "interrupted" in w.stderr and "Traceback" not in w.stderr, w.stderr
    assert w.exit_s < EXIT_S


def _history_ends_in_time(run_dir: Path, w: Watched) -> None:
    """The probe/load history is saved and its last op was invoked within RUN_END_S."""
    config = json.loads((run_dir / "config.json").read_text())
    assert config["interrupted"] is True
    invoke = pq.read_table(run_dir / "history.parquet", columns=["invoke_ns"]).column(0)
    assert len(invoke) > 0
    if config.get("runtime") == "virtual":  # simulated time: the run stopped before its end
        duration_s = config["spec"]["options"]["duration_s"]
        assert max(invoke.to_pylist()) < duration_s * 1e9 * 0.99
        return
    last_s = (max(invoke.to_pylist()) - w.signal_mono_ns) / 1e9
    assert last_s <= RUN_END_S, f"an op was invoked {last_s:.2f} s after the signal"


@pytest.fixture(scope="module")
def redis_lan():
    """(Cluster, root) of one redis-server for the load test's workers."""
    with running_cluster("redis", nodes=1, regions="lan", name="orphans-redis") as c:
        yield c


# -- one test per process-starting command, each with SIGTERM and SIGINT ----------------------

@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_counter_bench(tmp_path: Path, sig: int):
    w = run_and_signal(["counter", "bench", "--store", "redis", "--configs", "weak",
                        "--experiments", "throughput", "--clients", "3", "--counters", "1",
                        "--duration", "30", "--out", "runs", "--json"], tmp_path, sig,
                       _counters_in_use, settle_s=1.0)
    assert _count(w.seen, "redis-server") == 3 and _count(w.seen, "toxiproxy-server") == 4
    _check_interrupted(w, sig)
    res = json.loads((_run_dir(tmp_path / "runs", "*-counter-bench-redis") / "results.json")
                     .read_text())
    assert res["interrupted"] is True
    point = res["points"][-1]  # the point cut short is kept, marked as such
    assert point["interrupted"] is True and point["ops"] > 0
    ended_s = (point["t0_mono_ns"] + point["elapsed_s"] * 1e9 - w.signal_mono_ns) / 1e9
    assert ended_s <= RUN_END_S, f"the point ran on {ended_s:.2f} s after the signal"


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_clt_local(tmp_path: Path, sig: int):
    # the signal lands 2 s into the measuring phase: its first progress line ("running")
    # comes once the agents were told to start, which a busy machine delayed beyond 2 s
    # after they were spawned (then no ping had been sent, and none could be kept)
    def measuring(seen: dict[int, str]) -> bool:
        return (_count(seen, "replicalab.clt.agent") >= 3
                and _count(seen, "toxiproxy-server") >= 1
                and "running (" in (tmp_path / "stderr.txt").read_text())

    w = run_and_signal(["clt", "local", "--nodes", "3", "--regions", "dc3", "--rate", "50",
                        "--duration", "30s", "--out", "runs"], tmp_path, sig, measuring,
                       settle_s=2.0)
    assert _count(w.seen, "replicalab.clt.agent") == 3
    _check_interrupted(w, sig)
    run_dir = _run_dir(tmp_path / "runs", "*-clt-local-dc3")
    rows = pq.read_table(run_dir / "clt.parquet", columns=["start_us"]).column(0).to_pylist()
    assert rows, "no ping was kept"
    last_s = (max(rows) * 1000 - w.signal_wall_ns) / 1e9
    assert last_s <= RUN_END_S, f"a ping was sent {last_s:.2f} s after the signal"
    # the analysis is saved; the figures are left to `clt report` (drawing them while the
    # signal waited took more than 15 s beside a CPU hog)
    assert (run_dir / "results.json").exists() and not (run_dir / "figures").exists()


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_compare(tmp_path: Path, sig: int):
    out = tmp_path / "runs"

    def probing(seen: dict[int, str]) -> bool:
        return (_count(seen, "redis-server") >= 3
                and any(out.glob("*-compare-redis/runs/*-staleness-*")))

    w = run_and_signal(["compare", "--kinds", "redis", "--duration", "20", "--out", "runs",
                        "--json"], tmp_path, sig, probing, settle_s=1.5)
    _check_interrupted(w, sig)
    assert not list((tmp_path / ".replicalab" / "clusters").glob("*"))  # state removed too
    _history_ends_in_time(_run_dir(out, "*-compare-redis/runs/*-staleness-*"), w)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_load_run_with_workers(tmp_path: Path, sig: int, redis_lan):
    c, _ = redis_lan
    server = redis.Redis(port=c.nodes[0].port)
    server.flushall()

    def loading(seen: dict[int, str]) -> bool:  # both workers spawned, requests flowing
        return _count(seen, "multiprocessing.spawn") >= 2 and server.dbsize() > 0

    w = run_and_signal(["load", "run", "--store", c.url, "--workers", "2", "--rate", "300",
                        "--read-ratio", "0.5", "--duration", "30s", "--out", "runs", "--json"],
                       tmp_path, sig, loading, settle_s=1.0)
    server.close()
    assert _count(w.seen, "multiprocessing.spawn") == 2
    _check_interrupted(w, sig)
    run_dir = _run_dir(tmp_path / "runs", "*-load-*")
    _history_ends_in_time(run_dir, w)
    steps = json.loads((run_dir / "results.json").read_text())["steps"]
    assert len(steps) == 1 and steps[0]["counts"]["ok"] > 0  # the cut step is kept


def test_probe_batch_with_workers(tmp_path: Path):
    # two forked workers (same command line as the CLI), each in a run of a simulated day
    # (seconds of simulation: the signal lands in it, not in a save, as it could in 2 h);
    # SIGTERM only: the CLI turns it into its SIGINT, which takes the Ctrl-C path from there
    sig = signal.SIGTERM
    w = run_and_signal(["probe", "--duration", "24h", "--repeats", "4", "--workers", "2",
                        "--out", "runs", "--json"], tmp_path, sig,
                       lambda s: _count(s, "replicalab.cli.main") >= 2, settle_s=1.5)
    assert _count(w.seen, "replicalab.cli.main") == 2
    _check_interrupted(w, sig)
    batch = _run_dir(tmp_path / "runs", "*-batch-staleness-*")
    summary = json.loads((batch / "batch.json").read_text())
    assert summary["interrupted"] is True and summary["runs_planned"] == 4
    cut = [r for p in summary["points"] for r in p["runs"] if r["interrupted"]]
    assert cut, "the runs in progress are kept, marked as cut short"
    for r in cut:
        _history_ends_in_time(batch / "runs" / r["label"], w)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_cluster_up_interrupted_while_starting(tmp_path: Path, sig: int):
    # ZooKeeper's JVMs take seconds to start: the signal lands while the ensemble forms
    w = run_and_signal(["cluster", "up", "zookeeper", "--nodes", "3", "--name", "zk-orphans"],
                       tmp_path, sig, lambda s: _count(s, "java") >= 1, settle_s=0.2)
    _check_interrupted(w, sig)
    assert w.exit_s <= RUN_END_S + 2.0, f"took {w.exit_s:.2f} s to stop"
    assert not (tmp_path / ".replicalab" / "clusters" / "zk-orphans").exists()


def test_cluster_up_that_finished_keeps_its_cluster_until_down(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("REPLICALAB_STATE_DIR", str(tmp_path / ".replicalab"))
    cli = [sys.executable, "-m", "replicalab.cli.main", "cluster"]
    up = subprocess.run([*cli, "up", "redis", "--nodes", "1", "--regions", "lan", "--name",
                         "kept", "--json"], cwd=tmp_path, capture_output=True, text=True,
                        timeout=60, check=False)
    if up.returncode != 0:
        server_missing("redis-server", up.stderr)
    state = json.loads((tmp_path / ".replicalab" / "clusters" / "kept" / "cluster.json")
                       .read_text())
    pids = [n["pid"] for n in state["nodes"]] + [state["toxiproxy_pid"]]
    try:
        assert all(process.alive(p) for p in pids)  # not stopped when `up` exited
    finally:
        down = subprocess.run([*cli, "down", "kept"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60, check=False)
    assert down.returncode == 0, down.stderr
    assert not any(process.alive(p) for p in pids)

"""Cluster state in one per-user place (issue 29, item 3): ``cluster status`` and ``cluster
down`` find a cluster from any directory, a cluster whose processes died is shown as such and
cleaned up by ``down``, and a dead server's recycled pid is never signalled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicalab.cluster import base, process
from replicalab.cluster.state import SYSTEM_STATE_DIR, Cluster, Node, load, state_root, store_url
from replicalab.stores.url import parse_store_url
from servers import server_missing

CLI = [sys.executable, "-m", "replicalab.cli.main", "cluster"]


def test_the_state_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path):
    monkeypatch.setenv("REPLICALAB_STATE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_root() == tmp_path / "mine"
    monkeypatch.delenv("REPLICALAB_STATE_DIR")
    assert state_root() == tmp_path / "xdg" / "replicalab"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/dir")  # the XDG spec says: ignore it
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home = tmp_path / "home" / ".local" / "state" / "replicalab"
    assert state_root() == (SYSTEM_STATE_DIR if os.geteuid() == 0 else home)
    monkeypatch.delenv("XDG_STATE_HOME")
    assert state_root() == (SYSTEM_STATE_DIR if os.geteuid() == 0 else home)
    # a relative override is made absolute where it is read: it names one place
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REPLICALAB_STATE_DIR", "rel")
    assert state_root() == tmp_path / "rel" and state_root().is_absolute()


def test_a_recycled_pid_is_not_signalled(tmp_path: Path):
    """A saved cluster whose server died and whose pid now names another process: `down`
    removes the state and leaves that process alone."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        ticks = process.start_ticks(other.pid)
        assert ticks is not None
        c = Cluster("redis", "recycled", "lan",
                    [Node(0, "LAN", "primary", 1, str(tmp_path / "n0"), pid=other.pid)],
                    born={str(other.pid): ticks - 1})  # the server started a tick earlier
        c.save(tmp_path)
        assert base.gone(load("recycled", tmp_path))
        _, rows = base.status("recycled", tmp_path)
        assert rows[0]["alive"] == "no" and rows[0]["state"] == "process gone"
        base.down("recycled", tmp_path)
        assert other.poll() is None, "an unrelated process got the dead server's signal"
        assert not (tmp_path / "clusters" / "recycled").exists()
    finally:
        other.kill()
        other.wait()
        process._BORN.pop(other.pid, None)


def _cli(args: list[str], cwd: Path, state: Path, timeout_s: float = 90.0
         ) -> subprocess.CompletedProcess[str]:
    """Run ``replicalab cluster ARGS`` in ``cwd`` with its state in ``state``: named by
    $XDG_STATE_HOME (the per-user default, as a user's shell has it) when ``state`` is
    ``<dir>/replicalab``, else by $REPLICALAB_STATE_DIR."""
    cwd.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "REPLICALAB_STATE_DIR"}
    if state.name == "replicalab":
        env["XDG_STATE_HOME"] = str(state.parent)
    else:
        env["REPLICALAB_STATE_DIR"] = str(state)
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout_s, check=False, env={**env, "COLUMNS": "200"})


def _up(tmp_path: Path, state: Path, name: str) -> list[int]:
    up = _cli(["up", "redis", "--nodes", "1", "--regions", "lan", "--name", name, "--json"],
              tmp_path / "here", state)
    if up.returncode != 0:
        server_missing("redis-server", up.stderr)
    saved = json.loads((state / "clusters" / name / "cluster.json").read_text())
    pids = [n["pid"] for n in saved["nodes"]] + [saved["toxiproxy_pid"]]
    assert all(process.alive(p) for p in pids)
    assert {str(p) for p in pids} == set(saved["born"])  # start times kept for `down`
    return pids


@pytest.mark.integration
def test_status_and_down_find_the_cluster_from_another_directory(tmp_path: Path):
    state = tmp_path / "xdg" / "replicalab"  # $XDG_STATE_HOME/replicalab, no override
    pids = _up(tmp_path, state, "x")
    elsewhere = tmp_path / "elsewhere"
    try:
        st = _cli(["status"], elsewhere, state)
        assert st.returncode == 0, st.stderr
        assert "x (redis, lan)" in st.stdout and "gone" not in st.stdout, st.stdout
        js = json.loads(_cli(["status", "--json"], elsewhere, state).stdout)
        assert js["clusters"] == ["x"] and js["gone"] == []
        assert js["state_dir"] == str(state)
        assert js["urls"]["x"].startswith("redis://127.0.0.1:")  # a script probes from it
        assert js["urls"]["x"] in st.stdout
    finally:
        down = _cli(["down", "x"], elsewhere, state)
    assert down.returncode == 0, down.stderr
    assert "x: stopped 2 processes" in down.stdout, down.stdout
    assert not any(process.alive(p) for p in pids)
    assert "no clusters are up" in _cli(["status"], elsewhere, state).stdout


@pytest.mark.integration
def test_a_cluster_whose_processes_died_is_shown_so_and_cleaned_up(tmp_path: Path):
    state = tmp_path / "state"
    pids = _up(tmp_path, state, "dead")
    try:
        for p in pids:  # the servers this test started die (an OOM kill, a reboot, ...)
            os.kill(p, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(process.alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        st = _cli(["status"], tmp_path / "elsewhere", state)
        assert st.returncode == 0, st.stderr
        assert "processes are gone" in st.stdout and "cluster down dead" in st.stdout, st.stdout
        assert "process gone" in st.stdout
        js = json.loads(_cli(["status", "--json"], tmp_path, state).stdout)
        assert js["gone"] == ["dead"]
    finally:
        down = _cli(["down", "dead"], tmp_path / "elsewhere", state)
    assert down.returncode == 0, down.stderr
    assert "already gone; removed its state" in down.stdout, down.stdout
    assert not (state / "clusters" / "dead").exists()
    assert "no clusters are up" in _cli(["status"], tmp_path, state).stdout


def test_every_driver_url_is_built_one_way_and_parses_back():
    """The URL each driver gives (one helper for all) names the first node, the others under
    the adapter's own parameter, and one region per node, which the adapters' parser reads."""
    nodes = [Node(i, r, "", 0, "", client_port=7000 + i) for i, r in enumerate(("US-E", "EU"))]
    c = Cluster("redis", "t", "dc3", nodes)
    url = store_url(c, "redis", "replicas")
    assert url == "redis://127.0.0.1:7000?replicas=127.0.0.1:7001&regions=dc3&node_regions=US-E,EU"
    u = parse_store_url(url, "replicas", (), "redis://127.0.0.1:6379")
    assert [e.port for e in u.nodes] == [7000, 7001]
    one = store_url(Cluster("postgres", "t", "lan", nodes[:1]), "postgresql", "standbys",
                    prefix="postgres@", path="/postgres")
    assert one == "postgresql://postgres@127.0.0.1:7000/postgres?regions=lan&node_regions=US-E"

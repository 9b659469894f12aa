"""hosts/ without hosts: the inventory file and its one-line errors, the nftables rule sets,
and the command line's refusals (no root, a bad inventory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicalab.cli.main import app
from replicalab.hosts import emulated, inventory, nft
from replicalab.hosts.inventory import HostSpec, Inventory

GOOD = """
known_hosts = "/etc/ssh/ssh_known_hosts"
[[host]]
name = "db1"
address = "10.0.0.11"
region = "US-E"
user = "admin"
key = "~/.ssh/id_ed25519"
sudo = true

[[host]]
name = "db2"
address = "10.0.1.12"
region = "US-W"
"""


def test_an_inventory_round_trips_with_defaults(tmp_path: Path):
    path = tmp_path / "inv.toml"
    path.write_text(GOOD)
    inv = inventory.load(path)
    db1, db2 = inv.hosts
    assert (db1.user, db1.port, db1.sudo, db1.root) == ("admin", 22, True,
                                                        inventory.DEFAULT_ROOT)
    assert db1.key == str(Path("~/.ssh/id_ed25519").expanduser())
    assert (db2.user, db2.key, db2.sudo) == ("root", "", False)
    assert inv.wan == "real" and inv.addresses() == ["10.0.0.11", "10.0.1.12"]
    again = Inventory(tmp_path / "again.toml", inv.hosts, inv.known_hosts, "emulated", "tp",
                      "lab")
    inventory.save(again)
    back = inventory.load(again.path)
    assert back.hosts == inv.hosts and (back.wan, back.toxiproxy, back.emulated_set) == (
        "emulated", "tp", "lab")


@pytest.mark.parametrize(("text", "says"), [
    ("", "lists no host"),
    ("[[host]]\nname = 'a'\n", "give its address"),
    ("[[host]]\nname = 'a'\naddress = '1.2.3.4'\nport = '22'\n", "port must be a int"),
    ("[[host]]\nname = 'a'\naddress = '1.2.3.4'\ncolour = 'red'\n", "unknown key 'colour'"),
    ("[[host]]\nname = 'a'\naddress = '1.2.3.4'\n[[host]]\nname = 'a'\naddress = '1.2.3.5'\n",
     "two hosts have name 'a'"),
    ("wan = 'fast'\n[[host]]\nname = 'a'\naddress = '1.2.3.4'\n", "wan = 'fast'"),
    ("hosts = 1\n", "unknown key 'hosts'"),
    ("[[host]\n", "not valid TOML"),
])
def test_a_bad_inventory_is_one_line_naming_the_fix(tmp_path: Path, text: str, says: str):
    path = tmp_path / "inv.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=says.replace("(", r"\(")) as err:
        inventory.load(path)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="no such inventory file"):
        inventory.load(tmp_path / "missing.toml")


def test_a_partition_drops_only_the_other_sides_addresses():
    script = nft.drop_between("rlfabc", ["198.18.3.3", "198.18.3.4"])
    assert script.startswith("table inet rlfabc {")
    assert "elements = { 198.18.3.3, 198.18.3.4 }" in script
    assert "ip saddr @cut drop" in script and "ip daddr @cut drop" in script
    assert script.count("drop") == 2 and "policy accept" in script  # nothing else dropped
    with pytest.raises(ValueError):
        nft.drop_between("rlf; flush ruleset", ["198.18.3.3"])
    with pytest.raises(ValueError):
        nft.drop_between("rlf", ["not-an-address"])
    redirect = nft.redirects("rlw_x", [("198.18.3.4", 2380, 31000)])
    assert "ip daddr 198.18.3.4 tcp dport 2380 redirect to :31000" in redirect
    assert "type nat hook output" in redirect


def test_set_names_do_not_collide_between_state_directories(tmp_path: Path):
    a, b = emulated.Names("lab", tmp_path / "a"), emulated.Names("lab", tmp_path / "b")
    assert a.namespace(0) != b.namespace(0) and a.bridge != b.bridge
    assert all(len(x) <= 15 for x in (a.bridge, a.veth(49)))  # IFNAMSIZ


def test_hosts_up_without_root_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(emulated.os, "geteuid", lambda: 1000)
    res = CliRunner().invoke(app, ["hosts", "up", "--count", "2", "--name", "x"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: emulated hosts need root")


def test_cluster_up_on_a_bad_inventory_is_one_line_and_exit_2(tmp_path: Path):
    path = tmp_path / "inv.toml"
    path.write_text("[[host]]\nname = 'a'\n")
    res = CliRunner().invoke(app, ["cluster", "up", "redis", "--hosts", str(path)])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        f"error: inventory {path} host 1: give its address (e.g. address = \"10.0.0.11\")"]


def test_a_host_names_itself_in_errors():
    assert HostSpec("db1", "10.0.0.11", user="admin", port=2222).where == \
        "admin@10.0.0.11:2222"


DATA = Path(__file__).resolve().parents[1] / "docs" / "data" / "hosts_vs_loopback.json"


def test_redis_on_emulated_hosts_gives_loopbacks_staleness_windows_within_10_percent():
    """Judged from benchmarks/hosts_vs_loopback.py's recorded runs (each ran Redis on
    loopback and on emulated hosts, same delays, same probe, in one run)."""
    runs = json.loads(DATA.read_text())["runs"]
    assert len(runs) >= 3
    for run in runs:
        for where in ("loopback", "hosts"):
            assert run[where]["early"] == 0.0 and run[where]["late"] == 1.0, run
        ratio = run["hosts"]["median"] / run["loopback"]["median"]
        assert 0.9 <= ratio <= 1.1, run


def test_a_zombie_server_is_not_running_for_the_hosts_shell_test():
    """The shell test hosts use for "is the server running" (crash heal, status, cluster
    down): a live process runs; a killed one the init process has not reaped (a zombie:
    State Z) does not, nor a pid that is gone. The wrong product, ``[^Z]`` after
    ``[[:space:]]*``, passes a zombie (the blank matches it) and left a crashed primary
    down after its heal."""
    import os
    import signal
    import subprocess

    from replicalab.hosts.ssh import running_test

    def runs(pid: int) -> bool:
        return subprocess.run(["sh", "-c", running_test(pid)]).returncode == 0

    live = subprocess.Popen(["sleep", "30"])
    try:
        assert runs(live.pid)
        live.send_signal(signal.SIGKILL)
        # wait until it has exited without reaping it: a zombie until we do
        os.waitid(os.P_PID, live.pid, os.WEXITED | os.WNOWAIT)
        assert Path(f"/proc/{live.pid}/stat").read_text().split(") ", 1)[1][0] == "Z"
        assert not runs(live.pid)
    finally:
        live.kill()
        live.wait()
    assert not runs(live.pid)  # reaped: gone
    shell = subprocess.run(["sh", "-c", f"p={live.pid}; {running_test('$p')}"])
    assert shell.returncode != 0  # the "$p" form the heal's shell lines use

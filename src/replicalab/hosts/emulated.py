"""Emulated hosts: network namespaces on a bridge, each with an OpenSSH server, for everyone
without a lab. This module only *makes* and *removes* them (``ip netns``, ``ip link``, and
``ip netns exec`` to start each sshd); everything else reaches them over SSH, exactly as it
reaches real machines (``hosts/ssh.py``).

A set called NAME (unique in its state directory) has
* namespaces ``rl-NAME-<tag>-h0`` .. ``-h{N-1}``, one veth pair each, the namespace's end
  named ``eth0`` and the machine's end ``rl<tag>v<i>``, on bridge ``rl<tag>br`` (``tag``: 8
  hex digits of the SHA-1 of the state directory and the name, so two users, or two test
  runs, both making a set "lab" on one machine do not collide; interface names have at
  most 15 bytes);
* addresses in a /24 of 198.18.0.0/15 (RFC 2544's benchmarking range) that no interface of
  the machine uses: the bridge ``.1`` (the controller's own address, never an inventory
  address), host i ``.(i+2)``; inside a namespace only the /24's route, **no default
  route**, and forwarding off, so nothing can leave the machine;
* an ed25519 host key and an ed25519 login key made for the set, ``known_hosts`` and the
  inventory, under ``<state root>/hosts/NAME/``, and each host's own root directory there
  (the machine's file system is shared: each host keeps its files under its root).

Making a set needs root (CAP_NET_ADMIN); :func:`down` removes every namespace, interface,
process (every pid in the namespaces), key and file of the set.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from replicalab.errors import ParameterError
from replicalab.hosts import inventory as inv_mod
from replicalab.hosts.inventory import HostSpec, Inventory
from replicalab.hosts.ssh import SshHost, each
from replicalab.regions import region_set

SSHD = "/usr/sbin/sshd"
NETWORK = ipaddress.IPv4Network("198.18.0.0/15")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,23}$")
_READY_S = 20.0
_MAX_HOSTS = 50


def _need_root() -> None:
    if os.geteuid() != 0:
        raise ValueError("emulated hosts need root (network namespaces and a bridge): run "
                         "`sudo replicalab hosts up ...`, or list real machines in an "
                         "inventory (docs/hosts.md)")


def _check_tools() -> None:
    for tool, package in (("ip", "iproute2"), (SSHD, "openssh-server"),
                          ("ssh-keygen", "openssh-client"), ("ssh", "openssh-client")):
        if shutil.which(tool) is None:
            raise ValueError(f"{tool} is not installed; run scripts/install-servers.sh "
                             f"(apt-get install {package})")


def set_dir(name: str, root: Path) -> Path:
    """Return the directory of emulated set ``name``: ``<root>/hosts/<name>``."""
    return root / "hosts" / name


def inventory_path(name: str, root: Path) -> Path:
    """Return the inventory file of emulated set ``name``."""
    return set_dir(name, root) / "inventory.toml"


def resolve(hosts: Path | str, root: Path) -> Path:
    """Return the inventory file ``hosts`` names: a file, else the inventory of the emulated
    set of that name under ``root`` (``--hosts lab`` after ``hosts up --name lab``)."""
    path = Path(hosts).expanduser()
    if path.exists() or not _NAME.match(str(hosts)):
        return path
    own = inventory_path(str(hosts), root)
    return own if own.exists() else path


@dataclass(frozen=True)
class Names:
    """The kernel objects of one set."""

    name: str
    root: Path

    @property
    def tag(self) -> str:
        """Return 8 hex digits of the SHA-1 of the state root and set name (interface
        names are short)."""
        return hashlib.sha1(f"{self.root.absolute()}|{self.name}".encode()).hexdigest()[:8]

    @property
    def bridge(self) -> str:
        """Return the bridge's name."""
        return f"rl{self.tag}br"

    def namespace(self, i: int) -> str:
        """Return host ``i``'s namespace name."""
        return f"rl-{self.name}-{self.tag}-h{i}"

    def veth(self, i: int) -> str:
        """Return the machine's end of host ``i``'s veth pair."""
        return f"rl{self.tag}v{i}"

    def namespaces(self) -> list[str]:
        """Return the set's namespaces that exist now."""
        prefix = f"rl-{self.name}-{self.tag}-h"
        return [n for n in _list_namespaces()
                if n.startswith(prefix) and n.removeprefix(prefix).isdigit()]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                          check=False)
    if check and done.returncode != 0:
        raise ValueError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def _list_namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _used_networks() -> set[ipaddress.IPv4Network]:
    out = _ip("-4", "-o", "addr", "show", check=False).stdout
    found = set()
    for m in re.finditer(r"inet (\d+\.\d+\.\d+\.\d+)/\d+", out):
        found.add(ipaddress.IPv4Network(f"{m.group(1)}/24", strict=False))
    return found


@contextlib.contextmanager
def _subnet_lock() -> Iterator[None]:
    """Hold the machine-wide lock under which a set picks its /24 and makes its bridge."""
    path = Path("/run/replicalab-hosts.lock")
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _sshd_config(d: Path, address: str, i: int) -> str:
    return "\n".join([
        f"ListenAddress {address}", "Port 22", f"HostKey {d / 'ssh_host_ed25519_key'}",
        f"PidFile {d / f'h{i}.sshd.pid'}", f"AuthorizedKeysFile {d / 'authorized_keys'}",
        "PermitRootLogin prohibit-password", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        "LogLevel VERBOSE", "MaxSessions 64", "MaxStartups 64:30:128",
        "PrintMotd no", "AcceptEnv LANG", ""])


def up(count: int, name: str, root: Path, regions: str = "lan",
       toxiproxy: str = "toxiproxy-server") -> Inventory:
    """Make ``count`` emulated hosts called set ``name`` (regions assigned round-robin from
    region set ``regions``), wait until each answers over SSH and return their inventory
    (written to :func:`inventory_path`). ValueError naming the problem; a half-made set is
    removed."""
    _need_root()
    _check_tools()
    if not _NAME.match(name):
        raise ParameterError("name", f"{name!r}: lower-case letters, digits and -, up to 24")
    if not 1 <= count <= _MAX_HOSTS:
        raise ParameterError("count", f"{count} must be between 1 and {_MAX_HOSTS}")
    rs = region_set(regions)
    names = Names(name, root)
    d = set_dir(name, root)
    if d.exists() or names.namespaces():
        raise ParameterError("name", f"{name!r}: a set of emulated hosts of that name "
                                     f"exists; `replicalab hosts down {name}` first or pick "
                                     "another")
    try:
        d.mkdir(parents=True)
        d.chmod(0o755)  # hosts' roots below it: servers may run as other users
        return _make(count, names, d, [rs.regions[i % len(rs.regions)] for i in range(count)],
                     toxiproxy)
    except BaseException:
        down(name, root)
        raise


def _make(count: int, names: Names, d: Path, regions: list[str], toxiproxy: str) -> Inventory:
    for key, comment in (("ssh_host_ed25519_key", "host"), ("id_ed25519", "login")):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                        f"replicalab-{names.name}-{comment}", "-f", str(d / key)],
                       check=True, capture_output=True, timeout=30)
    (d / "authorized_keys").write_text((d / "id_ed25519.pub").read_text())
    with _subnet_lock():
        used = _used_networks()
        net = next((n for n in NETWORK.subnets(new_prefix=24) if n not in used), None)
        if net is None:
            raise ValueError("every /24 of 198.18.0.0/15 is in use; `replicalab hosts down` "
                             "a set first")
        gateway = net.network_address + 1
        _ip("link", "add", names.bridge, "type", "bridge")
        _ip("addr", "add", f"{gateway}/24", "dev", names.bridge)
        _ip("link", "set", names.bridge, "up")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    host_key = (d / "ssh_host_ed25519_key.pub").read_text().split()
    specs, known = [], []
    for i in range(count):
        ns, address = names.namespace(i), str(net.network_address + i + 2)
        _ip("netns", "add", ns)
        _ip("link", "add", names.veth(i), "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", names.veth(i), "master", names.bridge, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        conf = d / f"h{i}.sshd_config"
        conf.write_text(_sshd_config(d, address, i))
        host_root = d / f"h{i}"
        host_root.mkdir(mode=0o755)
        # the one place a namespace is entered: sshd is what makes it a host
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                        "net.ipv4.ip_forward=0"], check=True, capture_output=True, timeout=30)
        started = subprocess.run(["ip", "netns", "exec", ns, SSHD, "-f", str(conf),
                                  "-E", str(d / f"h{i}.sshd.log")],
                                 capture_output=True, text=True, timeout=30, check=False)
        if started.returncode != 0:
            raise ValueError(f"sshd did not start in {ns}: {started.stderr.strip()}")
        specs.append(HostSpec(f"h{i}", address, regions[i], "root", 22,
                              str(d / "id_ed25519"), False, str(host_root)))
        known.append(f"{address} {host_key[0]} {host_key[1]}")
    (d / "known_hosts").write_text("\n".join(known) + "\n")
    inv = Inventory(d / "inventory.toml", specs, str(d / "known_hosts"), "emulated", toxiproxy,
                    names.name)
    hosts = [SshHost(h, inv.known_hosts) for h in specs]
    each(hosts, _wait_answers)
    inv_mod.save(inv, f"emulated hosts {names.name}, written by `replicalab hosts up`; "
                      f"`replicalab hosts down {names.name}` removes them")
    return inv


def _wait_answers(host: SshHost) -> None:
    deadline = time.monotonic() + _READY_S
    while True:
        try:
            host.run("true", timeout_s=10)
            return
        except ValueError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _kill_namespace_processes(ns: str) -> list[int]:
    """SIGKILL every process in namespace ``ns`` (sshd, its sessions, servers started over
    SSH, timers); return their pids."""
    killed: list[int] = []
    for _ in range(20):  # bounded: a process may fork while we kill
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()
                if p.isdigit()]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += pids
        time.sleep(0.05)
    return killed


@dataclass(frozen=True)
class Removed:
    """What :func:`down` removed of one set."""

    name: str
    removed: list[str]

    def to_json(self) -> dict[str, object]:
        """Return the set's name and what was removed, as JSON-ready data."""
        return {"name": self.name, "removed": self.removed}


def down(name: str, root: Path) -> Removed:
    """Remove set ``name``: close the SSH masters, kill every process in its namespaces,
    delete the namespaces (their veths and nftables tables go with them), the bridge and
    the set's directory (keys, known_hosts, inventory, the hosts' files). Return what was
    removed (ValueError when nothing of that name exists)."""
    _need_root()
    names = Names(name, root)
    d = set_dir(name, root)
    removed: list[str] = []
    if (d / "inventory.toml").exists():
        with contextlib.suppress(ValueError, OSError, subprocess.SubprocessError):
            inv = inv_mod.load(d / "inventory.toml")
            each([SshHost(h, inv.known_hosts) for h in inv.hosts], lambda h: h.close())
    for ns in names.namespaces():
        _kill_namespace_processes(ns)
        _ip("netns", "del", ns, check=False)
        removed.append(f"namespace {ns}")
    for i in range(_MAX_HOSTS):  # a veth whose namespace went first is gone already
        if _ip("link", "show", names.veth(i), check=False).returncode == 0:
            _ip("link", "del", names.veth(i), check=False)
            removed.append(f"veth {names.veth(i)}")
    if _ip("link", "show", names.bridge, check=False).returncode == 0:
        _ip("link", "del", names.bridge, check=False)
        removed.append(f"bridge {names.bridge}")
    if d.exists():
        shutil.rmtree(d, ignore_errors=True)
        removed.append(f"directory {d}")
    if not removed:
        raise ValueError(f"no emulated hosts named {name!r}; `replicalab hosts status` "
                         "lists them")
    return Removed(name, removed)


@dataclass(frozen=True)
class SetStatus:
    """One emulated set as it is now."""

    name: str
    inventory: str
    hosts: list[dict[str, str]]

    def to_json(self) -> dict[str, object]:
        """Return the status as JSON-ready data."""
        return {"name": self.name, "inventory": self.inventory, "hosts": self.hosts}


def sets(root: Path) -> list[str]:
    """Return the names of the emulated sets saved under ``root``."""
    d = root / "hosts"
    return sorted(p.parent.name for p in d.glob("*/inventory.toml")) if d.exists() else []


def status(name: str, root: Path) -> SetStatus:
    """Return each host's namespace, address, region and whether it answers over SSH."""
    path = inventory_path(name, root)
    inv = inv_mod.load(path)
    present = set(_list_namespaces())
    names = Names(name, root)

    def row(pair: tuple[int, SshHost]) -> dict[str, str]:
        i, h = pair
        try:
            h.run("true", timeout_s=10)
            ssh = "answers"
        except ValueError as err:
            ssh = str(err)
        return {"host": h.spec.name, "address": h.spec.address, "region": h.spec.region,
                "namespace": names.namespace(i) + ("" if names.namespace(i) in present
                                                   else " (gone)"), "ssh": ssh}

    pairs = list(enumerate(SshHost(h, inv.known_hosts) for h in inv.hosts))
    rows = each(pairs, row)
    return SetStatus(name, str(path), rows)

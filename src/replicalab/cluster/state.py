"""What a cluster started, saved as JSON so status/down/faults act on exactly that.

Cluster state lives in one per-user directory (:func:`state_root`), so ``cluster status``
and ``cluster down`` find a cluster whatever directory they run in.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from replicalab.cluster import process

STATE_DIR_ENV = "REPLICALAB_STATE_DIR"
"""Environment variable naming the cluster state directory (tests give each run its own)."""


SYSTEM_STATE_DIR = Path("/var/lib/replicalab")
"""Root's default: PostgreSQL runs as an unprivileged user (cluster/postgres.py) that must
reach its data directory, which it cannot under root's home (mode 0700)."""


def state_root() -> Path:
    """Return the directory holding cluster state, absolute: ``$REPLICALAB_STATE_DIR``,
    else ``$XDG_STATE_HOME/replicalab``, else ``~/.local/state/replicalab`` (the XDG base
    directory default; a relative ``XDG_STATE_HOME`` is ignored, as the spec says), or
    ``/var/lib/replicalab`` for root (see :data:`SYSTEM_STATE_DIR`)."""
    own = os.environ.get(STATE_DIR_ENV)
    if own:
        return Path(own).expanduser().absolute()
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "replicalab"
    if os.geteuid() == 0:
        return SYSTEM_STATE_DIR
    return Path.home() / ".local" / "state" / "replicalab"


ROOT = state_root()
"""The state directory as it was when replicalab was imported (a default for modules that
pass a root down; the CLI's cluster commands call :func:`state_root` when they run)."""


@dataclass
class Node:
    """One server: index, region, role, its pid and ports, its data directory."""

    index: int
    region: str
    role: str
    port: int
    data_dir: str
    pid: int = 0
    peer_port: int = 0
    client_port: int = 0  # the port clients use (a client-link proxy when asked)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Link:
    """One Toxiproxy proxy: a directed link from ``src`` node (or client) to ``dst`` node."""

    name: str
    listen_port: int
    upstream_port: int
    src: str
    dst: str
    src_region: str
    dst_region: str
    downstream_ms: float
    upstream_ms: float
    jitter_ms: float
    kind: str = "replication"


@dataclass
class Cluster:
    """A running cluster: kind, name, regions, nodes, links, Toxiproxy, the URL to probe."""

    kind: str
    name: str
    regions: str
    nodes: list[Node]
    links: list[Link] = field(default_factory=list)
    toxiproxy_pid: int = 0
    toxiproxy_port: int = 0
    client_region: str | None = None
    url: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    born: dict[str, int] = field(default_factory=dict)
    """Start time (clock ticks since boot) of each saved pid, so that a later command
    (``cluster down`` after the servers died) never signals a process that took a dead
    server's pid."""

    def pids(self) -> list[int]:
        """Return the pids of the cluster's servers and its Toxiproxy (0s left out)."""
        return [n.pid for n in self.nodes if n.pid] + ([self.toxiproxy_pid]
                                                      if self.toxiproxy_pid else [])

    def reserved_ports(self) -> set[int]:
        """Return every port this cluster uses or has promised to one of its servers."""
        ports = {self.toxiproxy_port}
        for n in self.nodes:
            ports |= {n.port, n.peer_port, n.client_port, *n.extra.get("ports", [])}
        return ports | {x.listen_port for x in self.links}

    def directory(self, root: Path | None = None) -> Path:
        """Return ``<state root>/clusters/<name>`` (root: :func:`state_root` by default)."""
        return (root or state_root()) / "clusters" / self.name

    def save(self, root: Path | None = None) -> Path:
        """Write ``cluster.json`` (with each pid's start time) and return its path."""
        # what this process knows first, then what was saved, then /proc for a pid
        # started some other way
        self.born = {str(p): t for p in self.pids()
                     if (t := process.born(p) or self.born.get(str(p))
                         or process.start_ticks(p)) is not None}
        d = self.directory(root)
        d.mkdir(parents=True, exist_ok=True)
        path = d / "cluster.json"
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path


def load(name: str, root: Path | None = None) -> Cluster:
    """Return the saved cluster ``name`` (ValueError if there is none); its pids' start
    times go to the process registry, so a recycled pid is never signalled."""
    path = (root or state_root()) / "clusters" / name / "cluster.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"no cluster named {name!r}; `replicalab cluster status` lists "
                         "them") from None
    data["nodes"] = [Node(**n) for n in data["nodes"]]
    data["links"] = [Link(**x) for x in data["links"]]
    c = Cluster(**data)
    for pid, ticks in c.born.items():
        process.remember_born(int(pid), ticks)
    return c


def check_name(name: str) -> str:
    """Return ``name`` if it can name a cluster (its directory), else raise ValueError
    naming the characters allowed."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
        raise ValueError(f"cluster name {name!r}: use up to 64 letters, digits, '.', '_' "
                         "and '-', starting with a letter or digit")
    return name


def names(root: Path | None = None) -> list[str]:
    """Return the names of saved clusters."""
    d = (root or state_root()) / "clusters"
    return sorted(p.parent.name for p in d.glob("*/cluster.json")) if d.exists() else []


def settings(c: Cluster) -> dict[str, str]:
    """Return the server settings the cluster was started with over the lab's defaults
    (``cluster up --set KEY=VALUE``: Redis ``appendfsync``, PostgreSQL ``fsync``,
    ZooKeeper ``forceSync``, etcd flags), each driver passing them in its server's own way."""
    return dict(c.extra.get("settings", {}))


def loopback(node: Node) -> str:
    """Return the address clients reach ``node`` on: 127.0.0.1 (one port per node)."""
    return "127.0.0.1"


def store_url(c: Cluster, scheme: str, others: str, host: Callable[[Node], str] = loopback,
              prefix: str = "", path: str = "") -> str:
    """Return the store URL of cluster ``c``: ``scheme://[prefix]first[path]?others=...&
    regions=...&node_regions=...``, the first node the one clients dial, the rest listed under
    the adapter's parameter ``others`` (left out when there are none)."""
    first, rest = c.nodes[0], c.nodes[1:]
    url = f"{scheme}://{prefix}{host(first)}:{first.client_port}{path}?"
    if rest:
        url += f"{others}=" + ",".join(f"{host(n)}:{n.client_port}" for n in rest) + "&"
    return url + f"regions={c.regions}&node_regions=" + ",".join(n.region for n in c.nodes)

"""What a cluster started, saved as JSON so status/down/faults act on exactly that."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(".replicalab")


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

    def reserved_ports(self) -> set[int]:
        """Return every port this cluster uses or has promised to one of its servers."""
        ports = {self.toxiproxy_port}
        for n in self.nodes:
            ports |= {n.port, n.peer_port, n.client_port, *n.extra.get("ports", [])}
        return ports | {x.listen_port for x in self.links}

    def directory(self, root: Path = ROOT) -> Path:
        """Return ``.replicalab/clusters/<name>``."""
        return root / "clusters" / self.name

    def save(self, root: Path = ROOT) -> Path:
        """Write ``cluster.json`` and return its path."""
        d = self.directory(root)
        d.mkdir(parents=True, exist_ok=True)
        path = d / "cluster.json"
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path


def load(name: str, root: Path = ROOT) -> Cluster:
    """Return the saved cluster ``name`` (ValueError if there is none)."""
    path = root / "clusters" / name / "cluster.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"no cluster named {name!r}; `replicalab cluster status` lists "
                         "them") from None
    data["nodes"] = [Node(**n) for n in data["nodes"]]
    data["links"] = [Link(**x) for x in data["links"]]
    return Cluster(**data)


def names(root: Path = ROOT) -> list[str]:
    """Return the names of saved clusters."""
    d = root / "clusters"
    return sorted(p.parent.name for p in d.glob("*/cluster.json")) if d.exists() else []


def settings(c: Cluster) -> dict[str, str]:
    """Return the server settings the cluster was started with over the lab's defaults
    (``cluster up --set KEY=VALUE``: Redis ``appendfsync``, PostgreSQL ``fsync``,
    ZooKeeper ``forceSync``, etcd flags), each driver passing them in its server's own way."""
    return dict(c.extra.get("settings", {}))

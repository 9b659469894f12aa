"""The ``toykv`` cluster driver: one toy server per node, started as a local process;
n0 is the primary every client talks to, the others stand by."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from replicalab.cluster import process
from replicalab.cluster.ports import wait_listening
from replicalab.cluster.state import Cluster, Node, store_url


class ToyDriver:
    """Starts ``python -m replicalab_toyplug.server PORT`` per node."""

    kind = "toykv"
    ports_per_node = 1

    def check_installed(self) -> None:
        """The server is this package: nothing else to install."""

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        """(Re)start one server and wait until it listens."""
        Path(node.data_dir).mkdir(parents=True, exist_ok=True)
        node.pid = process.start([sys.executable, "-m", "replicalab_toyplug.server",
                                  str(node.port)], Path(node.data_dir) / "server.log")
        if not wait_listening(node.port, 20):
            raise ValueError(f"toykv n{node.index} did not listen on port {node.port}; see "
                             f"{node.data_dir}/server.log")

    def start(self, c: Cluster, links: Any, root: Path) -> None:
        """Start every node (no replication: n0 holds the data)."""
        for node in c.nodes:
            node.role = "primary" if node.index == 0 else "standby"
            self.start_node(c, node, root)

    def url(self, c: Cluster) -> str:
        """Return ``toykv://n0?standby=...&regions=...&node_regions=...``."""
        return store_url(c, "toykv", "standby")

    def status(self, c: Cluster) -> list[dict[str, str]]:
        """Return each node's role."""
        return [{"node": f"n{n.index}", "region": n.region, "pid": str(n.pid),
                 "port": str(n.port), "role": n.role, "state": n.role} for n in c.nodes]

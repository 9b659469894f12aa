"""Redis: node 0 is the primary; every other node is a replica whose ``replicaof`` link to
the primary goes through its own Toxiproxy proxy (so the replication stream carries the
region delay)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from replicalab.cluster import placement
from replicalab.cluster.placement import address
from replicalab.cluster.state import Cluster, Node, settings, store_url

if TYPE_CHECKING:
    from replicalab.cluster.links import LinkMaker


class RedisDriver:
    """Starts redis-server processes from Debian's redis-server package."""

    kind = "redis"
    ports_per_node = 1
    host_binaries = ("redis-server",)  # on hosts: Debian's redis-server package

    def check_installed(self) -> None:
        """Raise ValueError if redis-server is missing."""
        if shutil.which("redis-server") is None:
            raise ValueError("redis-server is not installed; run scripts/install-servers.sh "
                             "(apt-get install redis-server)")

    def _argv(self, c: Cluster, node: Node) -> list[str]:
        argv = ["redis-server", "--port", str(node.port), "--bind", address(node),
                "--dir", node.data_dir, "--save", "", "--appendonly", "no",
                "--protected-mode", "no", "--repl-diskless-sync", "yes",
                "--repl-diskless-sync-delay", "0", "--daemonize", "no"]
        if node.extra.get("replicaof"):
            argv += ["--replicaof", str(node.extra.get("replicaof_host", "127.0.0.1")),
                     str(node.extra["replicaof"])]
        for key, value in settings(c).items():  # e.g. appendonly yes, appendfsync always
            argv += [f"--{key}", value]
        return argv

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        """Start (or restart) one redis-server (here or on its host) and wait until it
        listens."""
        placement.start(c, node, self._argv(c, node))
        if not placement.wait_listening(node, node.port, 20):
            raise ValueError(f"redis-server n{node.index} did not listen on port {node.port}; "
                             f"see {node.data_dir}/server.log")

    def start(self, c: Cluster, links: LinkMaker, root: Path) -> None:
        """Start the primary, then each replica through its replication link; return when
        every replica's link to the primary is up."""
        primary = c.nodes[0]
        primary.role = "primary"
        self.start_node(c, primary, root)
        for node in c.nodes[1:]:
            node.role = "replica"
            host, port = links.peer(f"repl-{node.index}", node, primary)
            node.extra.update(replicaof=port, replicaof_host=host)
            self.start_node(c, node, root)
            c.save(root)
        self._wait_synced(c)

    def _wait_synced(self, c: Cluster, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        pending = list(c.nodes[1:])
        while pending and time.monotonic() < deadline:
            node = pending[0]
            try:
                info = redis.Redis(address(node), node.port, socket_timeout=1
                                   ).info("replication")
                if info.get("master_link_status") == "up":
                    pending.pop(0)
                    continue
            except redis.RedisError:
                pass
            time.sleep(0.1)
        if pending:
            raise ValueError(f"replica n{pending[0].index} did not sync with the primary "
                             f"within {timeout_s:.0f} s; see {pending[0].data_dir}/server.log")

    def url(self, c: Cluster) -> str:
        """Return ``redis://primary?replicas=...&regions=...&node_regions=...``."""
        return store_url(c, "redis", "replicas", host=address)

    def status(self, c: Cluster) -> list[dict[str, str]]:
        """Return role, link state and replication lag (bytes behind the primary) per node."""
        rows = []
        primary_offset = None
        for node in c.nodes:
            row = {"node": f"n{node.index}", "region": node.region,
                   "pid": str(placement.pid(node)), "port": str(node.port), "role": node.role}
            try:
                info = redis.Redis(address(node), node.port, socket_timeout=1
                                   ).info("replication")
            except redis.RedisError as err:
                row["state"] = f"unreachable ({type(err).__name__})"
                rows.append(row)
                continue
            if info.get("role") == "master":
                primary_offset = int(info.get("master_repl_offset", 0))
                row["state"] = f"primary, {info.get('connected_slaves', 0)} replicas connected"
            else:
                offset = int(info.get("slave_repl_offset", 0))
                lag = "" if primary_offset is None else f", {primary_offset - offset} bytes behind"
                row["state"] = f"replica, link {info.get('master_link_status')}{lag}"
            rows.append(row)
        return rows

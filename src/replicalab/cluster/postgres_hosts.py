"""PostgreSQL on hosts: what ``cluster/postgres.py`` does with local files and processes,
done over SSH on each node's host (initdb, pg_basebackup, the configuration files, the
server), with the same lab settings. The server binaries are the host's newest
``/usr/lib/postgresql/<major>/bin`` (Debian's ``postgresql`` package); when the SSH user is
root (or uses sudo), setup and server run as the host's ``postgres`` user through
``setpriv``, as on loopback. ``pg_hba.conf`` trusts 127.0.0.1, the inventory's addresses and
the controller's address as the host sees it (``$SSH_CLIENT``)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from replicalab.cluster import placement
from replicalab.cluster.state import Cluster, Node

if TYPE_CHECKING:
    from replicalab.hosts.ssh import SshHost

SERVER_USER = "postgres"
_FIND_BIN = ("ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n | tail -1")


def _root_like(host: SshHost) -> bool:
    return host.spec.user == "root" or host.spec.sudo


def as_user(host: SshHost, argv: list[str]) -> list[str]:
    """Return ``argv`` run as the server user on ``host`` (root cannot run PostgreSQL)."""
    if not _root_like(host):
        return argv
    return ["setpriv", f"--reuid={SERVER_USER}", f"--regid={SERVER_USER}", "--init-groups",
            "--", *argv]


def bin_dir(c: Cluster, node: Node) -> str:
    """Return the PostgreSQL binaries' directory on ``node``'s host (remembered in the
    cluster; ValueError naming the host when it has none)."""
    found = c.extra.get("pg_bin")
    if not found:
        host = placement.host_of(c, node)
        found = host.run(_FIND_BIN, check=False).out.strip()
        if not found:
            raise ValueError(f"host {host.spec.name} has no PostgreSQL server under "
                             "/usr/lib/postgresql; apt-get install postgresql there")
        c.extra["pg_bin"] = found
    return str(found)


def run_as_user(c: Cluster, node: Node, argv: list[str], log_name: str, what: str) -> None:
    """Run a setup command as the server user in ``node``'s directory on its host; ValueError
    with the log's last line when it fails."""
    host = placement.host_of(c, node)
    d = shlex.quote(node.data_dir)
    log = shlex.quote(f"{node.data_dir}/{log_name}")
    r = host.run(f"cd {d} && {shlex.join(as_user(host, argv))} >>{log} 2>&1", timeout_s=180,
                 check=False)
    if not r.ok:
        last = host.run(f"tail -n 1 {log}", check=False).out.strip()
        raise ValueError(f"{what} failed on host {host.spec.name} (exit {r.rc}): {last} "
                         f"(log: {node.data_dir}/{log_name} there)")


def prepare_dir(c: Cluster, node: Node) -> str:
    """Make ``node``'s directory and an empty ``pgdata`` (0700, the server user's) on its
    host; return pgdata's path."""
    host = placement.host_of(c, node)
    d, pgdata = shlex.quote(node.data_dir), shlex.quote(node.data_dir + "/pgdata")
    own = f" && chown {SERVER_USER}: {d} {pgdata}" if _root_like(host) else ""
    host.run(f"mkdir -p {d} && chmod 755 {d} && rm -rf {pgdata} && mkdir -m 700 {pgdata}"
             + own)
    return node.data_dir + "/pgdata"


def hba(c: Cluster, node: Node) -> str:
    """Return the pg_hba.conf of cluster ``c`` on hosts (see the module docstring)."""
    host = placement.host_of(c, node)
    controller = host.run("echo ${SSH_CLIENT%% *}").out.strip()
    sources = ["127.0.0.1", *(placement.address(n) for n in c.nodes)]
    if controller:
        sources.append(controller)
    lines = ["# replicalab: trust the hosts of the cluster and the controller"]
    for a in dict.fromkeys(sources):
        lines += [f"host all all {a}/32 trust", f"host replication all {a}/32 trust"]
    return "\n".join(lines) + "\n"


def configure_primary(c: Cluster, node: Node, conf: str) -> None:
    """Append the lab settings to the primary's postgresql.conf and write its pg_hba.conf."""
    host = placement.host_of(c, node)
    pgdata = node.data_dir + "/pgdata"
    host.run(f"cat >> {shlex.quote(pgdata + '/postgresql.conf')}", stdin=conf.encode())
    host.put(hba(c, node).encode(), pgdata + "/pg_hba.conf", 0o644)

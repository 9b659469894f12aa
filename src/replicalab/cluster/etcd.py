"""etcd 3.4: a cluster of members whose every directed peer link carries the region delay.

Why a per-member demultiplexer. etcd derives each member's ID (and from those the cluster
ID) from the member's advertised peer URLs, so every member must list the same peer URLs for
a given member: giving member i its own ``--initial-cluster`` view, where the others' URLs
are i's own proxies, makes the members compute different IDs and reject each other
("request cluster ID mismatch"; tried with 3.4.23). One Toxiproxy proxy per *destination*
would have to carry one delay for all senders. So each member j advertises one peer URL,
``http://127.0.0.1:A_j``, served by a small TCP demultiplexer that runs beside etcd (a
child in etcd's process group). It reads the HTTP request head of each new peer
connection, finds the sender in rafthttp's ``X-PeerURLs`` header (the sender's advertised
URL) and splices the connection, head included, into the Toxiproxy proxy
``peer-i-j`` (member i to member j), whose upstream is j's real peer listener. Connections
that do not name a sender (rafthttp's RTT prober, the leader's ``/version`` checks) go
straight to j with ``Connection: close`` so that no later raft request reuses them.

rafthttp sends j's messages to i on the long-lived stream *i* dialed to j, so the proxy's
downstream carries j→i (the j→i one-way delay) and its upstream i→j (requests, pipeline
posts): both directions of every directed pair get the delay of the region matrix.

Ports per member: client, peer (etcd's listener, what the proxies connect to) and
advertised peer (the demultiplexer). Everything binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from replicalab.cluster import placement, process
from replicalab.cluster.placement import address
from replicalab.cluster.relay import pipe
from replicalab.cluster.state import Cluster, Node, settings, store_url
from replicalab.regions import region_set

if TYPE_CHECKING:
    from replicalab.cluster.links import LinkMaker

_READY_TIMEOUT_S = 40.0
_PLAIN = {"verify": False}
"""httpx options for the members' plain-http loopback API: no TLS to verify, so no SSL
context is built per call (30 ms each here, ten times that on a loaded machine, which made
one look at three members outlast a 0.5 s deadline)."""
HEARTBEAT_MS = 100  # etcd's default


def election_timeout_ms(c: Cluster) -> int:
    """Return the election timeout for ``c``: etcd's default 1000 ms, or 10x the largest RTT
    between its members' regions when that is more (etcd's tuning guide), so that WAN delays
    plus a busy machine do not set off elections."""
    rs = region_set(c.regions)
    used = {n.region for n in c.nodes}
    worst = max((rs.rtt_ms[rs.index(a)][rs.index(b)] for a in used for b in used), default=0)
    return max(1000, math.ceil(10 * worst / 100) * 100)


def _peer_url(node: Node) -> str:
    """Return the peer URL member ``node`` advertises (its demultiplexer on loopback, its
    own listener on a host)."""
    return f"http://{address(node)}:{node.extra['ports'][2]}"


def _status(node: Node, timeout_s: float = 1.0) -> dict[str, Any]:
    """Return the JSON of ``/v3/maintenance/status`` from member ``node``."""
    r = httpx.post(f"http://{address(node)}:{node.port}/v3/maintenance/status", json={},
                   timeout=timeout_s, **_PLAIN)
    r.raise_for_status()
    data: dict[str, Any] = r.json()
    return data


def leader_view(statuses: list[dict[str, Any] | None]) -> tuple[int | None, list[int | None]]:
    """Return (leader's member id or None, each member's own id or None) from the members'
    ``/v3/maintenance/status`` answers (None: no answer), in node order.

    The leader is the one every answering member names, and only if it is one of them and
    names itself: during an election members disagree or name none (``"0"`` or missing).
    """
    members = [None if s is None else int(s["header"]["member_id"]) for s in statuses]
    named = {int(s.get("leader") or 0) for s in statuses if s is not None}
    if len(named) != 1:
        return None, members
    (leader,) = named
    if leader == 0 or leader not in members:
        return None, members
    own = statuses[members.index(leader)]
    return (leader if own is not None and int(own.get("leader") or 0) == leader else None,
            members)


def _view(c: Cluster) -> tuple[int | None, list[int | None]]:
    found: list[dict[str, Any] | None] = []
    for node in c.nodes:
        try:
            found.append(_status(node))
        except (httpx.HTTPError, ValueError, KeyError):
            found.append(None)
    return leader_view(found)


def leader_index(c: Cluster) -> int | None:
    """Return the node index of the member every member names as leader (None: no agreed
    leader right now, e.g. during an election, or a member does not answer)."""
    leader, members = _view(c)
    return None if leader is None else members.index(leader)


def transfer_leadership(c: Cluster, target: int, timeout_s: float = 10.0) -> float:
    """Make member ``target`` (node index) the leader and return the seconds it took.

    The current leader is asked through the v3 gateway (``/v3/maintenance/transfer-leadership``,
    etcd's MoveLeader: it catches the target up, then tells it to campaign at once). Returns
    when every member names ``target`` as leader; asks again if another member won meanwhile
    (or the leader was changing when asked); ValueError naming what failed after
    ``timeout_s``. Every wait is bounded by that deadline.
    """
    if not 0 <= target < len(c.nodes):
        raise ValueError(f"cluster {c.name}: no member n{target} (it has n0..n{len(c.nodes) - 1})")
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    problem = "no agreed leader"
    asked: int | None = None  # the leader we last asked (not asked again while it leads)
    while True:
        leader, members = _view(c)
        if members[target] is not None and leader == members[target]:
            for node in c.nodes:
                node.role = "leader" if node.index == target else "follower"
            return time.monotonic() - t0
        # what this look found is named even when the deadline passed during it (one look
        # at dead members took longer than a 0.5 s deadline on a loaded machine)
        if members[target] is None:
            problem = f"n{target} does not answer"
        elif leader is None:
            problem = "the members do not agree on a leader"
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            break
        if members[target] is not None and leader is not None and leader != asked:
            asked = leader
            try:
                at = c.nodes[members.index(leader)]
                r = httpx.post(f"http://{address(at)}:{at.port}"
                               "/v3/maintenance/transfer-leadership",
                               json={"targetID": str(members[target])}, timeout=left_s,
                               **_PLAIN)
                if r.status_code != 200:
                    # e.g. "etcdserver: not leader" when leadership moved since we looked
                    problem = f"the leader refused: {r.text.strip()[:200]}"
                    asked = None
            except httpx.HTTPError as err:
                problem = f"asking the leader failed: {type(err).__name__}"
                asked = None
        time.sleep(min(0.1, max(deadline - time.monotonic(), 0)))
    raise ValueError(f"cluster {c.name}: the leader did not move to n{target} within "
                     f"{timeout_s:g} s ({problem}); `replicalab cluster status {c.name}` "
                     "shows the members")


def _healthy(node: Node, timeout_s: float = 2.0) -> bool:
    try:
        r = httpx.get(f"http://{address(node)}:{node.port}/health", timeout=timeout_s,
                      **_PLAIN)
        return r.status_code == 200 and r.json().get("health") == "true"
    except (httpx.HTTPError, ValueError):
        return False


class EtcdDriver:
    """Starts ``etcd`` members from Debian's etcd-server package (3.4)."""

    kind = "etcd"
    ports_per_node = 3  # client, peer listener, advertised peer (demultiplexer)
    host_binaries = ("etcd",)  # on hosts: Debian's etcd-server package

    def check_installed(self) -> None:
        """Raise ValueError if the etcd binary is missing."""
        if shutil.which("etcd") is None:
            raise ValueError("etcd is not installed; run scripts/install-servers.sh "
                             "(apt-get install etcd-server etcd-client)")

    # -- starting ---------------------------------------------------------------------------

    def _etcd_argv(self, c: Cluster, node: Node, state: str) -> list[str]:
        client = f"http://{address(node)}:{node.port}"
        initial = ",".join(f"n{n.index}={_peer_url(n)}" for n in c.nodes)
        listen = f"http://{address(node)}:{node.peer_port}"
        if placement.on_hosts(c):
            # on a host: peers dial the advertised URL (redirected to the sender's own
            # Toxiproxy on emulated hosts), whose proxies dial the peer listener
            listen = f"{_peer_url(node)},{listen}"
        return ["etcd", "--name", f"n{node.index}",
                "--data-dir", str(Path(node.data_dir) / "data"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", listen,
                "--initial-advertise-peer-urls", _peer_url(node),
                "--initial-cluster", initial, "--initial-cluster-state", state,
                "--initial-cluster-token", f"replicalab-{c.name}",
                "--heartbeat-interval", str(HEARTBEAT_MS),
                "--election-timeout", str(election_timeout_ms(c)),
                "--logger", "zap", "--log-outputs", "stderr",
                *(f"--{k}={v}" for k, v in settings(c).items())]

    def _argv(self, c: Cluster, node: Node, state: str) -> list[str]:
        if placement.on_hosts(c):  # no demultiplexer: each host's redirects pick the link
            return self._etcd_argv(c, node, state)
        argv = [sys.executable, "-m", "replicalab.cluster.etcd",
                "--listen", str(node.extra["ports"][2]), "--direct", str(node.peer_port)]
        for src_url, port in sorted(node.extra.get("routes", {}).items()):
            argv += ["--route", f"{src_url}={port}"]
        return [*argv, "--", *self._etcd_argv(c, node, state)]

    def _launch(self, c: Cluster, node: Node, state: str) -> None:
        log = Path(node.data_dir) / "server.log"
        placement.start(c, node, self._argv(c, node, state))
        deadline = time.monotonic() + 20
        pending = [node.port, node.extra["ports"][2]]
        while pending and time.monotonic() < deadline:
            if not placement.on_hosts(c) and not process.alive(node.pid):
                break
            try:
                with socket.create_connection((address(node), pending[0]), timeout=0.5):
                    pending.pop(0)
            except OSError:
                time.sleep(0.05)
        if pending:
            raise ValueError(f"etcd member n{node.index} did not listen on port {pending[0]}; "
                             f"see {log}")

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        """Restart one member from its data directory (``--initial-cluster-state existing``);
        it rejoins and catches up from the leader. Returns once it listens."""
        self._launch(c, node, "existing")

    def start(self, c: Cluster, links: LinkMaker, root: Path) -> None:
        """Create the peer links, start every member, return once there is a leader and
        every member is healthy."""
        redirects: dict[int, list[tuple[str, int, int]]] = {n.index: [] for n in c.nodes}
        for dst in c.nodes:
            dst.extra["routes"] = {}
            for src in c.nodes:
                if src is not dst:
                    host, port = links.peer(f"peer-{src.index}-{dst.index}", src, dst,
                                            dst_port=dst.peer_port)
                    dst.extra["routes"][_peer_url(src)] = port
                    if host == "127.0.0.1" and placement.on_hosts(c):
                        # src's connections to dst's advertised URL go to src's proxy
                        redirects[src.index].append((address(dst), dst.extra["ports"][2],
                                                     port))
        c.save(root)
        if placement.on_hosts(c):
            for node in c.nodes:
                placement.redirect(c, node, redirects[node.index])
        for node in c.nodes:
            self._launch(c, node, "new")
            c.save(root)
        self._wait_ready(c)
        c.save(root)

    def _wait_ready(self, c: Cluster, timeout_s: float = _READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        problem = "no answer yet"
        while time.monotonic() < deadline:
            for node in c.nodes:
                if not placement.running(c, node):
                    raise ValueError(f"etcd member n{node.index} exited while starting; see "
                                     f"{node.data_dir}/server.log")
            try:
                st = [_status(n) for n in c.nodes]
            except (httpx.HTTPError, ValueError) as err:
                problem = f"status: {type(err).__name__}"
                time.sleep(0.2)
                continue
            leaders = {s.get("leader", "0") for s in st}
            if len(leaders) != 1 or "0" in leaders:
                problem = f"members see leaders {sorted(leaders)}"
                time.sleep(0.2)
                continue
            sick = [f"n{n.index}" for n in c.nodes if not _healthy(n)]
            if sick:
                problem = f"{', '.join(sick)} not healthy"
                time.sleep(0.2)
                continue
            (leader,) = leaders
            for node, s in zip(c.nodes, st, strict=True):
                member = s["header"]["member_id"]
                node.extra["member_id"] = f"{int(member):x}"
                node.role = "leader" if member == leader else "follower"
            return
        raise ValueError(f"etcd cluster {c.name} did not elect a healthy leader within "
                         f"{timeout_s:.0f} s ({problem}); see the server.log files under "
                         f"{Path(c.nodes[0].data_dir).parent}")

    # -- describing ---------------------------------------------------------------------------

    def url(self, c: Cluster) -> str:
        """Return ``etcd://n0?endpoints=n1,...&regions=...&node_regions=...``."""
        return store_url(c, "etcd", "endpoints", host=address)

    def status(self, c: Cluster) -> list[dict[str, str]]:
        """Return per member: member id, leader or follower, raft term and committed/applied
        index, and how many entries its applied index is behind the leader's."""
        rows: list[dict[str, str]] = []
        found: list[dict[str, Any] | None] = []
        for node in c.nodes:
            try:
                found.append(_status(node))
            except (httpx.HTTPError, ValueError):
                found.append(None)
        leader_applied = None
        for s in found:
            if s is not None and s["header"]["member_id"] == s.get("leader"):
                leader_applied = int(s.get("raftAppliedIndex", s.get("raftIndex", 0)))
        for node, s in zip(c.nodes, found, strict=True):
            row = {"node": f"n{node.index}", "region": node.region,
                   "pid": str(placement.pid(node)), "port": str(node.port)}
            if s is None:
                row.update(role="unreachable", state="no answer from /v3/maintenance/status")
                rows.append(row)
                continue
            member = s["header"]["member_id"]
            applied = int(s.get("raftAppliedIndex", s.get("raftIndex", 0)))
            behind = "" if leader_applied is None else str(max(leader_applied - applied, 0))
            row.update(role="leader" if member == s.get("leader") else "follower",
                       member_id=f"{int(member):x}", leader_id=f"{int(s.get('leader', 0)):x}",
                       raft_term=str(s.get("raftTerm", "")),
                       raft_index=str(s.get("raftIndex", "")), applied_index=str(applied),
                       behind=behind)
            lag = f"{behind} behind leader" if behind else "leader unknown"
            row["state"] = (f"id {row['member_id']}, term {row['raft_term']}, applied "
                            f"{applied}/{row['raft_index']}, {lag}")
            rows.append(row)
        return rows


# -- the peer demultiplexer (runs beside each member: python -m replicalab.cluster.etcd) -------


def _sender_port(head: bytes, routes: dict[str, int]) -> int | None:
    """Return the proxy port for the sender named by ``X-PeerURLs`` in ``head`` (or None)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"x-peerurls":
            for url in value.decode("latin-1").split(","):
                if url.strip() in routes:
                    return routes[url.strip()]
    return None


def _close_after(head: bytes) -> bytes:
    """Return ``head`` asking the server to close the connection after its response."""
    lines = [x for x in head.split(b"\r\n") if not x.lower().startswith(b"connection:")]
    while lines and not lines[-1]:
        lines.pop()
    return b"\r\n".join([*lines, b"Connection: close", b"", b""])


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direct: int,
                  routes: dict[str, int]) -> None:
    up_writer = None
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        port = _sender_port(head, routes)
        if port is None:
            port, head = direct, _close_after(head)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        up_writer.write(head)
        await asyncio.gather(pipe(reader, up_writer, writer),
                             pipe(up_reader, writer, up_writer))
    except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        for w in (writer, up_writer):
            if w is not None:
                w.close()


async def _demux(sock: socket.socket, direct: int, routes: dict[str, int]) -> None:
    server = await asyncio.start_server(lambda r, w: _handle(r, w, direct, routes), sock=sock,
                                        limit=1 << 16)
    parent = os.getppid()
    async with server:
        while os.getppid() == parent:  # etcd (our parent after the fork) is gone: stop
            await asyncio.sleep(0.5)


def main(argv: list[str] | None = None) -> None:
    """Bind the demultiplexer, fork it off, and exec etcd in this process (same pid)."""
    p = argparse.ArgumentParser(prog="python -m replicalab.cluster.etcd",
                                description="etcd member with a per-sender peer demultiplexer")
    p.add_argument("--listen", type=int, required=True, help="advertised peer port")
    p.add_argument("--direct", type=int, required=True, help="etcd's own peer port")
    p.add_argument("--route", action="append", default=[], help="SENDER_URL=PROXY_PORT")
    p.add_argument("etcd", nargs=argparse.REMAINDER, help="-- etcd ARGS...")
    args = p.parse_args(argv)
    etcd = args.etcd[1:] if args.etcd[:1] == ["--"] else args.etcd
    routes = {}
    for r in args.route:
        url, _, port = r.rpartition("=")
        routes[url] = int(port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.listen))
    sock.listen(128)
    sys.stdout.flush()
    if os.fork() == 0:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_demux(sock, args.direct, routes))
        os._exit(0)
    sock.close()
    os.execvp(etcd[0], etcd)


if __name__ == "__main__":
    main()

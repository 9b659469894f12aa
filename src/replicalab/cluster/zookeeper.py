"""ZooKeeper 3.8 (Debian's ``zookeeper`` package): a quorum of 3+ servers on 127.0.0.1.

Each node has four ports: client, quorum (followers -> leader), election, and a relay in front
of the quorum port. Every server gets its own ``zoo.cfg`` in which its own ``server.N`` entry
holds its real quorum and election ports and every other server's entry holds the ports of the
Toxiproxy proxies *from it* to that server (``quorum-i-j``, ``election-i-j``), so each directed
link carries the region delay of its own pair. Followers reach the leader through their quorum
proxy: forwarded writes, proposals, acks and commits all cross the emulated WAN.

Why the relay: Toxiproxy accepts a connection and only then dials the upstream, closing the
connection if that fails. A follower usually decides who leads one one-way delay before the
leader does (it adopts the leader's vote first), so it connects before the leader listens on
its quorum port. Without a proxy it would be refused and retry; through Toxiproxy it is
accepted, then cut, and ZooKeeper starts a new election, often forever. So each server runs
under a small wrapper (this module's ``__main__``) that starts the JVM in its own process group
and relays ``relay port -> quorum port``, holding an accepted connection while it retries the
dial (up to initLimit, as ZooKeeper's own follower does). The quorum proxies point at the relay.

One gap ZooKeeper leaves open: when a lower-id server opens an election connection to a
higher-id one, the higher-id server drops it and dials back to the address the lower-id server
advertised (its real election port), bypassing the proxy. So at start every election proxy
holds connections back (a ``reset_peer`` toxic: accepted, then reset before a byte passes)
while all servers but the last start. Then the proxies from the last node
(highest id) to the others are enabled and it starts: it dials everyone through its own
proxies and, all logs being empty, its vote is the best, so everyone adopts it. After a head
start the other proxies from higher to lower ids are enabled, so the rest can exchange votes
too: every election connection is dialled by the higher id through its own proxy, and the
first leader is the last node. Once the quorum serves (or if a server has not joined after
15 s), the lower-to-higher proxies are released as well (a restarted server needs them to
rejoin; its election connections to higher ids may then be dialled back directly).
:func:`direct_connections` lists any server-to-server connection that is not proxied;
``status`` shows them. Election traffic only flows during elections; the data path (quorum
port) is always proxied.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from replicalab.cluster import process
from replicalab.cluster.ports import wait_listening
from replicalab.cluster.state import Cluster, Node, settings, store_url

if TYPE_CHECKING:
    from replicalab.cluster.links import LinkMaker
    from replicalab.cluster.toxiproxy import Toxiproxy

# Where Debian's packages put things (libzookeeper-java, libslf4j-java, liblog4j1.2-java).
# The package's own classpath is /etc/zookeeper/conf:/usr/share/java/zookeeper.jar (see
# /etc/zookeeper/conf/environment); the jar's manifest names its dependencies. We put each
# node's own directory first instead (it holds our log4j.properties) and add the slf4j ->
# log4j binding so the server's log reaches server.log.
JAVA = "java"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
LOG_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
HEAP = ("-Xms32m", "-Xmx256m")

TICK_MS = 500
INIT_LIMIT = 20  # ticks: 10 s for a follower to connect to and sync with a new leader
SYNC_LIMIT = 10  # ticks: 5 s of silence before the leader drops a follower
_LOG4J = """log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n
"""


def four_letter(port: int, command: str, timeout_s: float = 1.0) -> str:
    """Return a server's answer to a four-letter command (``srvr``, ``mntr``, ``ruok``...)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(command.encode())
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def server_state(port: int) -> dict[str, str]:
    """Return ``srvr`` fields (``Mode``, ``Zxid``, ...); ``{}`` if not serving or unreachable."""
    try:
        text = four_letter(port, "srvr")
    except OSError:
        return {}
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields if "Mode" in fields else {}


def _ports(node: Node) -> tuple[int, int, int, int]:
    client, quorum, election, relay = node.extra["ports"][:4]
    return int(client), int(quorum), int(election), int(relay)


class ZookeeperDriver:
    """Starts one QuorumPeerMain JVM per node (in the foreground, under the relay wrapper)."""

    kind = "zookeeper"
    ports_per_node = 4  # client, quorum, election, relay in front of quorum

    def check_installed(self) -> None:
        """Raise ValueError if Java or the ZooKeeper jar is missing."""
        missing = []
        if shutil.which(JAVA) is None:
            missing.append(f"{JAVA} (a Java runtime)")
        if not ZOOKEEPER_JAR.exists():
            missing.append(str(ZOOKEEPER_JAR))
        if missing:
            raise ValueError(f"ZooKeeper is not installed ({' and '.join(missing)} missing); "
                             "run scripts/install-servers.sh (apt-get install zookeeper)")

    # -- configuration -------------------------------------------------------------------

    def _config(self, c: Cluster, node: Node) -> str:
        client = _ports(node)[0]
        lines = [
            f"tickTime={TICK_MS}",
            f"initLimit={INIT_LIMIT}",
            f"syncLimit={SYNC_LIMIT}",
            f"dataDir={Path(node.data_dir).resolve() / 'data'}",
            f"clientPort={client}",
            "clientPortAddress=127.0.0.1",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,stat,mntr,ruok",
            "standaloneEnabled=false",
            "reconfigEnabled=false",
            # a lab on one machine: the OS page cache survives a SIGKILLed server, so skipping
            # fsync loses no acknowledged write in our crash faults and keeps latency steady
            "forceSync=no",
            "preAllocSize=4096",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        overrides = settings(c)  # e.g. forceSync=yes, ZooKeeper's own default
        lines = [x for x in lines if x.split("=", 1)[0] not in overrides]
        lines += [f"{k}={v}" for k, v in overrides.items()]
        peers = node.extra.get("peers", {})
        for other in c.nodes:
            if other.index == node.index:
                quorum, election = _ports(node)[1:3]
            else:
                quorum, election = peers[str(other.index)]
            lines.append(f"server.{other.index + 1}=127.0.0.1:{quorum}:{election}")
        return "\n".join(lines) + "\n"

    def _argv(self, node: Node) -> list[str]:
        conf = Path(node.data_dir).resolve()
        classpath = [str(conf), str(ZOOKEEPER_JAR)] + [str(p) for p in LOG_JARS if p.exists()]
        java = [shutil.which(JAVA) or JAVA, *HEAP, "-XX:+UseSerialGC",
                "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
                # retry unanswered election notifications every second at most (default 60 s)
                "-Dzookeeper.fastleader.maxNotificationInterval=1000",
                f"-Dzookeeper.log.dir={conf}", "-cp", os.pathsep.join(classpath), MAIN,
                str(conf / "zoo.cfg")]
        _, quorum, _, relay = _ports(node)
        wait_s = INIT_LIMIT * TICK_MS / 1000
        return [sys.executable, "-m", "replicalab.cluster.zookeeper", str(relay), str(quorum),
                str(wait_s), "--", *java]

    # -- lifecycle -----------------------------------------------------------------------

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        """(Re)start one server from its data directory; return once its ports listen."""
        conf = Path(node.data_dir).resolve()
        data = conf / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{node.index + 1}\n")
        (conf / "zoo.cfg").write_text(self._config(c, node))
        (conf / "log4j.properties").write_text(_LOG4J)
        node.pid = process.start(self._argv(node), conf / "server.log", cwd=conf)
        client, _, election, relay = _ports(node)
        for port in (relay, client, election):
            if not wait_listening(port, 30):
                raise ValueError(f"zookeeper n{node.index} did not listen on port {port}; "
                                 f"see {conf}/server.log")

    def start(self, c: Cluster, links: LinkMaker, root: Path) -> None:
        """Create every quorum and election proxy, start the servers in ascending id order,
        and return once there is one leader and every server serves."""
        for node in c.nodes:
            peers: dict[str, list[int]] = {}
            for other in c.nodes:
                if other.index == node.index:
                    continue
                _, _, election, relay = _ports(other)
                src = f"n{node.index}"
                q = links.link(f"quorum-{node.index}-{other.index}", src, node.region, other,
                               dst_port=relay)
                e = links.link(f"election-{node.index}-{other.index}", src, node.region, other,
                               kind="election", dst_port=election)
                peers[str(other.index)] = [q, e]
            node.extra["peers"] = peers
            node.role = "starting"
        c.save(root)
        hub = c.nodes[-1].index
        election = [x for x in c.links if x.kind == "election"]
        first = [x.name for x in election if x.src == f"n{hub}"]
        downward = [x.name for x in election if x.src != f"n{hub}"
                    and int(x.src[1:]) > int(x.dst[1:])]
        upward = [x.name for x in election if int(x.src[1:]) < int(x.dst[1:])]
        # (disabling a proxy instead would free its port, which the OS may then hand out)
        for x in election:
            if x.name not in first:
                _hold(links.tp, x.name, True)
        for node in c.nodes:
            self.start_node(c, node, root)
            c.save(root)
        if downward:
            time.sleep(1.0)  # the last node's vote reaches everyone first
            for name in downward:
                _hold(links.tp, name, False)
        try:
            self.wait_serving(c, 15.0)
        except ValueError:  # a server missed the first election: let it dial up to rejoin
            for name in upward:
                _hold(links.tp, name, False)
            self.wait_serving(c, 45.0)
        for name in upward:
            _hold(links.tp, name, False)
        for node in c.nodes:
            node.role = server_state(node.port).get("Mode", "unknown")
        c.save(root)

    def wait_serving(self, c: Cluster, timeout_s: float = 60.0) -> str:
        """Wait until exactly one server leads and all serve; return the leader's name."""
        deadline = time.monotonic() + timeout_s
        modes: dict[str, str] = {}
        while time.monotonic() < deadline:
            modes = {f"n{n.index}": server_state(n.port).get("Mode", "") for n in c.nodes}
            leaders = [name for name, m in modes.items() if m == "leader"]
            if len(leaders) == 1 and all(m in ("leader", "follower") for m in modes.values()):
                return leaders[0]
            time.sleep(0.1)
        waiting = [name for name, m in modes.items() if not m] or list(modes)
        raise ValueError(f"zookeeper cluster {c.name} had no leader with all servers serving "
                         f"within {timeout_s:.0f} s (not serving: {', '.join(waiting)}); see "
                         f"{Path(c.nodes[0].data_dir).parent}/n*/server.log")

    # -- what clients and operators see --------------------------------------------------

    def url(self, c: Cluster) -> str:
        """Return ``zk://first?servers=others&regions=...&node_regions=...``."""
        return store_url(c, "zk", "servers")

    def status(self, c: Cluster) -> list[dict[str, str]]:
        """Return per server: live role (srvr Mode), zxid, and transactions behind the leader."""
        states = [server_state(n.port) for n in c.nodes]
        zxids = [int(s["Zxid"], 16) if "Zxid" in s else None for s in states]
        lead = next((z for s, z in zip(states, zxids, strict=True)
                     if s.get("Mode") == "leader"), None)
        rows = []
        for node, s, zxid in zip(c.nodes, states, zxids, strict=True):
            row = {"node": f"n{node.index}", "region": node.region, "pid": str(node.pid),
                   "port": str(node.port)}
            if not s:
                row.update(role="down", state="not serving (down, electing or syncing)",
                           zxid="", behind="")
                rows.append(row)
                continue
            mode = s["Mode"]
            behind = "" if lead is None or zxid is None else str(_behind(lead, zxid))
            row.update(role=mode, zxid="" if zxid is None else f"0x{zxid:x}", behind=behind)
            row["state"] = f"{mode}, zxid {row['zxid']}" + (
                f", {behind} txns behind the leader" if mode == "follower" and behind else "")
            rows.append(row)
        direct = direct_connections(c)
        for row in rows:
            mine = [d for d in direct if d.startswith(row["node"] + " ")]
            row["direct"] = "; ".join(mine)
            if mine:
                row["state"] += f"; {len(mine)} unproxied election/quorum connection(s)"
        return rows


def _hold(tp: Toxiproxy, name: str, hold: bool) -> None:
    """Make proxy ``name`` reset every connection before any byte passes (or stop it)."""
    tp.set_reset(name, hold)


def _behind(leader_zxid: int, zxid: int) -> int:
    """Transactions between two zxids (epoch in the high 32 bits, counter in the low)."""
    if leader_zxid >> 32 != zxid >> 32:
        return (leader_zxid & 0xFFFFFFFF) if leader_zxid > zxid else 0
    return max(0, (leader_zxid & 0xFFFFFFFF) - (zxid & 0xFFFFFFFF))


# -- checking the emulation ------------------------------------------------------------------

def _group_socket_inodes(pgid: int) -> set[int]:
    """Return the socket inodes held by every process of process group ``pgid``."""
    inodes: set[int] = set()
    if pgid <= 0:
        return inodes
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) != pgid:
                    continue
            fds = os.listdir(f"/proc/{entry}/fd")
        except (OSError, IndexError, ValueError):
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def _established() -> list[tuple[int, int, int]]:
    """Return (local port, remote port, inode) of established TCP connections."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "01":  # ESTABLISHED
                out.append((int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16),
                            int(f[9])))
    return out


def direct_connections(c: Cluster) -> list[str]:
    """Return the server-to-server connections that bypass Toxiproxy (ideally none).

    A connection to one server's real quorum or election port dialled by another server's
    processes (rather than by Toxiproxy, or by the server's own relay) carries no delay.
    """
    real: dict[int, tuple[int, str]] = {}
    for n in c.nodes:
        _, quorum, election, _ = _ports(n)
        real[quorum] = (n.index, "quorum")
        real[election] = (n.index, "election")
    owners = {inode: n.index for n in c.nodes for inode in _group_socket_inodes(n.pid)}
    out = []
    for local, remote, inode in _established():
        if remote in real and inode in owners and owners[inode] != real[remote][0]:
            dst, kind = real[remote]
            out.append(f"n{owners[inode]} -> n{dst} {kind} port (local port {local})")
    return out


# -- the wrapper each server runs under: JVM + relay in front of its quorum port -------------

async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def _relay(listen_port: int, upstream_port: int, wait_s: float,
                 done: asyncio.Future[int]) -> None:
    """Accept on ``listen_port``; dial ``upstream_port`` (retrying for ``wait_s``); pipe."""

    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                ur, uw = await asyncio.open_connection("127.0.0.1", upstream_port)
                break
            except OSError:
                if time.monotonic() > deadline or cr.at_eof():
                    cw.close()
                    return
                await asyncio.sleep(0.02)
        await asyncio.gather(_pipe(cr, uw), _pipe(ur, cw))

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    async with server:
        await done


def _serve(argv: list[str]) -> int:
    """``RELAY_PORT QUORUM_PORT WAIT_S -- java ...``: run the JVM, relay until it exits."""
    sep = argv.index("--")
    listen_port, upstream_port, wait_s = int(argv[0]), int(argv[1]), float(argv[2])
    child = subprocess.Popen(argv[sep + 1:], stdin=subprocess.DEVNULL)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def stop(sig: int) -> None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(sig)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop, sig)
        relay = asyncio.ensure_future(_relay(listen_port, upstream_port, wait_s, done))
        code = await asyncio.to_thread(child.wait)
        done.set_result(code)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(relay, 2)
        return code

    return asyncio.run(main())


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1:]))

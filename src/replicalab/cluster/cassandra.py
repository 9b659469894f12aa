"""Apache Cassandra 5.0 (jars from Maven Central): one node per loopback address, one data
centre per region, every directed internode link delayed by its own Toxiproxy proxy.

Addresses. A cluster claims a loopback block 127.42.K.0/24 (``loopback.py``, lock files so
that two clusters never share one). Node i advertises A_i = 127.42.K.(1+i) (its
``broadcast_address`` and CQL ``rpc_address``, port 9042) and listens for other nodes on
L_i = 127.42.K.(101+i):7000. A_i:7000 is a demultiplexer in the node's wrapper process
(``cassandra_node.py``) that reads the sender from the internode handshake and splices the
connection into the Toxiproxy proxy ``peer-s-i`` (sender s to node i, upstream L_i:7000),
so each direction of each node pair carries the one-way delay of its region pair.

Layout. Node i is in region i mod |regions|; each region is a Cassandra data centre
(``GossipingPropertyFileSnitch``, rack ``r1``), so LOCAL_ONE / LOCAL_QUORUM / EACH_QUORUM
mean what they say. Every node is a seed with a fixed token (Murmur3, evenly spaced), so
all start at once without bootstrapping or colliding on tokens. ``up`` returns once every
node knows every node with its data centre and gossip status, as a client connected to it
sees the ring (``stores.cassandra.ring_view``): a node logs a peer "UP" before the peer has
joined, and a keyspace created from such a view holds no replica in the peer's data centre.
Small heaps (256 MB), no JMX, hinted handoff on, commit log synced every 10 s (the page
cache survives a SIGKILLed node), no dynamic snitch (see ``config_yaml``). ``cluster up
--set KEY=VALUE`` overrides any cassandra.yaml setting, e.g. ``commitlog_sync=batch`` (ack
a write only once its commit log is synced) over the default ``periodic`` (synced every 10
s, Cassandra's own default).

Installation: ``scripts/install-servers.sh`` copies cassandra-all 5.0.6 and its dependency
jars from Maven Central with Debian's Maven into ``.replicalab/cassandra/5.0.6/lib``. The
Java 17 module options are ours (the list Cassandra's jvm17-server.options gives).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicalab.cluster import loopback, process
from replicalab.cluster.ports import wait_listening_on
from replicalab.cluster.state import Cluster, Node, store_url
from replicalab.cluster.state import settings as state_settings

if TYPE_CHECKING:
    from replicalab.cluster.links import LinkMaker

VERSION = "5.0.6"
STORAGE_PORT = 7000
CQL_PORT = 9042
KEYSPACE = "replicalab"
HEAP = ("-Xms256m", "-Xmx256m")
MAIN = "org.apache.cassandra.service.CassandraDaemon"
_READY_TIMEOUT_S = 80.0

# Java 17 needs these to let Cassandra reach JDK internals (the list of Cassandra's own
# conf/jvm17-server.options, JPMS section).
JAVA17_OPTIONS = (
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
)

# A lab node on a 2-core machine shared with other servers: one small heap, few threads,
# quick start (no waiting for gossip to settle: every node is a seed with its own token).
# A node that missed a schema change (a push lost to a partition or a stall) pulls it when
# gossip shows another schema version: by default 60 s later once it has been up 60 s, and
# a client of that node meanwhile hears "keyspace ... does not exist" (the CI run of
# 2026-11-29); here 1 s.
JVM_OPTIONS = (
    *HEAP, "-XX:+UseSerialGC", "-Xss512k", "-XX:MaxDirectMemorySize=256m",
    "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=2", "-Djava.net.preferIPv4Stack=true",
    "-Dcassandra-foreground=yes", "-Dcassandra.skip_wait_for_gossip_to_settle=0",
    "-Dcassandra.ring_delay_ms=1000", "-Dcassandra.superuser_setup_delay_ms=0",
    "-Dcassandra.migration_delay_ms=1000", "-Dcassandra.schema_pull_interval_ms=1000",
    "-Dcassandra.shutdown_announce_in_ms=200", "-XX:+ExitOnOutOfMemoryError",
)

_LOGBACK = """<configuration scan="false">
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{ISO8601} %-5level [%thread] %logger{0} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


def lib_dir(root: Path) -> Path | None:
    """Return the directory holding cassandra-all and its dependency jars, or None.

    Looked for in $REPLICALAB_CASSANDRA_LIB, ``<root>/cassandra/VERSION/lib``, then the
    checkout's ``.replicalab/cassandra/VERSION/lib`` (where scripts/install-servers.sh puts
    them).
    """
    checkout = Path(__file__).resolve().parents[3] / ".replicalab"
    for candidate in (os.environ.get("REPLICALAB_CASSANDRA_LIB"),
                      root / "cassandra" / VERSION / "lib",
                      checkout / "cassandra" / VERSION / "lib"):
        if candidate and (Path(candidate) / f"cassandra-all-{VERSION}.jar").exists():
            return Path(candidate).resolve()
    return None


def tokens(n: int) -> list[int]:
    """Return ``n`` Murmur3 tokens evenly spaced over [-2**63, 2**63)."""
    return [-(2 ** 63) + i * (2 ** 64 // n) for i in range(n)]


def advertised(node: Node) -> str:
    """Return the address node ``node`` advertises (internode and CQL)."""
    return str(node.extra["address"])


def listening(node: Node) -> str:
    """Return the address on which node ``node``'s JVM takes internode connections."""
    return str(node.extra["listen"])


def data_centres(c: Cluster) -> dict[str, int]:
    """Return {data centre: nodes in it} (a region is a data centre)."""
    out: dict[str, int] = {}
    for n in c.nodes:
        out[n.region] = out.get(n.region, 0) + 1
    return out


def config_yaml(c: Cluster, node: Node) -> str:
    """Return the cassandra.yaml of ``node`` (YAML is JSON-compatible: values are quoted)."""
    d = Path(node.data_dir).resolve()
    seeds = ",".join(f"{advertised(n)}:{STORAGE_PORT}" for n in c.nodes)
    settings: dict[str, Any] = {
        "cluster_name": f"replicalab-{c.name}",
        "num_tokens": 1,
        "initial_token": str(node.extra["token"]),
        "partitioner": "org.apache.cassandra.dht.Murmur3Partitioner",
        "endpoint_snitch": "GossipingPropertyFileSnitch",
        "listen_address": listening(node),
        "broadcast_address": advertised(node),
        "listen_on_broadcast_address": False,
        "rpc_address": advertised(node),
        "storage_port": STORAGE_PORT,
        "native_transport_port": CQL_PORT,
        "start_native_transport": True,
        "data_file_directories": [str(d / "data")],
        "commitlog_directory": str(d / "commitlog"),
        "saved_caches_directory": str(d / "saved_caches"),
        "hints_directory": str(d / "hints"),
        "cdc_raw_directory": str(d / "cdc_raw"),
        "commitlog_sync": "periodic",
        "commitlog_sync_period": "10000ms",
        "authenticator": "AllowAllAuthenticator",
        "authorizer": "AllowAllAuthorizer",
        "hinted_handoff_enabled": True,
        "max_hint_window": "3h",
        "auto_snapshot": False,
        "read_request_timeout": "2000ms",
        "range_request_timeout": "4000ms",
        "write_request_timeout": "2000ms",
        "counter_write_request_timeout": "2000ms",
        "cas_contention_timeout": "2000ms",
        "request_timeout": "4000ms",
        "truncate_request_timeout": "20000ms",
        "concurrent_reads": 8,
        "concurrent_writes": 8,
        "concurrent_counter_writes": 8,
        "concurrent_compactors": 1,
        "memtable_heap_space": "32MiB",
        "memtable_offheap_space": "32MiB",
        "key_cache_size": "8MiB",
        "counter_cache_size": "4MiB",
        "file_cache_size": "32MiB",
        "networking_cache_size": "16MiB",
        "native_transport_max_threads": 32,
        # the static snitch's order, not latency scores: a coordinator always reads its own
        # replica first (at ONE: only it), so "the reader at US-W" reads US-W's copy. The
        # dynamic snitch, given a few slow local reads on a busy machine, sent ONE reads at
        # US-W to US-E for minutes (88 ms instead of 1 ms). Remote replicas come in ring order.
        "dynamic_snitch": False,
        "seed_provider": [{"class_name": "org.apache.cassandra.locator.SimpleSeedProvider",
                           "parameters": [{"seeds": seeds}]}],
    }
    overrides = {k: _yaml_value(v) for k, v in state_settings(c).items()}
    if overrides.get("commitlog_sync", "periodic") != "periodic":
        # batch and group syncs take no period (Cassandra refuses one beside them)
        settings.pop("commitlog_sync_period")
    settings.update(overrides)  # e.g. commitlog_sync=batch (``cluster up --set``)
    # YAML reads JSON values; one line per key keeps the file readable
    return "".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items())


def _yaml_value(text: str) -> Any:
    """Return a ``--set`` value as cassandra.yaml wants it: an integer, a boolean or text."""
    if text.lstrip("-").isdigit():
        return int(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


class CassandraDriver:
    """Starts one CassandraDaemon JVM per node, each under its demultiplexing wrapper."""

    kind = "cassandra"
    ports_per_node = 0  # fixed ports (7000, 9042) on addresses of the node's own

    def check_installed(self) -> None:
        """Raise ValueError if Java or the Cassandra jars are missing."""
        missing = []
        if shutil.which("java") is None:
            missing.append("java (a Java 17 runtime)")
        if lib_dir(Path(".replicalab")) is None:
            missing.append(f"the cassandra-all {VERSION} jars")
        if missing:
            raise ValueError(f"Cassandra is not installed ({' and '.join(missing)} missing); "
                             "run scripts/install-servers.sh (make servers), which copies "
                             "them from Maven Central with Maven")

    # -- configuration -------------------------------------------------------------------

    def _write_config(self, c: Cluster, node: Node) -> Path:
        conf = Path(node.data_dir).resolve()
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "cassandra.yaml").write_text(config_yaml(c, node))
        (conf / "cassandra-rackdc.properties").write_text(
            f"dc={node.region}\nrack=r1\nprefer_local=false\n")
        (conf / "logback.xml").write_text(_LOGBACK)
        return conf

    def _argv(self, c: Cluster, node: Node, root: Path) -> list[str]:
        conf = Path(node.data_dir).resolve()
        lib = lib_dir(root)
        if lib is None:
            self.check_installed()
            raise ValueError("the Cassandra jars are missing")
        jars = sorted(str(p) for p in lib.glob("*.jar"))
        jamm = [j for j in jars if Path(j).name.startswith("jamm-")]
        java = [shutil.which("java") or "java", *JVM_OPTIONS, *JAVA17_OPTIONS,
                *(f"-javaagent:{j}" for j in jamm[:1]),
                f"-Dcassandra.config=file://{conf / 'cassandra.yaml'}",
                f"-Dlogback.configurationFile=file://{conf / 'logback.xml'}",
                f"-Dcassandra.logdir={conf}", f"-Dcassandra.storagedir={conf}",
                "-cp", os.pathsep.join([str(conf), *jars]), MAIN]
        routes = [f"--route={advertised(c.nodes[int(s)])}={port}"
                  for s, port in sorted(node.extra.get("routes", {}).items())]
        return [sys.executable,
                "-m", "replicalab.cluster.cassandra_node", "--lock", str(c.extra["lock"]),
                "--listen", f"{advertised(node)}:{STORAGE_PORT}",
                "--direct", f"{listening(node)}:{STORAGE_PORT}", *routes, "--", *java]

    # -- lifecycle -----------------------------------------------------------------------

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        """(Re)start one node from its data directory; return once it serves CQL."""
        self.start_nodes(c, [node], root)

    def start_nodes(self, c: Cluster, nodes: list[Node], root: Path) -> None:
        """(Re)start ``nodes`` at once from their data directories (after a power loss of
        every node); return once every one serves CQL."""
        for node in nodes:
            self._launch(c, node, root)
        self._wait_cql(nodes, _READY_TIMEOUT_S)

    def _launch(self, c: Cluster, node: Node, root: Path) -> None:
        conf = self._write_config(c, node)
        node.pid = process.start(self._argv(c, node, root), conf / "server.log", cwd=conf)
        node.role = "starting"

    def start(self, c: Cluster, links: LinkMaker, root: Path) -> None:
        """Claim a loopback block, create every internode proxy, start all nodes at once
        and return once every node serves CQL and sees all the others up."""
        n = len(c.nodes)
        block = loopback.claim(hosts=[h for i in range(n) for h in (1 + i, 101 + i)],
                               ports=[STORAGE_PORT, CQL_PORT])
        try:
            c.extra["block"] = block.k
            c.extra["lock"] = str(block.lock_path)
            for node, token in zip(c.nodes, tokens(n), strict=True):
                node.extra.update(address=block.address(1 + node.index),
                                  listen=block.address(101 + node.index), token=str(token))
                node.port = node.client_port = CQL_PORT
                node.peer_port = STORAGE_PORT
            for dst in c.nodes:
                dst.extra["routes"] = {}
                for src in c.nodes:
                    if src is not dst:
                        dst.extra["routes"][str(src.index)] = links.link(
                            f"peer-{src.index}-{dst.index}", f"n{src.index}", src.region,
                            dst, dst_port=STORAGE_PORT, dst_host=listening(dst))
            c.save(root)
            for node in c.nodes:
                self._launch(c, node, root)
            c.save(root)
            self._wait_cql(c.nodes, _READY_TIMEOUT_S)
            self._wait_ring(c, _READY_TIMEOUT_S)
            self._wait_members(c, _READY_TIMEOUT_S)
        finally:
            block.release()  # the node wrappers hold the block now
        for node in c.nodes:
            node.role = "up"
        c.save(root)

    def _wait_cql(self, nodes: list[Node], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for node in nodes:
            while not wait_listening_on(advertised(node), CQL_PORT, 0.5):
                if not process.alive(node.pid):
                    raise ValueError(f"cassandra n{node.index} exited while starting; see "
                                     f"{node.data_dir}/server.log")
                if time.monotonic() > deadline:
                    raise ValueError(f"cassandra n{node.index} did not serve CQL on "
                                     f"{advertised(node)}:{CQL_PORT} within {timeout_s:.0f} s;"
                                     f" see {node.data_dir}/server.log")

    def _wait_ring(self, c: Cluster, timeout_s: float) -> None:
        """Wait until every node's log says it has seen every other node come up."""
        deadline = time.monotonic() + timeout_s
        while True:
            missing = []
            for node in c.nodes:
                text = (Path(node.data_dir) / "server.log").read_text(errors="replace")
                for other in c.nodes:
                    if other is not node and f"/{advertised(other)}:{STORAGE_PORT} is now UP" \
                            not in text:
                        missing.append(f"n{node.index} sees n{other.index}")
            if not missing:
                return
            if time.monotonic() > deadline:
                raise ValueError(f"cassandra cluster {c.name}: not every node saw the others "
                                 f"up within {timeout_s:.0f} s ({', '.join(missing[:3])} "
                                 f"missing); see {Path(c.nodes[0].data_dir).parent}/n*/"
                                 "server.log")
            time.sleep(0.2)

    def _wait_members(self, c: Cluster, timeout_s: float) -> None:
        """Wait until every node knows every node with its data centre and gossip status,
        as a client connected to it sees them (``stores.cassandra.ring_view``).

        A node logs a peer "UP" from its first gossip round, before the peer has joined
        the ring: a client connected to it then, even with a URL naming one node, would
        create a keyspace without the peer's data centre (no replica there: reads at ONE
        in it served a WAN round trip away for as long as the keyspace exists)."""
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
        from cassandra.cluster import Cluster as Driver
        from cassandra.policies import WhiteListRoundRobinPolicy

        from replicalab.stores.cassandra import ring_view

        deadline = time.monotonic() + timeout_s
        for node in c.nodes:
            address = advertised(node)
            # its own view: every query to this node alone
            only = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([address]))
            driver = Driver([address], port=CQL_PORT, protocol_version=5,
                            execution_profiles={EXEC_PROFILE_DEFAULT: only},
                            schema_metadata_enabled=False, token_metadata_enabled=False,
                            connect_timeout=timeout_s)
            try:
                session = driver.connect()
                try:
                    ring_view(session, len(c.nodes), max(deadline - time.monotonic(), 1.0))
                except ValueError as err:
                    raise ValueError(f"cassandra n{node.index}: {err}; see "
                                     f"{node.data_dir}/server.log") from None
            finally:
                driver.shutdown()

    # -- what clients and operators see --------------------------------------------------

    def url(self, c: Cluster) -> str:
        """Return ``cassandra://A0:9042?hosts=A1:9042,...&regions=...&node_regions=...``."""
        return store_url(c, "cassandra", "hosts", host=advertised)

    def status(self, c: Cluster) -> list[dict[str, str]]:
        """Return per node: whether it serves CQL, its data centre, token and address."""
        rows = []
        for node in c.nodes:
            up = wait_listening_on(advertised(node), CQL_PORT, 0.2)
            rows.append({"node": f"n{node.index}", "region": node.region,
                         "pid": str(node.pid), "port": str(node.port),
                         "role": "up" if up else "down",
                         "address": advertised(node),
                         "state": (f"dc {node.region}, token {node.extra.get('token')}, "
                                   f"{advertised(node)}:{CQL_PORT} "
                                   f"{'serves CQL' if up else 'does not answer'}")})
        return rows

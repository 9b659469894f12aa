"""MinIO sites: one single-drive MinIO deployment per region, joined by site replication.

MinIO (AGPL-3.0) is built from the Go module proxy by ``scripts/install-servers.sh`` and only
ever run as a separate server process; replicalab imports none of its code.

Why each site resolves its peers' names on its own. Site replication keeps one endpoint per
site, the same for every peer (``http://site-n1.replicalab.internal:P1``), so one proxy per
destination would carry one delay for every sender. Each MinIO therefore runs in a mount
namespace of its own (``unshare --mount``) in which its own ``/etc/hosts`` maps every peer's
name to a loopback address of the directed link: site i reaches site j at
``127.77.i.j:Pj``, where Toxiproxy's proxy ``site-i-j`` listens and forwards to j's
``127.0.0.1:Pj`` with the region matrix's delays (i→j upstream, j→i downstream); a site's own
name maps to 127.0.0.1. ``mc`` (MinIO's client, which sets up site replication) runs with a
hosts file mapping every name to 127.0.0.1 (the controller is on no WAN).

Site replication is asynchronous: a PUT is acknowledged by the site that took it, then
queued and sent to every peer. The bucket is made on n0 after the sites are joined, so it
exists on every site with versioning on (site replication turns it on).

The lab's root key and secret are made at ``cluster up`` (random), kept in the cluster's state
directory (mode 0700) and in the URL it prints, and gone with ``cluster down``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from replicalab.cluster import process
from replicalab.cluster.ports import wait_listening_on
from replicalab.cluster.state import Cluster, Link, Node, store_url
from replicalab.cluster.toxiproxy import Toxiproxy

if TYPE_CHECKING:
    from replicalab.cluster.links import LinkMaker

BUCKET = "replicalab"
ACCESS_KEY = "replicalab"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"  # what install-servers.sh builds
_READY_TIMEOUT_S = 60.0
_MC_TIMEOUT_S = 120.0
_PLAIN = {"verify": False, "trust_env": False}


def site_name(node: Node) -> str:
    """Return the host name site ``node`` is known by to its peers."""
    return f"site-n{node.index}.replicalab.internal"


def link_address(src: int, dst: int) -> str:
    """Return the loopback address the proxy of the directed link src→dst listens on."""
    return f"127.77.{src}.{dst}"


def binary(name: str) -> Path:
    """Return the ``minio`` or ``mc`` executable (ValueError saying how to install it):
    ``$REPLICALAB_MINIO`` / ``$REPLICALAB_MC``, the checkout's ``.replicalab/bin`` (where
    scripts/install-servers.sh builds them), then PATH."""
    checkout = Path(__file__).resolve().parents[3] / ".replicalab" / "bin"
    env = os.environ.get(f"REPLICALAB_{name.upper()}")
    for candidate in (env, checkout / name):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    found = shutil.which(name)
    if found:
        return Path(found)
    raise ValueError(f"{name} is not installed; run scripts/install-servers.sh (or make "
                     "test), which builds MinIO and mc from the Go module proxy "
                     "(about 3 minutes on 2 cores)")


def own_hosts(hosts: Path) -> list[str]:
    """Return the argv prefix that runs a command with ``hosts`` as its /etc/hosts: a mount
    namespace of its own (and, for a user other than root, a user namespace in which it may
    mount)."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts)]


def _secret(c: Cluster) -> str:
    return str(c.extra["secret"])


def _health(port: int, timeout_s: float = 1.0) -> bool:
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/minio/health/live", timeout=timeout_s,
                      **_PLAIN)  # type: ignore[arg-type]
        return r.status_code == 200
    except httpx.HTTPError:
        return False


def _has_bucket(port: int) -> bool:
    """Return True when site ``port`` has the bucket (an unsigned HEAD answers 403 for a
    bucket that exists, 404 for one that does not)."""
    try:
        r = httpx.head(f"http://127.0.0.1:{port}/{BUCKET}", timeout=2.0,
                       **_PLAIN)  # type: ignore[arg-type]
        return r.status_code in (200, 403)
    except httpx.HTTPError:
        return False


class MinioDriver:
    """Starts MinIO sites (``minio server``) joined by site replication (``mc``)."""

    kind = "minio"
    ports_per_node = 1  # the S3 API (the web console is off)

    def check_installed(self) -> None:
        """Raise ValueError if minio, mc or unshare is missing."""
        binary("minio")
        binary("mc")
        if shutil.which("unshare") is None:
            raise ValueError("unshare (util-linux) is missing; apt-get install util-linux")

    # -- starting ---------------------------------------------------------------------------

    def _hosts_file(self, c: Cluster, node: Node) -> Path:
        """Write site ``node``'s /etc/hosts: itself direct, each peer through its link."""
        lines = ["127.0.0.1 localhost"]
        for peer in c.nodes:
            address = "127.0.0.1" if peer is node else link_address(node.index, peer.index)
            lines.append(f"{address} {site_name(peer)}")
        path = Path(node.data_dir) / "hosts"
        path.write_text("\n".join(lines) + "\n")
        return path

    def _env(self, c: Cluster) -> dict[str, str]:
        return {"MINIO_ROOT_USER": ACCESS_KEY, "MINIO_ROOT_PASSWORD": _secret(c),
                "MINIO_BROWSER": "off", "MINIO_UPDATE": "off",
                # the data directories sit on the machine's root disk, which MinIO refuses
                # outside CI/CD mode
                "MINIO_CI_CD": "on", "MINIO_PROMETHEUS_AUTH_TYPE": "public",
                "HOME": str(Path(c.nodes[0].data_dir).parent)}

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        """(Re)start one site from its data directory; return once it is live."""
        data = Path(node.data_dir)
        (data / "data").mkdir(parents=True, exist_ok=True)
        hosts = self._hosts_file(c, node)
        argv = [*own_hosts(hosts), str(binary("minio")), "server", "--quiet", "--address",
                f"127.0.0.1:{node.port}", str(data / "data")]
        node.pid = process.start(argv, data / "server.log", env=self._env(c), label="minio")
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while not _health(node.port):
            if not process.alive(node.pid):
                raise ValueError(f"MinIO site n{node.index} exited while starting; see "
                                 f"{data / 'server.log'}")
            if time.monotonic() >= deadline:
                raise ValueError(f"MinIO site n{node.index} was not live within "
                                 f"{_READY_TIMEOUT_S:.0f} s; see {data / 'server.log'}")
            time.sleep(0.1)

    def _site_links(self, c: Cluster, links: LinkMaker) -> None:
        """One proxy per directed pair of sites, on the pair's own loopback address."""
        tp: Toxiproxy = links.tp
        for src in c.nodes:
            for dst in c.nodes:
                if src is dst:
                    continue
                name = f"site-{src.index}-{dst.index}"
                tp.create(name, dst.port, dst.port, listen_host=link_address(src.index,
                                                                             dst.index))
                there, back, jitter = links.delays(src.region, dst.region)
                tp.set_latency(name, downstream_ms=back, upstream_ms=there, jitter_ms=jitter)
                c.links.append(Link(name, dst.port, dst.port, f"n{src.index}",
                                    f"n{dst.index}", src.region, dst.region, back, there,
                                    jitter, "replication"))
                if not wait_listening_on(link_address(src.index, dst.index), dst.port, 10):
                    raise ValueError(f"the Toxiproxy link {name} did not listen on "
                                     f"{link_address(src.index, dst.index)}:{dst.port}")

    def mc(self, c: Cluster, *args: str, timeout_s: float = _MC_TIMEOUT_S) -> str:
        """Run ``mc ARGS`` against the cluster's sites (aliases n0, n1, ...) and return its
        output (ValueError with mc's message when it fails). The aliases live in mc's
        environment only, never in a file."""
        base = Path(c.nodes[0].data_dir).parent
        hosts = base / "mc-hosts"
        hosts.write_text("127.0.0.1 localhost\n" + "".join(
            f"127.0.0.1 {site_name(n)}\n" for n in c.nodes))
        env = {**os.environ, "MC_CONFIG_DIR": str(base / "mc"), "MC_DISABLE_PAGER": "1",
               "MC_NO_COLOR": "1"}
        for n in c.nodes:
            env[f"MC_HOST_n{n.index}"] = (f"http://{ACCESS_KEY}:{_secret(c)}@{site_name(n)}:"
                                          f"{n.port}")
        argv = [*own_hosts(hosts), str(binary("mc")), "--config-dir", str(base / "mc"), *args]
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ValueError(f"mc {' '.join(args)} did not finish within {timeout_s:.0f} s"
                             ) from None
        if done.returncode != 0:
            msg = (done.stderr or done.stdout).strip().replace(_secret(c), "***")
            raise ValueError(f"mc {' '.join(args)} failed: {msg[:400]}")
        return done.stdout

    def start(self, c: Cluster, links: LinkMaker, root: Path) -> None:
        """Start every site, join them by site replication, make the bucket on n0 and
        return once every site has it."""
        base = c.directory(root)
        base.mkdir(parents=True, exist_ok=True)
        base.chmod(0o700)  # the root secret is in cluster.json
        c.extra["secret"] = secrets.token_urlsafe(24)
        c.extra["bucket"] = BUCKET
        c.save(root)
        self._site_links(c, links)
        for node in c.nodes:
            node.role = "site"
            self.start_node(c, node, root)
            c.save(root)
        if len(c.nodes) > 1:
            self.mc(c, "admin", "replicate", "add", *(f"n{n.index}" for n in c.nodes))
        self.mc(c, "mb", f"n0/{BUCKET}")
        deadline = time.monotonic() + _READY_TIMEOUT_S
        pending = list(c.nodes)
        while pending:
            pending = [n for n in pending if not _has_bucket(n.port)]
            if pending and time.monotonic() >= deadline:
                raise ValueError(f"bucket {BUCKET} did not reach site(s) "
                                 f"{', '.join(f'n{n.index}' for n in pending)} within "
                                 f"{_READY_TIMEOUT_S:.0f} s; see their server.log")
            if pending:
                time.sleep(0.2)

    # -- describing ---------------------------------------------------------------------------

    def url(self, c: Cluster) -> str:
        """Return ``s3://KEY:SECRET@n0/replicalab?endpoints=n1,...&regions=...``."""
        return store_url(c, "s3", "endpoints", prefix=f"{ACCESS_KEY}:{_secret(c)}@",
                         path=f"/{BUCKET}")

    def status(self, c: Cluster) -> list[dict[str, str]]:
        """Return per site: live or not, and from its metrics the objects it replicated to
        each peer (failed ones beside) and received from them."""
        rows = []
        for node in c.nodes:
            row = {"node": f"n{node.index}", "region": node.region, "pid": str(node.pid),
                   "port": str(node.port), "role": node.role or "site"}
            if not _health(node.port):
                row["state"] = "not answering /minio/health/live"
            else:
                row["state"] = "live" + "".join(f"; {x}" for x in _replication(node.port))
            rows.append(row)
        return rows


def _replication(port: int) -> list[str]:
    """Return what site ``port``'s cluster metrics say of its replication: per peer the
    objects sent (failed), and the objects received ([] when the metrics do not answer)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        r = httpx.get(f"http://127.0.0.1:{port}/minio/v2/metrics/cluster", timeout=2.0,
                      **_PLAIN)  # type: ignore[arg-type]
        r.raise_for_status()
    except httpx.HTTPError:
        return []
    sent: dict[str, float] = {}
    failed: dict[str, float] = {}
    received = 0.0
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            peer = sample.labels.get("endpoint", "").split(".")[0].removeprefix("site-")
            name = sample.name.removesuffix("_total")  # the parser adds it to counters
            if name == "minio_cluster_replication_sent_count":
                sent[peer] = sample.value
            elif name == "minio_cluster_replication_total_failed_count":
                failed[peer] = sample.value
            elif name == "minio_cluster_replication_received_count":
                received += sample.value
    out = [f"sent {int(n)} to {peer} ({int(failed.get(peer, 0))} failed)"
           for peer, n in sorted(sent.items())]
    return [*out, f"received {int(received)}"]

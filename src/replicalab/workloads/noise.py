"""The noise floor of a real-store run (``runtime/noise.py``) with its echo routed through the
run's own Toxiproxy: a proxy with no toxic in front of an echo server of this process, made
for the run and removed after it. A store replicalab did not start has no Toxiproxy: its
echo goes over plain loopback, and the floor says so (``echo_via``). The cluster's servers
and Toxiproxy are watched too: their threads' wait for a core and, for a store whose writes
wait for an fsync (:func:`fsync_dir`), an fsync beside their data."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from replicalab.cluster import toxiproxy
from replicalab.cluster.ports import allocate
from replicalab.cluster.state import Cluster, load, names, settings, state_root
from replicalab.runtime.noise import EchoServer, NoiseMonitor


def cluster_for(url: str, name: str | None = None, root: str | Path | None = None
                ) -> Cluster | None:
    """Return the running cluster behind a run: the one named (under ``root``), else the
    one in the state directory whose URL is ``url``; None when there is none."""
    where = Path(root) if root else state_root()
    try:
        if name is not None:
            return load(name, where)
        return next((c for c in (load(n, where) for n in names(where)) if c.url == url), None)
    except (OSError, ValueError, KeyError):
        return None


def fsync_dir(cluster: Cluster) -> Path | None:
    """Return a directory on the disk of ``cluster``'s first server when the store's writes
    wait for an fsync there as the lab starts it, else None: etcd syncs its log before it
    answers (unless ``--unsafe-no-fsync``); MinIO writes objects with O_DIRECT and their
    metadata with O_DSYNC (minio/minio#7479, #11615); Redis only with ``appendfsync
    always``, Cassandra only with ``commitlog_sync`` batch or group. The lab runs
    PostgreSQL with ``fsync = off`` and ZooKeeper with ``forceSync=no`` unless told
    otherwise (``cluster up --set``)."""
    if not cluster.nodes:
        return None
    got = settings(cluster)
    syncs = {"etcd": got.get("unsafe-no-fsync", "false") != "true",
             "minio": True,
             "redis": got.get("appendfsync") == "always",
             "cassandra": got.get("commitlog_sync", "periodic") != "periodic",
             "postgres": got.get("fsync", "off") == "on",
             "zookeeper": got.get("forceSync", "no") == "yes"}.get(cluster.kind, False)
    where = Path(cluster.nodes[0].data_dir)
    return where if syncs and where.is_dir() else None


@contextlib.contextmanager
def monitor(cluster: Cluster | None) -> Iterator[NoiseMonitor]:
    """Yield a :class:`NoiseMonitor` (not started) whose echo answers through ``cluster``'s
    Toxiproxy (a proxy with no toxic), or over plain loopback without a cluster or when
    the proxy cannot be made; the echo server and the proxy are removed on the way out."""
    echo = EchoServer()
    proxy, tp = None, None
    try:
        port, via = echo.port, "loopback"
        if cluster is not None and cluster.toxiproxy_port:
            tp = toxiproxy.Toxiproxy(cluster.toxiproxy_port)
            name = f"noise-echo-{os.getpid()}-{echo.port}"
            try:
                (listen,) = allocate(1, avoid=cluster.reserved_ports())
                tp.create(name, listen, echo.port)
                proxy, port, via = name, listen, "toxiproxy (no toxic)"
            except (ValueError, OSError) as err:
                via = f"loopback (Toxiproxy refused the echo proxy: {err})"
            except Exception as err:  # the HTTP client's own errors: a Toxiproxy gone
                via = f"loopback (Toxiproxy did not answer: {type(err).__name__})"
        yield NoiseMonitor(port, via, server_pids=cluster.pids() if cluster else (),
                           fsync_dir=fsync_dir(cluster) if cluster else None)
    finally:
        if tp is not None:
            if proxy is not None:
                with contextlib.suppress(Exception):
                    tp.delete(proxy)
            tp.close()
        echo.close()

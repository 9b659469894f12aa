"""Servers that ask for a password, started by the tests themselves: what a user's own store
looks like to replicalab (it did not start them and must log in).

* :func:`redis_requirepass`: one redis-server with ``requirepass``; the URL selects database 2.
* :func:`etcd_with_auth`: one etcd member with authentication on; user ``prober`` may only
  read and write keys under ``replicalab/`` (so a probe writing elsewhere fails loudly).
* :func:`postgres_role`: a login role with a password (scram-sha-256) and its own database
  on a running PostgreSQL cluster (the shared test cluster): pg_hba gets one rule for that
  role, ahead of the cluster's trust rule, on every node, and the servers reload it.

Every server is stopped (and its directory removed) when the context ends; each logs to a
file the tests read back to check that no secret was written there.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

from replicalab.cluster import process
from replicalab.cluster.ports import allocate, wait_listening
from replicalab.cluster.state import Cluster
from servers import server_missing, shared_root

SECRET = "s3cr3t-Hunter2-x9"
"""The password every server here asks for: no run directory, terminal or log may show it."""


@dataclass
class AuthServer:
    """A started server: the URL with the password, the one without, and its log files."""

    url: str
    logs: list[Path]
    port: int


@contextmanager
def redis_requirepass() -> Iterator[AuthServer]:
    """Yield a redis-server with requirepass SECRET; the URL names database 2."""
    if shutil.which("redis-server") is None:
        server_missing("redis-server", "not installed")
    root = shared_root("replicalab-auth-redis-")
    (port,) = allocate(1)
    conf = root / "redis.conf"  # the password in a file, not on the command line
    conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {root}\nsave \"\"\nappendonly no\n"
                    f"requirepass {SECRET}\n")
    log = root / "server.log"
    pid = process.start(["redis-server", str(conf)], log)
    try:
        if not wait_listening(port, 20):
            server_missing("redis-server with requirepass", log.read_text()[-300:])
        yield AuthServer(f"redis://:{SECRET}@127.0.0.1:{port}/2", [log], port)
    finally:
        process.stop(pid)
        shutil.rmtree(root, ignore_errors=True)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _etcd_admin(port: int, token: str, path: str, body: dict) -> dict:
    headers = {"Authorization": token} if token else {}
    r = httpx.post(f"http://127.0.0.1:{port}{path}", json=body, headers=headers, timeout=5)
    r.raise_for_status()
    return r.json()


@contextmanager
def etcd_with_auth() -> Iterator[AuthServer]:
    """Yield one etcd member with auth on: root (password SECRET+"root") and prober
    (password SECRET, read-write on ``replicalab/`` only)."""
    if shutil.which("etcd") is None:
        server_missing("etcd", "not installed")
    root = shared_root("replicalab-auth-etcd-")
    client, peer = allocate(2)
    log = root / "server.log"
    pid = process.start(["etcd", "--name", "n0", "--data-dir", str(root / "data"),
                         "--listen-client-urls", f"http://127.0.0.1:{client}",
                         "--advertise-client-urls", f"http://127.0.0.1:{client}",
                         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                         "--initial-cluster", f"n0=http://127.0.0.1:{peer}",
                         "--logger", "zap", "--log-outputs", "stderr"], log)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                _etcd_admin(client, "", "/v3/maintenance/status", {})
                break
            except httpx.HTTPError as err:
                if time.monotonic() > deadline:
                    server_missing("etcd", f"{err}; {log.read_text()[-300:]}")
                time.sleep(0.1)
        for path, body in [
            ("/v3/auth/role/add", {"name": "root"}),
            ("/v3/auth/user/add", {"name": "root", "password": SECRET + "root"}),
            ("/v3/auth/user/grant", {"user": "root", "role": "root"}),
            ("/v3/auth/role/add", {"name": "prober"}),
            ("/v3/auth/role/grant", {"name": "prober", "perm": {
                "permType": "READWRITE", "key": _b64("replicalab/"),
                "range_end": _b64("replicalab0")}}),
            ("/v3/auth/user/add", {"name": "prober", "password": SECRET}),
            ("/v3/auth/user/grant", {"user": "prober", "role": "prober"}),
            ("/v3/auth/enable", {}),
        ]:
            _etcd_admin(client, "", path, body)
        yield AuthServer(f"etcd://prober:{SECRET}@127.0.0.1:{client}", [log], client)
    finally:
        process.stop(pid)
        shutil.rmtree(root, ignore_errors=True)


def etcd_keys(port: int) -> list[str]:
    """Return every key of the etcd at ``port`` (as root)."""
    token = _etcd_admin(port, "", "/v3/auth/authenticate",
                        {"name": "root", "password": SECRET + "root"})["token"]
    data = _etcd_admin(port, token, "/v3/kv/range",
                       {"key": _b64("\0"), "range_end": _b64("\0"), "keys_only": True})
    return [base64.b64decode(kv["key"]).decode() for kv in data.get("kvs", [])]


HBA_RULE = "host all prober 127.0.0.1/32 scram-sha-256\n"


@contextmanager
def postgres_role(cluster: Cluster) -> Iterator[AuthServer]:
    """Yield the URL of role ``prober`` (password SECRET, database ``probedb``) on
    ``cluster``, whose nodes now ask that role for its password; undone at the end."""
    primary = cluster.nodes[0]
    admin = f"host=127.0.0.1 port={primary.port} user=postgres dbname=postgres"
    hba = [Path(n.data_dir).absolute() / "pgdata" / "pg_hba.conf" for n in cluster.nodes]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS probedb")
        conn.execute("DROP ROLE IF EXISTS prober")
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(f"CREATE ROLE prober LOGIN PASSWORD '{SECRET}'")
        conn.execute("CREATE DATABASE probedb OWNER prober")
    wait_replayed(cluster)  # a probe's first read at a standby must find the database
    originals = [p.read_text() for p in hba]
    try:
        for p, text in zip(hba, originals, strict=True):
            p.write_text(HBA_RULE + text)
        _reload(cluster)
        logs = [Path(n.data_dir) / "server.log" for n in cluster.nodes]
        yield AuthServer(cluster.url.replace("postgresql://postgres@",
                                             f"postgresql://prober:{SECRET}@")
                         .replace("/postgres?", "/probedb?"),
                         [p for p in logs if p.exists()], primary.port)
    finally:
        for p, text in zip(hba, originals, strict=True):
            p.write_text(text)
        _reload(cluster)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS probedb WITH (FORCE)")
            conn.execute("DROP ROLE IF EXISTS prober")


def wait_replayed(cluster: Cluster, timeout_s: float = 60.0) -> None:
    """Wait until every standby of ``cluster`` has replayed the primary's WAL as it is now
    (a database or table just created there exists on them too); fail after ``timeout_s``.
    Without it a probe read "database probedb does not exist" at a standby on a busy
    machine."""
    def query(port: int, sql: str, *args: object) -> object:
        with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            return conn.execute(sql, args or None).fetchone()[0]  # type: ignore[index]

    lsn = str(query(cluster.nodes[0].port, "SELECT pg_current_wal_lsn()"))
    standbys = [n for n in cluster.nodes[1:]
                if query(n.port, "SELECT pg_is_in_recovery()")]
    deadline = time.monotonic() + timeout_s
    for n in standbys:
        while not query(n.port, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", lsn):
            assert time.monotonic() < deadline, f"standby n{n.index} did not replay {lsn}"
            time.sleep(0.05)


def _reload(cluster: Cluster) -> None:
    for n in cluster.nodes:
        with psycopg.connect(f"host=127.0.0.1 port={n.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


@contextmanager
def redis_tls() -> Iterator[tuple[AuthServer, Path]]:
    """Yield a redis-server that speaks only TLS (and asks for SECRET), with a self-signed
    certificate for 127.0.0.1 made by openssl, and the path of that certificate (the CA a
    client must trust)."""
    if shutil.which("redis-server") is None or shutil.which("openssl") is None:
        server_missing("redis-server with TLS (and openssl)", "not installed")
    root = shared_root("replicalab-auth-tls-")
    cert, key = root / "cert.pem", root / "key.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                           "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj",
                           "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                          capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        server_missing("a self-signed certificate", made.stderr[-300:])
    (port,) = allocate(1)
    conf = root / "redis.conf"
    conf.write_text(f"port 0\ntls-port {port}\nbind 127.0.0.1\ndir {root}\nsave \"\"\n"
                    f"tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {cert}\n"
                    f"tls-auth-clients no\nrequirepass {SECRET}\n")
    log = root / "server.log"
    pid = process.start(["redis-server", str(conf)], log)
    try:
        if not wait_listening(port, 20):
            server_missing("redis-server with TLS", log.read_text()[-300:])
        yield AuthServer(f"rediss://:{SECRET}@127.0.0.1:{port}/3", [log], port), cert
    finally:
        process.stop(pid)
        shutil.rmtree(root, ignore_errors=True)

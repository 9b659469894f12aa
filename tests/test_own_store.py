"""Probing a store replicalab did not start, as a user would: servers that ask for a
password (redis-server with requirepass, database 2; a PostgreSQL role with a password; an
etcd with authentication), `replicalab probe` (staleness) and `probe --workload register`
then `replicalab check` through the CLI. Each run logs in, keeps to its key prefix (each
server refuses keys outside ``replicalab/``: Redis by an ACL key pattern, PostgreSQL by a
row-level security policy, etcd by a role's key range), leaves no key behind, and shows the
password nowhere: not in any file of its run directory, not on the terminal, not in the
servers' logs. And a redis-server that speaks only TLS passes the conformance suite over
``rediss://``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from typer.testing import CliRunner

from authservers import (
    SECRET,
    AuthServer,
    etcd_keys,
    etcd_with_auth,
    postgres_role,
    redis_requirepass,
    wait_replayed,
)
from replicalab.cli.main import app
from replicalab.history import load_history
from replicalab.stores import open_store
from replicalab.stores.postgres import _CREATE, TABLE

pytestmark = pytest.mark.integration


def cli(*args: str) -> tuple[int, str]:
    """Run one command in this process; return its exit code and everything it printed."""
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    return res.exit_code, res.stdout + res.stderr


def probe_check_and_grep(server: AuthServer, out: Path, keys_left) -> None:
    """Run the staleness probe, the register probe and check on ``server``; assert each
    logged in, wrote only under its prefix (the server refuses the rest: no op failed with
    an error), left no key, and that the password shows nowhere."""
    printed = []
    code, text = cli("probe", "--store", server.url, "--duration", "1500ms",
                     "--write-interval", "200ms", "--out", str(out))
    printed.append(text)
    assert code == 0, text
    assert "keys: under replicalab/" in text and "removed at the end" in text
    code, text = cli("probe", "--store", server.url, "--workload", "register", "--ops", "120",
                     "--consistency", "consistent", "--duration", "30s", "--out", str(out),
                     "--json")
    printed.append(text)
    assert code == 0, text
    runs = sorted(out.iterdir())
    assert len(runs) == 2
    for run in runs:
        config = json.loads((run / "config.json").read_text())
        assert config["error"] == "" and config["keys"]["error"] == "", config
        assert config["keys"]["written"] == config["keys"]["removed"] > 0, config["keys"]
        h, _ = load_history(run)
        failed = [i for i in range(len(h)) if h.types()[i] != 1 and h.process[i] >= 0]
        # only compare-and-sets whose condition was false: nothing refused, nothing lost
        assert all(h.types()[i] == 2 and h.f[i] == h.f_code("cas") for i in failed), [
            (h.f[i], h.error[i]) for i in failed]
        refused = [e for e in h.error if any(w in e for w in ("NOPERM", "permission",
                                                              "security", "denied"))]
        assert refused == []
    code, text = cli("check", str(runs[1]))
    printed.append(text)
    assert code == 0, text
    assert "NOT" not in text and "linearizable" in text
    assert keys_left() == []
    # the password, nowhere
    files = [p for p in out.rglob("*") if p.is_file()] + list(server.logs)
    holding = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert holding == [], holding
    assert not [p for p in out.rglob("*") if SECRET in str(p)]  # nor in a name
    assert all(SECRET not in t for t in printed), printed
    assert any(":***@" in t for t in printed)  # the URL shown, with its password masked


def test_redis_with_requirepass_on_database_2(tmp_path: Path):
    with redis_requirepass() as server:
        admin = redis.Redis(port=server.port, password=SECRET, db=2)
        # the load generator's fast client logs in and selects the database too
        code, text = cli("load", "run", "--store", server.url, "--client", "fast", "--rate",
                         "200", "--duration", "1s", "--out", str(tmp_path / "load"), "--json")
        assert code == 0, text
        assert json.loads(text[text.index("{"):])["steps"][0]["errors"] == [], text
        assert SECRET not in text and admin.dbsize() > 0  # load keeps its keys (no prefix)
        admin.flushdb()
        # the default user (requirepass) may only touch keys under the probe's prefix
        admin.execute_command("ACL", "SETUSER", "default", "resetkeys", "~replicalab/*")
        both = [redis.Redis(port=server.port, password=SECRET, db=d) for d in (0, 2)]

        def keys_left() -> list:
            return [k for r in both for k in r.scan_iter()]

        # the URL's database is the one written to
        async def write_one() -> None:
            store = open_store(server.url)
            try:
                await (await store.connect()).write({"replicalab/t/item/a": "1"})
            finally:
                await store.close()

        asyncio.run(write_one())
        assert both[1].get("replicalab/t/item/a") == b"1" and both[0].dbsize() == 0
        both[1].delete("replicalab/t/item/a")
        probe_check_and_grep(server, tmp_path / "runs", keys_left)
        # --prefix and --keep: the keys stay, under that prefix only
        code, text = cli("probe", "--store", server.url, "--duration", "500ms",
                         "--write-interval", "100ms", "--prefix", "replicalab/kept/",
                         "--keep", "--out", str(tmp_path / "kept"))
        assert code == 0, text
        assert "keys: 1 under replicalab/kept/ kept (--keep)" in text
        assert keys_left() == [b"replicalab/kept/probe/item/value"]


@pytest.fixture
def pg_role(postgres_dc3) -> Iterator[AuthServer]:
    with postgres_role(postgres_dc3[0]) as server:
        yield server


def test_postgres_role_with_a_password(pg_role: AuthServer, postgres_dc3, tmp_path: Path):
    primary = postgres_dc3[0].nodes[0]
    admin = f"host=127.0.0.1 port={primary.port} user=postgres dbname=probedb"
    with psycopg.connect(admin, autocommit=True) as conn:
        # the table the adapter would create, made by the superuser with a policy: the
        # role may only hold rows under the probe's prefix
        conn.execute(_CREATE)
        conn.execute(f"GRANT ALL ON {TABLE} TO prober")
        conn.execute(f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY")
        conn.execute(f"CREATE POLICY under_prefix ON {TABLE} TO prober "
                     "USING (domain LIKE 'replicalab/%') WITH CHECK (domain LIKE 'replicalab/%')")
    wait_replayed(postgres_dc3[0])  # the table and its policy on the standbys too

    def keys_left() -> list:
        with psycopg.connect(admin) as conn:
            return conn.execute(f"SELECT domain, item, attr FROM {TABLE}").fetchall()

    probe_check_and_grep(pg_role, tmp_path / "runs", keys_left)


def test_etcd_with_authentication(tmp_path: Path):
    with etcd_with_auth() as server:
        probe_check_and_grep(server, tmp_path / "runs", lambda: etcd_keys(server.port))


def test_redis_over_tls_passes_the_conformance_suite():
    from authservers import redis_tls
    from replicalab.testing import run_conformance

    with redis_tls() as (server, ca):
        # without the CA the server's certificate is refused, in one line naming the URL
        with pytest.raises(ValueError, match=r"rediss://:\*\*\*@.*CERTIFICATE_VERIFY_FAILED"):
            asyncio.run(_connect(server.url))
        report = run_conformance(f"{server.url}?tls_ca={ca}")
        # every check of the suite ran and passed (2 on transactions), but client-region:
        # one Redis is one region, with nowhere else to place a client
        passing = ("describes-itself", "absent-reads-none", "consistent-read",
                   "eventual-read", "multi-read", "conditional-write", "atomic-multi-write",
                   "delete", "timeout-is-unknown", "txn-own-writes", "txn-atomic")
        assert report.ok and {r.name: r.status for r in report.results} == {
            **dict.fromkeys(passing, "passed"), "client-region": "skipped"}, report.text()


async def _connect(url: str) -> None:
    store = open_store(url)
    try:
        await store.connect()
    finally:
        await store.close()

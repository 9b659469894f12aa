"""PostgreSQL: node 0 is the primary; every other node is a hot standby cloned from it with
``pg_basebackup -R``, whose ``primary_conninfo`` goes through its own Toxiproxy proxy (so
the WAL stream, and the standby's replies, carry the region delay).

Lab settings, chosen for speed and written to the primary's ``postgresql.conf`` (standbys
inherit them through the base backup): ``fsync = off`` (a killed process loses nothing, the
OS still holds its writes; only an OS crash would), ``shared_buffers = 32MB``, trust
authentication for TCP connections from 127.0.0.1 only, no Unix socket.
``synchronous_standby_names = 'ANY n (*)'`` names every standby and the server default
``synchronous_commit = local`` makes no commit wait; a session asks to wait with
``synchronous_commit = on | remote_write | remote_apply`` (the ``postgresql://`` URL's
parameter), and then waits for all n standbys.

The pid recorded per node is a small ``sh`` supervisor sharing its process group with the
postmaster (see ``_SUPERVISOR``). PostgreSQL refuses to run as root: when replicalab runs as
root, the servers, ``initdb`` and ``pg_basebackup`` run as the unprivileged user
``$REPLICALAB_PG_USER`` (default ``postgres``, which Debian's package creates) through
``setpriv``; data directories belong to that user.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from replicalab.cluster import placement, postgres_hosts, process
from replicalab.cluster.placement import address
from replicalab.cluster.state import Cluster, Node, settings, store_url

if TYPE_CHECKING:
    from replicalab.cluster.links import LinkMaker

PG_LIB = Path("/usr/lib/postgresql")  # Debian: /usr/lib/postgresql/<major>/bin
BINARIES = ("initdb", "postgres", "pg_basebackup")
DB_USER = "postgres"  # the database superuser initdb creates
_INSTALL = "run scripts/install-servers.sh (apt-get install postgresql)"


def bin_dir() -> Path | None:
    """Return the directory holding the PostgreSQL server binaries, or None.

    ``$REPLICALAB_PG_BIN`` if set (and then only it), else the newest
    ``/usr/lib/postgresql/<major>/bin``, else the directory of ``postgres`` on PATH.
    """
    env = os.environ.get("REPLICALAB_PG_BIN")
    if env:
        return Path(env)
    found = sorted(PG_LIB.glob("*/bin/postgres"),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.parent.name)])
    if found:
        return found[-1].parent
    on_path = shutil.which("postgres")
    return Path(on_path).resolve().parent if on_path else None


def _lab_conf(standbys: int) -> str:
    sync = f"'ANY {standbys} (*)'" if standbys else "''"
    return f"""
# --- replicalab lab settings (fast, not durable against an OS crash) ---
unix_socket_directories = ''
wal_level = replica
max_wal_senders = 20
wal_keep_size = '256MB'
hot_standby = on
wal_receiver_status_interval = '1s'
synchronous_standby_names = {sync}
synchronous_commit = local
fsync = off
shared_buffers = '32MB'
max_connections = 200
"""


_HBA = """# replicalab: trust TCP connections from 127.0.0.1 only (no Unix socket is opened)
host all all 127.0.0.1/32 trust
host replication all 127.0.0.1/32 trust
"""


# The recorded pid is this shell; the postmaster shares its process group, so a signal to
# the group reaches both. SIGTERM there would be PostgreSQL's "smart" shutdown, which waits
# for every client to disconnect; the shell turns it into a fast shutdown (SIGINT). SIGKILL
# kills both and the postmaster's children exit when they see it gone.
_SUPERVISOR = """"$@" &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null' TERM INT
rc=0
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done
exit "$rc"
"""


# what a new postmaster says when the killed one has not quite gone
_KILLED_SERVER_STILL_THERE = ("another postmaster", "pre-existing shared memory block")


def _last_line(log: Path) -> str:
    """Return the last non-empty line of ``log`` (the server's complaint) and its path."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        lines = []
    return f"{lines[-1] if lines else 'no output'} (log: {log})"


class PostgresDriver:
    """Starts PostgreSQL primary + hot standbys from Debian's postgresql package."""

    kind = "postgres"
    ports_per_node = 1
    host_binaries = ("setpriv",)  # on hosts: the server from /usr/lib/postgresql (postgresql)

    # --- who runs the servers -------------------------------------------------------------

    def _user(self) -> pwd.struct_passwd | None:
        """Return the unprivileged account servers run as when we are root (None if not root)."""
        if os.geteuid() != 0:
            return None
        name = os.environ.get("REPLICALAB_PG_USER", "postgres")
        try:
            return pwd.getpwnam(name)
        except KeyError:
            raise ValueError(f"PostgreSQL refuses to run as root and user {name!r} does not "
                             f"exist; create it (useradd --system {name}) or set "
                             "REPLICALAB_PG_USER to an unprivileged user") from None

    def _as_user(self, argv: list[str]) -> list[str]:
        user = self._user()
        if user is None:
            return argv
        return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                "--init-groups", "--", *argv]

    def _env(self) -> dict[str, str]:
        user = self._user()
        return {} if user is None else {"HOME": user.pw_dir, "USER": user.pw_name,
                                        "LOGNAME": user.pw_name}

    def _own(self, path: Path) -> None:
        user = self._user()
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)

    def check_installed(self) -> None:
        """Raise ValueError naming a missing binary (or run-as user) and how to fix it."""
        where = bin_dir()
        for name in BINARIES:
            if where is None or not os.access(where / name, os.X_OK):
                place = f"in {where}" if where else f"under {PG_LIB} or on PATH"
                raise ValueError(f"PostgreSQL server binary {name!r} not found {place}; "
                                 f"{_INSTALL}")
        if self._user() is not None and shutil.which("setpriv") is None:
            raise ValueError("setpriv is needed to run PostgreSQL as an unprivileged user "
                             "when replicalab runs as root; apt-get install util-linux")

    def _bin(self, name: str) -> str:
        where = bin_dir()
        if where is None:
            raise ValueError(f"PostgreSQL server binary {name!r} not found; {_INSTALL}")
        return str(where / name)

    # --- data directories -------------------------------------------------------------------

    @staticmethod
    def _dir(node: Node) -> Path:
        # absolute: the servers run with another working directory (the default root is
        # the relative .replicalab)
        return Path(node.data_dir).absolute()

    def _pgdata(self, node: Node) -> Path:
        return self._dir(node) / "pgdata"

    def _prepare_dir(self, node: Node) -> Path:
        """Create ``<node dir>/pgdata`` (empty, mode 0700, owned by the server user)."""
        node_dir = self._dir(node)
        node_dir.mkdir(parents=True, exist_ok=True)
        node_dir.chmod(0o755)
        pgdata = self._pgdata(node)
        shutil.rmtree(pgdata, ignore_errors=True)  # left over from an interrupted start
        pgdata.mkdir(mode=0o700)
        self._own(pgdata)
        probe = subprocess.run(self._as_user(["test", "-w", str(pgdata)]), env=self._env_all(),
                               capture_output=True, check=False)
        if probe.returncode != 0:
            user = self._user()
            raise ValueError(f"user {user.pw_name if user else '?'!r} that runs PostgreSQL "
                             f"cannot reach {pgdata} (a parent directory is not searchable "
                             "by others, e.g. mode 0700); use a cluster root under a "
                             "world-searchable directory")
        return pgdata

    def _env_all(self) -> dict[str, str]:
        return {**os.environ, **self._env()}

    def _run(self, argv: list[str], log: Path, what: str, timeout_s: float = 120.0) -> None:
        """Run a setup command as the server user; ValueError pointing at its log on failure."""
        with log.open("ab") as out:
            try:
                done = subprocess.run(self._as_user(argv), stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=self._env_all(),
                                      cwd=log.parent, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                raise ValueError(f"{what} took more than {timeout_s:.0f} s; see {log}") from None
        if done.returncode != 0:
            raise ValueError(f"{what} failed (exit {done.returncode}): {_last_line(log)}")

    def _init_primary(self, c: Cluster, node: Node) -> None:
        if placement.on_hosts(c):
            pgdata_ = postgres_hosts.prepare_dir(c, node)
            postgres_hosts.run_as_user(
                c, node, [self._bin_of(c, node, "initdb"), "-D", pgdata_, "-U", DB_USER,
                          "--auth=trust", "--no-locale", "-E", "UTF8", "--no-sync"],
                "initdb.log", f"initdb of n{node.index}")
            postgres_hosts.configure_primary(c, node, _lab_conf(len(c.nodes) - 1))
            return
        pgdata = self._prepare_dir(node)
        log = self._dir(node) / "initdb.log"
        self._run([self._bin("initdb"), "-D", str(pgdata), "-U", DB_USER, "--auth=trust",
                   "--no-locale", "-E", "UTF8", "--no-sync"], log, f"initdb of n{node.index}")
        with (pgdata / "postgresql.conf").open("a") as conf:
            conf.write(_lab_conf(len(c.nodes) - 1))
        (pgdata / "pg_hba.conf").write_text(_HBA)

    def _bin_of(self, c: Cluster, node: Node, name: str) -> str:
        """Return binary ``name``'s path where ``node`` runs (here or on its host)."""
        if placement.on_hosts(c):
            return f"{postgres_hosts.bin_dir(c, node)}/{name}"
        return self._bin(name)

    def _clone_standby_on_host(self, c: Cluster, node: Node, link: tuple[str, int]) -> None:
        pgdata = postgres_hosts.prepare_dir(c, node)
        conninfo = (f"host={link[0]} port={link[1]} user={DB_USER} "
                    f"application_name=n{node.index}")
        postgres_hosts.run_as_user(
            c, node, [self._bin_of(c, node, "pg_basebackup"), "-d", conninfo, "-D", pgdata,
                      "-R", "-X", "stream", "-c", "fast", "--no-sync"],
            "basebackup.log", f"pg_basebackup of n{node.index}")

    def _clone_standby(self, node: Node, link_port: int) -> None:
        pgdata = self._prepare_dir(node)
        log = self._dir(node) / "basebackup.log"
        conninfo = (f"host=127.0.0.1 port={link_port} user={DB_USER} "
                    f"application_name=n{node.index}")
        self._run([self._bin("pg_basebackup"), "-d", conninfo, "-D", str(pgdata), "-R",
                   "-X", "stream", "-c", "fast", "--no-sync"], log,
                  f"pg_basebackup of n{node.index}")

    # --- processes ---------------------------------------------------------------------------

    def _argv(self, c: Cluster, node: Node) -> list[str]:
        server = [self._bin_of(c, node, "postgres"), "-D", str(self._pgdata(node)),
                  "-p", str(node.port), "-c", f"listen_addresses={address(node)}",
                  "-c", f"cluster_name=n{node.index}"]
        for key, value in settings(c).items():  # e.g. fsync=on over the lab's fsync=off
            server += ["-c", f"{key}={value}"]
        return ["sh", "-c", _SUPERVISOR, f"postgres-n{node.index}", *server]

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        """Start (or restart, after a crash: recovery runs first) one server from its data
        directory and wait until it accepts queries."""
        if placement.on_hosts(c):
            host = placement.host_of(c, node)
            placement.start(c, node, postgres_hosts.as_user(host, self._argv(c, node)))
            if not self._wait_ready(c, node, 60.0):
                raise ValueError(f"postgres n{node.index} did not accept connections on "
                                 f"{address(node)}:{node.port}; see {node.data_dir}/"
                                 f"server.log on host {host.spec.name}")
            return
        log = self._dir(node) / "server.log"
        deadline = time.monotonic() + 30.0
        while True:
            self._wait_reaped(node, deadline)
            offset = log.stat().st_size if log.exists() else 0
            node.pid = process.start(self._as_user(self._argv(c, node)), log,
                                     cwd=self._dir(node), env=self._env())
            if self._wait_ready(c, node, 60.0):
                return
            if process.alive(node.pid) or time.monotonic() > deadline:
                break
            with log.open("rb") as f:
                f.seek(offset)
                said = f.read().decode(errors="replace")
            if not any(x in said for x in _KILLED_SERVER_STILL_THERE):
                break
            # the killed server was still exiting (its pid still looked alive, or its
            # shared memory was still attached): try again
            time.sleep(0.2)
        process.stop(node.pid)  # not yet saved in cluster.json: `down` would miss it
        raise ValueError(f"postgres n{node.index} did not accept connections on port "
                         f"{node.port}: {_last_line(log)}")

    def _wait_reaped(self, node: Node, deadline: float) -> None:
        """Wait while the previous postmaster (after a crash) is an unreaped zombie.

        A killed postmaster whose parent is gone waits for init to reap it; until then its
        pid exists and the new server would take it for a live postmaster and refuse.
        """
        try:
            old = int((self._pgdata(node) / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        while (time.monotonic() < deadline and Path(f"/proc/{old}").exists()
               and not process.alive(old)):
            time.sleep(0.05)

    @staticmethod
    def _connect(node: Node, timeout_s: int = 2) -> psycopg.Connection:
        return psycopg.connect(host=address(node), port=node.port, user=DB_USER,
                               dbname="postgres",
                               connect_timeout=timeout_s, autocommit=True,
                               application_name="replicalab-cluster")

    def _wait_ready(self, c: Cluster, node: Node, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not placement.running(c, node):
                return False
            try:
                with self._connect(node) as conn:
                    conn.execute("SELECT 1")
                return True
            except psycopg.Error:
                time.sleep(0.1)
        return False

    def start(self, c: Cluster, links: LinkMaker, root: Path) -> None:
        """Start the primary, then clone and start each standby through its replication
        link; return when every standby streams from the primary."""
        primary = c.nodes[0]
        primary.role = "primary"
        self._init_primary(c, primary)
        self.start_node(c, primary, root)
        c.save(root)
        for node in c.nodes[1:]:
            node.role = "standby"
            host, port = links.peer(f"repl-{node.index}", node, primary)
            node.extra["primary_link_port"] = port
            if placement.on_hosts(c):
                self._clone_standby_on_host(c, node, (host, port))
            else:
                self._clone_standby(node, port)
            self.start_node(c, node, root)
            c.save(root)
        self._wait_streaming(c)

    def _wait_streaming(self, c: Cluster, timeout_s: float = 60.0) -> None:
        want = {f"n{n.index}" for n in c.nodes[1:]}
        if not want:
            return
        deadline = time.monotonic() + timeout_s
        streaming: set[str] = set()
        while time.monotonic() < deadline:
            try:
                with self._connect(c.nodes[0]) as conn:
                    rows = conn.execute("SELECT application_name FROM pg_stat_replication "
                                        "WHERE state = 'streaming'").fetchall()
                streaming = {r[0] for r in rows}
                if want <= streaming:
                    return
            except psycopg.Error:
                pass
            time.sleep(0.1)
        late = sorted(want - streaming)[0]
        log = self._dir(c.nodes[int(late[1:])]) / "server.log"
        said = f"see {log} on its host" if placement.on_hosts(c) else _last_line(log)
        raise ValueError(f"standby {late} did not stream from the primary within "
                         f"{timeout_s:.0f} s: {said}")

    def url(self, c: Cluster) -> str:
        """Return ``postgresql://postgres@primary/postgres?standbys=...&regions=...``."""
        return store_url(c, "postgresql", "standbys", host=address, prefix=f"{DB_USER}@",
                         path="/postgres")

    def status(self, c: Cluster) -> list[dict[str, str]]:
        """Return role and replication state per node: on the primary each standby's state
        and replay lag (pg_stat_replication); on a standby its WAL receiver state, bytes not
        yet replayed relative to the primary's WAL position, and time since its last replay."""
        rows = []
        primary_lsn = None
        for node in c.nodes:
            row = {"node": f"n{node.index}", "region": node.region,
                   "pid": str(placement.pid(node)), "port": str(node.port), "role": node.role}
            rows.append(row)
            try:
                with self._connect(node) as conn:
                    standby = conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
                    if not standby:
                        primary_lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
                        reps = conn.execute(
                            "SELECT application_name, state, sync_state, "
                            "COALESCE(round(extract(epoch FROM replay_lag) * 1000), 0) "
                            "FROM pg_stat_replication ORDER BY application_name").fetchall()
                        parts = [f"{a} {s} ({sy}, replay lag {lag} ms)"
                                 for a, s, sy, lag in reps]
                        row["state"] = (f"primary, {len(reps)} standbys"
                                        + (": " + "; ".join(parts) if parts else ""))
                        continue
                    rec = conn.execute(
                        "SELECT (SELECT status FROM pg_stat_wal_receiver), "
                        "pg_last_wal_replay_lsn(), COALESCE(round(extract(epoch FROM "
                        "now() - pg_last_xact_replay_timestamp()) * 1000), -1)").fetchone()
                    status, replay_lsn, since_ms = rec
                    behind = ""
                    if primary_lsn is not None and replay_lsn is not None:
                        diff = conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)",
                                            (str(primary_lsn), str(replay_lsn))).fetchone()[0]
                        behind = f", {max(int(diff), 0)} bytes not replayed"
                    last = f", last replayed commit {since_ms} ms ago" if since_ms >= 0 else ""
                    row["state"] = f"standby, {status or 'no WAL receiver'}{behind}{last}"
            except psycopg.Error as err:
                row["state"] = f"unreachable ({type(err).__name__})"
        return rows

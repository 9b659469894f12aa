"""``replicalab cluster up|status|down``: real local clusters with emulated WAN links."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.words import plural
from replicalab.cluster import base
from replicalab.cluster import kinds as store_kinds
from replicalab.cluster.state import load, names, state_root

cluster_app = typer.Typer(help="Start, inspect and stop real local clusters.",
                          no_args_is_help=True)


@cluster_app.command("up")
def up(
    kind: Annotated[str, typer.Argument(help=" | ".join(store_kinds.names()) + ".")],
    nodes: Annotated[int, typer.Option(help="Number of servers.")] = 3,
    regions: Annotated[str, typer.Option(help="Region set: dc3, aws5 or lan.")] = "dc3",
    name: Annotated[str | None, typer.Option(help="Cluster name (default KIND-REGIONS).")
                    ] = None,
    base_port: Annotated[int | None, typer.Option(help="First of consecutive ports to use.")
                         ] = None,
    client_region: Annotated[str | None, typer.Option(
        help="Also route client links through proxies, as from this region.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    power_loss_fs: Annotated[bool, typer.Option(
        "--power-loss-fs", help="Put each node's data directory on a file system that keeps "
        "writes in memory until fsync, so that a power-loss fault can drop them (needs FUSE)."
    )] = False,
    setting: Annotated[list[str] | None, typer.Option(
        "--set", help="Server setting KEY=VALUE over the lab's defaults, repeatable: "
        "appendfsync=always (Redis), fsync=on (PostgreSQL), forceSync=yes (ZooKeeper).")
    ] = None,
    hosts: Annotated[Path | None, typer.Option(
        help="Inventory (TOML) of the hosts to run on, one node per host, over SSH, or the "
        "name of a set `replicalab hosts up` made (docs/hosts.md).")] = None,
) -> None:
    """Start a cluster on 127.0.0.1 whose replication links carry the region delays.

    Example: replicalab cluster up redis --nodes 3 --regions dc3

    Example: replicalab cluster up redis --power-loss-fs --set appendfsync=always

    Example: replicalab cluster up etcd --hosts inventory.toml --regions dc3 --name e
    """
    try:
        settings = parse_settings(setting or [])
        root = state_root()
        # a JVM's start says nothing of the next one's: no ETA, the bar moves, the line says
        # what is going on
        with progress_bar(f"cluster up {kind}", not as_json, estimates=False) as tick:
            tick(0.0, f"starting {plural(nodes, kind + ' node')} and their links on {regions}")
            with _watch_start(root / "clusters" / (name or f"{kind}-{regions}"), tick):
                c = base.up(kind, nodes, regions, name, base_port, client_region,
                            root=root, settings=settings, power_loss_fs=power_loss_fs,
                            hosts=hosts)
    except ValueError as err:
        fail(str(err))
    base.keep(c)  # the cluster outlives this command: `cluster down` stops it
    if as_json:
        sys.stdout.write(json.dumps({"name": c.name, "url": c.url}) + "\n")
        return
    say(f"cluster {c.name}: {plural(len(c.nodes), c.kind + ' node')} in {c.regions}, "
        f"{plural(len(c.links), 'proxied link')}")
    say(f"store URL: {c.url}")
    say(f"probe it:  replicalab probe --store '{c.url}' --duration 60s")
    say(f"stop it:   replicalab cluster down {c.name}")


def start_phase(saved: dict[str, Any] | None, waited_s: float) -> tuple[float, str]:
    """Return (fraction done, what is being done) of a cluster being started, from its
    ``cluster.json`` as saved so far (None: not yet) and the seconds since its last node
    started: Toxiproxy, then each node's process, then the wait until they answer (a JVM
    takes seconds: the bar creeps on, never reaching the end before they do)."""
    if saved is None:
        return 0.02, "preparing"
    nodes = saved.get("nodes", [])
    started = sum(1 for n in nodes if n.get("pid"))
    if not saved.get("toxiproxy_pid"):
        return 0.05, "starting Toxiproxy"
    if started < len(nodes):
        n = nodes[started]
        return (0.1 + 0.4 * started / max(len(nodes), 1),
                f"starting node n{n['index']} ({n['region']}), {started} of {len(nodes)} "
                "started")
    creep = 1 - math.exp(-waited_s / 10.0)
    # the text changes every 5 s, so that piped output says the wait goes on
    so_far = f", {int(waited_s // 5) * 5}s so far" if waited_s >= 5 else ""
    return (0.5 + 0.45 * creep,
            f"{len(nodes)} of {len(nodes)} started; waiting until they answer{so_far}")


@contextlib.contextmanager
def _watch_start(directory: Path, tick: Any) -> Iterator[None]:
    """Tell ``tick`` what a cluster being started in ``directory`` is doing, every quarter
    second, from what ``cluster up`` saves as it goes (on a thread: the start blocks)."""
    stop = threading.Event()

    def watch() -> None:
        seen: tuple[int, int] | None = None
        since = time.monotonic()
        while not stop.wait(0.25):
            try:
                saved = json.loads((directory / "cluster.json").read_text())
            except (OSError, ValueError):
                saved = None  # not yet written, or half written
            now = (sum(1 for n in (saved or {}).get("nodes", []) if n.get("pid")),
                   int(bool((saved or {}).get("toxiproxy_pid"))))
            if now != seen:
                seen, since = now, time.monotonic()
            tick(*start_phase(saved, time.monotonic() - since))

    thread = threading.Thread(target=watch, name="cluster-up-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)


def parse_settings(items: list[str]) -> dict[str, str]:
    """Return {key: value} of ``--set KEY=VALUE`` options (ValueError naming a bad one)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"--set {item!r}: write KEY=VALUE, e.g. --set appendfsync=always")
        out[key.strip()] = value.strip()
    return out


@cluster_app.command("status")
def status(
    name: Annotated[str | None, typer.Argument(help="Cluster name (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show each node's role, pid, port and replication state or lag.

    Clusters are found from any directory: their state lives in one directory per user
    ($REPLICALAB_STATE_DIR, else $XDG_STATE_HOME/replicalab, else ~/.local/state/replicalab).

    Example: replicalab cluster status redis-dc3
    """
    root = state_root()
    targets = [name] if name else names(root)
    tables, dead = [], []
    for n in targets:
        try:
            c, rows = base.status(n, root)
        except ValueError as err:
            fail(str(err))
        cols = ["node", "region", "role", "alive", "pid", "port", "state"]
        title = f"{c.name} ({c.kind}, {c.regions}) — {c.url}"
        if base.gone(c):
            dead.append(c.name)
            title += f" — its processes are gone; `replicalab cluster down {c.name}` removes it"
        t = TableData(title, cols, wrap=(6,))
        for row in rows:
            t.add(*(row.get(col, "") for col in cols))
        tables.append(t)
    if as_json:
        sys.stdout.write(json.dumps({"clusters": targets, "gone": dead, "state_dir": str(root),
                                     "tables": [t.to_json() for t in tables]}) + "\n")
    elif not targets:
        say(f"no clusters are up (state in {root})")
    else:
        show(tables)


@cluster_app.command("down")
def down(
    name: Annotated[str | None, typer.Argument(help="Cluster name.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Stop every cluster.")] = False,
) -> None:
    """Stop exactly the processes a cluster started and remove its data (a cluster whose
    processes died: remove what it left).

    Example: replicalab cluster down redis-dc3
    """
    if not name and not all_:
        fail("name a cluster or pass --all")
    root = state_root()
    targets = names(root) if all_ else [name]
    for n in targets:
        try:
            was_gone = base.gone(load(n, root))
            pids = base.down(n, root)
        except ValueError as err:
            fail(str(err))
        if was_gone:
            say(f"{n}: its processes were already gone; removed its state")
        else:
            say(f"{n}: stopped {plural(len(pids), 'process')}")

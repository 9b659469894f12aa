"""Real local clusters with emulated WAN links: :func:`cluster_up` starts one (it outlives
the call), :func:`cluster_status` shows each node's role, pid, port and replication state,
:func:`cluster_down` stops exactly the processes a cluster started. What ``replicalab
cluster up|status|down`` run; clusters are found from any directory (their state lives in
one directory per user)."""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from replicalab.api.errors import ParameterError
from replicalab.api.outcome import Outcome, Table
from replicalab.api.progress import Progress, ticking
from replicalab.api.words import plural


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


def parse_settings(items: Sequence[str]) -> dict[str, str]:
    """Return {key: value} of ``KEY=VALUE`` server settings (ParameterError naming one)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ParameterError("settings", f"{item!r}: write KEY=VALUE, e.g. "
                                             "appendfsync=always")
        out[key.strip()] = value.strip()
    return out


def cluster_up(kind: str, nodes: int = 3, regions: str = "dc3", name: str | None = None,
               base_port: int | None = None, client_region: str | None = None,
               power_loss_fs: bool = False, settings: Sequence[str] = (),
               progress: Progress = None, hosts: str | Path | None = None) -> Outcome:
    """Start a cluster of ``nodes`` servers of ``kind`` on 127.0.0.1 whose replication links
    carry the delays of ``regions`` (through Toxiproxy; ``client_region``: client links
    too, as from that region); ``power_loss_fs``: data directories on a file system that
    keeps writes in memory until fsync; ``settings``: server settings over the lab's
    defaults (``appendfsync=always``); ``hosts``: an inventory (TOML) or a set ``hosts up``
    made, one node per host, over SSH. The cluster outlives this call (``cluster_down``
    stops it); the :class:`Outcome` has its name and store URL."""
    from replicalab.cluster import base
    from replicalab.cluster.state import state_root

    chosen = parse_settings(settings)
    root = state_root()
    # a JVM's start says nothing of the next one's: no ETA, the bar moves, the line says
    # what is going on
    with ticking(f"cluster up {kind}", progress) as tick:
        if tick is not None:
            tick(0.0, f"starting {plural(nodes, kind + ' node')} and their links on "
                      f"{regions}")
        with contextlib.ExitStack() as stack:
            if tick is not None:
                stack.enter_context(_watch_start(root / "clusters" / (name or
                                                                     f"{kind}-{regions}"),
                                                 tick))
            c = base.up(kind, nodes, regions, name, base_port, client_region, root=root,
                        settings=chosen, power_loss_fs=power_loss_fs,
                        hosts=None if hosts is None else Path(hosts))
    base.keep(c)  # the cluster outlives this call: `cluster down` stops it
    return Outcome({"name": c.name, "url": c.url}, remarks=[
        f"cluster {c.name}: {plural(len(c.nodes), c.kind + ' node')} in {c.regions}, "
        f"{plural(len(c.links), 'proxied link')}", f"store URL: {c.url}",
        f"probe it:  replicalab probe --store '{c.url}' --duration 60s",
        f"stop it:   replicalab cluster down {c.name}"])


def cluster_status(name: str | None = None) -> Outcome:
    """Return each cluster's (or ``name``'s) nodes as a table: region, role, alive, pid,
    port, replication state or lag, and its store URL (``urls``, by name, for a script to
    probe it); a cluster whose processes are gone says so."""
    from replicalab.cluster import base
    from replicalab.cluster.state import names, state_root

    root = state_root()
    targets = [name] if name else names(root)
    tables, dead, urls = [], [], {}
    for n in targets:
        c, rows = base.status(n, root)
        urls[c.name] = c.url
        cols = ["node", "region", "role", "alive", "pid", "port", "state"]
        title = f"{c.name} ({c.kind}, {c.regions}) — {c.url}"
        if base.gone(c):
            dead.append(c.name)
            title += f" — its processes are gone; `replicalab cluster down {c.name}` removes it"
        t = Table(title, cols, wrap=(6,))
        for row in rows:
            t.add(*(row.get(col, "") for col in cols))
        tables.append(t)
    return Outcome({"clusters": targets, "urls": urls, "gone": dead, "state_dir": str(root)},
                   tables=tables,
                   remarks=[] if targets else [f"no clusters are up (state in {root})"])


def cluster_down(name: str | None = None, all_clusters: bool = False) -> Outcome:
    """Stop exactly the processes cluster ``name`` (or every one) started and remove its
    data (a cluster whose processes died: remove what it left)."""
    from replicalab.cluster import base
    from replicalab.cluster.state import load, names, state_root

    if not name and not all_clusters:
        raise ParameterError("name", "is missing: name a cluster, or pass {all}",
                             {"all": "all_clusters=True"})
    root = state_root()
    remarks = []
    for n in names(root) if all_clusters else [name]:
        was_gone = base.gone(load(n, root))
        pids = base.down(n, root)
        remarks.append(f"{n}: its processes were already gone; removed its state" if was_gone
                       else f"{n}: stopped {plural(len(pids), 'process')}")
    return Outcome({}, remarks=remarks)


def hosts_up(count: int = 3, name: str = "lab", regions: str = "lan") -> Outcome:
    """Make ``count`` emulated hosts in network namespaces on a bridge (198.18.0.0/15, no
    default route), each with an OpenSSH server and keys made for the set ``name``, taking
    the regions of ``regions`` in turn; return the :class:`Outcome` with the inventory
    (needs root)."""
    from replicalab.cluster.state import state_root
    from replicalab.hosts import emulated

    inv = emulated.up(count, name, state_root(), regions)
    return Outcome(inv.to_json(), remarks=[
        f"hosts {name}: {plural(len(inv.hosts), 'host')} reached over SSH ("
        + ", ".join(f"{h.name} {h.address} {h.region}" for h in inv.hosts) + ")",
        f"inventory: {inv.path}",
        f"use it:    replicalab cluster up redis --hosts {inv.path} --regions {regions}",
        f"remove:    replicalab hosts down {name}"])


def hosts_status(name: str | None = None) -> Outcome:
    """Return each emulated host of set ``name`` (default: every set) as a table: address,
    region, namespace and whether it answers over SSH."""
    from replicalab.cluster.state import state_root
    from replicalab.hosts import emulated

    root = state_root()
    found = [emulated.status(n, root) for n in ([name] if name else emulated.sets(root))]
    cols = ["host", "address", "region", "namespace", "ssh"]
    tables = []
    for s in found:
        t = Table(f"{s.name} — {s.inventory}", cols, wrap=(4,))
        for row in s.hosts:
            t.add(*(row[c] for c in cols))
        tables.append(t)
    return Outcome({"sets": [s.to_json() for s in found]}, tables=tables,
                   remarks=[] if found else [f"no emulated hosts (state in {root})"])


def hosts_down(name: str) -> Outcome:
    """Remove emulated host set ``name``: its namespaces, bridge, every process in them,
    keys and files."""
    from replicalab.cluster.state import state_root
    from replicalab.hosts import emulated

    removed = emulated.down(name, state_root())
    return Outcome(removed.to_json(), remarks=[f"{name}: removed {', '.join(removed.removed)}"])

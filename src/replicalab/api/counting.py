"""Bounded Counters (seed 004) from Python: one operation on a counter kept by per-data-centre
stores or a counter server (:func:`counter`), the middleware served for one data centre
(:func:`counter_serve`), and the seed's experiments (:func:`counter_bench`). What
``replicalab counter create|inc|dec|value|serve|bench`` run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, INTERRUPTED, STOPPED, Outcome, Table
from replicalab.api.progress import Progress, ticking
from replicalab.counters.crdt import CounterError
from replicalab.counters.middleware import HINT_GLOBAL
from replicalab.stores.base import StoreError

__all__ = ["HINT_GLOBAL", "CounterError", "StoreError", "counter", "counter_bench",
           "counter_recover", "counter_serve"]

CONFIGS = ("client-based", "weak", "strong")
"""How one operation reaches the counter: the Bounded Counter (client-based middleware), or
the baselines, weak (no invariant) and strong (one home data centre)."""
ACTIONS = ("create", "inc", "dec", "value")


@dataclass
class UrlTopology:
    """Data centres given as one store URL each (``DC=URL``)."""

    dcs: tuple[str, ...]
    urls: dict[str, str]

    def store(self, dc: str, from_dc: str | None = None) -> Any:
        """Return ``dc``'s store (reached directly: the caller runs next to every store)."""
        from replicalab.stores import open_store

        return open_store(self.urls[dc])


def parse_stores(stores: Sequence[str] | None, serving: bool = False) -> UrlTopology:
    """Return the data centres of ``DC=URL`` texts (ParameterError naming ``stores``).

    A ``sim://`` store lives inside one process: a one-shot operation (``serving`` False)
    refuses it, since the counter would vanish with the process; a server takes one in
    real time (``?clock=real``), alive as long as the server."""
    if not stores:
        raise ParameterError("stores", "missing: give each data centre's store: {stores} "
                                       "US-E=redis://127.0.0.1:6379 {stores} US-W=... (the DC "
                                       "names are the counter's replicas)",
                             {"stores": "stores item"})
    urls: dict[str, str] = {}
    for item in stores:
        dc, sep, url = item.partition("=")
        if not sep or not dc or "://" not in url:
            raise ParameterError("stores", f"{item!r}: use DC=URL, e.g. "
                                           "US-E=redis://127.0.0.1:6379")
        if dc in urls:
            raise ParameterError("stores", f"name data centre {dc!r} twice; give one URL per DC")
        if url.startswith("sim://") and not serving:
            raise ParameterError("stores", f"{item!r}: a sim:// store lives only inside one "
                                           "process, so a counter on it would be gone when this "
                                           "command ends; use redis:// or postgresql:// stores, "
                                           "or serve the simulated DCs with `replicalab counter "
                                           "serve --store DC=sim://primary?clock=real ...` and "
                                           "pass {server} HOST:PORT", {"server": "server"})
        if url.startswith("sim://") and "real" not in parse_qs(urlsplit(url).query).get(
                "clock", []):
            raise ParameterError("stores", f"{item!r}: a counter server runs in real time; add "
                                           "?clock=real to the sim:// URL (e.g. "
                                           "sim://primary?clock=real)")
        urls[dc] = url
    return UrlTopology(tuple(urls), urls)


def parse_server(text: str) -> tuple[str, int]:
    """Return (host, port) of ``HOST:PORT`` (ParameterError naming ``server``)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ParameterError("server", f"{text!r}: use HOST:PORT of a `replicalab counter "
                                       "serve`, e.g. 127.0.0.1:7400")
    return host, int(port)


async def _with_service(topo: UrlTopology, dc: str, config: str,
                        fn: Callable[[Any], Awaitable[Any]], key: str) -> Any:
    """Return ``fn(service)`` for a one-shot session of ``config`` in ``dc``; the change is
    pushed to the other DCs before returning."""
    if dc not in topo.dcs:
        raise ParameterError("dc", f"{dc!r} is not one of the data centres of {{stores}} "
                                   f"({', '.join(topo.dcs)})", {"stores": "stores"})
    if config == "client-based":
        from replicalab.counters.client_mw import ClientMiddleware
        from replicalab.counters.middleware import Options
        from replicalab.counters.service import Placement

        mw = ClientMiddleware(Placement.from_urls(dc, topo.dcs, topo.urls), Options(pool=1))
        try:
            out = await fn(mw)
            await mw.syncer.sync_key(key)
            return out
        finally:
            await mw.close()
    from replicalab.counters.baselines import StrongDeployment, WeakDeployment

    dep: Any = (await WeakDeployment(topo).open() if config == "weak"
                else await StrongDeployment(topo, home=topo.dcs[0]).open())
    try:
        svc = await dep.service(dc)
        try:
            return await fn(svc)
        finally:
            await svc.close()
    finally:
        await dep.close()


async def _with_server(server: str, fn: Callable[[Any], Awaitable[Any]]) -> Any:
    """Return ``fn(service)`` on the counter server at ``server`` (HOST:PORT)."""
    from replicalab.counters.server import RemoteCounterService

    host, port = parse_server(server)
    svc = await RemoteCounterService.connect(host, port, timeout_s=10.0)
    try:
        return await fn(svc)
    finally:
        await svc.close()


def counter(action: str, key: str, *, by: int = 1, initial: int = 0, lower: int = 0,
            upper: int | None = None, allow_global: bool = False,
            stores: Sequence[str] = (), dc: str | None = None, config: str = "client-based",
            server: str | None = None) -> Outcome:
    """Do ``action`` on counter ``key`` and return the :class:`Outcome` (``results``: the
    key and its value as the data centre sees it, or the bounds created; one remark):
    ``create`` with ``initial``, ``lower`` and ``upper`` bounds (its slack to each bound
    split over the data centres), ``inc``/``dec`` by ``by`` (``allow_global``: ask other
    DCs for rights this one lacks), ``value``. The counter is reached through the stores
    of every data centre (``stores``: ``DC=URL`` each; ``dc``: whose view, default the
    first; ``config``: client-based, weak or strong) or a counter server (``server``:
    HOST:PORT). Raises ParameterError for bad input, CounterError for an operation the
    invariant refuses, StoreError for a data centre that does not answer."""
    ops: dict[str, Callable[[Any], Awaitable[Any]]] = {
        "create": lambda s: s.create(key, initial, lower, upper),
        "inc": lambda s: s.inc(key, by, allow_global=allow_global),
        "dec": lambda s: s.dec(key, by, allow_global=allow_global),
        "value": lambda s: s.value(key)}
    if action not in ops:
        raise ParameterError("action", f"{action!r}: use one of {', '.join(ACTIONS)}")
    if config not in CONFIGS:
        raise ParameterError("config", f"{config!r}: use one of {', '.join(CONFIGS)}")
    if server is not None:
        for name, given in (("stores", bool(stores)), ("dc", dc is not None),
                            ("config", config != "client-based")):
            if given:
                raise ParameterError(name, "has no effect with {server}: the counter server "
                                           "serves its own data centre with its stores; drop "
                                           "it", {"server": "server"})
        v = asyncio.run(_with_server(server, ops[action]))
    else:
        topo = parse_stores(stores)
        v = asyncio.run(_with_service(topo, dc or topo.dcs[0], config, ops[action], key))
    if action == "create":
        bounds = f"{lower} <= value" + (f" <= {upper}" if upper is not None else "")
        return Outcome({"key": key, "initial": initial, "lower": lower, "upper": upper,
                        "created": True},
                       remarks=[f"created {key} = {initial} (invariant: {bounds})"])
    return Outcome({"key": key, "value": v}, remarks=[f"{key} = {v}"])


def counter_serve(dc: str, stores: Sequence[str], port: int = 7400, host: str = "127.0.0.1",
                  batch_ms: float = 2.0, batch_max: int = 256, sync_ms: float = 200.0,
                  threshold: int = 20, seed: int = 0,
                  announce: Callable[[str], None] = print) -> None:
    """Serve data centre ``dc``'s server-based middleware on ``host:port`` until Ctrl-C or
    SIGTERM: one serialiser per counter, group commit (``batch_ms``, ``batch_max``), state
    sync with the other DCs every ``sync_ms``, rights asked for below ``threshold``;
    ``announce`` is told where it serves before it starts."""
    from replicalab.counters import server

    topo = parse_stores(stores, serving=True)
    if dc not in topo.dcs:
        raise ParameterError("dc", f"{dc!r} is not one of the data centres of {{stores}} "
                                   f"({', '.join(topo.dcs)})", {"stores": "stores"})
    peers = {d: u for d, u in topo.urls.items() if d != dc}
    announce(f"counter middleware for {dc} on {host}:{port} (peers: "
             f"{', '.join(peers) or 'none'}); Ctrl-C stops it; reach it with "
             f"replicalab counter value KEY --server {host}:{port}")
    server.serve(dc, topo.urls[dc], peers, port, host=host, dcs=topo.dcs, batch_ms=batch_ms,
                 batch_max=batch_max, sync_ms=sync_ms, threshold=threshold, seed=seed)


def _ints(text: str | Sequence[int], name: str) -> tuple[int, ...]:
    if not isinstance(text, str):
        return tuple(int(x) for x in text)
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ParameterError(name, f"{text!r}: give comma-separated integers, e.g. 3,15,30"
                             ) from None
    if not values:
        raise ParameterError(name, "is empty: give e.g. 3,15,30")
    return values


def _names(text: str | Sequence[str], name: str) -> tuple[str, ...]:
    values = tuple(x.strip() for x in (text.split(",") if isinstance(text, str) else text)
                   if x.strip())
    if not values:
        raise ParameterError(name, "is empty")
    return values


def bench_table(results: dict[str, Any]) -> Table:
    """Return one row per measured point of a bench; configurations named as they were
    given."""
    dcs = results["dcs"]
    t = Table(results["title"], ["experiment", "config", "clients", "counters", "ok ops/s",
                                 "failed", "p50 ms", "p99 ms", "p50 ms " + "/".join(dcs),
                                 "excess"], wrap=(), right=tuple(range(2, 10)))
    for p in results["points"]:
        s, lat = p["spec"], p["latency_ms"]["all"]
        reg = p["latency_by_region_ms"]
        t.add(s["experiment"], s["config"], s["clients"], s["counters"],
              f"{p['throughput_ops_s']:,.1f}", f"{p['failed']:,}", f"{lat['p50'] or 0:.1f}",
              f"{lat['p99'] or 0:.1f}", "/".join(f"{(reg[d]['p50'] or 0):.1f}" for d in dcs),
              p["violations"]["final_excess"])
    return t


def fault_table(results: dict[str, Any]) -> Table | None:
    """Return one row per fault point (None when there is none): the window, what each DC
    sold inside it, transfers across the cut, the rights of a lost DC, and the checks."""
    rows = [p for p in results["points"] if p["spec"].get("fault") and "rights" in p]
    if not rows:
        return None
    dcs = results["dcs"]
    t = Table("Faults between data centres (seed 004 §IV-E)",
              ["fault", "config", "DC", "window s", "ok inside " + "/".join(dcs), "across",
               "lost DC held", "recovered", "written off", "acks = store", "excess"],
              wrap=(), right=tuple(range(3, 11)))
    for p in rows:
        s, f, r = p["spec"], p.get("fault") or {}, p["rights"]
        eff = p.get("fault_effects") or {}
        inside = eff.get("ok_during_by_dc", {})
        window = (f"{f['start_s']:.1f}-{f['end_s']:.1f}"
                  if f.get("start_s") is not None and f.get("end_s") is not None else "-")
        lost = s["fault"] == "dc-loss"
        t.add(s["fault"], s["config"], f.get("dc", ""), window,
              "/".join(str(inside.get(d, 0)) for d in dcs),
              eff.get("transfers_across_during", "-"),
              r.get("held_by_lost_at_loss", "-") if lost else "-",
              r.get("recovered", "-") if lost else "-",
              r.get("written_off", "-") if lost else "-",
              "yes" if r["used_matches_acks"] and r["granted_matches_acks"] else "NO",
              p["violations"]["final_excess"])
    return t


def counter_recover(keys: Sequence[str], lost: str, stores: Sequence[str]) -> Outcome:
    """Move every right data centre ``lost`` held of each counter of ``keys`` to the
    survivors (seed 004 §IV-E), from its final state: its store (``stores``: ``DC=URL``
    each), restarted from its disk; written off if that is gone. Returns the
    :class:`Outcome`: ``recoveries`` and one line per counter and DC."""
    from replicalab.counters.recovery import recover_from_urls

    done = asyncio.run(recover_from_urls(list(keys), lost, parse_stores(stores).urls))
    lines = []
    for r in done:
        for d, held in r.held.items():
            moved = ", ".join(f"{n} to {s}" for s, n in r.recovered.get(d, {}).items())
            lines.append(f"{r.key} ({d}): {lost} held {held} rights, from its {r.source}; "
                         f"recovered {r.recovered_total(d)}{f' ({moved})' if moved else ''}, "
                         f"written off {r.written_off[d]}")
    return Outcome({"recoveries": [r.to_json() for r in done]}, remarks=lines)


def counter_bench(kind: str = "redis", configs: str | Sequence[str] | None = None,
                  experiments: str | Sequence[str] | None = None,
                  clients: str | Sequence[int] = "3,15,30",
                  counters: str | Sequence[int] = "1,100", duration: str | float = "20s",
                  think_ms: float = 100.0, inc_fraction: float = 0.2,
                  low_load_clients: int = 15, exhaust_initial: int = 6000,
                  exhaust_clients: int = 30, exhaust_max: str | float = "2m",
                  violation_initial: int = 100, sync_ms: float = 200.0, seed: int = 1,
                  out: str | Path = "runs", progress: Progress = None,
                  fault_dc: str | None = None, fault_at: str | float = "1s",
                  fault_for: str | float = "5s", fault_initial: int = 600) -> Outcome:
    """Run seed 004's experiments on three data centres (dc3) of store ``kind`` (redis,
    postgresql, cassandra, or sim in-process) for each configuration and client count;
    the fault experiments (partition, dc-loss: seed §IV-E) cut off or lose ``fault_dc``
    (default the last) at ``fault_at`` into a point for ``fault_for``, from
    ``fault_initial``. Return the :class:`Outcome`: throughput, latency per region and
    invariant violations per point, the faults' table, and the report."""
    from replicalab.counters.bench import CONFIGS as BENCH_CONFIGS
    from replicalab.counters.bench import EXPERIMENTS
    from replicalab.counters.bench_run import BenchSpec, run_bench
    from replicalab.history.rundir import make_run_dir, save_results
    from replicalab.report.counters import render_counter_report

    spec = BenchSpec(store=kind, configs=_names(configs or BENCH_CONFIGS, "configs"),
                     experiments=_names(experiments or EXPERIMENTS, "experiments"),
                     clients=_ints(clients, "clients"), counters=_ints(counters, "counters"),
                     duration_s=seconds(duration, "duration"), think_ms=think_ms,
                     inc_fraction=inc_fraction, low_load_clients=low_load_clients,
                     exhaust_initial=exhaust_initial, exhaust_clients=exhaust_clients,
                     exhaust_max_s=seconds(exhaust_max, "exhaust_max"),
                     violation_initial=violation_initial, sync_ms=sync_ms, seed=seed,
                     fault_dc=fault_dc or "", fault_at_s=seconds(fault_at, "fault_at"),
                     fault_for_s=seconds(fault_for, "fault_for"), fault_initial=fault_initial)
    spec.check()
    run_dir = make_run_dir(Path(out), "counter-bench", kind)
    try:
        with ticking(f"counter bench on {kind}", progress) as tick:
            run = run_bench(spec, lambda r: save_results(r, run_dir), tick, root=None)
    except ValueError as err:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # nothing was measured: leave no empty run directory
        raise ValueError(f"{err}; the data centres could not be started (try kind sim)"
                         ) from None
    report = render_counter_report(run.results, run_dir)
    tables = [t for t in (bench_table(run.results), fault_table(run.results)) if t]
    return Outcome(run.results, run_dir, report, tables,
                   [f"note: {n}" for n in run.results["notes"]],
                   INTERRUPTED if run.interrupted else STOPPED if run.error else DONE,
                   f"interrupted; the points measured so far are saved in {run_dir}"
                   if run.interrupted else f"the bench stopped early ({run.error}); what it "
                   f"measured is saved in {run_dir}" if run.error else "")

"""``replicalab counter ...``: Bounded Counters on per-DC stores, and the seed-004 bench."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

import typer

from replicalab.cli.errors import fail, note
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import duration_ms, parse_duration_s
from replicalab.counters.bench import CONFIGS, EXPERIMENTS
from replicalab.counters.bench_run import BenchSpec, run_bench
from replicalab.counters.crdt import CounterError
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.stores import Store, StoreError, open_store

counter_app = typer.Typer(
    help="Bounded Counters: numeric invariants (value >= bound) over eventually consistent "
         "stores across data centres (seed 004).", no_args_is_help=True)

OP_CONFIGS = ("client-based", "weak", "strong")


def register(app: typer.Typer) -> None:
    """Add ``replicalab counter ...`` to the root app."""
    app.add_typer(counter_app, name="counter")


# --------------------------------------------------------------------------- one operation


@dataclass
class UrlTopology:
    """Data centres given as one store URL each (the CLI's ``--store DC=URL``)."""

    dcs: tuple[str, ...]
    urls: dict[str, str]

    def store(self, dc: str, from_dc: str | None = None) -> Store:
        """Return ``dc``'s store (reached directly: the CLI runs next to every store)."""
        return open_store(self.urls[dc])


def parse_stores(stores: list[str] | None, serving: bool = False) -> UrlTopology:
    """Return the data centres of ``--store DC=URL`` options (ValueError naming the fix).

    A ``sim://`` store lives inside one process: a one-shot command (``serving`` False)
    refuses it, since the counter would vanish with the command; ``counter serve`` takes one
    in real time (``?clock=real``), alive as long as the server."""
    if not stores:
        raise ValueError("give each data centre's store: --store US-E=redis://127.0.0.1:6379 "
                         "--store US-W=... (the DC names are the counter's replicas)")
    urls: dict[str, str] = {}
    for item in stores:
        dc, sep, url = item.partition("=")
        if not sep or not dc or "://" not in url:
            raise ValueError(f"--store {item!r}: use DC=URL, e.g. US-E=redis://127.0.0.1:6379")
        if dc in urls:
            raise ValueError(f"--store names data centre {dc!r} twice; give one URL per DC")
        if url.startswith("sim://") and not serving:
            raise ValueError(f"--store {item!r}: a sim:// store lives only inside one process, "
                             "so a counter on it would be gone when this command ends; use "
                             "redis:// or postgresql:// stores, or serve the simulated DCs "
                             "with `replicalab counter serve --store DC=sim://primary?clock="
                             "real ...` and pass --server HOST:PORT")
        if url.startswith("sim://") and "real" not in parse_qs(urlsplit(url).query).get(
                "clock", []):
            raise ValueError(f"--store {item!r}: a counter server runs in real time; add "
                             "?clock=real to the sim:// URL (e.g. sim://primary?clock=real)")
        urls[dc] = url
    return UrlTopology(tuple(urls), urls)


def parse_server(text: str) -> tuple[str, int]:
    """Return (host, port) of ``--server HOST:PORT`` (ValueError naming the fix)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--server {text!r}: use HOST:PORT of a `replicalab counter serve`, "
                         "e.g. 127.0.0.1:7400")
    return host, int(port)


def cli_message(err: Exception) -> str:
    """Return the error's message with the library's hints in the CLI's words."""
    from replicalab.counters.middleware import HINT_GLOBAL

    return str(err).replace(HINT_GLOBAL, "retry with --global")


async def _with_service(topo: UrlTopology, dc: str, config: str,
                        fn: Callable[[Any], Awaitable[Any]], key: str) -> Any:
    """Return ``fn(service)`` for a one-shot session of ``config`` in ``dc``; the change is
    pushed to the other DCs before returning."""
    if dc not in topo.dcs:
        raise ValueError(f"--dc {dc!r} is not one of the data centres given with --store "
                         f"({', '.join(topo.dcs)})")
    if config == "client-based":
        from replicalab.counters.client_mw import ClientMiddleware
        from replicalab.counters.middleware import Options
        from replicalab.counters.service import Placement

        urls = topo.urls
        mw = ClientMiddleware(Placement.from_urls(dc, topo.dcs, urls), Options(pool=1))
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


def _run_op(stores: list[str] | None, dc: str | None, config: str, key: str,
            fn: Callable[[Any], Awaitable[Any]], server: str | None = None) -> Any:
    try:
        if config not in OP_CONFIGS:
            raise ValueError(f"--config {config!r}: use one of {', '.join(OP_CONFIGS)}")
        if server is not None:
            for flag, given in (("--store", bool(stores)), ("--dc", dc is not None),
                                ("--config", config != "client-based")):
                if given:
                    raise ValueError(f"{flag} has no effect with --server: the counter server "
                                     "serves its own data centre with its stores; drop it")
            return asyncio.run(_with_server(server, fn))
        topo = parse_stores(stores)
        return asyncio.run(_with_service(topo, dc or topo.dcs[0], config, fn, key))
    except StoreError as err:
        fail(f"data centre unreachable: {cli_message(err)}")
    except (CounterError, ValueError) as err:
        fail(cli_message(err))


def _print(as_json: bool, doc: dict[str, Any], line: str) -> None:
    if as_json:
        sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    else:
        say(line)


StoreOpt = Annotated[list[str] | None, typer.Option(
    "--store", metavar="DC=URL", help="A data centre and its store, DC=URL; repeat once per "
                                      "DC (the first is the default --dc and Strong's home).")]
DcOpt = Annotated[str | None, typer.Option(help="The data centre whose view to use.")]
ConfigOpt = Annotated[str, typer.Option(help="client-based (the Bounded Counter), weak or "
                                             "strong.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
GlobalOpt = Annotated[bool, typer.Option(
    "--global", help="Ask other DCs for rights when this DC lacks them.")]
ServerOpt = Annotated[str | None, typer.Option(
    help="HOST:PORT of a `replicalab counter serve` (server-based middleware) to send the "
         "operation to, instead of reaching the stores directly.")]


@counter_app.command("create")
def create(
    key: Annotated[str, typer.Argument(help="Counter name (no '/').")],
    initial: Annotated[int, typer.Option(help="Initial value.")] = 0,
    lower: Annotated[int, typer.Option(help="Invariant: value >= lower.")] = 0,
    upper: Annotated[int | None, typer.Option(
        help="Invariant: value <= upper (e.g. seats taken <= capacity); increments then "
             "spend rights as decrements do.")] = None,
    store: StoreOpt = None, dc: DcOpt = None, config: ConfigOpt = "client-based",
    server: ServerOpt = None, as_json: JsonOpt = False,
) -> None:
    """Create a counter with its slack to each bound split over the data centres.

    Example: replicalab counter create stock --initial 100 --store US-E=redis://127.0.0.1:7001
    --store US-W=redis://127.0.0.1:7002 --store EU=redis://127.0.0.1:7003

    Example: replicalab counter create stock --initial 100 --server 127.0.0.1:7400
    """
    _run_op(store, dc, config, key, lambda s: s.create(key, initial, lower, upper), server)
    bounds = f"{lower} <= value" + (f" <= {upper}" if upper is not None else "")
    _print(as_json, {"key": key, "initial": initial, "lower": lower, "upper": upper,
                     "created": True}, f"created {key} = {initial} (invariant: {bounds})")


@counter_app.command("inc")
def inc(
    key: Annotated[str, typer.Argument(help="Counter name.")],
    by: Annotated[int, typer.Option(help="Amount to add.")] = 1,
    allow_global: GlobalOpt = False,
    store: StoreOpt = None, dc: DcOpt = None, config: ConfigOpt = "client-based",
    server: ServerOpt = None, as_json: JsonOpt = False,
) -> None:
    """Add to a counter in one data centre without breaking its upper bound, if it has one;
    prints the value that DC sees.

    Example: replicalab counter inc stock --by 5 --dc US-W --store US-E=... --store US-W=...

    Example: replicalab counter inc stock --by 5 --server 127.0.0.1:7400
    """
    v = _run_op(store, dc, config, key, lambda s: s.inc(key, by, allow_global=allow_global),
                server)
    _print(as_json, {"key": key, "value": v}, f"{key} = {v}")


# dec repeats inc's option list: Typer declares a command's options in its own signature
@counter_app.command("dec")
def dec(
    key: Annotated[str, typer.Argument(help="Counter name.")],
    by: Annotated[int, typer.Option(help="Amount to subtract.")] = 1,
    allow_global: GlobalOpt = False,
    store: StoreOpt = None, dc: DcOpt = None, config: ConfigOpt = "client-based",
    server: ServerOpt = None, as_json: JsonOpt = False,
) -> None:
    """Subtract from a counter in one data centre without breaking its bound.

    Example: replicalab counter dec stock --by 2 --global --store US-E=... --store US-W=...

    Example: replicalab counter dec stock --by 2 --server 127.0.0.1:7400
    """
    v = _run_op(store, dc, config, key, lambda s: s.dec(key, by, allow_global=allow_global),
                server)
    _print(as_json, {"key": key, "value": v}, f"{key} = {v}")


@counter_app.command("value")
def value(
    key: Annotated[str, typer.Argument(help="Counter name.")],
    store: StoreOpt = None, dc: DcOpt = None, config: ConfigOpt = "client-based",
    server: ServerOpt = None, as_json: JsonOpt = False,
) -> None:
    """Print a counter's value as one data centre knows it.

    Example: replicalab counter value stock --dc EU --store US-E=... --store EU=...

    Example: replicalab counter value stock --server 127.0.0.1:7400
    """
    v = _run_op(store, dc, config, key, lambda s: s.value(key), server)
    _print(as_json, {"key": key, "value": v}, f"{key} = {v}")


# --------------------------------------------------------------------------- bench


def _ints(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{option} {text!r}: give comma-separated integers, e.g. 3,15,30"
                         ) from None
    if not values:
        raise ValueError(f"{option} is empty: give e.g. 3,15,30")
    return values


def _names(text: str, option: str) -> tuple[str, ...]:
    values = tuple(x.strip() for x in text.split(",") if x.strip())
    if not values:
        raise ValueError(f"{option} is empty")
    return values


def summary_table(results: dict[str, Any]) -> TableData:
    """Return one row per measured point; configurations named as ``--configs`` names them."""
    dcs = results["dcs"]
    t = TableData(results["title"], ["experiment", "config", "clients", "counters", "ok ops/s",
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


@counter_app.command("bench")
def bench(
    kind: Annotated[str | None, typer.Option(
        help="Store kind of the data centres: redis, postgresql, cassandra (one cluster, a "
             "data centre per region) or sim (in-process, no server).")] = None,
    store: Annotated[str | None, typer.Option(
        help="Deprecated alias of --kind.", hidden=True)] = None,
    configs: Annotated[str, typer.Option(help="Configurations: " + ", ".join(CONFIGS) + ".")
                       ] = ",".join(CONFIGS),
    experiments: Annotated[str, typer.Option(help="Experiments: " + ", ".join(EXPERIMENTS)
                                             + ".")] = ",".join(EXPERIMENTS),
    clients: Annotated[str, typer.Option(help="Client counts (spread evenly over the DCs).")
                       ] = "3,15,30",
    counters: Annotated[str, typer.Option(help="Numbers of counters for the throughput "
                                               "experiment.")] = "1,100",
    duration: Annotated[str, typer.Option(help="Length of each point: 20s, 1m; a plain number "
                                          "is seconds.")] = "20s",
    think: Annotated[str | None, typer.Option(
        help="Think time between a client's ops: 100ms (the default), 0 for none.",
        show_default=False)] = None,
    think_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --think.")
                        ] = None,
    inc_fraction: Annotated[float, typer.Option(help="Fraction of increments.")] = 0.2,
    low_load_clients: Annotated[int, typer.Option(help="Clients of the by-region experiment.")
                                ] = 15,
    exhaust_initial: Annotated[int, typer.Option(help="Initial value of the exhaustion run.")
                               ] = 6000,
    exhaust_clients: Annotated[int, typer.Option(help="Clients of the exhaustion run.")] = 30,
    exhaust_max: Annotated[str, typer.Option(help="Cap on the exhaustion run: 2m, 90s.")
                           ] = "2m",
    violation_initial: Annotated[int, typer.Option(help="Initial value of the violations "
                                                        "experiment.")] = 100,
    fault_dc: Annotated[str | None, typer.Option(
        help="Data centre cut off (partition) or lost (dc-loss); default the last (EU).",
        show_default=False)] = None,
    fault_at: Annotated[str, typer.Option(help="When the fault starts in its point: 1s.")
                        ] = "1s",
    fault_for: Annotated[str, typer.Option(
        help="How long the DC stays cut off, or lost before its rights are recovered: 5s.")
                         ] = "5s",
    fault_initial: Annotated[int, typer.Option(help="Initial value of the fault runs.")
                             ] = 600,
    sync: Annotated[str | None, typer.Option(
        help="Inter-DC synchronisation period: 200ms (the default), 1s.",
        show_default=False)] = None,
    sync_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --sync.")
                       ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the clients' choices.")] = 1,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: JsonOpt = False,
) -> None:
    """Run seed 004's experiments on three data centres (dc3) and write an HTML report.

    Example: replicalab counter bench --kind redis --clients 3,15,30 --duration 20s

    Faults (seed §IV-E): replicalab counter bench --kind redis --experiments
    partition,dc-loss --configs server-based+batch --fault-dc EU --fault-for 5s
    """
    if store is not None:
        note(f"--store {store} is deprecated here; use --kind {store}")
    store = kind or store or "redis"
    try:
        think_ms = duration_ms(think, "--think", think_ms, "--think-ms", "100ms")
        sync_ms = duration_ms(sync, "--sync", sync_ms, "--sync-ms", "200ms")
        spec = BenchSpec(store=store, configs=_names(configs, "--configs"),
                         experiments=_names(experiments, "--experiments"),
                         clients=_ints(clients, "--clients"),
                         counters=_ints(counters, "--counters"),
                         duration_s=parse_duration_s(duration, "--duration"),
                         think_ms=think_ms, inc_fraction=inc_fraction,
                         low_load_clients=low_load_clients, exhaust_initial=exhaust_initial,
                         exhaust_clients=exhaust_clients,
                         exhaust_max_s=parse_duration_s(exhaust_max, "--exhaust-max"),
                         violation_initial=violation_initial, sync_ms=sync_ms, seed=seed,
                         fault_dc=fault_dc or "",
                         fault_at_s=parse_duration_s(fault_at, "--fault-at"),
                         fault_for_s=parse_duration_s(fault_for, "--fault-for"),
                         fault_initial=fault_initial)
        spec.check()
        run_dir = make_run_dir(out, "counter-bench", store)
    except ValueError as err:
        fail(str(err))
    try:
        with progress_bar(f"counter bench on {store}", enabled=not as_json) as tick:
            run = run_bench(spec, lambda r: save_results(r, run_dir), tick, root=None)
    except ValueError as err:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # nothing was measured: leave no empty run directory
        fail(f"{err}; the data centres could not be started (try --kind sim)")
    _emit_bench(run, run_dir, as_json)


def fault_table(results: dict[str, Any]) -> TableData | None:
    """Return one row per fault point (None when there is none): the window, what each DC
    sold inside it, transfers across the cut, the rights of a lost DC, and the checks."""
    rows = [p for p in results["points"] if p["spec"].get("fault") and "rights" in p]
    if not rows:
        return None
    dcs = results["dcs"]
    t = TableData("Faults between data centres (seed 004 §IV-E)",
                  ["fault", "config", "DC", "window s", "ok inside " + "/".join(dcs),
                   "across", "lost DC held", "recovered", "written off", "acks = store",
                   "excess"], wrap=(), right=tuple(range(3, 11)))
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


def _emit_bench(run: Any, run_dir: Path, as_json: bool) -> None:
    """Render a bench's report, print its table (or one JSON object), and exit 130 or 2 if
    it was interrupted or stopped early."""
    from replicalab.report.counters import render_counter_report

    report = render_counter_report(run.results, run_dir)
    tables = [t for t in (summary_table(run.results), fault_table(run.results))
              if t is not None]
    if as_json:
        sys.stdout.write(json.dumps({**run.results, "run_dir": str(run_dir),
                                     "report": str(report),
                                     "tables": [t.to_json() for t in tables]},
                                    sort_keys=True) + "\n")
    else:
        show(tables)
        for n in run.results["notes"]:
            say(f"note: {n}")
        say(f"report: {report}")
    if run.interrupted:
        fail("interrupted; the points measured so far are saved in " + str(run_dir), 130)
    if run.error:
        fail(f"the bench stopped early ({run.error}); what it measured is saved in {run_dir}")


__all__ = ["counter_app", "register"]


@counter_app.command("recover")
def recover(
    keys: Annotated[list[str], typer.Argument(help="The counters to recover.",
                                              show_default=False, metavar="KEY")],
    lost: Annotated[str, typer.Option(help="The data centre lost for good (it must never "
                                           "serve again under its name).")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Move every right a lost data centre held to the survivors (seed 004 §IV-E), from its
    final state: its store, restarted from its disk; written off if that is gone.

    Example: replicalab counter recover stock --lost EU --store US-E=redis://127.0.0.1:7001
    --store US-W=redis://127.0.0.1:7002 --store EU=redis://127.0.0.1:7003
    """
    from replicalab.counters.recovery import recover_from_urls

    try:
        topo = parse_stores(store)
        done = asyncio.run(recover_from_urls(keys, lost, topo.urls))
    except StoreError as err:
        fail(f"data centre unreachable: {cli_message(err)}")
    except (CounterError, ValueError) as err:
        fail(cli_message(err))
    if as_json:
        sys.stdout.write(json.dumps({"recoveries": [r.to_json() for r in done]},
                                    sort_keys=True) + "\n")
        return
    for r in done:
        for d, held in r.held.items():
            moved = ", ".join(f"{n} to {s}" for s, n in r.recovered.get(d, {}).items())
            say(f"{r.key} ({d}): {lost} held {held} rights, from its {r.source}; "
                f"recovered {r.recovered_total(d)}{f' ({moved})' if moved else ''}, "
                f"written off {r.written_off[d]}")


@counter_app.command("serve")
def serve(
    dc: Annotated[str, typer.Option(help="The data centre this middleware serves.")],
    stores: StoreOpt = None,
    port: Annotated[int, typer.Option(help="TCP port to serve on.")] = 7400,
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless told).")
                    ] = "127.0.0.1",
    batch_ms: Annotated[float, typer.Option(help="Group commit: longest wait before a batch "
                                            "is written (ms); 0 = no batching.")] = 2.0,
    batch_max: Annotated[int, typer.Option(help="Group commit: most operations per write.")
                         ] = 256,
    sync: Annotated[str | None, typer.Option(
        help="Period of state sync with the other DCs: 200ms (the default), 1s.",
        show_default=False)] = None,
    sync_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --sync.")
                       ] = None,
    threshold: Annotated[int, typer.Option(help="Ask another DC for rights below this many."
                                           )] = 20,
    seed: Annotated[int, typer.Option(help="Seed of retry jitter.")] = 0,
) -> None:
    """Run one data centre's server-based middleware until Ctrl-C or SIGTERM: one serialiser
    per counter, group commit, and an acknowledgement only after the durable write.

    Clients speak JSON lines over TCP (counters.server.RemoteCounterService).

    Example: replicalab counter serve --dc US-E --store US-E=redis://127.0.0.1:6379
    --store US-W=redis://127.0.0.1:6380 --store EU=redis://127.0.0.1:6381 --port 7400
    """
    from replicalab.counters import server

    try:
        sync_ms = duration_ms(sync, "--sync", sync_ms, "--sync-ms", "200ms")
        topo = parse_stores(stores, serving=True)
        if dc not in topo.dcs:
            raise ValueError(f"--dc {dc!r} is not one of the data centres given with --store "
                             f"({', '.join(topo.dcs)})")
        peers = {d: u for d, u in topo.urls.items() if d != dc}
        say(f"counter middleware for {dc} on {host}:{port} (peers: "
            f"{', '.join(peers) or 'none'}); Ctrl-C stops it; reach it with "
            f"replicalab counter value KEY --server {host}:{port}")
        server.serve(dc, topo.urls[dc], peers, port, host=host, dcs=topo.dcs,
                     batch_ms=batch_ms, batch_max=batch_max, sync_ms=sync_ms,
                     threshold=threshold, seed=seed)
    except StoreError as err:
        fail(f"data centre unreachable: {err}")
    except (CounterError, ValueError, OSError) as err:
        fail(str(err))

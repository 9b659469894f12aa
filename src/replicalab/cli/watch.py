"""``replicalab watch`` (the seed-001 suite every interval, samples to SQLite, live view) and
``replicalab dashboard`` (the samples as a page on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from replicalab.cli.errors import UserError, fail
from replicalab.cli.output import out_console, say
from replicalab.cli.progress import fmt_s
from replicalab.cli.timeparse import parse_duration_s
from replicalab.watch.config import load_backends
from replicalab.watch.db import SampleDB
from replicalab.watch.stats import Sample, round_line
from replicalab.watch.vehicle import Vehicle, direction, gauge
from replicalab.watch.watcher import BackendState, SuiteOptions, Watcher

__all__ = ["dashboard", "live_view", "out_console", "register", "watch"]


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def live_view(states: list[BackendState], vehicle: Vehicle, db: Path) -> Group:
    """Return the terminal view: per-backend last p50/p99 and the vehicle's gauge."""
    t = Table(title=Text(f"replicalab watch → {db}"), title_justify="left")
    t.add_column("backend", no_wrap=True)
    t.add_column("status", no_wrap=True)
    for col in ("rounds", "read p50/p99 ms", "write p50/p99 ms", "errors"):
        t.add_column(col, justify="right", no_wrap=True)
    problems = []
    for st in states:
        status = (f"loading {100 * st.load_fraction:.0f}%" if st.status == "loading"
                  else st.status)
        colour = {"ok": "green", "unavailable": "red"}.get(st.status, "yellow")
        t.add_row(Text(st.name), Text(status, style=colour), str(st.rounds),
                  f"{_ms(st.quantile_ms('read', 50))} / {_ms(st.quantile_ms('read', 99))}",
                  f"{_ms(st.quantile_ms('write', 50))} / {_ms(st.quantile_ms('write', 99))}",
                  str(st.errors))
        if st.status == "unavailable" and st.last_error:
            problems.append(Text(f"{st.name}: {st.last_error}", style="red",
                                 overflow="ellipsis", no_wrap=True))
    steer = vehicle.steer()
    reads = sum(1 for op in vehicle.seen if op == "read")
    car = Panel(f"{gauge(steer, 31)}  {direction(steer)}\n"
                f"steering {steer:+.2f}, heading {vehicle.heading_deg:+.0f}°; "
                f"{reads} reads / {len(vehicle.seen) - reads} writes in the last "
                f"{len(vehicle.seen)} ops", title="store-driven vehicle (seed 002)",
                title_align="left", expand=False)
    return Group(t, *problems, car)


class LoadingLines:
    """Piped output: what a backend does before its first round (loading its records can
    take a minute), on stderr: a line when loading starts, then every ``every_s``."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self.t0 = time.monotonic()
        self.said: dict[str, float] = {}

    def update(self, states: list[BackendState]) -> None:
        """Print a line for each backend that is loading and due one, and one when a
        backend said to be loading stops: loaded, or why it could not load."""
        now = time.monotonic()
        for st in states:
            if st.status != "loading":
                if self.said.pop(st.name, None) is not None:
                    say(f"watch: {st.name}: " + (
                        f"loaded in {fmt_s(now - self.t0)}; rounds begin" if st.status == "ok"
                        else f"loading stopped: {st.last_error or st.status}"), err=True)
                continue
            last = self.said.get(st.name)
            if last is None or now - last >= self.every_s:
                self.said[st.name] = now
                say(f"watch: {st.name}: loading its records before the first round "
                    f"({100 * st.load_fraction:.0f}% done, {fmt_s(now - self.t0)} elapsed)",
                    err=True)


async def _watch(watcher: Watcher, live: Live | None, vehicle: Vehicle, db: Path,
                 lines: LoadingLines | None = None) -> str:
    """Run the watcher until done or a signal; return the signal's name ("" if none)."""
    stop = asyncio.Event()
    got: list[str] = []
    loop = asyncio.get_running_loop()

    def on_signal(name: str) -> None:
        got.append(name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)
    task = asyncio.create_task(watcher.run(stop))
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=0.5)
            if live is not None:
                live.update(live_view(watcher.states, vehicle, db))
            if lines is not None:
                lines.update(watcher.states)
        if lines is not None:
            lines.update(watcher.states)  # a backend whose loading ended with the run
        task.result()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return got[0] if got else ""


def watch(
    config: Annotated[Path, typer.Option(help="TOML file of [backends.NAME] tables "
                                         "(url, durability, availability, transactional, "
                                         "geo, records, read).")],
    db: Annotated[Path, typer.Option(help="SQLite file the samples are appended to.")] = Path(
        "samples.sqlite"),
    interval: Annotated[str, typer.Option(help="Time between rounds: 10s, 500ms, 1m.")] = "10s",
    max_rounds: Annotated[int | None, typer.Option(help="Stop after N rounds per backend."
                                                   )] = None,
    duration: Annotated[str | None, typer.Option(help="Stop after this long: 1h, 7d.")] = None,
    records: Annotated[int, typer.Option(help="Keyspace size per backend (a backend's "
                                         "`records` overrides it).")] = 1_000_000,
    record_bytes: Annotated[int, typer.Option(help="Size of one record in bytes.")] = 1024,
    reads: Annotated[int, typer.Option(help="Reads per round per backend.")] = 1,
    writes: Annotated[int, typer.Option(help="Writes per round per backend.")] = 1,
    timeout: Annotated[str, typer.Option(help="Timeout of one operation.")] = "5s",
    seed: Annotated[int, typer.Option(help="Seed of the key choice and record contents.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON line per backend "
                                          "round instead of the live view.")] = False,
    metrics_port: Annotated[int | None, typer.Option(
        help="Also serve the samples as Prometheus metrics on "
             "http://127.0.0.1:PORT/metrics (0: any free port; docs/watch.md).",
        show_default=False, metavar="PORT")] = None,
    metrics_host: Annotated[str, typer.Option(
        help="Address /metrics listens on (0.0.0.0: every interface, for a Prometheus on "
             "another machine).", metavar="ADDRESS")] = "127.0.0.1",
) -> None:
    """Run the seed-001 microbenchmark suite every interval against each backend.

    Samples are committed to --db every round; restart with the same --db to continue.

    Example: replicalab watch --config docs/examples/backends.toml --db samples.sqlite

    Example: replicalab watch --config docs/examples/backends.toml --metrics-port 9464
    """
    try:
        if max_rounds is not None and duration is not None:
            raise UserError("give --max-rounds or --duration, not both")
        opts = SuiteOptions(
            interval_s=parse_duration_s(interval, "--interval"), records=records,
            record_bytes=record_bytes, reads=reads, writes=writes,
            timeout_s=parse_duration_s(timeout, "--timeout"), seed=seed,
            max_rounds=max_rounds,
            duration_s=None if duration is None else parse_duration_s(duration, "--duration"))
        specs = load_backends(config)
        metrics, server = None, None
        if metrics_port is not None:  # before the database: a bad port leaves nothing behind
            from replicalab.watch.metrics import WatchMetrics, serve

            metrics = WatchMetrics([b.name for b in specs])
            server = serve(metrics, metrics_port, metrics_host)
            host, bound = server.server_address[:2]
            say(f"metrics: http://{host}:{bound}/metrics", err=True)
        store = SampleDB(db)
        vehicle = Vehicle()

        def on_round(state: BackendState, samples: list[Sample]) -> None:
            if metrics is not None:
                metrics.observe(samples)
            vehicle.observe(s.op for s in samples if s.ok)
            if as_json:
                sys.stdout.write(json.dumps({"backend": state.name, "status": state.status,
                                             "samples": [asdict(s) for s in samples],
                                             "steering": vehicle.steer()}) + "\n")
                sys.stdout.flush()
            elif not out_console.is_terminal:
                say(round_line(samples))

        watcher = Watcher(specs, store, opts, on_round)
    except (ValueError, UserError) as err:
        fail(str(err))
    use_live = not as_json and out_console.is_terminal
    try:
        if use_live:
            with Live(live_view(watcher.states, vehicle, db), console=out_console,
                      refresh_per_second=4) as live:
                stopped_by = asyncio.run(_watch(watcher, live, vehicle, db))
        else:
            stopped_by = asyncio.run(_watch(watcher, None, vehicle, db,
                                            None if as_json else LoadingLines()))
        total = store.count()
    finally:
        store.close()
        if server is not None:
            server.shutdown()
            server.server_close()
    if not as_json:
        say(f"{total:,} samples in {db}" + (f" (stopped by {stopped_by})" if stopped_by else ""))
    if stopped_by:  # SIGTERM acts as Ctrl-C, as for every command
        raise typer.Exit(130)


def dashboard(
    db: Annotated[Path, typer.Option(help="SQLite file written by `replicalab watch`.")] = Path(
        "samples.sqlite"),
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 = any free port).")] = 8765,
) -> None:
    """Serve the watch samples as a page on 127.0.0.1 (works with no internet).

    Example: replicalab dashboard --db samples.sqlite --port 8765
    """
    from replicalab.report.dashboard import make_server

    try:
        server = make_server(db, port)
    except ValueError as err:
        fail(str(err))
    host, bound = server.server_address[:2]
    say(f"dashboard: http://{host}:{bound}/  (Ctrl-C to stop)")
    sys.stdout.flush()  # the URL must reach a log file now, not when the server stops
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    """Add the top-level ``watch`` and ``dashboard`` commands to the root app."""
    app.command()(watch)
    app.command()(dashboard)

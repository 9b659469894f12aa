"""``replicalab watch`` (the seed-001 suite every interval, samples to SQLite, live view) and
``replicalab dashboard`` (the samples as a page on 127.0.0.1); the runs are
``replicalab.api.watching``'s, the live view is drawn here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from replicalab.api import watching
from replicalab.api.watching import LoadingLines
from replicalab.api.watching import fraction_text as _fraction
from replicalab.api.watching import ms_text as _ms
from replicalab.cli.output import attempt, say, stdout_console

__all__ = ["dashboard", "live_view", "register", "watch"]


def live_view(states: list[Any], vehicle: Any, db: Path, fresh: list[Any] | None = None
              ) -> Group:
    """Return the terminal view: per-backend last p50/p99, the last staleness window of
    each region watched, and the vehicle's gauge."""
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
    for r in fresh or ():
        colour = "green" if r.fresh_fraction == 1.0 else "yellow"
        problems.append(Text(f"{r.backend} {r.region}: {_fraction(r.fresh_fraction)} of "
                             f"{r.reads} reads fresh, time to fresh {_ms(r.ttf_p50_ms)} ms "
                             f"(max {_ms(r.ttf_max_ms)})", style=colour, no_wrap=True,
                             overflow="ellipsis"))
    steer = vehicle.steer()
    reads = sum(1 for op in vehicle.seen if op == "read")
    car = Panel(f"{watching.gauge(steer, 31)}  {watching.direction(steer)}\n"
                f"steering {steer:+.2f}, heading {vehicle.heading_deg:+.0f}°; "
                f"{reads} reads / {len(vehicle.seen) - reads} writes in the last "
                f"{len(vehicle.seen)} ops", title="store-driven vehicle (seed 002)",
                title_align="left", expand=False)
    return Group(t, *problems, car)


def watch(
    config: Annotated[Path | None, typer.Option(help="TOML file of [backends.NAME] tables "
                                                "(url, durability, availability, "
                                                "transactional, geo, records, read).")] = None,
    store: Annotated[list[str] | None, typer.Option(
        help="A store URL to watch, e.g. s3://KEY:SECRET@HOST:PORT/BUCKET (repeat for "
             "several; with or without --config). An object store pays one PUT per record "
             "to load: mind --records.", show_default=False)] = None,
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
    staleness_write_interval: Annotated[str, typer.Option(
        help="Backends with staleness = true: time between the writer's versions.")] = "1s",
    staleness_read_rate: Annotated[float, typer.Option(
        help="Backends with staleness = true: reads per second of each region's reader."
    )] = 10.0,
) -> None:
    """Run the seed-001 microbenchmark suite every interval against each backend.

    Samples are committed to --db every round; restart with the same --db to continue.

    Example: replicalab watch --config docs/examples/backends.toml --db samples.sqlite

    Example: replicalab watch --config docs/examples/backends.toml --metrics-port 9464

    Example: replicalab watch --store s3://127.0.0.1:9000/bucket --records 1000
    """
    use_live = not as_json and stdout_console().is_terminal

    def on_round(state: Any, samples: list[dict[str, Any]], steering: float) -> None:
        if as_json:
            sys.stdout.write(json.dumps({"backend": state.name, "status": state.status,
                                         "samples": samples, "steering": steering}) + "\n")
            sys.stdout.flush()
        elif not use_live:
            say(watching.round_text(samples))

    lines = None if as_json or use_live else LoadingLines(
        announce=lambda line: say(line, err=True))
    live: list[Any] = []

    def on_freshness(rows: list[Any]) -> None:
        if as_json:
            sys.stdout.write(json.dumps(watching.freshness_json(rows)) + "\n")
            sys.stdout.flush()
        elif not use_live:
            say(watching.freshness_text(rows))

    def every(states: list[Any], vehicle: Any, fresh: list[Any]) -> None:
        if live:
            live[0].update(live_view(states, vehicle, db, fresh))
        elif use_live:
            live.append(Live(live_view(states, vehicle, db, fresh), console=stdout_console(),
                             refresh_per_second=4))
            live[0].start()
        if lines is not None:
            lines.update(states)

    try:
        outcome = attempt(lambda: watching.watch(
            config, db, interval, max_rounds, duration, records, record_bytes, reads, writes,
            timeout, seed, metrics_port, metrics_host, on_round, every,
            lambda line: say(line, err=True), store or [], staleness_write_interval,
            staleness_read_rate, on_freshness), {"stores": "--store"})
    finally:
        if live:
            live[0].stop()
    if not as_json:
        for line in outcome.remarks:
            say(line)
    if outcome.status != "done":  # SIGINT, or SIGTERM acting as Ctrl-C
        raise typer.Exit(130)


def dashboard(
    db: Annotated[Path, typer.Option(help="SQLite file written by `replicalab watch`.")] = Path(
        "samples.sqlite"),
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 = any free port).")] = 8765,
) -> None:
    """Serve the watch samples as a page on 127.0.0.1 (works with no internet).

    Example: replicalab dashboard --db samples.sqlite --port 8765
    """
    attempt(lambda: watching.dashboard(db, port, lambda line: (say(line), sys.stdout.flush())))


def register(app: typer.Typer) -> None:
    """Add the top-level ``watch`` and ``dashboard`` commands to the root app."""
    app.command()(watch)
    app.command()(dashboard)

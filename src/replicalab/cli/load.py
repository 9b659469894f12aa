"""``replicalab load run|ramp|sla|tradeoff``: open-loop load, a rising ramp, an SLA search
(``replicalab.api.loading.load_run``) and seed 003 §4's eventual against consistent reads
under paced load (``replicalab.api.tradeoff``), printed here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.api import loading
from replicalab.cli.errors import fail
from replicalab.cli.output import outcome_of
from replicalab.cli.progress import Bars
from replicalab.cli.timeparse import duration_ms

load_app = typer.Typer(help="Open-loop load: offered rate, ramp until failure, SLA search.",
                       no_args_is_help=True)
__all__ = ["load_app", "register", "tradeoff_cmd"]

Store = Annotated[str, typer.Option(help="Store URL, e.g. sim://simpledb or "
                                    "redis://127.0.0.1:6379.")]
Arrivals = Annotated[str, typer.Option(help="uniform | poisson arrivals.")]
ReadRatio = Annotated[float, typer.Option(help="Fraction of reads: 0.99, 0.75, 0.5 ...")]
Keyspace = Annotated[int, typer.Option(help="Keys chosen at random from this many.")]
MaxInFlight = Annotated[int, typer.Option(
    help="Connections per worker, one request in flight on each; due requests beyond that "
         "wait in the generator (timed from their intended start).")]
Consistency = Annotated[str, typer.Option(help="eventual | consistent reads.")]
Timeout = Annotated[str, typer.Option(help="Per-request timeout from the send: 2s, 500ms.")]
TimeoutMs = Annotated[float | None, typer.Option(
    "--timeout-ms", hidden=True, help="Per-request timeout in ms (old spelling of --timeout).")]
Drain = Annotated[str, typer.Option(help="After the schedule ends, how long queued requests "
                                    "may still be sent; the rest count as unsent.")]
Client = Annotated[str, typer.Option(help="store (the store adapter) | fast (lean Redis "
                                     "GET/SET client, redis:// only).")]
Loop = Annotated[str | None, typer.Option(
    help="Event loop of real-time runs: uvloop | asyncio (default: uvloop when installed). "
         "sim:// runs in virtual time and ignores it.")]
Workers = Annotated[int, typer.Option(help="Worker processes (local spawn, or Ray actors "
                                      "with --ray).")]
Ray = Annotated[str | None, typer.Option(help="Ray cluster address, or 'local' to start a "
                                         "local instance; needs replicalab[ray].")]
Prices = Annotated[str | None, typer.Option(help="Price table: a TOML file with [prices] "
                                            "or 'simpledb-2011' (seed 003 §4.2).")]
Seed = Annotated[int, typer.Option(help="Seed of arrivals, keys and the simulator.")]
Out = Annotated[Path, typer.Option(help="Directory that receives the run directory.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
Ramp = Annotated[str, typer.Option(help="Offered rates start:stop:step per second.")]
StepDuration = Annotated[str, typer.Option(help="Duration of each ramp step.")]
MaxErrorRate = Annotated[float, typer.Option(help="A step fails above this error fraction.")]
FailP99 = Annotated[float, typer.Option(help="A step fails above this response p99 (ms).")]



def _go(mode: str, timeout: str, timeout_ms: float | None, as_json: bool, **kw: Any) -> None:
    """Run the load ``mode`` and print it (bad input: one line, exit 2)."""

    def run() -> Any:
        if timeout_ms is not None and not timeout_ms > 0:
            raise ValueError(f"--timeout-ms {timeout_ms:g} must be positive; or give "
                             "--timeout as a duration, e.g. 2s")
        kw["timeout_ms"] = (timeout_ms if timeout_ms is not None
                            else duration_ms(timeout, "--timeout", None, "", "2s"))
        return loading.load_run(mode=mode, progress=Bars(not kw.pop("quiet")), **kw)

    outcome_of(run, as_json, {"sla_p99_ms": "--sla-p99", "step_duration": "--step-duration"})


@load_app.command("run")
def run_cmd(
    store: Store = "sim://simpledb",
    rate: Annotated[float, typer.Option(help="Offered rate, requests per second.")] = 100.0,
    duration: Annotated[str, typer.Option(help="How long to offer load: 30s, 5m.")] = "30s",
    arrivals: Arrivals = "poisson", read_ratio: ReadRatio = 0.99, keyspace: Keyspace = 1000,
    max_in_flight: MaxInFlight = 16, consistency: Consistency = "eventual",
    timeout: Timeout = "2s", timeout_ms: TimeoutMs = None, drain: Drain = "5s",
    client: Client = "store",
    loop: Loop = None, workers: Workers = 1, ray: Ray = None, prices: Prices = None, seed: Seed = 1,
    out: Out = Path("runs"), as_json: AsJson = False,
    groups: Annotated[int, typer.Option(
        help="Paced closed loop instead of --rate: client groups (machines; dealt out to "
             "--workers), each of --clients clients sending --client-rate requests/s and "
             "waiting for each reply (seed 003 §4).")] = 0,
    clients: Annotated[int, typer.Option(help="Paced: clients per group.")] = 100,
    client_rate: Annotated[float, typer.Option(help="Paced: requests/s per client.")] = 1.0,
) -> None:
    """Offer load at a fixed rate and report throughput, errors and latency.

    Example: replicalab load run --store sim://simpledb --rate 200 --duration 30s

    Example: replicalab load run --store sim://simpledb?clients_per_machine=100 --groups 5
    --clients 100 --client-rate 1 --duration 1m

    Example: replicalab load run --store redis://127.0.0.1:6379 --client fast --loop uvloop
    --rate 20000 --max-in-flight 50 --duration 10s
    """
    _go("run", timeout, timeout_ms, as_json, quiet=as_json, store=store, rate=rate,
        duration=duration, arrivals=arrivals, read_ratio=read_ratio, keyspace=keyspace,
        max_in_flight=max_in_flight, consistency=consistency, drain=drain, client=client,
        loop=loop, workers=workers, ray=ray, prices=prices, seed=seed, out=out,
        groups=groups, clients=clients, client_rate=client_rate)


@load_app.command("ramp")
def ramp_cmd(
    ramp: Ramp, store: Store = "sim://simpledb", step_duration: StepDuration = "10s",
    max_error_rate: MaxErrorRate = 0.01, fail_p99_ms: FailP99 = 1000.0,
    arrivals: Arrivals = "poisson", read_ratio: ReadRatio = 0.99, keyspace: Keyspace = 1000,
    max_in_flight: MaxInFlight = 16, consistency: Consistency = "eventual",
    timeout: Timeout = "2s", timeout_ms: TimeoutMs = None, drain: Drain = "5s",
    client: Client = "store",
    loop: Loop = None, workers: Workers = 1, ray: Ray = None, prices: Prices = None, seed: Seed = 1,
    out: Out = Path("runs"), as_json: AsJson = False,
) -> None:
    """Raise the offered rate step by step until the store fails (errors or p99 too high).

    Example: replicalab load ramp --store sim://simpledb --ramp 100:1000:100 --step-duration 10s
    """
    _go("ramp", timeout, timeout_ms, as_json, quiet=as_json, store=store, ramp=ramp,
        step_duration=step_duration, max_error_rate=max_error_rate, fail_p99_ms=fail_p99_ms,
        arrivals=arrivals, read_ratio=read_ratio, keyspace=keyspace,
        max_in_flight=max_in_flight, consistency=consistency, drain=drain, client=client,
        loop=loop, workers=workers, ray=ray, prices=prices, seed=seed, out=out)


# sla repeats ramp's option list: Typer declares a command's options in its own signature
# (a declaration list, not logic; duplicates pairs the two)
@load_app.command("sla")
def sla_cmd(
    ramp: Ramp,
    sla_p99: Annotated[str | None, typer.Option(
        help="Target: response-time p99 below this: 200ms, 1.5s (required).",
        show_default=False)] = None,
    sla_p99_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --sla-p99."
                                                     )] = None,
    store: Store = "sim://simpledb", step_duration: StepDuration = "10s",
    refine: Annotated[int, typer.Option(help="Extra bisection steps between the highest rate "
                                        "that met the SLA and the lowest that missed.")] = 3,
    max_error_rate: MaxErrorRate = 0.01, fail_p99_ms: FailP99 = 1000.0,
    arrivals: Arrivals = "poisson", read_ratio: ReadRatio = 0.99, keyspace: Keyspace = 1000,
    max_in_flight: MaxInFlight = 16, consistency: Consistency = "eventual",
    timeout: Timeout = "2s", timeout_ms: TimeoutMs = None, drain: Drain = "5s",
    client: Client = "store",
    loop: Loop = None, workers: Workers = 1, ray: Ray = None, prices: Prices = None, seed: Seed = 1,
    out: Out = Path("runs"), as_json: AsJson = False,
) -> None:
    """Find the highest offered rate whose response-time p99 stays under a target.

    Example: replicalab load sla --store sim://simpledb --ramp 100:2000:100 --sla-p99 100ms
    """
    if sla_p99 is None and sla_p99_ms is None:
        fail("load sla needs --sla-p99, the p99 target, e.g. --sla-p99 200ms")
    try:
        target_ms = duration_ms(sla_p99, "--sla-p99", sla_p99_ms, "--sla-p99-ms", "0")
    except ValueError as err:
        fail(str(err))
    _go("sla", timeout, timeout_ms, as_json, quiet=as_json, store=store, ramp=ramp,
        sla_p99_ms=target_ms, refine=refine, step_duration=step_duration,
        max_error_rate=max_error_rate, fail_p99_ms=fail_p99_ms, arrivals=arrivals,
        read_ratio=read_ratio, keyspace=keyspace, max_in_flight=max_in_flight,
        consistency=consistency, drain=drain, client=client, loop=loop, workers=workers,
        ray=ray, prices=prices, seed=seed, out=out)


@load_app.command("tradeoff")
def tradeoff_cmd(
    store: Annotated[str, typer.Option(help="Store URL, e.g. sim://simpledb or "
                                       "redis://127.0.0.1:6379.")] = "sim://simpledb",
    groups: Annotated[str, typer.Option(help="Client groups (machines) per load, comma "
                                        "separated.")] = "1,5,10,15,20,25",
    clients: Annotated[int, typer.Option(help="Clients per group.")] = 100,
    client_rate: Annotated[float, typer.Option(help="Requests per second per client, each "
                                               "waiting for its reply.")] = 1.0,
    read_ratios: Annotated[str, typer.Option(help="Read ratios, comma separated.")
                           ] = "0.99,0.75,0.5",
    consistency: Annotated[str, typer.Option(help="eventual, consistent, or both "
                                             "(comma separated).")] = "eventual,consistent",
    repeats: Annotated[int, typer.Option(help="Runs of each load (whiskers: min and max "
                                         "over them).")] = 3,
    step_duration: Annotated[str, typer.Option(help="How long each load runs.")] = "30s",
    keyspace: Annotated[int, typer.Option(help="Keys (the paper used one attribute of one "
                                          "item).")] = 1,
    timeout: Annotated[str, typer.Option(help="Per-request timeout.")] = "10s",
    seed: Annotated[int, typer.Option(help="Seed of phases, operations and the simulator.")
                    ] = 1,
    workers: Annotated[int, typer.Option(help="Local processes running steps (sim://) or "
                                         "client groups (real stores).")] = 1,
    ray: Annotated[str | None, typer.Option(help="Ray cluster address, or 'local'; needs "
                                            "replicalab[ray].")] = None,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Seed 003 §4: eventual against consistent reads as paced load grows (Figures 7-12).

    Example: replicalab load tradeoff --store sim://simpledb --workers 2

    Example: replicalab load tradeoff --store redis://127.0.0.1:6379 --groups 1,2,4
    --clients 20 --client-rate 5 --repeats 2 --step-duration 10s
    """
    from replicalab.api.durations import seconds
    from replicalab.api.tradeoff import tradeoff

    outcome_of(lambda: tradeoff(store, groups, clients, client_rate, read_ratios, consistency,
                                repeats, step_duration, keyspace,
                                1000 * seconds(timeout, "timeout"), seed, out, workers, ray,
                                Bars(not as_json)).outcome(), as_json)


def register(app: typer.Typer) -> None:
    """Add ``replicalab load run|ramp|sla|tradeoff`` to the root app."""
    app.add_typer(load_app, name="load")

"""``replicalab load run|ramp|sla``: open-loop load, a rising ramp, and an SLA search."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.checkers.load import SIMPLEDB_2011, PriceTable, p99_ms, parse_prices
from replicalab.cli.errors import UserError, fail
from replicalab.cli.output import TableData, out_console, say, show
from replicalab.cli.progress import Tick, progress_bar
from replicalab.cli.timeparse import duration_ms, parse_duration_s
from replicalab.history.rundir import Run
from replicalab.stores.base import redact_url
from replicalab.workloads.distributed import RayMissing
from replicalab.workloads.load import LoadSpec, default_loop
from replicalab.workloads.load_runner import RampPlan, parse_ramp, run_load

load_app = typer.Typer(help="Open-loop load: offered rate, ramp until failure, SLA search.",
                       no_args_is_help=True)
__all__ = ["load_app", "out_console", "register", "summary_table"]

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


def _prices(text: str | None) -> PriceTable | None:
    if text is None:
        return None
    if text == "simpledb-2011":
        return SIMPLEDB_2011
    path = Path(text)
    try:
        body = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"--prices {text}: cannot read it ({err.strerror}); give a TOML file "
                         "or simpledb-2011") from None
    return parse_prices(body, str(path))


def _spec(store: str, rate: float, duration: str, arrivals: str, read_ratio: float,
          keyspace: int, max_in_flight: int, consistency: str, timeout: str, drain: str,
          client: str, seed: int, loop: str | None = None,
          timeout_ms_old: float | None = None) -> LoadSpec:
    drain_s = 0.0 if drain.strip() in ("0", "0s") else parse_duration_s(drain, "--drain")
    if timeout_ms_old is not None and not timeout_ms_old > 0:
        raise ValueError(f"--timeout-ms {timeout_ms_old:g} must be positive; or give --timeout "
                         "as a duration, e.g. 2s")
    timeout_ms = (timeout_ms_old if timeout_ms_old is not None
                  else 1000 * parse_duration_s(timeout, "--timeout"))
    spec = LoadSpec(store=store, rate_per_s=rate, duration_s=parse_duration_s(
        duration, "--duration"), arrivals=arrivals, read_ratio=read_ratio, keyspace=keyspace,
        max_in_flight=max_in_flight, consistency=consistency, timeout_ms=timeout_ms,
        drain_s=drain_s, client=client, seed=seed, loop=loop or default_loop())
    spec.check()
    return spec


def _f(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None or x != x or x == float("inf") else f"{x:,.{digits}f}"


def summary_table(results: dict[str, Any]) -> TableData:
    """Return one row per step of a load run."""
    t = TableData(f"load {results['mode']} on {results['store']}",
                  ["offered/s", "done/s", "% offered", "errors", "resp p50 ms", "resp p99 ms",
                   "serv p99 ms", "failure"], wrap=(7,), right=tuple(range(7)))
    for s in results["steps"]:
        lat = s["latency"]
        t.add(_f(s["rate_per_s"], 1), _f(s["throughput_rps"], 1), _f(s["throughput_pct"], 1),
              f"{100 * s['error_rate']:.2f}%", _f(lat["response/all"].get("p50_ms")),
              _f(p99_ms(s)), _f(p99_ms(s, "service/all")), s.get("failure", ""))
    return t


def _finish(run: Run, as_json: bool) -> None:
    from replicalab.report.load import render_load_report

    report = render_load_report(run.results, run.run_dir)
    r = run.results
    table = summary_table(r)
    if as_json:
        sys.stdout.write(json.dumps({**r, "run_dir": str(run.run_dir), "report": str(report),
                                     "tables": [table.to_json()]}, sort_keys=True) + "\n")
    else:
        show(table)
        if r.get("stopped"):
            say(r["stopped"])
        if c := r.get("cost"):
            per = "n/a" if c["per_operation"] is None else f"{c['per_operation']:.3e}"
            say(f"cost: {c['total']:.6f} {c['currency']} total, {per} per operation "
                f"({c['prices']})")
        if (sla := r.get("sla")) and sla["best_rate_per_s"] is not None:
            say(f"SLA p99 < {sla['sla_p99_ms']:g} ms: highest rate {sla['best_rate_per_s']:g}/s "
                f"(first missed at {_f(sla['first_miss_rate_per_s'], 1)}/s)")
        say(f"report: {report}")
    if run.interrupted:
        fail(f"interrupted; the steps so far and a partial report are in {run.run_dir}", 130)
    if run.error:
        fail(f"the run stopped early ({run.error}); what was recorded is in {run.run_dir}")
    sla = r.get("sla")
    if sla is not None and sla["best_rate_per_s"] is None:
        lowest = min(s["rate_per_s"] for s in r["steps"])
        fail(f"no offered rate meets p99 < {sla['sla_p99_ms']:g} ms (not even {lowest:g}/s); "
             f"lower the ramp's start or raise --sla-p99; results are in {run.run_dir}")


def reachable(url: str) -> None:
    """Raise ValueError naming the fix if the real store at ``url`` does not answer (a
    simulated store always does): checked before a run directory is made."""
    if url.startswith("sim://"):
        return
    from replicalab.stores import StoreError, open_store

    store = open_store(url, 1)

    async def hello() -> None:
        try:
            client = await store.connect()
            await client.close()
        finally:
            await store.close()

    try:
        store.runtime.run(hello())
    except (StoreError, OSError) as err:
        raise ValueError(f"cannot reach {redact_url(url)}: {err}; start a server there "
                         "(replicalab cluster up redis --nodes 1 --regions lan prints a URL)"
                         ) from None


class StepPacer:
    """Moves a load run's bar inside each step by the time the step has run (a step offers
    load for a known duration), and names the step; run_load reports finished steps."""

    def __init__(self, tick: Tick, steps: int, step_s: float, rates: list[float]) -> None:
        self.tick, self.steps, self.step_s, self.rates = tick, max(steps, 1), step_s, rates
        self.done = 0
        self.t_step = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def what(self) -> str:
        rate = (f"offering {self.rates[self.done]:g}/s, " if self.done < len(self.rates)
                else "refining, ")
        return f"{rate}step {self.done + 1} of {'up to ' if self.steps > 1 else ''}{self.steps}"

    def __call__(self, fraction: float, what: str | None = None) -> None:
        """run_load's callback: ``fraction`` of the steps are done; ``what``, when given,
        names the step starting now (the rate it really offers)."""
        self.done = round(fraction * self.steps)
        self.t_step = time.monotonic()
        if what is not None:
            self.tick(fraction, what)
        elif fraction >= 1:
            self.tick(fraction, "saving the history")
        else:
            self.tick(fraction)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            within = min(0.95, (time.monotonic() - self.t_step) / self.step_s)
            self.tick((self.done + within) / self.steps)

    def __enter__(self) -> StepPacer:
        self.tick(0.0, self.what())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _go(spec: LoadSpec, mode: str, plan: RampPlan | None, workers: int, ray: str | None,
        prices: str | None, out: Path, as_json: bool) -> None:
    try:
        table = _prices(prices)
        reachable(spec.store)
        rates = [spec.rate_per_s] if plan is None else plan.rates()
        steps = len(rates) + (plan.refine if plan is not None and mode == "sla" else 0)
        with progress_bar(f"load {mode} on {redact_url(spec.store)}", not as_json) as tick, \
                StepPacer(tick, steps, spec.duration_s, rates) as pacer:
            run = run_load(spec, out, mode, plan, workers, ray, table, pacer)
            if run.interrupted:
                tick.interrupted()
    except (ValueError, UserError, RayMissing) as err:
        fail(str(err))
    _finish(run, as_json)


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
    try:
        spec = _spec(store, rate, duration, arrivals, read_ratio, keyspace, max_in_flight,
                     consistency, timeout, drain, client, seed, loop, timeout_ms
                     ).with_groups(groups, clients, client_rate)
        spec.check()
    except ValueError as err:
        fail(str(err))
    _go(spec, "run", None, workers, ray, prices, out, as_json)


def _plan(ramp: str, step_duration: str, max_error_rate: float, fail_p99_ms: float,
          sla_p99_ms: float | None = None, refine: int = 0) -> RampPlan:
    start, stop, step = parse_ramp(ramp)
    plan = RampPlan(start, stop, step, parse_duration_s(step_duration, "--step-duration"),
                    max_error_rate, fail_p99_ms, sla_p99_ms, refine)
    plan.check()
    return plan


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
    try:
        plan = _plan(ramp, step_duration, max_error_rate, fail_p99_ms)
        spec = _spec(store, plan.start_per_s, step_duration, arrivals, read_ratio, keyspace,
                     max_in_flight, consistency, timeout, drain, client, seed, loop,
                     timeout_ms)
    except ValueError as err:
        fail(str(err))
    _go(spec, "ramp", plan, workers, ray, prices, out, as_json)


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
    try:
        if sla_p99 is None and sla_p99_ms is None:
            raise ValueError("load sla needs --sla-p99, the p99 target, e.g. --sla-p99 200ms")
        sla_p99_ms = duration_ms(sla_p99, "--sla-p99", sla_p99_ms, "--sla-p99-ms", "0")
        plan = _plan(ramp, step_duration, max_error_rate, fail_p99_ms, sla_p99_ms, refine)
        spec = _spec(store, plan.start_per_s, step_duration, arrivals, read_ratio, keyspace,
                     max_in_flight, consistency, timeout, drain, client, seed, loop,
                     timeout_ms)
    except ValueError as err:
        fail(str(err))
    _go(spec, "sla", plan, workers, ray, prices, out, as_json)


def register(app: typer.Typer) -> None:
    """Add ``replicalab load run|ramp|sla`` to the root app."""
    app.add_typer(load_app, name="load")

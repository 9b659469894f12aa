"""Open-loop load: a fixed offered rate (:func:`load_run`), a ramp that raises it until the
store fails, or a search for the highest rate whose p99 meets an SLA (the same function,
``mode`` ramp or sla). What ``replicalab load run|ramp|sla`` runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, INTERRUPTED, STOPPED, Outcome, Table
from replicalab.api.progress import Progress, cut_short, ticking

MODES = ("run", "ramp", "sla")


def _f(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None or x != x or x == float("inf") else f"{x:,.{digits}f}"


def load_table(results: dict[str, Any]) -> Table:
    """Return one row per step of a load run: rates per s, the share of the requests sent
    that failed (seed 003's Figure 12) and of the offered ones never sent, latencies in ms,
    and for a ramp or an SLA search why the store failed a step."""
    from replicalab.checkers.load import p99_ms

    judged = results["mode"] != "run"
    t = Table(f"load {results['mode']} on {results['store']}",
              ["offered/s", "done/s", "% offered", "failed", "unsent", "resp p50 ms",
               "resp p99 ms", "serv p99 ms"] + (["store failed"] if judged else []),
              wrap=(8,) if judged else (), right=tuple(range(8)))
    for s in results["steps"]:
        lat = s["latency"]
        failed = s.get("failure_rate")
        t.add(_f(s["rate_per_s"], 1), _f(s["throughput_rps"], 1), _f(s["throughput_pct"], 1),
              "n/a" if failed is None else f"{100 * failed:.2f}%",
              f"{100 * s['error_rate_by_kind'].get('unsent', 0.0):.2f}%",
              _f(lat["response/all"].get("p50_ms")), _f(p99_ms(s)),
              _f(p99_ms(s, "service/all")), *([s.get("failure", "")] if judged else []))
    return t


_KIND_WORDS = {"busy": "busy (the store said it is overloaded: 503 ServiceUnavailable, BUSY)",
               "timeout": "no answer in time", "refused": "connection refused or lost",
               "other": "other errors"}


def failed_by_kind(step: dict[str, Any]) -> str:
    """Return "" if no request of ``step`` failed, else one line: how many of the requests
    sent failed, by kind (``checkers.load.ERROR_KINDS``), most frequent first."""
    counts = step["counts"]
    kinds = sorted(((n, k) for k, n in counts["errors"].items() if k != "unsent" and n),
                   reverse=True)
    if not kinds:
        return ""
    total = sum(n for n, _ in kinds)
    return (f"{total:,} of {counts['sent']:,} requests sent at {step['rate_per_s']:g}/s "
            "failed: " + ", ".join(f"{_KIND_WORDS[k]} {n:,}" for n, k in kinds))


def _prices(text: str | None) -> Any:
    from replicalab.checkers.load import SIMPLEDB_2011, parse_prices

    if text is None:
        return None
    if text == "simpledb-2011":
        return SIMPLEDB_2011
    try:
        body = Path(text).read_text(encoding="utf-8")
    except OSError as err:
        raise ParameterError("prices", f"{text}: cannot read it ({err.strerror}); give a TOML "
                                       "file or simpledb-2011") from None
    return parse_prices(body, text)


def reachable(spec: Any) -> None:
    """Raise ValueError naming the fix if the store of ``spec`` (a ``LoadSpec``) cannot do
    the reads it asks for (:class:`ParameterError` naming ``consistency``) or, a real one,
    does not answer (a simulated store always does): checked before a run directory is
    made."""
    from replicalab.stores import StoreError, open_store
    from replicalab.stores.base import redact_url
    from replicalab.workloads.load import reads_refused

    url = spec.store
    store = open_store(url, 1)
    refused = reads_refused(spec, store.info.features)

    async def hello() -> None:
        try:
            if refused is None and not url.startswith("sim://"):
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
    if refused is not None:
        raise refused


class StepPacer:
    """Moves a load run's bar inside each step by the time the step has run (a step offers
    load for a known duration), and names the step; run_load reports finished steps."""

    def __init__(self, tick: Any, steps: int, step_s: float, rates: list[float]) -> None:
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


def load_run(store: str = "sim://simpledb", rate: float = 100.0, duration: str | float = "30s",
             mode: str = "run", ramp: str | None = None, step_duration: str | float = "10s",
             max_error_rate: float = 0.01, fail_p99_ms: float = 1000.0,
             sla_p99_ms: float | None = None, refine: int = 3, arrivals: str = "poisson",
             read_ratio: float = 0.99, keyspace: int = 1000, max_in_flight: int = 16,
             consistency: str = "eventual", timeout_ms: float = 2000.0,
             drain: str | float = "5s", client: str = "store", loop: str | None = None,
             workers: int = 1, ray: str | None = None, prices: str | None = None,
             seed: int = 1, out: str | Path = "runs", progress: Progress = None,
             groups: int = 0, clients: int = 100, client_rate: float = 1.0) -> Outcome:
    """Offer open-loop load to ``store`` and return the :class:`Outcome`: throughput,
    errors and latency per step, its table and report. ``mode`` run: ``rate`` requests/s
    for ``duration``; ramp: the rates of ``ramp`` (start:stop:step per second),
    ``step_duration`` each, until a step fails (errors above ``max_error_rate`` or
    response p99 above ``fail_p99_ms``); sla: the highest rate whose p99 stays under
    ``sla_p99_ms``, ``refine`` bisection steps more. ``prices`` (a TOML file or
    simpledb-2011) adds the cost; ``workers`` processes or a Ray cluster offer it.
    ``groups`` > 0: a paced closed loop instead of ``rate`` (seed 003 §4): client groups
    (machines, dealt out to the workers), each of ``clients`` clients sending
    ``client_rate`` requests/s and waiting for each reply. A run whose SLA no rate meets is
    STOPPED with why."""
    from replicalab.workloads.distributed import RayMissing
    from replicalab.workloads.load import LoadSpec, default_loop
    from replicalab.workloads.load_runner import RampPlan, parse_ramp, run_load

    if mode not in MODES:
        raise ParameterError("mode", f"{mode!r}: use run, ramp or sla")
    plan = None
    if mode != "run":
        if ramp is None:
            raise ParameterError("ramp", "is missing: give start:stop:step per second")
        if mode == "sla" and sla_p99_ms is None:
            raise ParameterError("sla_p99_ms", "is missing: load sla needs the p99 target")
        plan = RampPlan(*parse_ramp(ramp), seconds(step_duration, "step_duration"),
                        max_error_rate, fail_p99_ms, sla_p99_ms, refine if mode == "sla" else 0)
        plan.check()
    drain_s = 0.0 if isinstance(drain, str) and drain.strip() in ("0", "0s") else seconds(
        drain, "drain")
    spec = LoadSpec(store=store, rate_per_s=plan.start_per_s if plan else rate,
                    duration_s=seconds(step_duration if plan else duration,
                                       "step_duration" if plan else "duration"),
                    arrivals=arrivals, read_ratio=read_ratio, keyspace=keyspace,
                    max_in_flight=max_in_flight, consistency=consistency, timeout_ms=timeout_ms,
                    drain_s=drain_s, client=client, seed=seed, loop=loop or default_loop()
                    ).with_groups(groups, clients, client_rate)
    spec.check()
    table = _prices(prices)
    reachable(spec)
    from replicalab.stores.base import redact_url

    rates = [spec.rate_per_s] if plan is None else plan.rates()
    steps = len(rates) + (plan.refine if plan is not None and mode == "sla" else 0)
    try:
        with ticking(f"load {mode} on {redact_url(spec.store)}", progress) as tick:
            with StepPacer(tick or (lambda *_: None), steps, spec.duration_s, rates) as pacer:
                run = run_load(spec, Path(out), mode, plan, workers, ray, table, pacer)
            if run.interrupted:
                cut_short(tick, "interrupted")
    except RayMissing as err:
        raise ParameterError(err.parameter, err.problem, err.mentions) from None
    from replicalab.report.load import render_load_report

    r = run.results
    report = render_load_report(r, run.run_dir)
    remarks = [r["stopped"]] if r.get("stopped") else []
    remarks += [line for s in r["steps"] if (line := failed_by_kind(s))]
    if c := r.get("cost"):
        per = "n/a" if c["per_operation"] is None else f"{c['per_operation']:.3e}"
        remarks.append(f"cost: {c['total']:.6f} {c['currency']} total, {per} per operation "
                       f"({c['prices']})")
    sla = r.get("sla")
    if sla and sla["best_rate_per_s"] is not None:
        remarks.append(f"SLA p99 < {sla['sla_p99_ms']:g} ms: highest rate "
                       f"{sla['best_rate_per_s']:g}/s (first missed at "
                       f"{_f(sla['first_miss_rate_per_s'], 1)}/s)")
    status, why = DONE, ""
    if run.interrupted:
        status, why = INTERRUPTED, (f"interrupted; the steps so far and a partial report are "
                                    f"in {run.run_dir}")
    elif run.error:
        status, why = STOPPED, (f"the run stopped early ({run.error}); what was recorded is "
                                f"in {run.run_dir}")
    elif sla is not None and sla["best_rate_per_s"] is None:
        lowest = min(s["rate_per_s"] for s in r["steps"])
        status, why = STOPPED, (f"no offered rate meets p99 < {sla['sla_p99_ms']:g} ms (not "
                                f"even {lowest:g}/s); lower the ramp's start or raise the "
                                f"target; results are in {run.run_dir}")
    return Outcome(r, run.run_dir, report, [load_table(r)], remarks, status, why)

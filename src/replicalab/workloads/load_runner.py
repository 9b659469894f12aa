"""Run a load, a ramp or an SLA search end to end and save the run directory.

``run``: one step at ``--rate``. ``ramp``: steps from start to stop, raising the offered
rate until the store fails (error rate or p99 beyond a limit). ``sla``: the same ramp, which
stops at the first step that misses the SLA, then ``refine`` bisection steps between the
highest rate that met it and the lowest that missed; the answer comes from
:func:`replicalab.checkers.load.sla_search` over all steps.

The run directory holds ``config.json``, ``history.parquet`` (every step's workers merged on
one timeline), ``intended.parquet`` (each op's intended start and step), ``results.json``,
``histograms/*.hlog`` and, from the CLI, ``report.html``. An interrupted run or a failing
store still saves every completed step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hdrh.log import HistogramLogWriter

from replicalab.checkers.load import (
    PriceTable,
    cost,
    decode_histograms,
    merge_counts,
    merge_histograms,
    merge_histories,
    next_refinement,
    sla_search,
    step_failure,
    step_summary,
)
from replicalab.errors import ParameterError
from replicalab.history import History, save_history
from replicalab.history.rundir import Run, make_run_dir, save_results
from replicalab.stores.base import redact_url
from replicalab.workloads.base import SCHEMA_VERSION
from replicalab.workloads.distributed import Pool, StepInterrupted, shifts_ns
from replicalab.workloads.load import PROCESS_STRIDE, LoadSpec, WorkerResult

MODES = ("run", "ramp", "sla")
MAX_STEPS = 200


@dataclass(frozen=True)
class RampPlan:
    """Offered rates to try (per s), how long each step lasts, and what counts as failing."""

    start_per_s: float
    stop_per_s: float
    step_per_s: float
    step_duration_s: float = 10.0
    max_error_rate: float = 0.01
    fail_p99_ms: float = 1000.0
    sla_p99_ms: float | None = None
    refine: int = 3

    def rates(self) -> list[float]:
        """Return the ramp's rates, start to stop inclusive."""
        n = int(np.floor((self.stop_per_s - self.start_per_s) / self.step_per_s + 1e-9)) + 1
        return [round(self.start_per_s + i * self.step_per_s, 6) for i in range(n)]

    def check(self) -> None:
        """Raise ParameterError naming the first invalid ramp parameter (as ``load_run``
        names it) and its fix."""
        if not (0 < self.start_per_s <= self.stop_per_s and self.step_per_s > 0):
            raise ParameterError("ramp", f"{self.start_per_s:g}:{self.stop_per_s:g}:"
                                         f"{self.step_per_s:g} needs 0 < start <= stop and "
                                         "step > 0, e.g. {ramp} 100:1000:100",
                                 {"ramp": "ramp"})
        if len(self.rates()) > MAX_STEPS:
            raise ParameterError("ramp", f"gives {len(self.rates())} steps, more than "
                                         f"{MAX_STEPS}; use a larger step")
        if not self.step_duration_s > 0:
            raise ParameterError("step_duration", f"{self.step_duration_s} s must be positive")
        if not 0 <= self.max_error_rate <= 1:
            raise ParameterError("max_error_rate", f"{self.max_error_rate} must be in 0..1")
        if not self.fail_p99_ms > 0:
            raise ParameterError("fail_p99_ms", f"{self.fail_p99_ms} must be positive")
        if self.sla_p99_ms is not None and not self.sla_p99_ms > 0:
            raise ParameterError("sla_p99_ms", f"{self.sla_p99_ms:g}ms must be positive")
        if not 0 <= self.refine <= 20:
            raise ParameterError("refine", f"{self.refine} must be 0..20")


def parse_ramp(text: str) -> tuple[float, float, float]:
    """Return (start, stop, step) per s from ``"start:stop:step"`` (ParameterError naming
    ``ramp`` if malformed)."""
    parts = text.split(":")
    try:
        if len(parts) != 3:
            raise ValueError
        start, stop, step = (float(p) for p in parts)
    except ValueError:
        raise ParameterError("ramp", f"{text!r} must be start:stop:step in requests per "
                                     "second, e.g. 100:1000:100") from None
    return start, stop, step


def merge_step(results: list[WorkerResult], rate_per_s: float, duration_s: float
               ) -> dict[str, Any]:
    """Return the summary of one step from its workers' results (counts and histograms
    merged exactly), with each worker's own counts, clocks and error."""
    counts = merge_counts(r.counts for r in results)
    hists = merge_histograms(decode_histograms(r.histograms) for r in results)
    elapsed_s = max(((r.end_ns - r.t0_ns) / 1e9 for r in results), default=0.0)
    out = step_summary(rate_per_s, duration_s, counts, hists, elapsed_s)
    out["histograms"] = {name: h.encode().decode("ascii") for name, h in hists.items()}
    out["workers"] = [{
        "worker": r.worker, "rate_per_s": r.rate_per_s, "hostname": r.clock.hostname,
        "pid": r.clock.pid, "runtime": "virtual" if r.virtual else "real", "loop": r.loop,
        "clock": {"wall_start_ns": r.clock.wall_start_ns, "mono_start_ns": r.clock.mono_start_ns,
                  "wall_end_ns": r.clock.wall_end_ns, "mono_end_ns": r.clock.mono_end_ns,
                  "wall_minus_mono_ns": r.clock.offset_ns, "drift_ns": r.clock.drift_ns},
        "t0_ns": r.t0_ns, "end_ns": r.end_ns,
        "counts": r.counts.to_json(), "error": r.error} for r in results]
    out["errors"] = sorted({r.error for r in results if r.error})
    return out


def _merged_history(steps: list[list[WorkerResult]]) -> tuple[History, np.ndarray, np.ndarray]:
    """Return all steps' histories on one timeline, intended starts and each row's step."""
    parts: list[tuple[History, Any, int, int]] = []
    step_of: list[int] = []
    virtual_base = 0
    for k, results in enumerate(steps):
        shifts = shifts_ns(results)
        for r, shift in zip(results, shifts, strict=True):
            # Virtual time restarts at 0 every step: lay the steps end to end.
            extra = virtual_base if r.virtual else 0
            parts.append((r.history, r.intended_ns, shift + extra, 0))  # ids already per worker
            step_of.extend([k] * len(r.history))
        if results and results[0].virtual:
            virtual_base += max(r.end_ns for r in results) + 1
    if not parts:
        return History(), np.zeros(0, np.int64), np.zeros(0, np.int64)
    h, intended = merge_histories(parts)
    # merge_histories orders rows by (shifted invoke, part, row): the same stable order here.
    order = np.argsort(np.concatenate([
        p[0].column("invoke_ns").astype(np.int64) + p[2] for p in parts]), kind="stable")
    steps_arr = np.asarray(step_of, np.int64)[order]
    return h, intended, steps_arr


def _save(run_dir: Path, spec: LoadSpec, steps: list[list[WorkerResult]],
          summaries: list[dict[str, Any]], config: dict[str, Any]) -> None:
    h, intended, step_of = _merged_history(steps)
    save_history(h, run_dir, config)
    pq.write_table(pa.table({"intended_ns": pa.array(intended, pa.int64()),
                             "step": pa.array(step_of, pa.int32())}),
                   run_dir / "intended.parquet", compression="zstd")
    folder = run_dir / "histograms"
    folder.mkdir(exist_ok=True)
    for k, s in enumerate(summaries):
        hists = decode_histograms(s["histograms"])
        for name, hist in hists.items():
            path = folder / f"step{k:02d}-{name.replace('/', '-')}.hlog"
            with path.open("w") as out:
                writer = HistogramLogWriter(out)
                writer.output_comment(f"replicalab load step {k} at {s['rate_per_s']:g}/s, "
                                      f"{name}, values in microseconds")
                writer.output_legend()
                writer.output_interval_histogram(hist, 0, 0, max_value_unit_ratio=1000.0)


def _check_input(spec: LoadSpec, mode: str, plan: RampPlan | None, workers: int) -> None:
    """Raise ParameterError for bad input, before any directory is made (a refused command
    leaves none behind)."""
    if mode not in MODES:
        raise ParameterError("mode", f"{mode!r}: use run, ramp or sla")
    spec.check()
    if mode != "run":
        if plan is None:
            raise ParameterError("ramp", f"is missing: load {mode} needs start:stop:step")
        plan.check()
        if mode == "sla" and plan.sla_p99_ms is None:
            raise ParameterError("sla_p99_ms", "is missing: load sla needs the p99 target, "
                                               "e.g. 200 ms")
    from replicalab.stores import open_store
    open_store(spec.store, spec.seed)  # fail fast on a bad URL
    if workers < 1:
        raise ParameterError("workers", f"{workers} must be at least 1")
    if spec.groups and mode != "run":
        raise ParameterError("groups", f"{spec.groups}: load {mode} offers rates; paced "
                                       "clients run with load run, or load tradeoff for a "
                                       "grid of loads")
    if spec.groups and workers > spec.groups:
        raise ParameterError("workers", f"{workers} is more than {{groups}} {spec.groups}: "
                                        "a worker runs whole groups; use at most as many "
                                        "workers as groups", {"groups": "groups"})


class _Stepper:
    """Offers one rate at a time on the worker pool and keeps what every step recorded:
    the workers' results and the merged summary (with why the step failed, if it did)."""

    def __init__(self, spec: LoadSpec, duration_s: float, plan: RampPlan | None, total: int,
                 progress: Callable[[float, str | None], None] | None) -> None:
        self.spec, self.duration_s, self.plan = spec, duration_s, plan
        self.total, self.progress = total, progress
        self.pool: Pool | None = None
        self.steps: list[list[WorkerResult]] = []
        self.summaries: list[dict[str, Any]] = []

    def _tell(self, what: str | None) -> None:
        if self.progress is not None:
            self.progress(min(1.0, len(self.summaries) / max(self.total, 1)), what)

    def offer(self, rate: float) -> dict[str, Any]:
        """Run one step at ``rate`` per second and return its summary; KeyboardInterrupt
        (after keeping what the workers recorded) if the step was cut short."""
        assert self.pool is not None
        # the rate really offered next (a search picks it as it goes)
        self._tell(f"offering {rate:g}/s, step {len(self.summaries) + 1} of "
                   f"{'up to ' if self.total > 1 else ''}{self.total}")
        step_spec = LoadSpec(**{**self.spec.__dict__, "rate_per_s": rate,
                                "duration_s": self.duration_s})
        try:
            results = self.pool.run_step(step_spec)
        except StepInterrupted as stop:  # keep what the workers recorded, then stop
            results, cut = stop.results, True
        else:
            cut = any(r.error == "interrupted" for r in results)  # an inline worker's Ctrl-C
        if cut and not results:
            raise KeyboardInterrupt
        self.steps.append(results)
        s = merge_step(results, rate, self.duration_s)
        plan = self.plan
        s["failure"] = (step_failure(s, plan.max_error_rate, plan.fail_p99_ms)
                        if plan is not None else "")
        self.summaries.append(s)
        self._tell(None)
        if cut:
            raise KeyboardInterrupt
        return s


def _offer_rates(stepper: _Stepper, mode: str, rates: list[float], plan: RampPlan | None
                 ) -> tuple[str, str]:
    """Offer ``rates`` in turn until a step errs, a ramp's store fails or an SLA is first
    missed; return (error, why the steps stopped early)."""
    for rate in rates:
        s = stepper.offer(rate)
        if s["errors"]:
            return "; ".join(s["errors"]), ""
        if mode == "ramp" and s["failure"]:
            return "", f"the store failed at {rate:g}/s: {s['failure']}"
        if mode == "sla":
            assert plan is not None and plan.sla_p99_ms is not None
            found = sla_search(stepper.summaries, plan.sla_p99_ms, plan.max_error_rate)
            if found["first_miss_rate_per_s"] is not None:
                return "", f"the SLA was first missed at {rate:g}/s"
    return "", ""


def _refine_sla(stepper: _Stepper, plan: RampPlan, sla_p99_ms: float) -> str:
    """Offer rates between the best one that met the SLA and the first that missed it,
    halving the gap ``plan.refine`` times at most; return the error of a step that erred."""
    min_gap = plan.step_per_s / 2 ** (plan.refine + 1)
    for _ in range(plan.refine):
        found = sla_search(stepper.summaries, sla_p99_ms, plan.max_error_rate)
        lo, hi = found["best_rate_per_s"], found["first_miss_rate_per_s"]
        if lo is None or hi is None:
            break
        rate = next_refinement(lo, hi, min_gap)
        if rate is None:
            break
        s = stepper.offer(rate)
        if s["errors"]:
            return "; ".join(s["errors"])
    return ""


def _results(spec: LoadSpec, mode: str, plan: RampPlan | None, stepper: _Stepper,
             workers: int, stopped: str, prices: PriceTable | None) -> dict[str, Any]:
    """Return results.json of a load run: its steps, why it stopped, the SLA found and the
    cost, where asked."""
    summaries = stepper.summaries
    pool = stepper.pool
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "workload": "load", "mode": mode,
        "store": redact_url(spec.store), "consistency": spec.consistency, "seed": spec.seed,
        "config": {**spec.to_json(), "plan": plan.__dict__ if plan else None,
                   "workers": pool.describe() if pool else {"workers": workers}},
        "steps": summaries, "stopped": stopped, "notes": [], "faults": [],
    }
    if plan is not None and plan.sla_p99_ms is not None and summaries:
        results["sla"] = sla_search(summaries, plan.sla_p99_ms, plan.max_error_rate)
    if prices is not None and summaries:
        total_counts = merge_counts(_counts(s) for s in summaries)
        results["cost"] = cost(total_counts, prices, sum(s["duration_s"] for s in summaries))
    steps = stepper.steps
    if steps and steps[0] and steps[0][0].virtual and len(steps[0]) > 1:
        results["notes"].append("sim:// stores run per worker process: each worker drove its "
                                "own simulated store at its share of the rate")
    return results


def run_load(spec: LoadSpec, out: Path, mode: str = "run", plan: RampPlan | None = None,
             workers: int = 1, ray_address: str | None = None,
             prices: PriceTable | None = None,
             progress: Callable[[float, str | None], None] | None = None) -> Run:
    """Run ``mode`` (run | ramp | sla) and save it under ``out``; returns even when a step
    fails or the run is interrupted (see Run). ValueError for bad input."""
    _check_input(spec, mode, plan, workers)
    # the workers first: Ray missing or out of reach is bad input, refused before a run
    # directory is made
    pool = Pool(workers, ray_address)
    try:
        run_dir = make_run_dir(out, "load", spec.store)
    except BaseException:
        pool.close()
        raise
    rates = [spec.rate_per_s] if mode == "run" else plan.rates()  # type: ignore[union-attr]
    duration_s = spec.duration_s if mode == "run" else plan.step_duration_s  # type: ignore
    total = len(rates) + (plan.refine if plan and mode == "sla" else 0)
    stepper = _Stepper(spec, duration_s, plan, total, progress)
    stepper.pool = pool
    interrupted, error, stopped = False, "", ""
    wall0 = time.perf_counter()
    try:
        error, stopped = _offer_rates(stepper, mode, rates, plan)
        if mode == "sla" and not error and plan is not None and plan.sla_p99_ms is not None:
            error = _refine_sla(stepper, plan, plan.sla_p99_ms)
    except KeyboardInterrupt:
        interrupted, error = True, "interrupted"
    finally:
        if stepper.pool is not None:
            stepper.pool.close()
    if mode == "ramp" and not stopped and not error:
        stopped = "the ramp reached its last rate without the store failing"
    results = _results(spec, mode, plan, stepper, workers, stopped, prices)
    if interrupted or error:
        results["notes"].append(f"run cut short: {error}")
    config = {"spec": spec.to_json(), "mode": mode, "plan": plan.__dict__ if plan else None,
              "wall_s": round(time.perf_counter() - wall0, 3), "interrupted": interrupted,
              "error": error, "process_stride": PROCESS_STRIDE}
    _save(run_dir, spec, stepper.steps, stepper.summaries, config)
    save_results(results, run_dir)
    if progress is not None and not interrupted:
        progress(1.0, None)
    return Run(run_dir, results, interrupted, error, stepper.steps)


def _counts(summary: dict[str, Any]) -> Any:
    from replicalab.checkers.load import Counts
    return Counts.from_json(summary["counts"])

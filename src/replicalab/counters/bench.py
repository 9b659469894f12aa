"""The experiments of seed 004 §V on data centres of one machine (``replicalab counter bench``).

Closed-loop clients (think time 100 ms), spread evenly over the data centres, each with its
own session of one configuration (Weak, Strong, client-based, server-based, server-based with
batching), apply 20 % increments and 80 % decrements to one counter or to 100 counters picked
uniformly. Every operation is timed and classified; after the clients stop, the bench waits for
the data centres to converge and reads each counter's final value everywhere.

Experiments (each a list of bounded *points*, one configuration and one client count each):

* ``throughput`` — throughput vs latency as the clients grow (seed Figures 6 and 10);
* ``regions`` — median latency by client region at low load (seed Figure 9, left);
* ``exhaust`` — decrements only from 6000 until every right is used: latency over time, with
  spikes at transfers and then fast local failures (seed Figure 9, middle);
* ``violations`` — decrements only from a small value: decrements in excess of the bound vs
  clients (seed Figure 9, right);
* ``partition`` and ``dc-loss`` — decrements only until every right is used while one data
  centre is cut off from the others for a while, or lost and its rights recovered (seed
  §IV-E; :mod:`faults`): the invariant, the rights accounted for (granted, used, held, held by
  the lost DC, recovered, written off) and what crossed the partition.

Accounting is pure (:func:`summarise`): throughput counts successful operations per second;
latency percentiles cover all operations (the seed averages failed ones too) and, separately,
each operation kind and client region; violations are counted from the final merged value
(decrements that took the counter below its bound), from the values the clients saw, and
from the acknowledgements.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from replicalab.counters import faults
from replicalab.counters.crdt import BoundedCounter, CounterError, InsufficientRights
from replicalab.counters.middleware import Stopped
from replicalab.counters.service import Contended, CounterService, UnknownCounter
from replicalab.errors import ParameterError
from replicalab.stores import ConditionFailed, StoreError, Unavailable

CONFIGS = ("weak", "strong", "client-based", "server-based", "server-based+batch")
MIDDLEWARES = ("client-based", "server-based", "server-based+batch")
EXPERIMENTS = ("throughput", "regions", "exhaust", "violations", *faults.FAULTS)
OUTCOMES = ("ok", "insufficient", "contended", "unavailable", "unknown", "error", "down")
OK, INSUFFICIENT, CONTENDED, UNAVAILABLE, UNKNOWN, ERROR, DOWN = range(len(OUTCOMES))
"""``down``: refused by a stopped (lost) data centre's middleware; it did not happen."""
SCHEMA_VERSION = 1
SERIES_MAX_POINTS = 20_000
"""Latency-over-time series longer than this are thinned by a fixed stride (in results)."""


class Deployment(Protocol):
    """One configuration running on the data centres: hands out client sessions."""

    name: str

    async def service(self, dc: str) -> CounterService:
        """Return a new client session in data centre ``dc``."""
        ...

    async def close(self) -> None:
        """Stop background work and release everything."""
        ...


# Data: fields and defaults, alike in shape to RampPlan (load_runner) and Syncer (sync).
@dataclass(frozen=True)
class PointSpec:
    """One bounded run: a configuration, a client count and a workload."""

    experiment: str
    config: str
    clients: int
    counters: int = 1
    inc_fraction: float = 0.2
    think_ms: float = 100.0
    initial: int = 1_000_000
    lower: int = 0
    duration_s: float = 20.0
    until_exhausted: bool = False
    allow_global: bool = True
    op_timeout_s: float = 10.0
    seed: int = 1
    fault: str = ""  # "", or one of faults.FAULTS
    fault_dc: str = ""  # the data centre cut off or lost
    fault_at_s: float = 1.0  # since the point's start
    fault_for_s: float = 5.0  # cut off for this long; lost for this long before recovery

    def check(self) -> None:
        """Raise ValueError naming the first invalid field."""
        if self.config not in CONFIGS:
            raise ValueError(f"configuration {self.config!r}: use one of {', '.join(CONFIGS)}")
        if self.fault and self.fault not in faults.FAULTS:
            raise ValueError(f"fault {self.fault!r}: use one of {', '.join(faults.FAULTS)}")
        if self.fault and self.config not in MIDDLEWARES:
            raise ValueError(f"fault {self.fault!r}: the Bounded Counter's middlewares are "
                             f"faulted, not {self.config}; use one of {', '.join(MIDDLEWARES)}")
        if self.fault and not (self.fault_at_s >= 0 and self.fault_for_s > 0):
            raise ValueError(f"fault at {self.fault_at_s} s for {self.fault_for_s} s: the start "
                             "must not be negative and the length must be positive")
        if self.clients < 1 or self.counters < 1:
            raise ValueError(f"clients ({self.clients}) and counters ({self.counters}) must "
                             "be at least 1")
        if not 0 <= self.inc_fraction <= 1:
            raise ValueError(f"increment fraction {self.inc_fraction} must be in [0, 1]")
        if not self.duration_s > 0 or self.think_ms < 0 or not self.op_timeout_s > 0:
            raise ValueError("duration and operation timeout must be positive, think time "
                             "not negative")
        if self.initial < self.lower:
            raise ValueError(f"initial value {self.initial} is below the bound {self.lower}")

    def label(self) -> str:
        """Return a short unique name of this point (usable in a counter name)."""
        return f"{self.experiment}-{self.config}-c{self.clients}-k{self.counters}"


def rights_accounting(states: Sequence[BoundedCounter | None], log: OpLog, spec: PointSpec,
                      fault: faults.FaultRun | None = None) -> dict[str, Any]:
    """Return where every right to decrement went, over the point's counters (``states``:
    each counter's final merged state, None if unread), in counter units:

    ``granted`` — rights ever created (the initial slack, one per increment); ``used`` —
    rights consumed by decrements the stores recorded; ``held`` — rights each DC holds at the
    end; ``acked_decrements``/``acked_increments`` — from the clients' acknowledgements,
    ``maybe_decrements`` — decrements whose outcome is unknown (unavailable, no answer, an
    unexpected store error: they may have happened);
    ``used_matches_acks`` — acked <= used <= acked + maybe (no acknowledged decrement lost,
    none invented); ``granted_matches_acks`` — granted == slack + acked increments (none
    lost: an increment's outcome is never unknown in these runs unless counted as maybe);
    for a lost DC: ``held_by_lost_at_loss``, ``recovered``, ``written_off`` and
    ``held_by_lost_at_end``.
    """
    key = np.asarray(log.key, dtype=np.int64)
    outcome = np.asarray(log.outcome, dtype=np.int64)
    dec = np.asarray(log.is_dec, dtype=bool)
    ok = outcome == OK
    # an unexpected store error (a COMMIT that got no answer from a killed server) may have
    # happened too: only refusals and "down" certainly did not
    maybe = (outcome == UNAVAILABLE) | (outcome == UNKNOWN) | (outcome == ERROR)
    read = [k for k, st in enumerate(states) if st is not None and st.down is not None]
    sel = np.isin(key, read)
    acked_dec = int(np.sum(ok & dec & sel))
    acked_inc = int(np.sum(ok & ~dec & sel))
    maybe_dec = int(np.sum(maybe & dec & sel))
    maybe_inc = int(np.sum(maybe & ~dec & sel))
    granted = used = 0
    held: dict[str, int] = {}
    for k in read:
        st = states[k]
        assert st is not None and st.down is not None
        granted += sum(st.down.r[i][i] for i in range(len(st.replicas)))
        used += sum(st.down.u)
        for dc in st.replicas:
            held[dc] = held.get(dc, 0) + (st.local_rights(dc) or 0)
    slack = (spec.initial - spec.lower) * len(read)
    out: dict[str, Any] = {
        "counters_read": len(read), "granted": granted, "used": used, "held": held,
        "acked_decrements": acked_dec, "acked_increments": acked_inc,
        "maybe_decrements": maybe_dec, "maybe_increments": maybe_inc,
        "used_matches_acks": acked_dec <= used <= acked_dec + maybe_dec,
        "granted_matches_acks": slack + acked_inc <= granted <= slack + acked_inc + maybe_inc,
    }
    if fault is not None and fault.kind == "dc-loss":
        recs = fault.recoveries
        out["held_by_lost_at_loss"] = sum(r.held.get("dec", 0) for r in recs)
        out["recovered"] = sum(r.recovered_total("dec") for r in recs)
        out["written_off"] = sum(r.written_off.get("dec", 0) for r in recs)
        out["recovery_source"] = sorted({r.source for r in recs})
        out["held_by_lost_at_end"] = held.get(fault.dc, 0)
    return out


@dataclass
class OpLog:
    """Every operation of one point, columnar (times in ns on the monotonic clock)."""

    start_ns: list[int] = field(default_factory=list)
    latency_ns: list[int] = field(default_factory=list)
    dc: list[int] = field(default_factory=list)
    is_dec: list[bool] = field(default_factory=list)
    outcome: list[int] = field(default_factory=list)
    key: list[int] = field(default_factory=list)
    seen: list[int | None] = field(default_factory=list)
    first_error: str = ""

    def add(self, start_ns: int, latency_ns: int, dc: int, is_dec: bool, outcome: int,
            key: int, seen: int | None) -> None:
        """Record one completed operation."""
        self.start_ns.append(start_ns)
        self.latency_ns.append(latency_ns)
        self.dc.append(dc)
        self.is_dec.append(is_dec)
        self.outcome.append(outcome)
        self.key.append(key)
        self.seen.append(seen)

    def __len__(self) -> int:
        return len(self.start_ns)


# --------------------------------------------------------------------------- analysis (pure)


def _lat(latency_ns: np.ndarray) -> dict[str, float | int | None]:
    """Return count, mean, p50 and p99 of ``latency_ns`` in ms (None when empty)."""
    if len(latency_ns) == 0:
        return {"n": 0, "mean": None, "p50": None, "p99": None}
    ms = latency_ns / 1e6
    return {"n": len(ms), "mean": round(float(ms.mean()), 3),
            "p50": round(float(np.percentile(ms, 50)), 3),
            "p99": round(float(np.percentile(ms, 99)), 3)}


def violations(log: OpLog, spec: PointSpec, final: Sequence[int | None],
               converged: bool = True) -> dict[str, Any]:
    """Return the decrements in excess of the bound, three ways (counts of decrements):

    ``final_excess`` — from the final merged value of each counter: ``lower - value`` when it
    ended below the bound; ``observed_below`` — successful decrements whose returned value was
    below the bound; ``acked_excess`` — successful decrements beyond everything ever available
    (initial slack plus successful increments); ``drift`` — final value minus what the
    acknowledged operations imply (non-zero: an acknowledged operation was lost, or one whose
    outcome was unknown took effect; None when the DCs had not converged, as then the final
    values are not the merged ones).
    """
    key = np.asarray(log.key, dtype=np.int64)
    ok = np.asarray(log.outcome, dtype=np.int64) == OK
    dec = np.asarray(log.is_dec, dtype=bool)
    seen = np.array([np.nan if s is None else s for s in log.seen], dtype=float)
    decs = np.bincount(key[ok & dec], minlength=spec.counters)
    incs = np.bincount(key[ok & ~dec], minlength=spec.counters)
    slack = spec.initial - spec.lower
    final_excess = drift = 0
    unknown = []
    for k in range(spec.counters):
        v = final[k] if k < len(final) else None
        if v is None:
            unknown.append(k)
            continue
        final_excess += max(0, spec.lower - v)
        drift += v - (spec.initial + int(incs[k]) - int(decs[k]))
    return {
        "final_excess": int(final_excess),
        "observed_below": int(np.sum(ok & dec & (seen < spec.lower))),
        "acked_excess": int(np.maximum(0, decs - incs - slack).sum()),
        "drift": int(drift) if converged else None,
        "final_values": [None if v is None else int(v) for v in final],
        "unread_counters": len(unknown),
    }


def summarise(log: OpLog, spec: PointSpec, dcs: Sequence[str], elapsed_s: float,
              final: Sequence[int | None], converged: bool = True) -> dict[str, Any]:
    """Return the point's figures: throughput (successful ops/s), offered rate (all ops/s),
    outcome counts, latency in ms (all ops, successful ops, per kind, per client region) and
    violations (see :func:`violations`)."""
    outcome = np.asarray(log.outcome, dtype=np.int64)
    lat = np.asarray(log.latency_ns, dtype=np.int64)
    dc = np.asarray(log.dc, dtype=np.int64)
    dec = np.asarray(log.is_dec, dtype=bool)
    ok = outcome == OK
    span = max(elapsed_s, 1e-9)
    counts = {name: int(np.sum(outcome == i)) for i, name in enumerate(OUTCOMES)}
    return {
        "ops": len(log),
        "outcomes": counts,
        "failed": len(log) - counts["ok"],
        "elapsed_s": round(elapsed_s, 3),
        "throughput_ops_s": round(counts["ok"] / span, 2),
        "offered_ops_s": round(len(log) / span, 2),
        "latency_ms": {"all": _lat(lat), "ok": _lat(lat[ok]), "inc": _lat(lat[~dec]),
                       "dec": _lat(lat[dec])},
        "latency_by_region_ms": {name: _lat(lat[dc == i]) for i, name in enumerate(dcs)},
        "violations": violations(log, spec, final, converged),
        "first_error": log.first_error,
    }


def series(log: OpLog, t0_ns: int, dcs: Sequence[str],
           max_points: int = SERIES_MAX_POINTS) -> dict[str, list[Any]]:
    """Return the latency-over-time series of a point (time since start in s, latency in ms,
    outcome name, client DC, value seen), thinned by a fixed stride past ``max_points``."""
    order = np.argsort(np.asarray(log.start_ns, dtype=np.int64), kind="stable")
    stride = max(1, -(-len(order) // max_points))
    idx = order[::stride]
    return {
        "t_s": [round((log.start_ns[i] - t0_ns) / 1e9, 4) for i in idx],
        "latency_ms": [round(log.latency_ns[i] / 1e6, 3) for i in idx],
        "outcome": [OUTCOMES[log.outcome[i]] for i in idx],
        "dc": [dcs[log.dc[i]] for i in idx],
        "seen": [log.seen[i] for i in idx],
        "stride": [stride],
    }


# --------------------------------------------------------------------------- one point


def classify(err: BaseException) -> int:
    """Return the outcome code of an operation that raised ``err``."""
    if isinstance(err, InsufficientRights):
        return INSUFFICIENT
    if isinstance(err, Contended | ConditionFailed):
        return CONTENDED
    if isinstance(err, Stopped):
        return DOWN
    if isinstance(err, Unavailable):
        return UNAVAILABLE
    if isinstance(err, TimeoutError):
        return UNKNOWN
    return ERROR


@dataclass
class _Clock:
    """Shared state of the clients of one point: when to stop and the last success."""

    end_ns: int
    last_ok_ns: int
    last_insufficient_ns: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    faulting: bool = False  # a fault is under way: running out of rights now is no end


async def _client(svc: CounterService, dc_i: int, spec: PointSpec, keys: Sequence[str],
                  rng: random.Random, log: OpLog, clock: _Clock) -> None:
    think_s = spec.think_ms / 1000
    # start spread over one think time so the clients do not move in lock step
    await asyncio.sleep(rng.random() * think_s)
    while time.monotonic_ns() < clock.end_ns and not clock.stop.is_set():
        k = rng.randrange(len(keys))
        is_dec = rng.random() >= spec.inc_fraction
        t0 = time.monotonic_ns()
        seen: int | None = None
        try:
            op = (svc.dec(keys[k], 1, allow_global=spec.allow_global) if is_dec
                  else svc.inc(keys[k], 1))
            seen = await asyncio.wait_for(op, spec.op_timeout_s)
            outcome = OK
        except (CounterError, StoreError, TimeoutError) as err:
            outcome = classify(err)
            if outcome == ERROR and not log.first_error:
                log.first_error = f"{type(err).__name__}: {err}"
        t1 = time.monotonic_ns()
        log.add(t0, t1 - t0, dc_i, is_dec, outcome, k, seen)
        if outcome == OK:
            clock.last_ok_ns = t1
        elif outcome == INSUFFICIENT:
            clock.last_insufficient_ns = t1
        await asyncio.sleep(think_s)


async def _watch_exhaustion(clock: _Clock, quiet_ns: int) -> None:
    """Stop the clients once nothing succeeded for ``quiet_ns`` and the counters refused
    decrements since (every right used)."""
    while not clock.stop.is_set():
        await asyncio.sleep(0.1)
        now = time.monotonic_ns()
        if (not clock.faulting and now - clock.last_ok_ns >= quiet_ns
                and clock.last_insufficient_ns > clock.last_ok_ns):
            clock.stop.set()


async def _await_known(svc: CounterService, key: str, timeout_s: float) -> None:
    """Wait until ``svc``'s data centre knows counter ``key`` (created elsewhere)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await svc.value(key)
            return
        except UnknownCounter:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def final_values(views: Mapping[str, CounterService], keys: Sequence[str],
                       timeout_s: float) -> tuple[list[int | None], bool]:
    """Return each counter's final merged value and whether the DCs converged.

    Reads every counter in every DC until all DCs agree or ``timeout_s`` passes; a counter
    the DCs still disagree on gets the lowest value seen (the view that knows most
    decrements), one no DC can read gets None.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        per_key: list[list[int]] = []
        for key in keys:
            got = await asyncio.gather(*(v.value(key) for v in views.values()),
                                       return_exceptions=True)
            per_key.append([g for g in got if isinstance(g, int)])
        converged = all(len(vs) == len(views) and len(set(vs)) == 1 for vs in per_key)
        if converged or time.monotonic() > deadline:
            return [min(vs) if vs else None for vs in per_key], converged
        await asyncio.sleep(0.1)


@dataclass
class PointResult:
    """A finished point: its spec, figures, and (for ``exhaust``) the series."""

    spec: PointSpec
    summary: dict[str, Any]
    series: dict[str, list[Any]] | None = None
    converged: bool = True
    interrupted: bool = False
    fault: faults.FaultRun | None = None

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        out = {"spec": asdict(self.spec), **self.summary, "converged": self.converged,
               "interrupted": self.interrupted}
        if self.series is not None:
            out["series"] = self.series
        if self.fault is not None:
            out["fault"] = self.fault.to_json()
        return out


def _fault_figures(fault: faults.FaultRun, dep: Any, log: OpLog, dcs: Sequence[str],
                   t0_ns: int) -> dict[str, Any]:
    """Return what a fault did to the clients and the transfers: successful and refused
    (no rights) operations per DC inside the fault's window and after it, transfers across
    the cut asked and done inside it, and the synchronisations that failed (none without a
    fault: each is an exchange that met the cut or the lost DC)."""
    start, end = fault.start_s, fault.end_s
    if start is None:
        return {}
    start_ns = t0_ns + int(start * 1e9)
    end_ns = t0_ns + int((end if end is not None else 1e9) * 1e9)
    t = np.asarray(log.start_ns, dtype=np.int64)
    ok = np.asarray(log.outcome, dtype=np.int64) == OK
    dc = np.asarray(log.dc, dtype=np.int64)
    refused = np.asarray(log.outcome, dtype=np.int64) == INSUFFICIENT
    inside = (t >= start_ns) & (t < end_ns)
    after = t >= end_ns
    crossed = failures = 0
    for name, mw in getattr(dep, "mws", {}).items():
        far = fault.others if name == fault.dc else (fault.dc,)
        crossed += faults.crossed(mw.transfer_log, name, far, start_ns, end_ns)
        failures += mw.syncer.stats.errors

    def per_dc(mask: np.ndarray) -> dict[str, int]:
        return {name: int(np.sum(mask & (dc == i))) for i, name in enumerate(dcs)}

    return {"ok_during_by_dc": per_dc(ok & inside),
            "refused_during_by_dc": per_dc(refused & inside),
            "ok_after_by_dc": per_dc(ok & after),
            "transfers_across_during": crossed, "sync_failures": failures}


async def run_point(dep: Deployment, dcs: Sequence[str], spec: PointSpec, prefix: str,
                    converge_s: float = 5.0,
                    tick: Callable[[float], None] | None = None,
                    topo: faults.Topology | None = None) -> PointResult:
    """Run one point on an opened deployment and return its result (creates fresh counters
    named ``<prefix>-<label>-<i>``; ``tick`` gets the elapsed fraction of the point; a point
    with a fault acts on the data centres ``topo``, and heals them before it returns)."""
    spec.check()
    if spec.fault and (topo is None or not hasattr(dep, "lose")):
        raise ValueError(f"a {spec.fault} point needs the data centres and a middleware "
                         "deployment")
    fault_dc = spec.fault_dc or dcs[-1]
    if spec.fault and fault_dc not in dcs:
        raise ParameterError("fault_dc", f"{fault_dc!r}: use one of {', '.join(dcs)}")
    keys = [f"{prefix}-{spec.label()}-{i}" for i in range(spec.counters)]
    views = {dc: await dep.service(dc) for dc in dcs}
    clients: list[CounterService] = []
    try:
        creator = views[dcs[0]]
        for key in keys:
            await creator.create(key, spec.initial, spec.lower)
        for dc in dcs[1:]:
            for key in keys:
                await _await_known(views[dc], key, converge_s)
        for i in range(spec.clients):
            clients.append(await dep.service(dcs[i % len(dcs)]))
        log = OpLog()
        t0 = time.monotonic_ns()
        clock = _Clock(end_ns=t0 + int(spec.duration_s * 1e9), last_ok_ns=t0)
        rng = random.Random(spec.seed)
        tasks = [asyncio.create_task(_client(c, i % len(dcs), spec, keys,
                                             random.Random(rng.getrandbits(64)), log, clock))
                 for i, c in enumerate(clients)]
        helpers = []
        fault_task = None
        if spec.fault:
            clock.faulting = True

            def fault_over() -> None:
                clock.faulting = False
                clock.last_ok_ns = time.monotonic_ns()  # quiet from now on counts, not before

            fault_task = asyncio.create_task(faults.run_fault(
                spec.fault, fault_dc, spec.fault_at_s, spec.fault_for_s, topo,  # type: ignore[arg-type]
                dep, keys, t0, fault_over))  # type: ignore[arg-type]
        if spec.until_exhausted:
            helpers.append(asyncio.create_task(_watch_exhaustion(clock, 1_000_000_000)))
        if tick is not None:
            async def ticker() -> None:
                while True:
                    tick(min(1.0, (time.monotonic_ns() - t0) / (spec.duration_s * 1e9)))
                    await asyncio.sleep(0.25)
            helpers.append(asyncio.create_task(ticker()))
        interrupted = False
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            # Ctrl-C or SIGTERM: keep the operations recorded so far (the caller saves
            # them, then stops); the final values are not waited for
            interrupted = True
        finally:
            for t in tasks + helpers:
                t.cancel()
            for t in tasks + helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
        elapsed_s = (time.monotonic_ns() - t0) / 1e9
        fault = None
        if fault_task is not None:
            if not fault_task.done():  # the clients stopped first (cap or Ctrl-C)
                fault_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                fault = await fault_task
        live = {dc: v for dc, v in views.items()
                if not (spec.fault == "dc-loss" and dc == fault_dc)}
        if interrupted:
            final, converged = [None] * len(keys), False
        else:
            final, converged = await final_values(live, keys, converge_s)
        summary = summarise(log, spec, dcs, elapsed_s, final, converged)
        summary["t0_mono_ns"] = t0  # the point's start on the machine's monotonic clock
        if spec.fault:
            survivor = next(iter(live))
            states = ([await dep.durable(survivor, k) for k in keys]  # type: ignore[attr-defined]
                      if not interrupted else [None] * len(keys))
            summary["rights"] = rights_accounting(states, log, spec, fault)
            if fault is not None:
                summary["fault_effects"] = _fault_figures(fault, dep, log, dcs, t0)
        ser = (series(log, t0, dcs) if spec.experiment == "exhaust" or spec.fault
               else None)
        return PointResult(spec, summary, ser, converged, interrupted, fault)
    finally:
        for c in [*clients, *views.values()]:
            with contextlib.suppress(Exception):
                await c.close()
        if spec.fault and topo is not None:
            await asyncio.to_thread(faults.heal, topo, None, spec.fault, fault_dc)

"""The placement simulator: policies over a request stream on a region matrix.

Objects start at a random region (the same for every policy of a run); each access is served
by the object's owner (latency = the requester's round trip to the owner's region), then the
policy sees it and may move the object, which takes effect for the next access. Two paths with
identical results: ``run_reference`` feeds the ``policies.py`` objects one access at a time in
Python; ``run_policy`` runs the compiled ``kernel``. ``run_experiment`` runs one workload
against a list of policies and returns JSON-ready results.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replicalab.errors import ParameterError
from replicalab.history.rundir import finite_or_null
from replicalab.placement import metrics, workloads
from replicalab.placement.kernel import Trace
from replicalab.placement.matrix import RegionMatrix, region_matrix
from replicalab.placement.policies import Requests, make_policy, parse_spec, policy_class

DEFAULT_POLICIES = "static,consecutive,majority,ema,cog,oracle"
SKEW_POLICIES = "static,cog,cog:balance=0.25,oracle"
PINGPONG_MS = 30_000.0  # a migration back to a region the object left this recently
SCHEMA = 1


@dataclass(frozen=True)
class PolicySpec:
    """A policy as the user named it: label (the spec text), name and string parameters."""

    label: str
    name: str
    params: dict[str, str] = field(default_factory=dict)


def policy_specs(text: str, balance: float | None = None) -> list[PolicySpec]:
    """Return the specs in a comma-separated list (``static,cog:balance=0.25``); ``balance``
    is added to every spec that has none. ValueError names a bad or repeated spec."""
    out: list[PolicySpec] = []
    for item in text.split(","):
        if not item.strip():
            continue
        name, params = parse_spec(item)
        if balance is not None and "balance" not in params:
            params["balance"] = str(balance)
        label = ":".join([name, *(f"{k}={v}" for k, v in params.items())])
        if any(s.label == label for s in out):
            raise ValueError(f"policy {label} is listed twice; list each once")
        out.append(PolicySpec(label, name, params))
    if not out:
        raise ParameterError("policy", "names no policy; pass e.g. static,cog")
    return out


def build(spec: PolicySpec, regions: RegionMatrix, owner0: np.ndarray,
          requests: Requests) -> Any:
    """Return the reference policy object for ``spec`` (ValueError on bad parameters)."""
    extra = {"requests": requests} if policy_class(spec.name).needs_requests else {}
    try:
        return make_policy(spec.name, regions, owner0, **spec.params, **extra)
    except ValueError as e:
        if str(e).startswith(("policy ", "unknown policy")):
            raise
        raise ValueError(f"policy {spec.label}: {e}") from None


def run_reference(policy: Any, regions: RegionMatrix, requests: Requests, owner0: np.ndarray,
                  pingpong_ms: float = PINGPONG_MS) -> Trace:
    """Return the Trace of feeding ``policy`` (from ``build``) every access in Python."""
    rtt = regions.rtt_ms.tolist()
    objs, regs, ts = (requests.obj.tolist(), requests.region.tolist(), requests.t_ms.tolist())
    owner = [int(x) for x in owner0]
    n_regions = regions.size
    left_at: list[list[float]] = [[-math.inf] * n_regions for _ in owner]
    latency = [0.0] * len(objs)
    mi: list[int] = []
    mf: list[int] = []
    mt: list[int] = []
    mp: list[bool] = []
    hit, moved = policy.hit, policy.moved
    for i in range(len(objs)):
        o, r, t = objs[i], regs[i], ts[i]
        own = owner[o]
        latency[i] = rtt[r][own]
        target = hit(o, r, t)
        if target is not None:
            mi.append(i)
            mf.append(own)
            mt.append(target)
            mp.append(t - left_at[o][target] <= pingpong_ms)
            left_at[o][own] = t
            owner[o] = target
            moved(o, target)
    return Trace(np.array(latency, np.float64), np.array(mi, np.int64), np.array(mf, np.int64),
                 np.array(mt, np.int64), np.array(mp, np.bool_), np.array(owner, np.int64))


def run_policy(policy: Any, regions: RegionMatrix, requests: Requests, owner0: np.ndarray,
               pingpong_ms: float = PINGPONG_MS) -> Trace:
    """Return the Trace of ``policy`` (from ``build``) on the compiled fast path; equal to
    ``run_reference`` on the same input (which runs a policy without a fast path)."""
    args = policy.fast_args()
    if args is None:
        return run_reference(policy, regions, requests, owner0, pingpong_ms)
    from replicalab.placement import jit  # numba loads on first use, not at import

    code = args.pop("code")
    return jit.run_fast(code, regions.rtt_ms, requests.obj, requests.region,
                           requests.t_ms, owner0, pingpong_ms=pingpong_ms, **args)


@dataclass(frozen=True)
class Experiment:
    """One run's settings: the workload's defaults with the user's overrides applied."""

    workload: str
    regions: str
    objects: int
    requests: int
    duration_s: float
    seed: int
    policies: tuple[PolicySpec, ...]
    pingpong_ms: float = PINGPONG_MS
    buckets: int = 50


def experiment(workload: str, *, policies: str | None = None, regions: str | None = None,
               objects: int | None = None, requests: int | None = None,
               duration_s: float | None = None, seed: int | None = None,
               balance: float | None = None, pingpong_ms: float = PINGPONG_MS,
               buckets: int = 50) -> Experiment:
    """Return the Experiment for ``workload`` with the seed's defaults where an argument is
    None (ValueError names a bad workload, policy, count or duration)."""
    workloads.check(workload)
    d = workloads.DEFAULTS[workload]
    if balance is not None and not 0 < balance <= 1:
        raise ParameterError("balance", f"{balance} must be a share of the objects in "
                                        "(0, 1], e.g. 0.25 for at most a quarter of them per "
                                        "region")
    if policies is None and workload == "skew":
        # the seed's skew run: CoG without and with the filter (at --balance if given)
        policies = SKEW_POLICIES.replace("0.25", str(0.25 if balance is None else balance))
        balance = None
    specs = tuple(policy_specs(DEFAULT_POLICIES if policies is None else policies, balance))
    for name, value in (("objects", objects), ("requests", requests)):
        if value is not None and value < 1:
            raise ParameterError(name, "must be at least 1")
    if duration_s is not None and not duration_s > 0:
        raise ValueError("the duration must be positive")
    if not 1 <= buckets <= 10_000 or not pingpong_ms >= 0:
        raise ValueError("buckets must be 1..10000 and the ping-pong window >= 0 ms")
    return Experiment(workload, regions or d.regions, objects or d.objects,
                      requests or d.requests, duration_s or d.duration_s,
                      d.seed if seed is None else seed, specs, pingpong_ms, buckets)


def check(exp: Experiment) -> None:
    """Raise ValueError for any bad input of ``exp`` (unknown region, bad policy parameter,
    impossible capacity) without generating its stream: cheap, for before a run starts."""
    regions = region_matrix(exp.regions)
    owner0 = workloads.initial_owners(regions.size, exp.objects, exp.seed)
    empty = Requests(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    for spec in exp.policies:
        build(spec, regions, owner0, empty)


def prepare(exp: Experiment) -> tuple[RegionMatrix, workloads.Stream, np.ndarray, list[Any]]:
    """Return the matrix, stream, initial owners and built policies of ``exp``; every bad
    input (unknown region, bad parameter, impossible capacity) raises ValueError here, before
    any simulation."""
    regions = region_matrix(exp.regions)
    stream = workloads.generate(exp.workload, regions, exp.objects, exp.requests,
                                exp.duration_s, exp.seed)
    owner0 = workloads.initial_owners(regions.size, exp.objects, exp.seed)
    built = [build(s, regions, owner0, stream.requests) for s in exp.policies]
    return regions, stream, owner0, built


def run_experiment(exp: Experiment, fast: bool = True,
                   progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Return the results of ``exp``: config, one entry per policy (metrics, series, their
    gain over static and gap to the oracle where those ran, wall time), JSON-ready."""
    regions, stream, owner0, built = prepare(exp)
    reqs = stream.requests
    entries = []
    for k, (spec, policy) in enumerate(zip(exp.policies, built, strict=True)):
        if progress is not None:
            progress(k, len(built), spec.label)
        start = time.perf_counter()
        runner = run_policy if fast else run_reference
        trace = runner(policy, regions, reqs, owner0, exp.pingpong_ms)
        wall_s = time.perf_counter() - start
        entry = {"policy": spec.label, "name": spec.name, "params": policy.params,
                 **metrics.summarize(trace, reqs.t_ms, exp.duration_s * 1000.0, owner0,
                                     regions.size, exp.buckets),
                 "wall_s": wall_s,
                 "requests_per_s": len(reqs) / wall_s if wall_s > 0 else None}
        if stream.sharers is not None:
            entry["on_sharers"] = metrics.on_sharers(trace.final_owner, stream.sharers)
        entries.append(entry)
    if progress is not None:
        progress(len(built), len(built), "")
    by_name = {e["policy"]: e for e in entries}
    for e in entries:
        if "static" in by_name:
            e["gain_vs_static_ms"] = by_name["static"]["mean_latency_ms"] - e["mean_latency_ms"]
        if "oracle" in by_name:
            e["gap_to_oracle_ms"] = e["mean_latency_ms"] - by_name["oracle"]["mean_latency_ms"]
    # results.json is written with allow_nan=False: an empty bucket is null, not NaN
    return finite_or_null({
        "kind": "placement", "schema_version": SCHEMA,
        "config": {"workload": exp.workload, "regions": exp.regions,
                   "region_names": list(regions.regions), "objects": exp.objects,
                   "requests": exp.requests, "duration_s": exp.duration_s, "seed": exp.seed,
                   "policies": [s.label for s in exp.policies], "pingpong_ms": exp.pingpong_ms,
                   "buckets": exp.buckets, "fast_path": fast},
        "policies": entries,
    })

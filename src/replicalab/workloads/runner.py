"""Run a probe end to end: open the store, drive the workload, save everything, check it.

Every run writes ``runs/<UTC time>-<workload>-<store>/`` with ``config.json``,
``history.parquet``, ``results.json`` and ``histograms/*.hlog``. If the run is interrupted
(Ctrl-C) or the store fails, the history recorded so far is saved all the same, with the
operations still in flight closed as ``info``.
"""

from __future__ import annotations

import json
import re
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hdrh.log import HistogramLogWriter

from replicalab.checkers.accounting import (
    FINAL,
    availability,
    fault_periods,
    lost_writes,
    unreachable_since,
)
from replicalab.checkers.latency import latency_histograms, latency_summary
from replicalab.faults.nemesis import Nemesis
from replicalab.faults.schedule import Fault
from replicalab.faults.sim import SimNemesis
from replicalab.history import History, load_history, save_history
from replicalab.stores import Feature, Store, StoreError, open_store
from replicalab.stores.base import redact_url
from replicalab.workloads import inter_element, latency, monotonic_writes, staleness, sweep
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder

WORKLOADS = ("staleness", "monotonic-writes", "inter-element", "latency", "sweep")


@dataclass(frozen=True)
class ProbeSpec:
    """Everything that defines a probe run (saved as config.json, enough to re-check it)."""

    store: str
    workload: str
    options: ProbeOptions = field(default_factory=ProbeOptions)
    staleness: staleness.StalenessConfig = field(default_factory=staleness.StalenessConfig)
    variant: str = "different"
    placement: str = "all"
    write_mode: str = "all"
    read_mode: str = "all"
    ops: int = 1000
    sweep: sweep.SweepConfig = field(default_factory=sweep.SweepConfig)
    cluster: str | None = None
    cluster_root: str = ".replicalab"
    faults: tuple[Fault, ...] = ()

    def check(self) -> None:
        """Raise ValueError naming the first invalid option."""
        if self.workload not in WORKLOADS:
            raise ValueError(f"--workload {self.workload!r}: use one of {', '.join(WORKLOADS)}")
        self.options.check()
        if self.workload == "staleness":
            self.staleness.check()
        elif self.workload == "monotonic-writes":
            monotonic_writes.check_variant(self.variant)
        elif self.workload == "latency":
            if self.ops < 2:
                raise ValueError(f"--ops {self.ops} must be at least 2")
        elif self.workload == "sweep":
            self.sweep.check()
        else:
            inter_element.parse_combinations(self.placement, self.write_mode, self.read_mode)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict of this spec (a password in the URL is masked)."""
        return {**asdict(self), "store": redact_url(self.store)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProbeSpec:
        """Return the spec saved by :meth:`to_json`."""
        st = dict(d["staleness"])
        st["successive_window_ms"] = tuple(st["successive_window_ms"])
        return cls(store=d["store"], workload=d["workload"], options=ProbeOptions(**d["options"]),
                   staleness=staleness.StalenessConfig(**st), variant=d["variant"],
                   placement=d["placement"], write_mode=d["write_mode"], read_mode=d["read_mode"],
                   ops=d.get("ops", 1000),
                   sweep=sweep.SweepConfig.from_json(d["sweep"]) if "sweep" in d
                   else sweep.SweepConfig(),
                   cluster=d.get("cluster"), cluster_root=d.get("cluster_root", ".replicalab"),
                   faults=tuple(Fault(**f) for f in d.get("faults", [])))


@dataclass
class ProbeRun:
    """Where a run was saved, its results, and whether it was cut short."""

    run_dir: Path
    results: dict[str, Any]
    interrupted: bool = False
    error: str = ""


def _needed(spec: ProbeSpec) -> set[Feature]:
    if spec.workload == "staleness":
        return staleness.required_features(spec.options)
    if spec.workload == "monotonic-writes":
        return monotonic_writes.required_features(spec.options, spec.variant)
    if spec.workload in ("latency", "sweep"):
        return set()
    return {Feature.CONSISTENT_READ if spec.options.consistency == "consistent"
            else Feature.EVENTUAL_READ}


def _combos(spec: ProbeSpec, store: Store) -> tuple[list[Any], dict[Any, str]]:
    combos = inter_element.parse_combinations(spec.placement, spec.write_mode, spec.read_mode)
    skipped = {c: why for c in combos if (why := c.feasible(store.info.features))}
    return combos, skipped


def _workload(spec: ProbeSpec, store: Store, h: History, rec: Recorder
              ) -> Coroutine[Any, Any, None]:
    if spec.workload == "staleness":
        return staleness.generate(store, h, spec.options, spec.staleness, rec)
    if spec.workload == "monotonic-writes":
        return monotonic_writes.generate(store, h, spec.options, spec.variant, rec)
    if spec.workload == "latency":
        return latency.generate(store, h, spec.options, spec.ops, rec)
    if spec.workload == "sweep":
        return sweep.generate(store, h, spec.options, spec.sweep, rec)
    combos, skipped = _combos(spec, store)

    async def all_combinations() -> None:
        await store.runtime.gather(*(
            inter_element.generate(store, h, spec.options, c, rec, i)
            for i, c in enumerate(combos) if c not in skipped))

    return all_combinations()


async def _final_reads(store: Store, h: History) -> None:
    """Read every key written, consistently where the store can, as process FINAL."""
    written = sorted({k for i, ks in enumerate(h.keys) if h.process[i] >= 0
                      and h.f[i] in (h.f_code("write"), h.f_code("cas")) for k in ks})
    if not written:
        return
    try:
        client = await store.connect()
    except (ValueError, StoreError):
        return  # the store is gone: lost writes stay unchecked, the run reports why
    rec = Recorder(h, store.runtime)
    consistent = Feature.CONSISTENT_READ in store.info.features
    for key in written:
        await rec.read(client, FINAL, (key,), consistent)
    await client.close()


async def _run(spec: ProbeSpec, store: Store, h: History, rec: Recorder,
               nemesis: Nemesis | SimNemesis | None) -> None:
    rt = store.runtime
    t0 = rt.now_ns()
    jobs = [_workload(spec, store, h, rec)]
    if nemesis is not None:
        jobs.append(nemesis.run(list(spec.faults), h, rt, t0,
                                t0 + int(spec.options.duration_s * 1e9)))
    await rt.gather(*jobs)
    await _final_reads(store, h)


def check(spec: ProbeSpec, h: History, features: frozenset[Feature]) -> dict[str, Any]:
    """Return the results of ``spec``'s checkers over ``h`` (pure: no I/O)."""
    if spec.workload == "staleness":
        out = staleness.check(h, spec.store, spec.options, spec.staleness)
    elif spec.workload == "monotonic-writes":
        out = monotonic_writes.check(h, spec.store, spec.options, spec.variant)
    elif spec.workload == "latency":
        out = latency.check(h, spec.store, spec.options, spec.ops)
    elif spec.workload == "sweep":
        out = sweep.check(h, spec.store, spec.options, spec.sweep, features)
    else:
        combos = inter_element.parse_combinations(spec.placement, spec.write_mode,
                                                  spec.read_mode)
        skipped = {c: why for c in combos if (why := c.feasible(features))}
        out = inter_element.check(h, spec.store, spec.options, combos, skipped)
    out["latency"] = latency_summary(latency_histograms(h))
    out["availability"] = availability(h)
    out["faults"] = fault_periods(h)
    out["lost_writes"] = lost_writes(h)
    return out


def _slug(url: str) -> str:
    base = url.split("?", 1)[0]
    return re.sub(r"[^A-Za-z0-9]+", "-", base).strip("-")[:40] or "store"


def make_run_dir(out: Path, workload: str, store_url: str) -> Path:
    """Create and return a fresh run directory under ``out`` (ValueError if not writable)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            run_dir = out / f"{stamp}-{workload}-{_slug(store_url)}{'' if n == 0 else f'-{n}'}"
            try:
                run_dir.mkdir()
                break
            except FileExistsError:
                continue
        probe = run_dir / ".writable"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ValueError(f"cannot write to output directory {out}: {err.strerror}; "
                         "pass --out with a writable directory") from None
    return run_dir


def write_histograms(h: History, run_dir: Path) -> list[Path]:
    """Write one HdrHistogram log per (operation, consistency); return the paths."""
    folder = run_dir / "histograms"
    folder.mkdir(exist_ok=True)
    paths = []
    for name, hist in latency_histograms(h).items():
        path = folder / (name.replace("/", "_") + ".hlog")
        with path.open("w") as out:
            writer = HistogramLogWriter(out)
            writer.output_comment(f"replicalab latency {name}, values in microseconds")
            writer.output_legend()
            writer.output_interval_histogram(hist, 0, 0, max_value_unit_ratio=1000.0)
        paths.append(path)
    return paths


def save_results(results: dict[str, Any], run_dir: Path) -> Path:
    """Write ``results.json`` deterministically (sorted keys) and return its path."""
    path = run_dir / "results.json"
    path.write_text(json.dumps(results, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return path


def _unreachable(spec: ProbeSpec, h: History) -> str:
    """Return why the run failed if the store stopped answering for good, else ""."""
    since = unreachable_since(h)
    if since is None:
        return ""
    if any(f.at_s <= since + 1 and f.at_s + f.for_s >= spec.options.duration_s
           for f in spec.faults):
        return ""  # a scheduled fault explains it
    last = next((e for e in reversed(h.error) if e), "no answer")
    return f"the store became unreachable {since:.1f} s into the run ({last})"


def run_probe(spec: ProbeSpec, out: Path,
              progress: Callable[[float], None] | None = None) -> ProbeRun:
    """Run ``spec`` and save it under ``out``; returns even when interrupted (see ProbeRun)."""
    spec.check()
    store = open_store(spec.store, spec.options.seed)
    missing = _needed(spec) - store.info.features
    if missing:
        raise ValueError(f"{spec.store} cannot do {', '.join(sorted(m.value for m in missing))}; "
                         "pick another --consistency/--variant or another store")
    nemesis: Nemesis | SimNemesis | None = None
    if spec.faults:
        if store.info.kind.startswith("sim/"):
            nemesis = SimNemesis.of(store)  # acts in the store's own virtual time
        elif spec.cluster is None:
            raise ValueError("faults need the cluster they act on: pass --cluster NAME")
        else:
            nemesis = Nemesis(spec.cluster, Path(spec.cluster_root))
        nemesis.check(list(spec.faults))
    run_dir = make_run_dir(out, spec.workload, spec.store)
    rt = store.runtime
    h = History()
    start = [0]
    span = spec.options.duration_s * 1e9

    planned = spec.sweep.planned_ops() if spec.workload == "sweep" else 0

    def tick(now_ns: int) -> None:
        if progress is not None:
            # a sweep ends after a number of requests, not after a duration
            done = sweep.measured_count(h) / planned if planned else (now_ns - start[0]) / span
            progress(min(1.0, done))

    rec = Recorder(h, rt, tick)
    interrupted, error, trace = False, "", ""
    wall0 = time.perf_counter()

    async def main() -> None:
        start[0] = rt.now_ns()
        try:
            await _run(spec, store, h, rec, nemesis)
        finally:
            await store.close()

    try:
        rt.run(main())
    except KeyboardInterrupt:
        interrupted, error = True, "interrupted"
    except Exception as err:  # the store failed: keep what was recorded, report the cause
        error, trace = f"{type(err).__name__}: {err}", traceback.format_exc()
    h.close_in_flight(rt.now_ns(), error or "interrupted")
    if not error and not interrupted:
        error = _unreachable(spec, h)
    config = {"spec": spec.to_json(), "store": store.info.to_json(),
              "wall_s": round(time.perf_counter() - wall0, 3), "interrupted": interrupted,
              "error": error, "error_traceback": trace,
              "runtime": "virtual" if rt.virtual else "real"}
    save_history(h, run_dir, config)
    results = check(spec, h, store.info.features)
    results["store"] = redact_url(spec.store)
    if interrupted or error:
        results["notes"].append(f"run cut short: {error}")
    save_results(results, run_dir)
    write_histograms(h, run_dir)
    if progress is not None:
        progress(1.0)
    return ProbeRun(run_dir, results, interrupted, error)


def recheck(run_dir: Path) -> dict[str, Any]:
    """Return results recomputed from a saved run's history and config (and save them)."""
    h, config = load_history(run_dir)
    try:
        spec = ProbeSpec.from_json(config["spec"])
        features = frozenset(Feature(f) for f in config["store"]["features"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{run_dir / 'config.json'} is malformed ({err}); "
                         "re-run the probe to get a complete run directory") from None
    results = check(spec, h, features)
    if config.get("error"):
        results["notes"].append(f"run cut short: {config['error']}")
    save_results(results, run_dir)
    return results

"""Run a probe end to end: open the store, drive the workload, save everything, check it.

Every run writes ``runs/<UTC time>-<workload>-<store>/`` with ``config.json``,
``history.parquet``, ``results.json`` and ``histograms/*.hlog``. If the run is interrupted
(Ctrl-C) or the store fails, the history recorded so far is saved all the same, with the
operations still in flight closed as ``info``.

On a real store the workload's keys live under a key prefix (``ProbeSpec.key_prefix``,
default ``replicalab/<run id>/``, see ``stores/prefix.py``), and every key the run wrote is
removed at the end, interrupted or not, unless ``keep_keys``; ``config.json`` says which
prefix and what the clean-up removed. The simulated store starts empty every run: no
prefix there.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
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
from replicalab.cluster.kinds import no_transactions
from replicalab.cluster.process import interrupts_deferred
from replicalab.cluster.state import load, names, state_root
from replicalab.errors import ParameterError
from replicalab.faults.nemesis import Nemesis
from replicalab.faults.schedule import Fault
from replicalab.faults.sim import SimNemesis
from replicalab.history import History, load_history, save_history
from replicalab.history.io import Spool
from replicalab.history.rundir import Run, make_run_dir, named_run_dir, save_results
from replicalab.runtime import interrupts
from replicalab.runtime.noise import NoiseFloor
from replicalab.stores import Feature, Store, StoreError, open_store
from replicalab.stores.base import redact_url
from replicalab.stores.prefix import PrefixedStore, check_prefix
from replicalab.workloads import noise as noise_floor
from replicalab.workloads import registry
from replicalab.workloads.base import ProbeOptions, Workload, config_from_json
from replicalab.workloads.recorder import Recorder


@dataclass(frozen=True)
class ProbeSpec:
    """Everything that defines a probe run (saved as config.json, enough to re-check it).

    ``config`` is the workload's own config dataclass; None means its defaults.
    """

    store: str
    workload: str  # its name (a Workload object given here is kept and named)
    options: ProbeOptions = field(default_factory=ProbeOptions)
    config: Any = None
    cluster: str | None = None
    cluster_root: str | None = None  # None: the per-user state directory (cluster/state.py)
    faults: tuple[Fault, ...] = ()
    key_prefix: str | None = None  # None: replicalab/<run id>/ on a real store
    keep_keys: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.workload, Workload):  # resolved where the command line parsed it
            object.__setattr__(self, "_definition", self.workload)
            object.__setattr__(self, "workload", self.workload.name)
        if self.config is None and self.workload in registry.names():
            object.__setattr__(self, "config", self.definition.config())

    @property
    def definition(self) -> Workload:
        """Return the workload object (looked up by name once per spec; ValueError for an
        unknown name)."""
        wl = self.__dict__.get("_definition")
        if wl is None:
            wl = registry.get(self.workload)
            object.__setattr__(self, "_definition", wl)
        return wl  # type: ignore[no-any-return]

    def __getstate__(self) -> dict[str, Any]:
        # a worker process finds the workload again by name (its functions may be lambdas)
        return {k: v for k, v in self.__dict__.items() if k != "_definition"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def check(self) -> None:
        """Raise ValueError naming the first invalid option."""
        wl = self.definition
        if not isinstance(self.config, wl.config):
            raise ParameterError("workload", f"{self.workload} takes a {wl.config.__name__}, "
                                             f"not a {type(self.config).__name__}")
        self.options.check()
        self.config.check()
        if self.key_prefix is not None:
            check_prefix(self.key_prefix)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict of this spec (a password in the URL is masked)."""
        return {"store": redact_url(self.store), "workload": self.workload,
                "options": asdict(self.options), "config": asdict(self.config),
                "cluster": self.cluster, "cluster_root": self.cluster_root,
                "faults": [asdict(f) for f in self.faults], "key_prefix": self.key_prefix,
                "keep_keys": self.keep_keys}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProbeSpec:
        """Return the spec saved by :meth:`to_json` (or by releases before workloads had
        one config each)."""
        wl = registry.get(d["workload"])
        if "config" in d:
            cfg = d["config"]
        elif wl.legacy_config is not None:
            cfg = wl.legacy_config(d)  # saved with every workload's fields side by side
        else:
            raise ValueError(f"the saved spec has no config for workload {d['workload']}")
        return cls(store=d["store"], workload=d["workload"], options=ProbeOptions(**d["options"]),
                   config=config_from_json(wl.config, cfg), cluster=d.get("cluster"),
                   cluster_root=d.get("cluster_root"),
                   faults=tuple(Fault(**f) for f in d.get("faults", [])),
                   key_prefix=d.get("key_prefix"), keep_keys=bool(d.get("keep_keys", False)))


@dataclass
class KeyCleanup:
    """Where a run's keys lived on a real store and what became of them: ``removed`` keys
    the store still held at the end, of ``written`` distinct keys the run wrote; ``kept``
    when asked to keep them; ``error`` when the clean-up failed (the keys are then left)."""

    prefix: str
    written: int = 0
    removed: int = 0
    kept: bool = False
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict of this clean-up."""
        return asdict(self)

    def line(self) -> str:
        """Return one line saying where the keys were and whether they are gone."""
        if self.kept:
            return f"keys: {self.written:,} under {self.prefix} kept (--keep)"
        if self.error:
            return (f"keys: {self.written:,} under {self.prefix} NOT removed ({self.error}); "
                    "remove them by hand")
        return f"keys: {self.written:,} written under {self.prefix}, removed at the end"


_CLEANUP_S = 30.0  # bound on removing a run's keys (a store that stopped answering)


def uses_prefix(store: Store) -> bool:
    """Return True for a store whose keys outlive the run (every store but the simulated
    one, which starts empty every run)."""
    return not store.info.kind.startswith("sim/")


async def _cleanup(store: PrefixedStore, keys: KeyCleanup) -> None:
    """Remove the run's keys unless kept, noting the outcome in ``keys`` (bounded)."""
    keys.written = len(store.written)
    if keys.kept:
        return
    try:
        keys.removed = await store.runtime.timeout(store.cleanup(), int(_CLEANUP_S * 1e9))
    except TimeoutError:
        keys.error = f"no answer within {_CLEANUP_S:g} s"
    except (StoreError, ValueError, OSError) as err:
        keys.error = redact_url(str(err)) or type(err).__name__


FINAL_SETTLE_S = 30.0
"""After a run with faults, how long the final reads keep retrying while a restarted store
comes back (s): a key whose final read never succeeds stays unchecked, never counted kept."""


async def _final_reads(store: Store, h: History, settle_s: float = 0.0) -> None:
    """Read every key written, consistently where the store can, as process FINAL; with
    ``settle_s`` > 0 (a run with faults) a failed read is retried for up to that long in
    all, on a new connection (the server may just have been restarted)."""
    written = sorted({k for i, ks in enumerate(h.keys) if h.process[i] >= 0
                      and h.f[i] in (h.f_code("write"), h.f_code("cas")) for k in ks})
    if not written:
        return
    rt = store.runtime
    until_ns = rt.now_ns() + int(settle_s * 1e9)
    rec = Recorder(h, rt)
    consistent = Feature.CONSISTENT_READ in store.info.features
    client = None
    for key in written:
        while True:
            if client is None:
                try:
                    client = await store.connect()
                except (ValueError, StoreError) as err:
                    client, refused = None, str(err) or type(err).__name__
            if client is not None and await rec.read(client, FINAL, (key,), consistent):
                break
            if rt.now_ns() >= until_ns:
                if client is None:
                    # the store is gone: lost writes stay unchecked, and the history keeps
                    # why (a final read that never reached the store, as a failed op)
                    now = rt.now_ns()
                    i = h.invoke(FINAL, "read", (key,), (None,),
                                 "consistent" if consistent else "eventual", now)
                    h.fail(i, now, f"no connection for {settle_s:g} s: {refused}")
                    return
                break
            if client is not None:
                await client.close()
                client = None
            await rt.sleep_ns(200_000_000)
    if client is not None:
        await client.close()


async def _run(spec: ProbeSpec, store: Store, h: History, rec: Recorder,
               nemesis: Nemesis | SimNemesis | None) -> None:
    rt = store.runtime
    t0 = rt.now_ns()
    wl = spec.definition
    cfg = spec.config
    if isinstance(getattr(cfg, "extra", None), dict):
        # clients in processes of their own open the store again from its URL (extra is
        # never saved: the URL may hold a password)
        cfg = dataclasses.replace(cfg, extra={**cfg.extra, "store_url": spec.store})
    jobs = [wl.generate(store, h, spec.options, cfg, rec)]
    if nemesis is not None:
        jobs.append(nemesis.run(list(spec.faults), h, rt, t0,
                                t0 + int(spec.options.duration_s * 1e9)))
    await rt.gather(*jobs)
    await _final_reads(store, h, FINAL_SETTLE_S if nemesis is not None else 0.0)


def check(spec: ProbeSpec, h: History, features: frozenset[Feature],
          step: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Return the results of ``spec``'s checkers over ``h`` (pure: no I/O); ``step`` is told
    the fraction of the checks done after each (the workload's own take most of the time)."""
    say = step or (lambda _done: None)
    out = spec.definition.check(h, spec.store, spec.options, spec.config, features)
    say(0.7)
    out["latency"] = latency_summary(latency_histograms(h))
    out["availability"] = availability(h)
    say(0.9)
    out["faults"] = fault_periods(h)
    out["lost_writes"] = lost_writes(h)
    say(1.0)
    return out


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


def _unreachable(spec: ProbeSpec, h: History) -> str:
    """Return why the run failed if the store stopped answering for good, else ""."""
    since = unreachable_since(h)
    if since is None:
        return ""
    if any(f.at_s <= since + 1 and f.at_s + f.for_s >= spec.options.duration_s
           for f in spec.faults):
        return ""  # a scheduled fault explains it
    proc = h.column("process")
    if bool(((proc == FINAL) & (h.types() == 1)).any()):
        # a final read answered after the run: the silence was an outage (an etcd election
        # answering "leader changed", ops left unknown), which availability shows, not a
        # store gone for good
        return ""
    last = next((e for e in reversed(h.error) if e), "no answer")
    return f"the store became unreachable {since:.1f} s into the run ({last})"


async def preflight(spec: ProbeSpec, store: Store) -> None:
    """Raise ValueError naming the fix if ``spec`` cannot run on ``store``: a region the store
    does not have, or a store that does not answer (a cluster that is down). Called before
    the run directory is made, so bad input leaves nothing behind."""
    if getattr(spec.config, "placement", None) == "separate-processes" and (
            store.runtime.virtual or store.info.kind.startswith("sim/")):
        raise ParameterError("placement", "separate-processes needs a real store (a "
                                          "simulated one lives in one process); use "
                                          "separate-clients on sim://")
    for name in ("writer_region", "reader_region"):
        region = getattr(spec.config, name, None)
        if region is not None and region not in store.info.regions:
            raise ParameterError(name, f"{region!r} is not one of the store's regions "
                                       f"({', '.join(store.info.regions)}); pick one of them "
                                       "(names are case-sensitive)")
    try:
        client = await store.connect()
    except (StoreError, ValueError) as err:
        raise ValueError(str(err) + cluster_hint(spec.store)) from None
    await client.close()


def cluster_hint(url: str) -> str:
    """Return "; is the cluster up? ..." when ``url`` is one a ``replicalab cluster up``
    printed (its servers are replicalab's to start), else "" (the user's own store: the
    adapter's message names the URL and the server's answer)."""
    try:
        mine = [n for n in names() if load(n).url == url]
    except (OSError, ValueError):
        return ""
    return (f"; is the cluster up? (`replicalab cluster status {mine[0]}`)" if mine else "")


def _open_checked(spec: ProbeSpec) -> tuple[Store, Nemesis | SimNemesis | None]:
    """Return ``spec``'s store and the nemesis of its faults (None without faults);
    ValueError for a feature the store lacks or faults without the cluster they act on."""
    store = open_store(spec.store, spec.options.seed)
    wl = spec.definition
    missing = wl.required_features(spec.options, spec.config) - store.info.features
    if Feature.TRANSACTIONS in missing:
        raise ValueError(no_transactions(spec.store))
    if missing:
        raise ParameterError("store", f"{spec.store} cannot do "
                                      f"{', '.join(sorted(m.value for m in missing))}; pick "
                                      "another {consistency}/{variant} or another store",
                             {"consistency": "consistency", "variant": "variant"})
    nemesis: Nemesis | SimNemesis | None = None
    if spec.faults:
        if store.info.kind.startswith("sim/"):
            nemesis = SimNemesis.of(store)  # acts in the store's own virtual time
        elif spec.cluster is None:
            raise ParameterError("cluster", "is missing: faults need the cluster they act "
                                            "on; name it")
        else:
            nemesis = Nemesis(spec.cluster, Path(spec.cluster_root) if spec.cluster_root
                              else state_root())
        nemesis.check(list(spec.faults))
    return store, nemesis


def _prefixed(spec: ProbeSpec, store: Store, run_dir: Path, keys: list[KeyCleanup],
              announce: Callable[[str], None] | None) -> PrefixedStore:
    """Return ``store`` with every key under the run's prefix (``--prefix``, else
    ``replicalab/<run directory>/``), noting it in ``keys`` and telling ``announce``."""
    prefix = (spec.key_prefix if spec.key_prefix is not None
              else f"replicalab/{run_dir.name}/")
    prefixed = PrefixedStore(store, prefix)
    keys.append(KeyCleanup(prefix, kept=spec.keep_keys))
    if announce is not None:  # the store is named by the command's progress label
        announce(f"keys: under {prefix}; " + ("kept at the end (--keep)" if spec.keep_keys
                                              else "removed at the end (--keep keeps them)"))
    return prefixed


def _results(spec: ProbeSpec, h: History, features: frozenset[Feature],
             config: dict[str, Any], cut_short: str | None,
             step: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Return the checked results of a run (pure: no I/O; ``cut_short``: why the run
    stopped early, None if it did not); ``step`` is told the fraction of the checks done."""
    results = check(spec, h, features, None if step is None else
                    lambda done: step(0.15 + 0.8 * done))
    results["store"] = redact_url(spec.store)
    results["ran_s"], results["runtime"] = config.get("ran_s"), config.get("runtime")
    _note_noise(results, config.get("noise"))
    results["partial"] = cut_short is not None
    if cut_short is not None:
        results["notes"].append(f"PARTIAL: run cut short ({cut_short}); every figure "
                                "covers only what ran")
    return results


def _write_results(results: dict[str, Any], h: History, run_dir: Path) -> None:
    save_results(results, run_dir)
    write_histograms(h, run_dir)


def _note_noise(results: dict[str, Any], noise: dict[str, Any] | None) -> None:
    """Put a real-time run's noise floor (``runtime/noise.py``) into its results and notes."""
    results["noise"] = noise
    if noise is not None:
        results.setdefault("notes", []).append(
            "noise floor: " + NoiseFloor.from_json(noise).line())


def run_probe(spec: ProbeSpec, out: Path,
              progress: Callable[[float], None] | None = None,
              announce: Callable[[str], None] | None = None, name: str | None = None,
              check_interrupted: bool = True) -> Run:
    """Run ``spec`` and save it under ``out`` (as ``out/name`` when a name is given: one run
    of a batch); returns even when interrupted (see Run). ``announce`` is told, before the
    first operation, where a real store's keys go.

    A run interrupted with ``check_interrupted`` False saves its history and config only,
    at once (checking hours of simulated traffic, or thousands of transactions, takes
    seconds, and Ctrl-C must end the command within one; ``replicalab report RUN_DIR`` does
    it later): its Run's results are :func:`unchecked_results`. ``ran_s`` in config.json and
    results.json is how long the run really ran (runtime seconds: simulated ones for a
    simulation), which differs from the asked ``duration_s`` when it was cut short or ended
    by count (``--txns``)."""
    spec.check()
    store, nemesis = _open_checked(spec)
    wl = spec.definition
    rt = store.runtime
    made: list[Path] = []  # the run directory, made once the store has answered
    h = History()
    start = [0]
    ended = [0]  # the run's clock when its workload (and final reads) ended, or it was cut
    started_unix_ns = [0]  # the wall clock when the run's clock read start[0]
    span = spec.options.duration_s * 1e9

    # the share of the wall time the run itself takes, the checks and the save after it
    # taking the rest: a simulation is checked in about 0.8 times the wall time it ran
    # (sim://simpledb staleness, 6 h simulated: 9 s running, 7 s checking and saving), a
    # real store's run outlasts its checks by far
    share = 0.55 if rt.virtual else 0.98
    # a simulation that may be cut short converts its history as it goes, so that a Ctrl-C
    # saves it within a second
    spool = Spool(h) if rt.virtual and not check_interrupted else None

    def tick(now_ns: int) -> None:
        if spool is not None:
            spool.feed()
        if progress is not None:
            done = (wl.done_fraction(h, spec.config) if wl.done_fraction is not None
                    else None)
            if done is None:  # a timed run (a workload may end by count or by time)
                done = (now_ns - start[0]) / span
            progress(share * min(1.0, done))

    rec = Recorder(h, rt, tick)
    interrupted, error, trace = False, "", ""
    wall0 = time.perf_counter()

    keys: list[KeyCleanup] = []
    floors: list[NoiseFloor] = []

    async def measured(target: Store) -> None:
        """Run the workload; in real time beside the noise floor's instruments."""
        if rt.virtual:
            await _run(spec, target, h, rec, nemesis)
            return
        with noise_floor.monitor(noise_floor.cluster_for(spec.store, spec.cluster,
                                                         spec.cluster_root)) as mon:
            mon.start()
            try:
                await _run(spec, target, h, rec, nemesis)
            finally:
                floors.append(await mon.stop())

    async def main() -> None:
        prefixed: PrefixedStore | None = None
        try:
            await preflight(spec, store)
            made.append(make_run_dir(out, spec.workload, spec.store) if name is None
                        else named_run_dir(out, name))
            target: Store = store
            if uses_prefix(store):
                target = prefixed = _prefixed(spec, store, made[0], keys, announce)
            start[0], started_unix_ns[0] = rt.now_ns(), time.time_ns()
            await measured(target)
        finally:
            if made:  # the run started; its end comes before the keys' clean-up
                ended[0] = rt.now_ns()
            if prefixed is not None:
                await _cleanup(prefixed, keys[0])
            await store.close()

    try:
        rt.run(main())
    except KeyboardInterrupt:
        if not made:
            raise
        interrupted, error = True, "interrupted"
    except Exception as err:  # the store failed: keep what was recorded, report the cause
        if not made and isinstance(err, ParameterError):
            raise err.with_traceback(None) from None  # names its parameter: kept as it is
        if not made and isinstance(err, ValueError | StoreError | OSError):
            raise ValueError(str(err)) from None  # bad input, before anything was recorded
        if not made:
            raise
        error, trace = f"{type(err).__name__}: {err}", traceback.format_exc()
    run_dir = made[0]
    ended[0] = ended[0] or rt.now_ns()  # interrupted before the finally could say
    h.close_in_flight(rt.now_ns(), error or "interrupted")
    if not error and not interrupted:
        error = _unreachable(spec, h)
    config = {"spec": spec.to_json(), "store": store.info.to_json(),
              "wall_s": round(time.perf_counter() - wall0, 3), "interrupted": interrupted,
              "error": error, "error_traceback": trace,
              "runtime": "virtual" if rt.virtual else "real",
              # anchors the history's clock (invoke_ns, complete_ns) to the wall clock
              "started_runtime_ns": start[0], "started_unix_ns": started_unix_ns[0],
              "ran_s": ran_s(start[0], ended[0]),
              "keys": keys[0].to_json() if keys else None,
              "noise": floors[0].to_json() if floors else None}
    if interrupted and not check_interrupted:
        with interrupts_deferred():  # a second Ctrl-C waits for the save to finish
            save_history(h, run_dir, config, quick=True, spool=spool)
        return Run(run_dir, unchecked_results(spec, h, ended[0] - start[0], rt.virtual), True,
                   error, keys=keys[0] if keys else None)
    step = (None if progress is None or interrupted or error else
            lambda done: progress(share + (1 - share) * done))
    cut = error if interrupted or error else None
    if not check_interrupted:
        # the history first, whole; then the checks, which a Ctrl-C abandons (seconds of
        # them for thousands of transactions: the command must end within one); the run
        # directory then holds what `replicalab report` checks later
        with interrupts_deferred() as late:
            save_history(h, run_dir, config)
        try:
            if late[0]:
                raise KeyboardInterrupt
            results = _results(spec, h, store.info.features, config, cut, step)
        except KeyboardInterrupt:
            interrupts.note()
            return Run(run_dir, unchecked_results(spec, h, ended[0] - start[0], rt.virtual),
                       True, error or "interrupted", keys=keys[0] if keys else None)
        with interrupts_deferred() as late:
            _write_results(results, h, run_dir)
    else:
        with interrupts_deferred() as late:  # a Ctrl-C now waits for the save to finish
            save_history(h, run_dir, config)
            results = _results(spec, h, store.info.features, config, cut, step)
            _write_results(results, h, run_dir)
    if late[0] and not interrupted:
        interrupted, error = True, error or "interrupted"
    if progress is not None and not (interrupted or error):
        progress(1.0)
    return Run(run_dir, results, interrupted, error,
               keys=keys[0] if keys else None)


def ran_s(start_ns: int, end_ns: int) -> float:
    """Return the seconds from ``start_ns`` to ``end_ns`` (runtime clock), to the ms."""
    return round(max(end_ns - start_ns, 0) / 1e9, 3)


def unchecked_results(spec: ProbeSpec, h: History, ran_ns: int, virtual: bool = True
                      ) -> dict[str, Any]:
    """Return what is known of a run saved without its checks: ``checked`` False, the
    operations recorded, and the seconds it ran of those asked (``virtual``: simulated
    seconds)."""
    return {"checked": False, "partial": True, "workload": spec.workload,
            "store": redact_url(spec.store), "operations": len(h),
            "ran_s": round(max(ran_ns, 0) / 1e9, 3), "duration_s": spec.options.duration_s,
            "virtual": virtual}


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
    # None: saved before runs recorded it
    results["ran_s"], results["runtime"] = config.get("ran_s"), config.get("runtime")
    _note_noise(results, config.get("noise"))
    results["partial"] = bool(config.get("error") or config.get("interrupted"))
    if results["partial"]:
        results["notes"].append(f"PARTIAL: run cut short ({config.get('error') or 'interrupted'}"
                                "); every figure covers only what ran")
    save_results(results, run_dir)
    return results

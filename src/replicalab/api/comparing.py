"""Real stores side by side (:func:`compare_clusters`, what ``replicalab compare`` runs) and
seed 001's chart measured (:func:`scorecard_run`, what ``replicalab scorecard`` runs).
Each starts the clusters of the kinds it is given (3 nodes on the same emulated regions),
measures, saves its run directory and report, and returns an
:class:`~replicalab.api.outcome.Outcome`."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, FAILED, INTERRUPTED, Outcome, Table
from replicalab.api.progress import Phases, Progress, cut_short, ticking

WORKLOADS = ("staleness", "latency", "register")


def _drop_if_empty(run_dir: Path) -> None:
    """Remove a run directory in which nothing was recorded (a store that could not
    start): bad input leaves no empty directory behind."""
    for d in (run_dir / "runs", run_dir):
        with contextlib.suppress(OSError):
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()


def compare_clusters(kinds: Sequence[str] = ("redis", "postgres", "etcd", "zookeeper"),
                     regions: str = "dc3", duration: str | float = "30s", ops: int = 200,
                     workload: str = "staleness", seed: int = 1, faults: Sequence[str] = (),
                     out: str | Path = "runs", progress: Progress = None,
                     hosts: str | None = None) -> Outcome:
    """Start each store kind of ``kinds`` as a 3-node cluster on ``regions`` (writer in
    the first region, reader in the second) and compare them: ``workload`` staleness
    (staleness probes of ``duration`` with eventual and consistent reads, plus a latency
    probe of ``ops`` operations per variant), latency (consistent vs eventual reads, with
    verdicts) or register (Jepsen's register test, linearizability). ``faults`` (fault
    texts) act on every staleness or register probe; ``hosts``: an inventory (TOML) or a
    set ``hosts up`` made, whose hosts each cluster runs on. Returns the :class:`Outcome`: the
    comparison's results, tables, notes and report; :class:`ParameterError` naming the
    parameter for bad input, before any cluster starts."""
    from replicalab.cluster import kinds as store_kinds
    from replicalab.experiments import compare as experiment
    from replicalab.faults.schedule import parse_fault
    from replicalab.history.rundir import make_run_dir, save_results
    from replicalab.regions import region_set

    chosen = [store_kinds.resolve(k.strip()) for k in kinds if k.strip()]
    if not chosen:
        raise ParameterError("kinds", "is empty; give e.g. redis,postgres,etcd,zookeeper")
    if workload not in WORKLOADS:
        raise ParameterError("workload", f"{workload!r}: use staleness, latency or register")
    duration_s = seconds(duration, "duration")
    if ops < 2:
        raise ParameterError("ops", f"must be at least 2 (got {ops})")
    for k in chosen if hosts is None else ():  # on hosts: checked there at start
        k.make_driver().check_installed()
    plan = tuple(parse_fault(f) for f in faults)
    if plan and workload == "latency":
        raise ParameterError("faults", "apply to the staleness and register comparisons; "
                                       "drop them or use {workload} staleness or register",
                             {"workload": "workload"})
    experiment.check_faults(plan, region_set(regions).regions, duration_s)
    names = [k.name for k in chosen]
    run_dir = make_run_dir(Path(out), {"staleness": "compare", "latency": "compare-latency",
                                       "register": "compare-register"}[workload],
                           "-".join(names))
    phases = {"staleness": lambda: experiment.staleness_phases(names, duration_s, ops),
              "latency": lambda: experiment.latency_phases(names, ops),
              "register": lambda: experiment.register_phases(names, duration_s)}[workload]()
    label = f"compare on {regions}" if workload == "staleness" else \
        f"compare --workload {workload} on {regions}"
    try:
        with ticking(label, progress) as tick:
            phase = Phases(tick or (lambda *_: None), phases).start
            if workload == "staleness":
                done = experiment.compare_staleness(chosen, regions, duration_s, ops, plan,
                                                    run_dir, phase, hosts)
            elif workload == "latency":
                done = experiment.compare_latency(chosen, regions, ops, seed, run_dir, phase,
                                                  hosts)
            else:
                done = experiment.compare_register(chosen, regions, duration_s, plan, seed,
                                                   run_dir, phase, hosts=hosts)
    except ValueError:
        _drop_if_empty(run_dir)
        raise
    save_results(done.results, run_dir)
    return Outcome(done.results, run_dir, _render(done, run_dir),
                   [Table.from_json(t) for t in done.results["tables"]],
                   list(done.results.get("notes", [])) + (
                       [f"each run's report with its timeline: {run_dir / 'runs'}"]
                       if workload == "register" else []))


def _render(comparison: Any, run_dir: Path) -> Path:
    from replicalab.report.model_page import render_model_report
    from replicalab.report.model_plots import freshness_overlay_figure

    figures = []
    if comparison.curves:
        figures.append(("fig-freshness", "Eventual reads: probability of reading the freshest "
                        "value against time since the write started (5 ms buckets).",
                        freshness_overlay_figure(comparison.curves, 300.0)))
    return render_model_report(comparison.results, run_dir, figures=figures,
                               kind="comparison")


def _scorecard_inputs(kinds: Sequence[str], only: Sequence[str] | None, regions: str,
                      hosts: str | Path | None = None) -> tuple[Any, tuple[str, ...]]:
    """Return (stores, properties) or raise ValueError naming the fix: an unknown kind or
    property, a server or FUSE that is missing, a sim:// URL that does not open."""
    from replicalab.cluster import powerloss
    from replicalab.experiments.plan import parse_kinds
    from replicalab.experiments.properties import parse_only
    from replicalab.regions import region_set
    from replicalab.stores import open_store

    stores = parse_kinds(",".join(kinds))
    props = parse_only(None if only is None else ",".join(only))
    region_set(regions)
    real = [s.kind for s in stores if s.kind is not None]
    for k in real if hosts is None else ():  # on hosts: checked there when it starts
        k.make_driver().check_installed()
    if hosts is not None:
        from replicalab.cluster.state import state_root
        from replicalab.hosts import emulated, inventory

        inventory.load(emulated.resolve(Path(hosts), state_root()))
    for s in stores:
        if s.kind is None:
            open_store(s.label, 1)
    if real and "durability" in props and hosts is None:
        why = powerloss.unavailable_reason()
        if why:
            raise ParameterError("only", f"names durability, which needs the power-loss file "
                                         f"system: {why}; leave durability out")
    return stores, props


def scorecard_table(doc: dict[str, Any]) -> Table:
    """Return the compact table of a scorecard: one line per cell (store, property, grade,
    headline: the figure that decides the grade); only the headline wraps on a narrow
    terminal, nothing is cut."""
    from replicalab.experiments.run import order
    from replicalab.report.scorecard import placement

    t = Table(f"scorecard of {placement(doc)}"
              + (" (interrupted: cells not measured are marked)" if doc["interrupted"]
                 else "") + "; evidence: open the report and click a cell",
              ["store", "property", "grade", "headline"], wrap=(3,))
    for store, cells in order(doc):
        for prop, c in zip(doc["properties"], cells, strict=True):
            t.add(store, prop, c["grade"] if c else "-",
                  (c.get("headline") or c["value"]) if c else "not measured")
    return t


def scorecard_run(kinds: Sequence[str] = ("redis", "postgres", "etcd", "zookeeper"),
                  regions: str = "dc3", quick: bool = False,
                  only: Sequence[str] | None = None, out: str | Path = "runs", seed: int = 1,
                  progress: Progress = None, hosts: str | Path | None = None,
                  name: str = "scorecard") -> Outcome:
    """Measure seed 001's chart for each store of ``kinds`` (cluster kinds, each started and
    stopped here on its own 3-node cluster named ``<name>-<kind>``, or ``sim://`` URLs):
    latency against the 50 / 500 ms goals, durability, availability, consistency,
    transactionality, geography (``only`` names some of them); ``quick``: shorter runs;
    ``hosts``: an inventory whose hosts each store's cluster starts on (durability is not
    measured there); ``name``: another lets two scorecards run at once. Returns the
    :class:`Outcome`: scorecard.json as ``results`` (``errors``: why a store could not be
    measured), its table and report; FAILED when a cell could not be measured because its
    run failed (``why`` names the first reason and the command that measures them again),
    INTERRUPTED on Ctrl-C."""
    from replicalab.cluster.state import check_name
    from replicalab.experiments.plan import FULL, QUICK
    from replicalab.experiments.properties import expected_steps
    from replicalab.experiments.run import begin, run, unmeasured_line
    from replicalab.regions import region_set
    from replicalab.report.scorecard import render_scorecard
    from replicalab.runtime import interrupts

    stores, props = _scorecard_inputs(kinds, only, regions, hosts)
    check_name(name)
    # its run directory and (empty) scorecard.json exist before a Ctrl-C can act; one that
    # comes after this count is one the run must stop for
    since = interrupts.count()
    sc = begin(Path(out), stores, props, regions, QUICK if quick else FULL, seed, name,
               None if hosts is None else str(hosts))
    run_dir = sc.run_dir
    try:
        with ticking(f"scorecard of {len(stores)} store" + ("" if len(stores) == 1 else "s"),
                     progress) as tick:
            done = [0]
            total = sum(expected_steps(s, props, sc.plan, len(region_set(regions).regions))
                        for s in stores)

            def step(what: str) -> None:
                if tick is not None:
                    tick(min(0.99, done[0] / total), what)
                done[0] = min(total, done[0] + 1)  # a coarse bar: one step per phase started

            run(sc, step, since=since)
            if sc.interrupted:
                cut_short(tick, "interrupted")  # its progress line says so, never "finished"
    except KeyboardInterrupt:
        # a Ctrl-C or SIGTERM between the run directory's making and the run's own handling
        # (a busy machine spends a while there) still leaves a scorecard that says so
        sc.interrupted = True
        sc.save()
    doc = sc.to_json()
    report = render_scorecard(doc, run_dir)
    missing = unmeasured_line(doc)
    status, why = ((INTERRUPTED, "interrupted: the cells measured so far and a partial "
                                 "chart are saved") if sc.interrupted else
                   (FAILED, missing) if missing else (DONE, ""))
    return Outcome(doc, run_dir, report, [scorecard_table(doc)],
                   [f"scorecard: {run_dir / 'scorecard.json'}"], status, why)

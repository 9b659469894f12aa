"""Protocol models and PBS staleness predictions, saved as runs: what ``replicalab model``
runs. :func:`model_run` (a model's latency against offered load, with its discrete-event
twin), :func:`model_validate` (every model against its twin over a grid), :func:`pbs`
(t-visibility and k-staleness of an N/R/W quorum store), :func:`model_against` and
:func:`pbs_against` (a model beside a real store it describes: etcd, Cassandra). Each
returns an :class:`~replicalab.api.outcome.Outcome`; parameters come as Python values,
or as the command line's texts (``sets``: ``"n=5"``, ``compare``: ``"n=3,5,7"``, a TOML
file), typed by the model's parameters class (``api/model_params.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.api.model_params import build, describe, load_toml, parse_compare, parse_sets
from replicalab.api.outcome import DONE, FAILED, INCONCLUSIVE, Outcome, Table
from replicalab.api.progress import Progress, ticking

T_SHOWN_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500)
"""The times after commit the PBS table shows."""


def _spec(name: str) -> Any:
    from replicalab.models.registry import MODELS

    if name not in MODELS:
        raise ParameterError("model", f"{name!r}: use one of {', '.join(MODELS)}")
    return MODELS[name]


def _loads(max_rps: float, points: int, loads: str | Sequence[float] | None) -> list[float]:
    """Return offered loads (req/s): explicit ``loads`` or ``points`` spread to 98 % of max."""
    if loads:
        try:
            values = [float(x) for x in (loads.split(",") if isinstance(loads, str) else loads)]
        except ValueError:
            raise ParameterError("loads", f"{loads!r}: give comma-separated requests/s, "
                                          "e.g. 1000,2000") from None
        if any(not v > 0 for v in values):
            raise ParameterError("loads", f"{loads!r}: every load must be positive")
        return values
    if points < 2:
        raise ParameterError("points", f"{points} must be at least 2")
    if not max_rps > 0 or max_rps == float("inf"):
        raise ParameterError("loads", "are needed: the model reports no finite maximum "
                                      "throughput")
    return [float(x) for x in np.linspace(0.05, 0.98, points) * max_rps]


def _relabel(c: Any, label: str) -> Any:
    from replicalab.models.base import Curve

    return Curve(label, c.points, c.max_throughput_rps, c.extra)


def _at_fractions(c: Any) -> str:
    def at(frac: float) -> str:
        target = frac * c.max_throughput_rps
        best = min(c.points, key=lambda pt: abs(pt.offered_rps - target), default=None)
        if best is None or best.latency_ms is None:
            return "saturated"
        return f"{best.latency_ms:.3f}"

    return f"{at(0.5)} / {at(0.9)}"


def _configs(spec: Any, params: str | Path | None, sets: Sequence[str],
             compare: str | None) -> tuple[list[tuple[str, Any]], tuple[str, list[Any]] | None]:
    """Return the configurations (label, parameters) of a model run and its comparison."""
    base = load_toml(None if params is None else Path(params))
    given = parse_sets(spec.params_cls, list(sets))
    cmp = parse_compare(spec.params_cls, compare)
    variants = [(f"{cmp[0]}={v}", {cmp[0]: v}) for v in cmp[1]] if cmp else [("", {})]
    return [(label, build(spec.params_cls, base, {**given, **extra}, spec.name))
            for label, extra in variants], cmp


def model_run(name: str, sets: Sequence[str] = (), params: str | Path | None = None,
              compare: str | None = None, points: int = 20,
              loads: str | Sequence[float] | None = None, twin: bool = False,
              rounds: int = 20_000, seed: int = 1, out: str | Path = "runs",
              progress: Progress = None) -> Outcome:
    """Return model ``name``'s latency (ms) against offered load (req/s) as a saved run:
    parameters from the TOML file ``params`` overridden by ``sets`` (``"n=5"``), one curve
    per value of ``compare`` (``"n=3,5,7"``), ``points`` loads up to 98 % of the maximum
    (or ``loads``), each curve followed by its discrete-event twin's (``twin``: ``rounds``
    per load, ``seed``). The :class:`Outcome` has the curves in ``results``, the summary
    table and the model's own tables, and the report."""
    from replicalab.history.rundir import make_run_dir, save_results
    from replicalab.models.validate import compare as compare_curves
    from replicalab.models.validate import comparison_table

    spec = _spec(name)
    configs, cmp = _configs(spec, params, sets, compare)
    curves = []
    with ticking(f"model {spec.name}", progress if twin else False) as tick:
        for i, (label, p) in enumerate(configs):
            grid = _loads(spec.curve(p, [1.0]).max_throughput_rps, points, loads)
            c = spec.curve(p, grid)
            curves.append(_relabel(c, label or c.label))
            if twin:
                if tick is not None:
                    tick(i / len(configs), f"twin of {label or c.label}")
                curves.append(_relabel(spec.twin(p, grid, seed, rounds),
                                       f"{label or c.label} (twin)"))
    run_dir = make_run_dir(Path(out), "model", spec.name)
    results: dict[str, Any] = {
        "schema_version": 1, "model": spec.name, "title": spec.title,
        "params": describe(configs[0][1]),
        "compare": None if cmp is None else {"key": cmp[0], "values": cmp[1]},
        "curves": [c.to_json() for c in curves],
        "tables": [t for _, p in configs[:1] for t in spec.tables(p)],
    }
    if twin:  # model vs twin, latency and capacity, per configuration
        pairs = [{"model": spec.name, **compare_curves(m.label, m, t, 0.10).to_json()}
                 for m, t in zip(curves[::2], curves[1::2], strict=True)]
        results["model_vs_twin"] = pairs
        results["tables"].append(comparison_table(pairs, 0.10))
    summary = Table(spec.title, ["curve", "max throughput (req/s)",
                                 "latency at 50% / 90% of max (ms)"], right=(1, 2))
    for c in curves:
        summary.add(c.label, f"{c.max_throughput_rps:,.0f}", _at_fractions(c))
    save_results(results, run_dir)
    # the report's modules load after the parameters are checked: 0.6 s of a bad command
    from replicalab.report.model_page import render_model_report

    report = render_model_report(results, run_dir, curves)
    return Outcome({**results, "summary_table": summary.to_json()}, run_dir, report,
                   [summary, *(Table.from_json(t) for t in results["tables"])])


def model_validate(model: str | None = None, rounds: int = 20_000, tolerance: float = 0.10,
                   seed: int = 1, workers: int = 1, ray: str | None = None,
                   progress: Progress = None, entries: Sequence[str] = ()) -> Outcome:
    """Run every model (or ``model``) and its discrete-event twin over the model's grid
    (or only its entries labelled as in ``entries``): mean latency and maximum throughput,
    the twin's measured by its own runs; on ``workers`` processes or a Ray cluster. The
    :class:`Outcome` is FAILED when a model and its twin differ by more than ``tolerance``
    (relative) somewhere."""
    from replicalab.cluster import process
    from replicalab.models.registry import MODELS
    from replicalab.models.validate import comparison_table, validate_cost, validate_entry
    from replicalab.runtime.parallel import JobFailed, RayMissing, Workers

    names = [_spec(model).name] if model else list(MODELS)
    if not 0 < tolerance < 1 or rounds < 100:
        raise ParameterError("tolerance", "must be in (0, 1) and {rounds} at least 100",
                             {"rounds": "rounds"})
    # every grid entry runs a model and its twin: the entries are the independent jobs,
    # the slowest first so that two workers finish together
    grids = {n: [label for label, _p, _loads in MODELS[n].grid()] for n in names}
    unknown = [e for e in entries if not any(e in labels for labels in grids.values())]
    if unknown:
        known = "; ".join(f"{n}: {', '.join(repr(x) for x in labels)}"
                          for n, labels in grids.items())
        raise ParameterError("entries", f"{unknown[0]!r} is no grid entry; the grid has {known}")
    jobs = [(n, i, rounds, seed, tolerance) for n in names
            for i, label in enumerate(grids[n]) if not entries or label in entries]
    order = sorted(range(len(jobs)), key=lambda j: -validate_cost(*jobs[j][:2]))
    try:
        pool = Workers(workers, ray, on_start=process.track)
        pool.start(len(jobs))
    except RayMissing as err:
        raise ParameterError(err.parameter, err.problem, err.mentions) from None
    done = [0]
    try:
        with ticking("model validate", progress) as tick:
            def finished(_i: int, _d: Any) -> None:
                done[0] += 1
                if tick is not None:
                    tick(done[0] / len(jobs))

            found = pool.map(validate_entry, [jobs[j] for j in order], finished)
    except JobFailed as err:
        raise ValueError(f"a twin failed: {err}") from None
    finally:
        pool.close()
    by_job = dict(zip(order, found, strict=True))
    rows = [{"model": jobs[j][0], **by_job[j].to_json()} for j in range(len(jobs))]
    table = Table.from_json(comparison_table(rows, tolerance), wrap=(1, 9),
                            right=(2, 3, 4, 5, 6, 7))
    ok = all(r["ok"] for r in rows)
    return Outcome({"tolerance": tolerance, "rows": rows}, tables=[table],
                   status=DONE if ok else FAILED)


def _measure_quorum(n: int, r: int, w: int, regions: str, apply_ms: float,
                    client_rtt_ms: float, client_sd_ms: float, client_region: str | None,
                    seed: int, out: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (t_mean_ms, p, enough-samples mask) measured by a staleness probe on the
    sim://quorum store with these parameters (reads every 0.5 ms after each write)."""
    from replicalab.checkers.extract import element_ops
    from replicalab.checkers.freshness import since_ack
    from replicalab.history import load_history
    from replicalab.workloads.base import ProbeOptions
    from replicalab.workloads.runner import ProbeSpec, run_probe
    from replicalab.workloads.staleness import KEY, StalenessConfig

    url = (f"sim://quorum?n={n}&r={r}&w={w}&regions={regions}&apply_ms={apply_ms}"
           f"&client_rtt_ms={client_rtt_ms}&client_sd_ms={client_sd_ms}")
    spec = ProbeSpec(store=url, workload="staleness",
                     options=ProbeOptions(duration_s=300, write_interval_s=0.1,
                                          read_rate=2000, seed=seed),
                     config=StalenessConfig(writer_region=client_region))
    probe_run = run_probe(spec, out)
    h, _ = load_history(probe_run.run_dir)
    writes, reads = element_ops(h, KEY)
    c = since_ack(writes, reads, 1.0)
    return (np.array(c["t_mean_ms"]), np.array(c["p"]), np.array(c["total"]) >= 300)


def pbs(n: int = 3, r: int = 1, w: int = 1, regions: str = "lan", apply_ms: float = 10.0,
        client_rtt_ms: float = 0.427, client_sd_ms: float = 0.0476,
        client_region: str | None = None, from_run: str | Path | None = None,
        t_max_ms: float = 100.0, measure: bool = False, trials: int = 100_000, seed: int = 1,
        out: str | Path = "runs") -> Outcome:
    """Predict how stale an N/R/W quorum store reads (PBS): P(consistent read) ``t`` ms
    after a write committed, up to ``t_max_ms``, the time to p = 0.9 / 0.99 / 0.999 and
    k-staleness, by ``trials`` Monte Carlo trials over latency legs fitted from a probe
    run's history (``from_run``) or those of the sim://quorum store with these
    parameters (``regions``, ``apply_ms``: mean exponential apply delay, client RTT);
    ``measure``: also probe that store and overlay what it measured."""
    from replicalab.history import load_history
    from replicalab.history.rundir import make_run_dir, save_results
    from replicalab.models import pbs as model

    if not t_max_ms > 0:
        raise ParameterError("t_max_ms", f"must be positive (got {t_max_ms})")
    if from_run is not None:
        h, _ = load_history(Path(from_run))
        wars, source = model.fit_wars(h, n, r, w), f"fitted from {from_run}"
    else:
        wars = model.wars_for_sim_quorum(n, regions, client_rtt_ms, client_sd_ms, apply_ms,
                                         client_region)
        source = f"sim://quorum legs ({regions}, apply {apply_ms:g} ms)"
    t = np.linspace(0.0, t_max_ms, 201)
    p = model.t_visibility(wars, r, w, t, trials, seed)
    measured = _measure_quorum(n, r, w, regions, apply_ms, client_rtt_ms, client_sd_ms,
                               client_region, seed, Path(out)) if measure else None
    t_at = {q: model.t_for_probability(wars, r, w, q, trials, seed) for q in (0.9, 0.99, 0.999)}
    k_stale = {k: model.k_staleness(n, r, w, k) for k in range(1, 6)}
    run_dir = make_run_dir(Path(out), "model", f"pbs-n{n}-r{r}-w{w}")
    shown = [x for x in T_SHOWN_MS if x <= t_max_ms]
    at = model.t_visibility(wars, r, w, shown, trials, seed)
    results: dict[str, Any] = {
        "schema_version": 1, "model": "pbs", "title": f"PBS N={n} R={r} W={w}",
        "params": {"n": n, "r": r, "w": w, "legs": source, "trials": trials, "seed": seed},
        "t_visibility": {"t_ms": t.round(4).tolist(), "p": p.round(6).tolist()},
        "t_for_probability_ms": {str(q): round(v, 4) for q, v in t_at.items()},
        "k_staleness": {str(k): round(v, 6) for k, v in k_stale.items()},
        "tables": [
            {"caption": "P(consistent read) t ms after the write committed",
             "header": ["t (ms)", "P(consistent)"],
             "rows": [[f"{x:g}", f"{100 * y:.2f}%"] for x, y in zip(shown, at, strict=True)]},
            {"caption": "Time after commit for a consistent read with probability p",
             "header": ["p", "t (ms)"], "rows": [[f"{q:g}", f"{v:.2f}"] for q, v in t_at.items()]},
            {"caption": "k-staleness: P(read returns one of the last k versions)",
             "header": ["k", "probability"],
             "rows": [[k, f"{100 * v:.3f}%"] for k, v in k_stale.items()]},
        ],
    }
    overlay, remarks = None, []
    if measured is not None:
        mt, mp, enough = measured
        keep = enough & (mt <= t_max_ms)
        mt, mp = mt[keep], mp[keep]
        gap = float(np.abs(model.t_visibility(wars, r, w, mt, trials, seed) - mp).max()) \
            if len(mt) else None
        results["measured"] = {"t_mean_ms": mt.round(4).tolist(), "p": mp.round(6).tolist(),
                               "max_abs_difference": None if gap is None else round(gap, 6)}
        overlay = (mt, mp)
        remarks.append("measured on sim://quorum: largest gap to the prediction "
                       f"{'n/a' if gap is None else f'{100 * gap:.2f} points'}")
    save_results(results, run_dir)
    from replicalab.report.model_page import render_model_report
    from replicalab.report.model_plots import visibility_figure

    report = render_model_report(results, run_dir, figures=[(
        "fig-visibility", f"t-visibility of N={n}, R={r}, W={w} ({source}).",
        visibility_figure(t, {f"PBS N={n} R={r} W={w}": p}, overlay))])
    table = Table(results["title"] + f" — {source}", ["t after commit (ms)", "P(consistent)"],
                  right=(0, 1))
    for x, y in zip(shown, at, strict=True):
        table.add(f"{x:g}", f"{100 * y:.2f}%")
    remarks.append(f"consistent with p=0.99 after {t_at[0.99]:.2f} ms; p=0.999 after "
                   f"{t_at[0.999]:.2f} ms")
    return Outcome(results, run_dir, report, [table], remarks)


def _against_outcome(run: Any, run_dir: Path, report: Path, tables: list[Table]) -> Outcome:
    """Return a model-against-store run: FAILED when the model missed its tolerance,
    INCONCLUSIVE when the run's noise floor exceeded what the verdict can bear."""
    return Outcome(run.results, run_dir, report, tables, list(run.remarks),
                   {1: FAILED, 3: INCONCLUSIVE}.get(run.exit_status, DONE))


def model_against(name: str, against: str, duration: str | float = "10s",
                  params: str | Path | None = None, sets: Sequence[str] = (),
                  compare: str | None = None, loads: str | None = None, rounds: int = 20_000,
                  seed: int = 1, out: str | Path = "runs", progress: Progress = None
                  ) -> Outcome:
    """Measure a real store (``against``: etcd) with one member per region, the leader
    placed as model ``name`` says, at offered writes/s ``loads``, ``duration`` per leader
    and rate; return the :class:`Outcome`, FAILED when a client region's mean is not within
    the model's tolerance or the best leaders differ."""
    from replicalab.experiments import against as experiment
    from replicalab.history.rundir import make_run_dir, save_results

    spec = _spec(name)
    duration_s = seconds(duration, "duration")
    configs, cmp = _configs(spec, params, sets, compare)
    p, leaders = experiment.check(spec, against, configs, cmp[0] if cmp else None)
    rates = experiment.parse_rates(loads)
    if rounds < 100:
        raise ParameterError("rounds", f"{rounds} must be at least 100")
    make_run_dir(Path(out), "model", f"{spec.name}-against-{against}").rmdir()  # writable?
    with ticking(f"{spec.name} against {against} on {p.rs.name}", progress) as tick:
        run = experiment.paxos_wan_against(p, against, leaders, rates, duration_s, rounds,
                                           seed, tick)
    run_dir = make_run_dir(Path(out), "model", f"{spec.name}-against-{against}")
    save_results(run.results, run_dir)
    experiment.save_raw(run, run_dir)
    from replicalab.report.against import render_against_report

    report = render_against_report(run.results, run.rows, run_dir)
    labels = ("quantity", "client region", "leader", "best")
    return _against_outcome(run, run_dir, report, [
        Table.from_json(t, right=tuple(i for i, h in enumerate(t["header"]) if h not in labels))
        for t in run.results["tables"]])


def pbs_against(n: int = 3, pairs: str | None = None, r: int = 1, w: int = 1,
                regions: str = "dc3", writer: str | None = None, reader: str | None = None,
                duration: str | float = "30s", t_max_ms: float = 100.0,
                trials: int = 100_000, seed: int = 1, out: str | Path = "runs",
                jitter_ms: float = 20.0, progress: Progress = None) -> Outcome:
    """Check PBS against Cassandra: N nodes, one per region, the latency legs from its own
    traffic, P(consistent) measured beside the prediction at every sampled t for each
    R:W pair of ``pairs`` (``"1:1,2:2"``; default ``r``:``w``), ``duration`` of probing
    per pair; FAILED when the largest gap over the curves exceeds the tolerance or no curve
    has a transition to test the model on."""
    from replicalab.experiments import against as experiment
    from replicalab.history.rundir import make_run_dir, save_results

    chosen = experiment.parse_pairs(pairs, r, w, n)
    # 30 s: 300 writes at R = 1, the measured curve good to +-8 points (DKW, 95 %)
    duration_s = seconds(duration, "duration")
    writer, reader = experiment.pbs_placement(n, chosen, regions, writer, reader, jitter_ms)
    run_dir = make_run_dir(Path(out), "model", f"pbs-n{n}-against-cassandra")
    with ticking(f"PBS N={n} against cassandra on {regions}", progress) as tick:
        run = experiment.pbs_against(n, chosen, regions, writer, reader, duration_s, t_max_ms,
                                     trials, seed, run_dir, tick, jitter_ms)
    save_results(run.results, run_dir)
    from replicalab.report.model_page import render_model_report
    from replicalab.report.model_plots import visibility_figure

    figures = [(c["id"], c["caption"], visibility_figure(c["t_ms"], c["predicted"],
                                                         c["measured"], c.get("sampled")))
               for c in run.curves]
    report = render_model_report(run.results, run_dir, figures=figures)
    return _against_outcome(run, run_dir, report,
                            [Table.from_json(run.results["tables"][0], right=tuple(range(9)))])

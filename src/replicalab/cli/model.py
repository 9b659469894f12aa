"""``replicalab model ...``: performance models and PBS staleness predictions."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import since_ack
from replicalab.cli.errors import fail
from replicalab.cli.model_params import build, describe, load_toml, parse_compare, parse_sets
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import duration_ms
from replicalab.cluster import process
from replicalab.history import load_history
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.models import pbs as pbs_model
from replicalab.models.base import Curve
from replicalab.models.registry import MODELS, ModelSpec
from replicalab.models.validate import Divergence, comparison_table, validate_cost, validate_entry
from replicalab.models.validate import compare as compare_curves
from replicalab.runtime.parallel import JobFailed, RayMissing, Workers
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig

model_app = typer.Typer(help="Predict protocol performance and staleness before building. "
                             "Measured against a real store (--against): paxos-wan (etcd) "
                             "and pbs (cassandra); the other models have no real counterpart.",
                        no_args_is_help=True)

_T_SHOWN_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500)


def _measure(n: int, r: int, w: int, regions: str, apply_ms: float, client_rtt_ms: float,
             client_sd_ms: float, client_region: str | None, seed: int, out: Path
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (t_mean_ms, p, enough-samples mask) measured by a staleness probe on the
    sim://quorum store with these parameters (reads every 0.5 ms after each write)."""
    url = (f"sim://quorum?n={n}&r={r}&w={w}&regions={regions}&apply_ms={apply_ms}"
           f"&client_rtt_ms={client_rtt_ms}&client_sd_ms={client_sd_ms}")
    spec = ProbeSpec(store=url, workload="staleness",
                     options=ProbeOptions(duration_s=300, write_interval_s=0.1,
                                          read_rate=2000, seed=seed),
                     config=StalenessConfig(writer_region=client_region))
    with progress_bar(f"measuring {url}") as tick:
        probe_run = run_probe(spec, out, tick)
    h, _ = load_history(probe_run.run_dir)
    writes, reads = element_ops(h, KEY)
    c = since_ack(writes, reads, 1.0)
    return (np.array(c["t_mean_ms"]), np.array(c["p"]), np.array(c["total"]) >= 300)


@model_app.command("pbs")
def pbs(
    n: Annotated[int, typer.Option(help="Replicas N.")] = 3,
    r: Annotated[int, typer.Option(help="Read quorum R.")] = 1,
    w: Annotated[int, typer.Option(help="Write quorum W.")] = 1,
    regions: Annotated[str | None, typer.Option(
        help="Region set of the replicas: lan, dc3, aws5 (default lan; dc3 with --against).")
                       ] = None,
    apply: Annotated[str | None, typer.Option(
        help="Mean exponential apply delay at a replica: 10ms (the default), 0.5s.",
        show_default=False)] = None,
    apply_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --apply."
                                                   )] = None,
    client_rtt_ms: Annotated[float, typer.Option(help="Client-replica RTT in one region (ms).")
                             ] = 0.427,
    client_sd_ms: Annotated[float, typer.Option(help="Its standard deviation (ms).")] = 0.0476,
    client_region: Annotated[str | None, typer.Option(help="Region of the coordinator.")
                             ] = None,
    from_run: Annotated[Path | None, typer.Option(
        help="Fit the latency legs from this probe run's history instead.")] = None,
    t_max_ms: Annotated[float, typer.Option(help="Plot up to this many ms after commit.")
                        ] = 100.0,
    measure: Annotated[bool, typer.Option(
        help="Also probe the matching sim://quorum store and overlay what it measured.")
                       ] = False,
    trials: Annotated[int, typer.Option(help="Monte Carlo trials.")] = 100_000,
    seed: Annotated[int, typer.Option(help="Seed of the Monte Carlo.")] = 1,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    against: Annotated[str | None, typer.Option(
        help="Measure a real store instead: cassandra (N nodes, one per region; legs from "
             "its own traffic, P(consistent) measured beside the prediction).")] = None,
    duration: Annotated[str | None, typer.Option(
        help="With --against: probing time per (R, W) (default 30s).")] = None,
    reader_region: Annotated[str | None, typer.Option(
        help="With --against: the reader's region (the writer's is --client-region).")
                             ] = None,
    pairs: Annotated[str | None, typer.Option(
        help="With --against: several R:W pairs on one cluster, e.g. 1:1,1:2,2:1,2:2,1:3.")
                     ] = None,
    jitter: Annotated[str | None, typer.Option(
        help="With --against: jitter of every replication link, uniform +-J (default "
             "20ms; 0ms keeps the region set's own).", show_default=False)] = None,
) -> None:
    """Predict how stale an N/R/W quorum store reads (PBS t-visibility and k-staleness).

    Example: replicalab model pbs --n 3 --r 1 --w 1 --apply 10ms
    Against Cassandra: replicalab model pbs --n 3 --r 1 --w 1 --against cassandra
    """
    if against is not None or duration is not None or pairs is not None \
            or reader_region is not None or jitter is not None:
        _pbs_against(against, n, r, w, pairs, from_run is not None or measure,
                     regions or "dc3", client_region, reader_region, duration, t_max_ms,
                     trials, seed, out, as_json, jitter)
        return
    regions = regions or "lan"
    try:
        apply_ms = duration_ms(apply, "--apply", apply_ms, "--apply-ms", "10ms")
        if not t_max_ms > 0:
            raise ValueError(f"--t-max-ms must be positive (got {t_max_ms})")
        wars, source = _legs(n, r, w, from_run, regions, client_rtt_ms, client_sd_ms,
                             apply_ms, client_region)
        t = np.linspace(0.0, t_max_ms, 201)
        p = pbs_model.t_visibility(wars, r, w, t, trials, seed)
        measured = _measure(n, r, w, regions, apply_ms, client_rtt_ms, client_sd_ms,
                            client_region, seed, out) if measure else None
        t_at = {q: pbs_model.t_for_probability(wars, r, w, q, trials, seed)
                for q in (0.9, 0.99, 0.999)}
        k_stale = {k: pbs_model.k_staleness(n, r, w, k) for k in range(1, 6)}
        run_dir = make_run_dir(out, "model", f"pbs-n{n}-r{r}-w{w}")
    except ValueError as err:
        fail(str(err))
    shown = [x for x in _T_SHOWN_MS if x <= t_max_ms]
    at_shown = pbs_model.t_visibility(wars, r, w, shown, trials, seed)
    results = _pbs_results(n, r, w, source, trials, seed, (t, p), t_at, k_stale,
                           (shown, at_shown))
    overlay = None
    if measured is not None:
        results["measured"], overlay = _beside_measured(measured, wars, r, w, t_max_ms,
                                                        trials, seed)
    save_results(results, run_dir)
    report = _pbs_report(results, run_dir, (t, p), overlay)
    if as_json:
        sys.stdout.write(json.dumps({**results, "run_dir": str(run_dir), "report": str(report)},
                                    sort_keys=True) + "\n")
        return
    _say_pbs(results, source, (shown, at_shown), t_at, report)


def _pbs_report(results: dict[str, Any], run_dir: Path, curve: tuple[np.ndarray, np.ndarray],
                overlay: tuple[np.ndarray, np.ndarray] | None) -> Path:
    """Write the report of a PBS prediction: its t-visibility ``curve`` (t ms, P), with what
    was measured overlaid; return its path."""
    from replicalab.report.model_page import render_model_report
    from replicalab.report.model_plots import visibility_figure

    prm = results["params"]
    n, r, w = prm["n"], prm["r"], prm["w"]
    return render_model_report(results, run_dir, figures=[(
        "fig-visibility", f"t-visibility of N={n}, R={r}, W={w} ({prm['legs']}).",
        visibility_figure(curve[0], {f"PBS N={n} R={r} W={w}": curve[1]}, overlay))])


def _legs(n: int, r: int, w: int, from_run: Path | None, regions: str, client_rtt_ms: float,
          client_sd_ms: float, apply_ms: float, client_region: str | None) -> tuple[Any, str]:
    """Return PBS's latency legs (WARS) and where they come from: fitted from a probe run's
    history, or those of the sim://quorum store with these parameters."""
    if from_run is not None:
        h, _ = load_history(from_run)
        return pbs_model.fit_wars(h, n, r, w), f"fitted from {from_run}"
    return (pbs_model.wars_for_sim_quorum(n, regions, client_rtt_ms, client_sd_ms, apply_ms,
                                          client_region),
            f"sim://quorum legs ({regions}, apply {apply_ms:g} ms)")


def _beside_measured(measured: tuple[np.ndarray, np.ndarray, np.ndarray], wars: Any, r: int,
                     w: int, t_max_ms: float, trials: int, seed: int
                     ) -> tuple[dict[str, Any], tuple[np.ndarray, np.ndarray]]:
    """Return what the sim://quorum probe measured (times with enough samples, up to
    ``t_max_ms``) with its largest gap to the prediction, and the (t ms, P) to overlay."""
    mt, mp, enough = measured
    mt, mp = mt[enough & (mt <= t_max_ms)], mp[enough & (mt <= t_max_ms)]
    predicted = pbs_model.t_visibility(wars, r, w, mt, trials, seed)
    gap = float(np.abs(predicted - mp).max()) if len(mt) else None
    return ({"t_mean_ms": mt.round(4).tolist(), "p": mp.round(6).tolist(),
             "max_abs_difference": None if gap is None else round(gap, 6)}, (mt, mp))


def _pbs_against(against: str | None, n: int, r: int, w: int, pairs: str | None,
                 local_options: bool, regions: str, client_region: str | None,
                 reader_region: str | None, duration: str | None, t_max_ms: float,
                 trials: int, seed: int, out: Path, as_json: bool,
                 jitter: str | None = None) -> None:
    """Run ``model pbs --against``: predict and measure on a real cluster (exit 2 for an
    option it cannot take; ``local_options``: --from-run or --measure was given)."""
    from replicalab.cli.model_against import parse_pairs, run_pbs_against

    try:
        if against != "cassandra":
            raise ValueError(f"--against {against!r}: PBS can be checked against "
                             "cassandra (--duration, --pairs, --jitter and --reader-region "
                             "need it)")
        if local_options:
            raise ValueError("--against measures the cluster itself; drop --from-run "
                             "and --measure")
        chosen = parse_pairs(pairs, r, w, n)
        jitter_ms = duration_ms(jitter, "--jitter", None, "", "20ms")
    except ValueError as err:
        fail(str(err))
    run_pbs_against(n, chosen, regions, client_region, reader_region, duration,
                    t_max_ms, trials, seed, out, as_json, jitter_ms)


def _pbs_results(n: int, r: int, w: int, source: str, trials: int, seed: int,
                 curve: tuple[np.ndarray, np.ndarray], t_at: dict[float, float],
                 k_stale: dict[int, float], at_shown: tuple[list[float], Any]
                 ) -> dict[str, Any]:
    """Return the results of a PBS prediction: the t-visibility ``curve`` (t in ms, P), the
    time to each probability, k-staleness and their tables (``at_shown``: t and P at the
    times the table shows)."""
    t, p = curve
    shown, at = at_shown
    return {
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
             "header": ["p", "t (ms)"],
             "rows": [[f"{q:g}", f"{v:.2f}"] for q, v in t_at.items()]},
            {"caption": "k-staleness: P(read returns one of the last k versions)",
             "header": ["k", "probability"],
             "rows": [[k, f"{100 * v:.3f}%"] for k, v in k_stale.items()]},
        ],
    }


def _say_pbs(results: dict[str, Any], source: str, at_shown: tuple[list[float], Any],
             t_at: dict[float, float], report: Path) -> None:
    """Print a PBS prediction: P(consistent) over time, the gap to what was measured, the
    times to p=0.99 and 0.999, and where the report is."""
    table = TableData(results["title"] + f" — {source}", ["t after commit (ms)",
                                                           "P(consistent)"], right=(0, 1))
    for x, y in zip(*at_shown, strict=True):
        table.add(f"{x:g}", f"{100 * y:.2f}%")
    show(table)
    if "measured" in results:
        gap = results["measured"]["max_abs_difference"]
        say(f"measured on sim://quorum: largest gap to the prediction "
            f"{'n/a' if gap is None else f'{100 * gap:.2f} points'}")
    say(f"consistent with p=0.99 after {t_at[0.99]:.2f} ms; p=0.999 after "
        f"{t_at[0.999]:.2f} ms")
    say(f"report: {report}")


def _loads(max_rps: float, points: int, loads: str | None) -> list[float]:
    """Return offered loads (req/s): explicit ``loads`` or ``points`` spread to 98 % of max."""
    if loads:
        try:
            values = [float(x) for x in loads.split(",")]
        except ValueError:
            raise ValueError(f"--loads {loads!r}: give comma-separated requests/s, "
                             "e.g. 1000,2000") from None
        if any(not v > 0 for v in values):
            raise ValueError(f"--loads {loads!r}: every load must be positive")
        return values
    if points < 2:
        raise ValueError(f"--points {points} must be at least 2")
    if not max_rps > 0 or max_rps == float("inf"):
        raise ValueError("the model reports no finite maximum throughput; pass --loads")
    return [float(x) for x in np.linspace(0.05, 0.98, points) * max_rps]


def model_command(spec: ModelSpec) -> Callable[..., None]:
    """Return the Typer command for one model of the registry."""

    def command(
        set_: Annotated[list[str] | None, typer.Option(
            "--set", help="Parameter KEY=VALUE (repeatable), e.g. --set n=5.")] = None,
        params: Annotated[Path | None, typer.Option(
            help="TOML file with parameters (top level or a [params] table).")] = None,
        compare: Annotated[str | None, typer.Option(
            help="One curve per value: KEY=V1,V2,..., e.g. n=3,5,7,9.")] = None,
        points: Annotated[int, typer.Option(help="Loads per curve, up to 98% of max.")] = 20,
        loads: Annotated[str | None, typer.Option(help="Explicit loads in requests/s.")
                         ] = None,
        twin: Annotated[bool, typer.Option(help="Also run the discrete-event twin.")] = False,
        rounds: Annotated[int, typer.Option(help="Rounds per load for the twin.")] = 20_000,
        seed: Annotated[int, typer.Option(help="Seed of the twin.")] = 1,
        out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                       ] = Path("runs"),
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")
                           ] = False,
        # plain defaults, not Annotated: these depend on ``spec``, which the annotations
        # (strings under `from __future__ import annotations`) cannot see
        against: str | None = typer.Option(
            None, help=f"Also measure a real store ({', '.join(spec.against)}) with one member "
                       "per region, the leader placed as the model says; --loads are then its "
                       "offered writes/s.", hidden=not spec.against,
            callback=_only_against(spec)),
        duration: str | None = typer.Option(
            None, help="With --against: measuring time per leader and rate, e.g. 10s.",
            hidden=not spec.against, callback=_only_against(spec)),
    ) -> None:
        if against is not None or duration is not None:
            from replicalab.cli.model_against import run_against

            run_against(spec, against, duration, params, set_ or [], compare, loads, rounds,
                        seed, out, as_json)
            return
        try:
            base = load_toml(params)
            sets = parse_sets(spec.params_cls, set_ or [])
            cmp = parse_compare(spec.params_cls, compare)
            variants = [(f"{cmp[0]}={v}", {cmp[0]: v}) for v in cmp[1]] if cmp else [("", {})]
            configs = [(label, build(spec.params_cls, base, {**sets, **extra}, spec.name))
                       for label, extra in variants]
            curves = _curves(spec, configs, points, loads, twin, rounds, seed, as_json)
            run_dir = make_run_dir(out, "model", spec.name)
        except ValueError as err:
            fail(str(err))
        results = _model_results(spec, configs, cmp, curves, twin)
        table = TableData(spec.title, ["curve", "max throughput (req/s)",
                                       "latency at 50% / 90% of max (ms)"], right=(1, 2))
        for c in curves:
            table.add(c.label, f"{c.max_throughput_rps:,.0f}", _at_fractions(c))
        save_results(results, run_dir)
        from replicalab.report.model_page import render_model_report

        report = render_model_report(results, run_dir, curves)
        if as_json:
            sys.stdout.write(json.dumps({**results, "run_dir": str(run_dir),
                                         "report": str(report),
                                         "summary_table": table.to_json()},
                                        sort_keys=True) + "\n")
            return
        show([table, *(TableData.from_json(t) for t in results["tables"])])
        say(f"report: {report}")

    command.__doc__ = f"{spec.title}.\n\nExample: {spec.example}"
    if spec.against:
        command.__doc__ += (f"\n\nAgainst a real store: replicalab model {spec.name} "
                            f"--against {spec.against[0]}")
    return command


def against_offers() -> str:
    """Return which models take --against and what they measure, e.g. "paxos-wan (against
    etcd) and pbs (against cassandra)"."""
    offers = [f"{name} (against {', '.join(s.against)})" for name, s in MODELS.items()
              if s.against] + ["pbs (against cassandra)"]
    return ", ".join(offers[:-1]) + " and " + offers[-1] if len(offers) > 1 else offers[0]


def _only_against(spec: ModelSpec) -> Callable[[str | None], str | None]:
    """Return the parse-time check of --against/--duration for ``spec``: a model with no
    real counterpart refuses them in one line naming the models that take them."""

    def check(value: str | None) -> str | None:
        if value is not None and not spec.against:
            raise typer.BadParameter(f"the {spec.name} model has no real store to be measured "
                                     f"against; --against is offered by {against_offers()}")
        return value

    return check


def _curves(spec: ModelSpec, configs: list[tuple[str, Any]], points: int, loads: str | None,
            twin: bool, rounds: int, seed: int, as_json: bool) -> list[Curve]:
    """Return the model's curve of every configuration (label, params), each followed by its
    twin's when ``twin``: latency (ms) against offered load (req/s)."""
    curves = []
    with progress_bar(f"model {spec.name}", enabled=twin and not as_json) as tick:
        for i, (label, p) in enumerate(configs):
            max_rps = spec.curve(p, [1.0]).max_throughput_rps
            grid = _loads(max_rps, points, loads)
            c = spec.curve(p, grid)
            curves.append(_relabel(c, label or c.label))
            if twin:
                tick(i / len(configs), f"twin of {label or c.label}")
                t = spec.twin(p, grid, seed, rounds)
                curves.append(_relabel(t, f"{label or c.label} (twin)"))
    return curves


def _model_results(spec: ModelSpec, configs: list[tuple[str, Any]],
                   cmp: tuple[str, list[Any]] | None, curves: list[Curve], twin: bool
                   ) -> dict[str, Any]:
    """Return results.json of a model run: parameters, curves, the model's tables and, with
    twins, model against twin per configuration."""
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
    return results


def _relabel(c: Curve, label: str) -> Curve:
    return Curve(label, c.points, c.max_throughput_rps, c.extra)


def _at_fractions(c: Curve) -> str:
    def at(frac: float) -> str:
        target = frac * c.max_throughput_rps
        best = min(c.points, key=lambda pt: abs(pt.offered_rps - target), default=None)
        if best is None or best.latency_ms is None:
            return "saturated"
        return f"{best.latency_ms:.3f}"

    return f"{at(0.5)} / {at(0.9)}"


@model_app.command("validate")
def validate_command(
    model: Annotated[str | None, typer.Option(help="Only this model (default: all).")] = None,
    rounds: Annotated[int, typer.Option(help="Rounds per load for the twins.")] = 20_000,
    tolerance: Annotated[float, typer.Option(
        help="Allowed relative gap in mean latency and in maximum throughput.")] = 0.10,
    seed: Annotated[int, typer.Option(help="Seed of the twins.")] = 1,
    workers: Annotated[int, typer.Option(
        help="Run the grid's independent twin simulations on this many local "
             "processes.")] = 1,
    ray: Annotated[str | None, typer.Option(
        help="Run them as tasks on a Ray cluster: ADDRESS, or 'local' for a local "
             "instance; needs replicalab[ray].")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run every model and its discrete-event twin over a grid: latency and maximum
    throughput (the twin's measured by its own runs); report where they diverge.

    Example: replicalab model validate --model paxos-lan

    Example: replicalab model validate --workers 2
    """
    names = [model] if model else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        fail(f"--model {unknown[0]!r}: use one of {', '.join(MODELS)}")
    if not 0 < tolerance < 1 or rounds < 100:
        fail("--tolerance must be in (0, 1) and --rounds at least 100")
    # every grid entry runs a model and its twin: the entries are the independent jobs,
    # the slowest first so that two workers finish together
    jobs = [(name, i, rounds, seed, tolerance) for name in names
            for i in range(len(MODELS[name].grid()))]
    order = sorted(range(len(jobs)), key=lambda j: -validate_cost(*jobs[j][:2]))
    try:
        pool = Workers(workers, ray, on_start=process.track)
        pool.start(len(jobs))
    except (RayMissing, ValueError) as err:
        fail(str(err))
    done = [0]
    try:
        with progress_bar("model validate", not as_json) as tick:
            def finished(_i: int, _d: Divergence) -> None:
                done[0] += 1
                tick(done[0] / len(jobs))

            found = pool.map(validate_entry, [jobs[j] for j in order], finished)
    except JobFailed as err:
        fail(f"a twin failed: {err}")
    finally:
        pool.close()
    by_job = dict(zip(order, found, strict=True))
    rows = [{"model": jobs[j][0], **by_job[j].to_json()} for j in range(len(jobs))]
    table = TableData.from_json(comparison_table(rows, tolerance), wrap=(1, 9),
                                right=(2, 3, 4, 5, 6, 7))
    if as_json:
        sys.stdout.write(json.dumps({"tolerance": tolerance, "rows": rows,
                                     "tables": [table.to_json()]}) + "\n")
    else:
        show(table)
    if not all(r["ok"] for r in rows):
        sys.exit(1)


def _broken(error: str) -> Callable[[], None]:
    """Return the command of a model whose package fails to load: it says so."""

    def command() -> None:
        fail(error)

    return command


for _spec in MODELS.installed().values():  # the shipped models, then installed packages'
    model_app.command(_spec.name)(model_command(_spec))
for _name, _error in MODELS.broken.items():
    model_app.command(_name, help="(fails to load: run it to see why)")(_broken(_error))

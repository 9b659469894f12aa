"""``replicalab model paxos-wan --against etcd`` and ``replicalab model pbs --against
cassandra``: parse the options, run the experiment of ``experiments/against.py``, save and
render it, print; exit 1 when the model is off by more than its tolerance, 3 when the verdict
is inconclusive (the run's noise floor exceeded what the verdict can bear)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from replicalab.cli.errors import fail
from replicalab.cli.model_params import build, load_toml, parse_compare, parse_sets
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.timeparse import parse_duration_s
from replicalab.experiments import against as experiment
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.models.registry import ModelSpec

parse_pairs = experiment.parse_pairs


def _finish(run: experiment.AgainstRun, run_dir: Path, report: Path, as_json: bool,
            tables: list[TableData]) -> None:
    """Print the run (``tables``, its remarks and report path, or one JSON object); exit 1
    if the model missed its tolerance, 3 if the verdict is inconclusive."""
    if as_json:
        sys.stdout.write(json.dumps({**run.results, "run_dir": str(run_dir),
                                     "report": str(report)}, sort_keys=True) + "\n")
    else:
        show(tables)
        for line in run.remarks:
            say(line)
        say(f"report: {report}")
    if run.exit_status:
        sys.exit(run.exit_status)  # 1: the model missed; 3: inconclusive (the machine)


def run_against(spec: ModelSpec, against: str | None, duration: str | None,
                params: Path | None, sets: list[str], compare: str | None, loads: str | None,
                rounds: int, seed: int, out: Path, as_json: bool) -> None:
    """Run ``model <spec> --against KIND``: exit 1 if a client region's mean is not within
    the tolerance of the model or the best leaders differ, 2 on bad input (``duration``: the
    --duration text, default 10 s)."""
    from replicalab.report.against import render_against_report

    try:
        if against is None:
            raise ValueError("--duration applies to --against only")
        duration_s = parse_duration_s(duration or "10s", "--duration")
        cmp = parse_compare(spec.params_cls, compare)
        base = load_toml(params)
        given = parse_sets(spec.params_cls, sets)
        configs = [("", build(spec.params_cls, base, {**given, **extra}, spec.name))
                   for extra in ([{cmp[0]: v} for v in cmp[1]] if cmp else [{}])]
        p, leaders = experiment.check(spec, against, configs, cmp[0] if cmp else None)
        rates = experiment.parse_rates(loads)
        if rounds < 100:
            raise ValueError(f"--rounds {rounds} must be at least 100")
        make_run_dir(out, "model", f"{spec.name}-against-{against}").rmdir()  # writable?
        with progress_bar(f"{spec.name} against {against} on {p.rs.name}",
                          enabled=not as_json) as tick:
            run = experiment.paxos_wan_against(p, against, leaders, rates, duration_s, rounds,
                                               seed, tick)
        run_dir = make_run_dir(out, "model", f"{spec.name}-against-{against}")
    except ValueError as err:
        fail(str(err))
    save_results(run.results, run_dir)
    experiment.save_raw(run, run_dir)
    report = render_against_report(run.results, run.rows, run_dir)
    labels = ("quantity", "client region", "leader", "best")
    _finish(run, run_dir, report, as_json, [
        TableData.from_json(t, right=tuple(i for i, h in enumerate(t["header"])
                                           if h not in labels)) for t in run.results["tables"]])


def run_pbs_against(n: int, pairs: list[tuple[int, int]], regions: str, writer: str | None,
                    reader: str | None, duration: str | None, t_max_ms: float, trials: int,
                    seed: int, out: Path, as_json: bool, jitter_ms: float = 20.0) -> None:
    """``model pbs --against cassandra``: prediction and measurement side by side at every
    sampled t, the report written; exit 1 when the largest gap over the curves exceeds the
    tolerance or no curve has a transition to test the model on."""
    from replicalab.report.model_page import render_model_report
    from replicalab.report.model_plots import visibility_figure

    try:
        # 30 s: 300 writes at R = 1, the measured curve good to +-8 points (DKW, 95 %)
        duration_s = parse_duration_s(duration or "30s", "--duration")
        writer, reader = experiment.pbs_placement(n, pairs, regions, writer, reader,
                                                  jitter_ms)
        run_dir = make_run_dir(out, "model", f"pbs-n{n}-against-cassandra")
        with progress_bar(f"PBS N={n} against cassandra on {regions}",
                          enabled=not as_json) as tick:
            run = experiment.pbs_against(n, pairs, regions, writer, reader, duration_s,
                                         t_max_ms, trials, seed, run_dir, tick, jitter_ms)
    except ValueError as err:
        fail(str(err))
    save_results(run.results, run_dir)
    figures = [(c["id"], c["caption"], visibility_figure(c["t_ms"], c["predicted"],
                                                         c["measured"], c.get("sampled")))
               for c in run.curves]
    report = render_model_report(run.results, run_dir, figures=figures)
    _finish(run, run_dir, report, as_json,
            [TableData.from_json(run.results["tables"][0], right=tuple(range(9)))])

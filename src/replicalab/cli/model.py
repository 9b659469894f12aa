"""``replicalab model ...``: performance models and PBS staleness predictions."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import since_ack
from replicalab.cli.errors import fail
from replicalab.cli.probe import out_console
from replicalab.cli.progress import progress_bar
from replicalab.history import load_history
from replicalab.models import pbs as pbs_model
from replicalab.report.model_page import render_model_report
from replicalab.report.model_plots import visibility_figure
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, make_run_dir, run_probe, save_results
from replicalab.workloads.staleness import KEY, StalenessConfig

model_app = typer.Typer(help="Predict protocol performance and staleness before building.",
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
                     staleness=StalenessConfig(writer_region=client_region))
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
    regions: Annotated[str, typer.Option(help="Region set of the replicas: lan, dc3, aws5.")
                       ] = "lan",
    apply_ms: Annotated[float, typer.Option(help="Mean exponential apply delay at a replica "
                                            "(ms).")] = 10.0,
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
) -> None:
    """Predict how stale an N/R/W quorum store reads (PBS t-visibility and k-staleness).

    Example: replicalab model pbs --n 3 --r 1 --w 1 --apply-ms 10
    """
    try:
        if not t_max_ms > 0:
            raise ValueError(f"--t-max-ms must be positive (got {t_max_ms})")
        if from_run is not None:
            h, _ = load_history(from_run)
            wars = pbs_model.fit_wars(h, n, r, w)
            source = f"fitted from {from_run}"
        else:
            wars = pbs_model.wars_for_sim_quorum(n, regions, client_rtt_ms, client_sd_ms,
                                                 apply_ms, client_region)
            source = f"sim://quorum legs ({regions}, apply {apply_ms:g} ms)"
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
    results = {
        "schema_version": 1, "model": "pbs", "title": f"PBS N={n} R={r} W={w}",
        "params": {"n": n, "r": r, "w": w, "legs": source, "trials": trials, "seed": seed},
        "t_visibility": {"t_ms": t.round(4).tolist(), "p": p.round(6).tolist()},
        "t_for_probability_ms": {str(q): round(v, 4) for q, v in t_at.items()},
        "k_staleness": {str(k): round(v, 6) for k, v in k_stale.items()},
        "tables": [
            {"caption": "P(consistent read) t ms after the write committed",
             "header": ["t (ms)", "P(consistent)"],
             "rows": [[f"{x:g}", f"{100 * y:.2f}%"] for x, y in zip(shown, at_shown,
                                                                     strict=True)]},
            {"caption": "Time after commit for a consistent read with probability p",
             "header": ["p", "t (ms)"],
             "rows": [[f"{q:g}", f"{v:.2f}"] for q, v in t_at.items()]},
            {"caption": "k-staleness: P(read returns one of the last k versions)",
             "header": ["k", "probability"],
             "rows": [[k, f"{100 * v:.3f}%"] for k, v in k_stale.items()]},
        ],
    }
    overlay = None
    if measured is not None:
        mt, mp, enough = measured
        mt, mp = mt[enough & (mt <= t_max_ms)], mp[enough & (mt <= t_max_ms)]
        predicted = pbs_model.t_visibility(wars, r, w, mt, trials, seed)
        gap = float(np.abs(predicted - mp).max()) if len(mt) else None
        results["measured"] = {"t_mean_ms": mt.round(4).tolist(), "p": mp.round(6).tolist(),
                               "max_abs_difference": None if gap is None else round(gap, 6)}
        overlay = (mt, mp)
    save_results(results, run_dir)
    report = render_model_report(results, run_dir, figures=[(
        "fig-visibility", f"t-visibility of N={n}, R={r}, W={w} ({source}).",
        visibility_figure(t, {f"PBS N={n} R={r} W={w}": p}, overlay))])
    if as_json:
        sys.stdout.write(json.dumps({**results, "run_dir": str(run_dir), "report": str(report)},
                                    sort_keys=True) + "\n")
        return
    table = Table(title=results["title"] + f" — {source}", title_justify="left")
    table.add_column("t after commit (ms)", justify="right")
    table.add_column("P(consistent)", justify="right")
    for x, y in zip(shown, at_shown, strict=True):
        table.add_row(f"{x:g}", f"{100 * y:.2f}%")
    out_console.print(table)
    if measured is not None:
        gap = results["measured"]["max_abs_difference"]
        out_console.print(f"measured on sim://quorum: largest gap to the prediction "
                          f"{'n/a' if gap is None else f'{100 * gap:.2f} points'}")
    out_console.print("consistent with p=0.99 after "
                      f"{t_at[0.99]:.2f} ms; p=0.999 after {t_at[0.999]:.2f} ms")
    out_console.print(f"report: {report}")

"""``replicalab compare --workload register``: Jepsen's register test on each real store,
side by side under the same fault schedule, with eventual and with consistent reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import Phases, progress_bar
from replicalab.cluster import base
from replicalab.faults.schedule import Fault
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.regions import region_set
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe

CONSISTENCIES = ("eventual", "consistent")


def _leader_region(c: Any) -> str | None:
    _, status = base.status(c.name)
    return next((c.nodes[i].region for i, s in enumerate(status)
                 if s.get("role") in ("leader", "primary")), None)


def register_row(kind: str, leader: str | None, runs: dict[str, dict[str, Any]],
                 run_dirs: dict[str, str]) -> dict[str, Any]:
    """Return one store's row: per read consistency the verdict, the keys found not
    linearizable, the smallest counterexample (ops), availability and lost writes."""
    row: dict[str, Any] = {"store": kind, "leader_region": leader}
    for c, r in runs.items():
        lin = r["linearizability"]
        bad = [p for p in lin["parts"] if p["valid"] is False]
        sizes = [len(p["counterexample"]) for p in bad if p.get("counterexample")]
        row.update({f"{c}_valid": lin["valid"], f"{c}_ops": lin["ops"],
                    f"{c}_keys": lin["keys"],
                    f"{c}_keys_not_linearizable": lin.get("keys_not_linearizable", len(bad)),
                    f"{c}_counterexample_ops": min(sizes) if sizes else None,
                    f"{c}_explanation": next((p["explanation"] for p in bad
                                              if p.get("explanation")), None),
                    f"{c}_availability": r["availability"]["overall"],
                    f"{c}_lost_writes": r["lost_writes"]["lost"],
                    f"{c}_run_dir": run_dirs[c]})
    return row


def _one(kind: str, regions: str, duration_s: float, clients: int, keys: int,
         faults: tuple[Fault, ...], seed: int, out: Path) -> dict[str, Any]:
    """Bring one cluster up, run the register test with eventual then consistent reads
    (writes in the first region, reads in the second, the same faults), bring it down."""
    rs = region_set(regions)
    writer, reader = rs.regions[0], rs.regions[1 % len(rs.regions)]
    c = base.up(kind, 3, regions, name=f"compare-register-{kind}")
    try:
        leader = _leader_region(c)
        runs, dirs = {}, {}
        for consistency in CONSISTENCIES:
            spec = ProbeSpec(store=c.url, workload="register",
                             options=ProbeOptions(consistency=consistency,
                                                  duration_s=duration_s, seed=seed),
                             config=RegisterConfig(keys=keys, clients=clients,
                                                   writer_region=writer, reader_region=reader),
                             cluster=c.name if faults else None, faults=faults)
            run = run_probe(spec, out)
            if run.interrupted:  # Ctrl-C stops the comparison; the cluster goes down below
                raise KeyboardInterrupt
            if run.error:
                raise ValueError(f"{kind}: the register probe stopped early ({run.error}); "
                                 f"what was recorded is in {run.run_dir}")
            runs[consistency], dirs[consistency] = run.results, str(run.run_dir)
        return register_row(kind, leader, runs, dirs)
    finally:
        base.down(c.name)


def _verdict(valid: Any, bad: int, keys: int, size: int | None) -> str:
    if valid is True:
        return "linearizable"
    if valid is False:
        return (f"NOT linearizable ({bad}/{keys} keys; counterexample "
                f"{size if size is not None else '?'} ops)")
    return f"unknown ({bad}/{keys} keys not linearizable)"


def register_table(rows: list[dict[str, Any]], regions: str, faults: tuple[Fault, ...]
                   ) -> dict[str, Any]:
    """Return the comparison table (caption, header, rows of strings) of ``rows``."""
    header = ["store", "leader/primary region"]
    for c in CONSISTENCIES:
        header += [f"{c} reads: verdict", f"{c} reads: ops checked", f"{c} reads: ops ok"]
    header.append("lost acknowledged writes")
    body = []
    for r in rows:
        cells = [r["store"], r["leader_region"] or "-"]
        for c in CONSISTENCIES:
            avail = r[f"{c}_availability"]
            cells += [_verdict(r[f"{c}_valid"], r[f"{c}_keys_not_linearizable"], r[f"{c}_keys"],
                               r[f"{c}_counterexample_ops"]),
                      f"{r[f'{c}_ops']:,}", "n/a" if avail is None else f"{100 * avail:.1f}%"]
        cells.append(str(sum(r[f"{c}_lost_writes"] for c in CONSISTENCIES)))
        body.append(cells)
    under = f" under {', '.join(f.label for f in faults)}" if faults else ""
    rs = region_set(regions).regions
    return {"caption": f"Register test (kv model) on 3-node clusters on {regions}{under}: "
                       f"writes and cas from {rs[0]}, reads at {rs[1 % len(rs)]}",
            "header": header, "rows": body}


def compare_register(names: list[str], regions: str, duration_s: float,
                     faults: tuple[Fault, ...], seed: int, out: Path, as_json: bool,
                     clients: int = 10, keys: int = 5) -> None:
    """Run the register comparison of ``names`` and print/save it."""
    try:
        run_dir = make_run_dir(out, "compare-register", "-".join(names))
        rows = []
        with progress_bar(f"compare --workload register on {regions}", not as_json) as tick:
            phases = Phases(tick, [(f"{k}: cluster and register tests", 5 + 2 * duration_s)
                                   for k in names])
            for k in names:
                phases.start(f"{k}: cluster and register tests")
                rows.append(_one(k, regions, duration_s, clients, keys, faults, seed,
                                 run_dir / "runs"))
    except ValueError as err:
        fail(str(err))
    table = register_table(rows, regions, faults)
    results = {"schema_version": 1, "model": "compare-register",
               "title": f"linearizability on {regions}",
               "params": {"kinds": ",".join(names), "regions": regions,
                          "probe_duration_s": duration_s, "clients": clients, "keys": keys,
                          "seed": seed, "faults": [f.label + f" at {f.at_s:g}s for {f.for_s:g}s"
                                                   for f in faults]},
               "rows": rows, "tables": [table],
               "notes": [f"{r['store']}, {c} reads: {r[f'{c}_explanation']}"
                         for r in rows for c in CONSISTENCIES if r[f"{c}_explanation"]]}
    save_results(results, run_dir)
    from replicalab.report.model_page import render_model_report

    report = render_model_report(results, run_dir, kind="comparison")
    if as_json:
        sys.stdout.write(json.dumps({**results, "report": str(report)}) + "\n")
        return
    show(TableData.from_json(table))
    for note in results["notes"]:
        say(note)
    say(f"report: {report}  (each run's report with its timeline: {run_dir / 'runs'})")

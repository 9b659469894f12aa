"""``replicalab scorecard``: seed 001's chart measured, one row per store, one column per
property, each cell coloured against the store's documented promise or seed 001's goals."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.cli.words import plural
from replicalab.cluster import kinds as store_kinds
from replicalab.experiments import properties
from replicalab.experiments.plan import Subject


def register(app: typer.Typer) -> None:
    """Add ``replicalab scorecard`` to the root app."""
    app.command(name="scorecard")(scorecard)


def _check_inputs(kinds: str, only: str | None, regions: str
                  ) -> tuple[tuple[Subject, ...], tuple[str, ...]]:
    """Return (stores, properties) or raise ValueError naming the fix: an unknown kind or
    property, a server or FUSE that is missing, a sim:// URL that does not open."""
    from replicalab.cluster import powerloss
    from replicalab.experiments.plan import parse_kinds
    from replicalab.experiments.properties import parse_only
    from replicalab.regions import region_set
    from replicalab.stores import open_store

    stores, props = parse_kinds(kinds), parse_only(only)
    region_set(regions)
    real = [s.kind for s in stores if s.kind is not None]
    for k in real:
        k.make_driver().check_installed()
    for s in stores:
        if s.kind is None:
            open_store(s.label, 1)
    if real and "durability" in props:
        why = powerloss.unavailable_reason()
        if why:
            raise ValueError(f"durability needs the power-loss file system: {why}; or leave "
                             "durability out with --only")
    return stores, props


def _table(sc: dict[str, Any]) -> TableData:
    """Return the compact terminal table: one line per cell (store, property, grade,
    headline: the figure that decides the grade); only the headline wraps on a narrow
    terminal, nothing is cut."""
    from replicalab.experiments.run import order
    from replicalab.report.scorecard import placement

    t = TableData(f"scorecard of {placement(sc)}"
                  + (" (interrupted: cells not measured are marked)" if sc["interrupted"]
                     else "") + "; evidence: open the report and click a cell",
                  ["store", "property", "grade", "headline"], wrap=(3,))
    for store, cells in order(sc):
        for prop, c in zip(sc["properties"], cells, strict=True):
            t.add(store, prop, c["grade"] if c else "-",
                  (c.get("headline") or c["value"]) if c else "not measured")
    return t


def scorecard(
    kinds: Annotated[str, typer.Option(help="Comma-separated stores: cluster kinds ("
                                            f"{store_kinds.help_text()}) and sim:// URLs.")
                     ] = "redis,postgres,etcd,zookeeper",
    regions: Annotated[str, typer.Option(help="Region set of the clusters.")] = "dc3",
    quick: Annotated[bool, typer.Option("--quick", help="Every cell, shorter runs "
                                                        "(about 8 minutes for four stores).")
                     ] = False,
    only: Annotated[str | None, typer.Option(
        help=f"Comma-separated properties: {properties.help_text()} (default: all).")] = None,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    seed: Annotated[int, typer.Option(help="Seed of every run.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print scorecard.json.")] = False,
    name: Annotated[str, typer.Option(help="Name prefix of the clusters it starts "
                                           "(NAME-KIND): another lets two scorecards run "
                                           "at once.")] = "scorecard",
) -> None:
    """Measure seed 001's chart for each store: latency from each region against the 50 ms /
    500 ms goals, acknowledged writes lost under kill -9 and power loss, availability while a
    region is cut off and while the leader is down, consistency promised vs observed,
    transactional isolation observed vs promised, and where replicas sit. Each store runs
    on its own 3-node cluster, started and stopped by the command. Exit code 1 when a cell
    could not be measured because its run failed (the last line says why and how to
    measure it again), 130 when interrupted.

    Example: replicalab scorecard --kinds redis,postgres,etcd,zookeeper --regions dc3 --quick

    Example: replicalab scorecard --kinds 'sim://primary?regions=dc3' --quick --only consistency

    Example: replicalab scorecard --kinds etcd --only durability,availability

    Example: replicalab scorecard --kinds cassandra --regions dc3 --quick
    """
    from replicalab.cluster.state import check_name
    from replicalab.experiments.plan import FULL, QUICK
    from replicalab.experiments.properties import expected_steps
    from replicalab.experiments.run import begin, run, unmeasured_line
    from replicalab.regions import region_set
    from replicalab.report.scorecard import render_scorecard

    try:
        stores, props = _check_inputs(kinds, only, regions)
        check_name(name)
        sc = begin(out, stores, props, regions, QUICK if quick else FULL, seed, name)
    except ValueError as err:
        fail(str(err))
    run_dir = sc.run_dir
    with progress_bar(f"scorecard of {plural(len(stores), 'store')}", not as_json) as tick:
        done = [0]
        total = sum(expected_steps(s, props, sc.plan, len(region_set(regions).regions))
                    for s in stores)

        def step(what: str) -> Any:
            tick(min(0.99, done[0] / total), what)
            done[0] = min(total, done[0] + 1)  # a coarse bar: one step per phase started
            return None

        run(sc, step)
        if sc.interrupted:
            tick.interrupted()  # its progress line says so, never "finished"
    doc = sc.to_json()
    report = render_scorecard(doc, run_dir)
    if as_json:
        sys.stdout.write(json.dumps({**doc, "run_dir": str(run_dir), "report": str(report)})
                         + "\n")
    else:
        show([_table(doc)])
        for store, err in doc["errors"].items():
            say(f"{store}: {err}", err=True)
        say(f"scorecard: {run_dir / 'scorecard.json'}")
        say(f"report: {report}")
    if sc.interrupted:
        fail("interrupted: the cells measured so far and a partial chart are saved", 130)
    if missing := unmeasured_line(doc):
        fail(missing, 1)

"""``replicalab model ...``: performance models and PBS staleness predictions; the runs are
``replicalab.api.modelling``'s, printed here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.api import catalog, modelling
from replicalab.cli.errors import fail
from replicalab.cli.output import outcome_of
from replicalab.cli.progress import Bars
from replicalab.cli.timeparse import duration_ms

model_app = typer.Typer(help="Predict protocol performance and staleness before building. "
                             "Measured against a real store (--against): paxos-wan (etcd) "
                             "and pbs (cassandra); the other models have no real counterpart.",
                        no_args_is_help=True)
_FLAGS = {"sets": "--set", "params": "--params", "t_max_ms": "--t-max-ms", "entries": "--entry",
          "writer": "--client-region", "reader": "--reader-region", "jitter_ms": "--jitter"}


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
        if against != "cassandra":
            fail(f"--against {against!r}: PBS can be checked against cassandra (--duration, "
                 "--pairs, --jitter and --reader-region need it)")
        if from_run is not None or measure:
            fail("--against measures the cluster itself; drop --from-run and --measure")
        outcome_of(lambda: modelling.pbs_against(
            n, pairs, r, w, regions or "dc3", client_region, reader_region, duration or "30s",
            t_max_ms, trials, seed, out, duration_ms(jitter, "--jitter", None, "", "20ms"),
            Bars(not as_json)), as_json, _FLAGS)
        return
    outcome_of(lambda: modelling.pbs(
        n, r, w, regions or "lan", duration_ms(apply, "--apply", apply_ms, "--apply-ms", "10ms"),
        client_rtt_ms, client_sd_ms, client_region, from_run, t_max_ms, measure, trials, seed,
        out), as_json, _FLAGS)


def model_command(spec: Any) -> Callable[..., None]:
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
            if against is None:
                fail("--duration applies to --against only")
            outcome_of(lambda: modelling.model_against(
                spec.name, against, duration or "10s", params, set_ or [], compare, loads,
                rounds, seed, out, Bars(not as_json)), as_json, _FLAGS)
            return
        outcome_of(lambda: modelling.model_run(spec.name, set_ or [], params, compare, points,
                                               loads, twin, rounds, seed, out,
                                               Bars(not as_json)), as_json, _FLAGS)

    command.__doc__ = f"{spec.title}.\n\nExample: {spec.example}"
    if spec.against:
        command.__doc__ += (f"\n\nAgainst a real store: replicalab model {spec.name} "
                            f"--against {spec.against[0]}")
    return command


def _only_against(spec: Any) -> Callable[[str | None], str | None]:
    """Return the parse-time check of --against/--duration for ``spec``: a model with no
    real counterpart refuses them in one line naming the models that take them."""

    def check(value: str | None) -> str | None:
        if value is not None and not spec.against:
            raise typer.BadParameter(f"the {spec.name} model has no real store to be measured "
                                     "against; --against is offered by "
                                     f"{catalog.against_offers()}")
        return value

    return check


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
    entry: Annotated[list[str] | None, typer.Option(
        help="Only this grid entry, by its label (repeatable), e.g. 'Paxos N=3'.")] = None,
) -> None:
    """Run every model and its discrete-event twin over a grid: latency and maximum
    throughput (the twin's measured by its own runs); report where they diverge.

    Example: replicalab model validate --model paxos-lan

    Example: replicalab model validate --workers 2
    """
    outcome_of(lambda: modelling.model_validate(model, rounds, tolerance, seed, workers, ray,
                                          Bars(not as_json), entry or ()), as_json, _FLAGS)


def _broken(error: str) -> Callable[[], None]:
    """Return the command of a model whose package fails to load: it says so."""

    def command() -> None:
        fail(error)

    return command


_MODELS, _BROKEN = catalog.protocol_models()
for _spec in _MODELS.values():  # the shipped models, then installed packages'
    model_app.command(_spec.name)(model_command(_spec))
for _name, _error in _BROKEN.items():
    model_app.command(_name, help="(fails to load: run it to see why)")(_broken(_error))

"""``replicalab clt ...``: the Cloud Latency Tester (agents, coordinator, local cluster); the
runs are ``replicalab.api.latency_tester``'s, printed here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicalab.api import latency_tester as clt
from replicalab.cli.output import attempt, outcome_of
from replicalab.cli.progress import Bars

clt_app = typer.Typer(help="Cloud Latency Tester: all-pairs RTT and quorum latency over TCP "
                      "(seed 002).", no_args_is_help=True)
__all__ = ["clt_app", "register"]

Rate = Annotated[float, typer.Option(help="Rounds per second at every node.")]
Payload = Annotated[int, typer.Option(help="Payload bytes per ping (echoed back).")]
Duration = Annotated[str, typer.Option(help="Length of the run: 30s, 10m, 1h.")]
Timeout = Annotated[str, typer.Option(help="Ping timeout; later echoes are censored "
                                      "observations (kept, never dropped).")]
SelfLoop = Annotated[bool, typer.Option("--self-loop", help="Each node also pings itself.")]
Window = Annotated[str, typer.Option(help="Window of the averages over time.")]
Spike = Annotated[float, typer.Option(help="A spike is a ping above this multiple of its "
                                      "pair's median.")]
Seed = Annotated[int, typer.Option(help="Seed of the payload bytes.")]
TraceEvery = Annotated[int, typer.Option(help="Trace every Nth round in the HLC logs (0: off).")]
Out = Annotated[Path, typer.Option(help="Directory that receives the run directory.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the results as JSON.")]



@clt_app.command("agent")
def agent(
    listen: Annotated[str, typer.Option(help="HOST:PORT to listen on.")] = "127.0.0.1:7100",
    skew_ms: Annotated[float, typer.Option(help="Offset this agent's physical clock (HLC and "
                                           "reported times) by this many ms, on purpose.")
                       ] = 0.0,
) -> None:
    """Run a CLT agent: echo pings, and ping the peers when a coordinator says so.

    Example: replicalab clt agent --listen 127.0.0.1:7101 --skew-ms 20
    """
    attempt(lambda: clt.clt_agent(listen, skew_ms))


@clt_app.command("run")
def run(
    agents: Annotated[str, typer.Option(help="Agents as [name=]HOST:PORT[@region], "
                                        "comma-separated.")],
    rate: Rate = 100.0, payload: Payload = 1024, duration: Duration = "10m",
    timeout: Timeout = "1s", self_loop: SelfLoop = False, window: Window = "30s",
    spike_factor: Spike = 3.0, seed: Seed = 1, trace_every: TraceEvery = 1,
    out: Out = Path("runs"), as_json: AsJson = False,
) -> None:
    """Coordinate running agents: rounds of all-pairs pings, then the report.

    Example: replicalab clt run --agents 127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103
    --rate 100 --payload 1024 --duration 10m --self-loop
    """
    outcome_of(lambda: clt.clt_run(agents, rate, payload, duration, timeout, self_loop, window,
                                   spike_factor, seed, trace_every, out, Bars(not as_json)),
               as_json, sort_keys=False)


@clt_app.command("local")
def local_cmd(
    nodes: Annotated[int, typer.Option(help="Agents to start on 127.0.0.1.")] = 3,
    regions: Annotated[str | None, typer.Option(
        help="Region set for Toxiproxy WAN links: aws5, dc3, lan (none: direct loopback).")
                       ] = None,
    skew_ms: Annotated[str | None, typer.Option(
        help="Per-node clock skews in ms, comma-separated (missing ones are 0).")] = None,
    jitter_ms: Annotated[float, typer.Option(help="Toxiproxy jitter per direction (ms).")
                         ] = 0.0,
    rate: Rate = 100.0, payload: Payload = 1024, duration: Duration = "30s",
    timeout: Timeout = "1s", self_loop: SelfLoop = False, window: Window = "30s",
    spike_factor: Spike = 3.0, seed: Seed = 1, trace_every: TraceEvery = 1,
    out: Out = Path("runs"), as_json: AsJson = False,
) -> None:
    """Start N local agents (behind Toxiproxy WAN links with --regions), run, stop them.

    Example: replicalab clt local --nodes 5 --regions aws5 --duration 60s
    """
    outcome_of(lambda: clt.clt_local(nodes, regions, skew_ms, jitter_ms, rate, payload,
                                     duration, timeout, self_loop, window, spike_factor, seed,
                                     trace_every, out, Bars(not as_json)),
               as_json, sort_keys=False)


@clt_app.command("report")
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by clt run/local.")],
    as_json: AsJson = False,
) -> None:
    """Re-analyse a saved CLT run from its Parquet rows and re-render its report.

    Example: replicalab clt report runs/20261122T030000Z-clt-local-aws5
    """
    outcome_of(lambda: clt.clt_report(run_dir), as_json, sort_keys=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(clt_app, name="clt")

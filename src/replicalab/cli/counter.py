"""``replicalab counter ...``: Bounded Counters on per-DC stores, and the seed-004 bench; the
work is ``replicalab.api.counting``'s, printed here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.api import catalog, counting
from replicalab.cli.errors import fail, note, said
from replicalab.cli.output import emit, outcome_of, say
from replicalab.cli.progress import Bars
from replicalab.cli.timeparse import duration_ms

counter_app = typer.Typer(
    help="Bounded Counters: numeric invariants (value >= bound) over eventually consistent "
         "stores across data centres (seed 004).", no_args_is_help=True)
CONFIGS, EXPERIMENTS = catalog.counter_configs()
_FLAGS = {"stores": "--store", "allow_global": "--global", "kind": "--kind"}


def register(app: typer.Typer) -> None:
    """Add ``replicalab counter ...`` to the root app."""
    app.add_typer(counter_app, name="counter")


def cli_message(err: Exception) -> str:
    """Return the error's message in the command line's words (options for parameters,
    ``--global`` for the library's hint)."""
    return said(err, _FLAGS).replace(counting.HINT_GLOBAL, "retry with --global")


def _answer(call: Callable[[], Any], as_json: bool) -> None:
    """Print what ``call`` returns (one line, or --json); its bad input or unreachable data
    centre is one line and exit 2."""
    try:
        outcome = call()
    except counting.StoreError as err:
        fail(f"data centre unreachable: {cli_message(err)}")
    except (counting.CounterError, ValueError, OSError) as err:
        fail(cli_message(err))
    if outcome is not None:
        emit(outcome, as_json)


def _op(action: str, key: str, as_json: bool, **kw: Any) -> None:
    """Do one counter operation and print its answer (one line, or --json)."""
    _answer(lambda: counting.counter(action, key, **kw), as_json)


StoreOpt = Annotated[list[str] | None, typer.Option(
    "--store", metavar="DC=URL", help="A data centre and its store, DC=URL; repeat once per "
                                      "DC (the first is the default --dc and Strong's home).")]
DcOpt = Annotated[str | None, typer.Option(help="The data centre whose view to use.")]
ConfigOpt = Annotated[str, typer.Option(help="client-based (the Bounded Counter), weak or "
                                             "strong.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
GlobalOpt = Annotated[bool, typer.Option(
    "--global", help="Ask other DCs for rights when this DC lacks them.")]
ServerOpt = Annotated[str | None, typer.Option(
    help="HOST:PORT of a `replicalab counter serve` (server-based middleware) to send the "
         "operation to, instead of reaching the stores directly.")]


@counter_app.command("create")
def create(
    key: Annotated[str, typer.Argument(help="Counter name (no '/').")],
    initial: Annotated[int, typer.Option(help="Initial value.")] = 0,
    lower: Annotated[int, typer.Option(help="Invariant: value >= lower.")] = 0,
    upper: Annotated[int | None, typer.Option(
        help="Invariant: value <= upper (e.g. seats taken <= capacity); increments then "
             "spend rights as decrements do.")] = None,
    store: StoreOpt = None, dc: DcOpt = None, config: ConfigOpt = "client-based",
    server: ServerOpt = None, as_json: JsonOpt = False,
) -> None:
    """Create a counter with its slack to each bound split over the data centres.

    Example: replicalab counter create stock --initial 100 --store US-E=redis://127.0.0.1:7001
    --store US-W=redis://127.0.0.1:7002 --store EU=redis://127.0.0.1:7003

    Example: replicalab counter create stock --initial 100 --server 127.0.0.1:7400
    """
    _op("create", key, as_json, initial=initial, lower=lower, upper=upper, stores=store or (),
        dc=dc, config=config, server=server)


def _change(action: str, amount: str, doc: str) -> None:
    """Add command ``action`` (inc or dec): by an amount, asking other DCs with --global."""

    def command(
        key: Annotated[str, typer.Argument(help="Counter name.")],
        by: int = typer.Option(1, help=f"Amount to {amount}."),  # ``amount``: not Annotated
        allow_global: GlobalOpt = False,
        store: StoreOpt = None, dc: DcOpt = None, config: ConfigOpt = "client-based",
        server: ServerOpt = None, as_json: JsonOpt = False,
    ) -> None:
        _op(action, key, as_json, by=by, allow_global=allow_global, stores=store or (),
            dc=dc, config=config, server=server)

    command.__doc__ = (f"{doc}\n\n    Example: replicalab counter {action} stock --by 2 "
                       f"--global --store US-E=... --store US-W=...\n\n    Example: "
                       f"replicalab counter {action} stock --by 2 --server 127.0.0.1:7400")
    counter_app.command(action)(command)


_change("inc", "add", "Add to a counter in one data centre without breaking its upper bound, "
        "if it has one;\n    prints the value that DC sees.")
_change("dec", "subtract", "Subtract from a counter in one data centre without breaking its "
        "bound.")


@counter_app.command("value")
def value(
    key: Annotated[str, typer.Argument(help="Counter name.")],
    store: StoreOpt = None, dc: DcOpt = None, config: ConfigOpt = "client-based",
    server: ServerOpt = None, as_json: JsonOpt = False,
) -> None:
    """Print a counter's value as one data centre knows it.

    Example: replicalab counter value stock --dc EU --store US-E=... --store EU=...

    Example: replicalab counter value stock --server 127.0.0.1:7400
    """
    _op("value", key, as_json, stores=store or (), dc=dc, config=config, server=server)


@counter_app.command("bench")
def bench(
    kind: Annotated[str | None, typer.Option(
        help="Store kind of the data centres: redis, postgresql, cassandra (one cluster, a "
             "data centre per region) or sim (in-process, no server).")] = None,
    store: Annotated[str | None, typer.Option(
        help="Deprecated alias of --kind.", hidden=True)] = None,
    configs: Annotated[str, typer.Option(help="Configurations: " + ", ".join(CONFIGS) + ".")
                       ] = ",".join(CONFIGS),
    experiments: Annotated[str, typer.Option(help="Experiments: " + ", ".join(EXPERIMENTS)
                                             + ".")] = ",".join(EXPERIMENTS),
    clients: Annotated[str, typer.Option(help="Client counts (spread evenly over the DCs).")
                       ] = "3,15,30",
    counters: Annotated[str, typer.Option(help="Numbers of counters for the throughput "
                                               "experiment.")] = "1,100",
    duration: Annotated[str, typer.Option(help="Length of each point: 20s, 1m; a plain number "
                                          "is seconds.")] = "20s",
    think: Annotated[str | None, typer.Option(
        help="Think time between a client's ops: 100ms (the default), 0 for none.",
        show_default=False)] = None,
    think_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --think.")
                        ] = None,
    inc_fraction: Annotated[float, typer.Option(help="Fraction of increments.")] = 0.2,
    low_load_clients: Annotated[int, typer.Option(help="Clients of the by-region experiment.")
                                ] = 15,
    exhaust_initial: Annotated[int, typer.Option(help="Initial value of the exhaustion run.")
                               ] = 6000,
    exhaust_clients: Annotated[int, typer.Option(help="Clients of the exhaustion run.")] = 30,
    exhaust_max: Annotated[str, typer.Option(help="Cap on the exhaustion run: 2m, 90s.")
                           ] = "2m",
    violation_initial: Annotated[int, typer.Option(help="Initial value of the violations "
                                                        "experiment.")] = 100,
    fault_dc: Annotated[str | None, typer.Option(
        help="Data centre cut off (partition) or lost (dc-loss); default the last (EU).",
        show_default=False)] = None,
    fault_at: Annotated[str, typer.Option(help="When the fault starts in its point: 1s.")
                        ] = "1s",
    fault_for: Annotated[str, typer.Option(
        help="How long the DC stays cut off, or lost before its rights are recovered: 5s.")
                         ] = "5s",
    fault_initial: Annotated[int, typer.Option(help="Initial value of the fault runs.")
                             ] = 600,
    sync: Annotated[str | None, typer.Option(
        help="Inter-DC synchronisation period: 200ms (the default), 1s.",
        show_default=False)] = None,
    sync_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --sync.")
                       ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the clients' choices.")] = 1,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: JsonOpt = False,
) -> None:
    """Run seed 004's experiments on three data centres (dc3) and write an HTML report.

    Example: replicalab counter bench --kind redis --clients 3,15,30 --duration 20s

    Faults (seed §IV-E): replicalab counter bench --kind redis --experiments
    partition,dc-loss --configs server-based+batch --fault-dc EU --fault-for 5s
    """
    if store is not None:
        note(f"--store {store} is deprecated here; use --kind {store}")
    kind = kind or store or "redis"
    # a bench counts its operations' refusals, so no error of its carries the library's
    # hint that cli_message turns into --global: bad options, data centres that failed
    outcome_of(lambda: counting.counter_bench(
        kind, configs, experiments, clients, counters, duration,
        duration_ms(think, "--think", think_ms, "--think-ms", "100ms"), inc_fraction,
        low_load_clients, exhaust_initial, exhaust_clients, exhaust_max, violation_initial,
        duration_ms(sync, "--sync", sync_ms, "--sync-ms", "200ms"), seed, out,
        Bars(not as_json), fault_dc, fault_at, fault_for, fault_initial), as_json, _FLAGS)


@counter_app.command("recover")
def recover(
    keys: Annotated[list[str], typer.Argument(help="The counters to recover.",
                                              show_default=False, metavar="KEY")],
    lost: Annotated[str, typer.Option(help="The data centre lost for good (it must never "
                                           "serve again under its name).")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Move every right a lost data centre held to the survivors (seed 004 §IV-E), from its
    final state: its store, restarted from its disk (given 10 s to finish loading it);
    written off if that is gone.

    Example: replicalab counter recover stock --lost EU --store US-E=redis://127.0.0.1:7001
    --store US-W=redis://127.0.0.1:7002 --store EU=redis://127.0.0.1:7003
    """
    _answer(lambda: counting.counter_recover(keys, lost, store or ()), as_json)


@counter_app.command("serve")
def serve(
    dc: Annotated[str, typer.Option(help="The data centre this middleware serves.")],
    stores: StoreOpt = None,
    port: Annotated[int, typer.Option(help="TCP port to serve on.")] = 7400,
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless told).")
                    ] = "127.0.0.1",
    batch_ms: Annotated[float, typer.Option(help="Group commit: longest wait before a batch "
                                            "is written (ms); 0 = no batching.")] = 2.0,
    batch_max: Annotated[int, typer.Option(help="Group commit: most operations per write.")
                         ] = 256,
    sync: Annotated[str | None, typer.Option(
        help="Period of state sync with the other DCs: 200ms (the default), 1s.",
        show_default=False)] = None,
    sync_ms: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --sync.")
                       ] = None,
    threshold: Annotated[int, typer.Option(help="Ask another DC for rights below this many."
                                           )] = 20,
    seed: Annotated[int, typer.Option(help="Seed of retry jitter.")] = 0,
) -> None:
    """Run one data centre's server-based middleware until Ctrl-C or SIGTERM: one serialiser
    per counter, group commit, and an acknowledgement only after the durable write.

    Clients speak JSON lines over TCP (counters.server.RemoteCounterService).

    Example: replicalab counter serve --dc US-E --store US-E=redis://127.0.0.1:6379
    --store US-W=redis://127.0.0.1:6380 --store EU=redis://127.0.0.1:6381 --port 7400
    """
    _answer(lambda: counting.counter_serve(
        dc, stores or (), port, host, batch_ms, batch_max,
        duration_ms(sync, "--sync", sync_ms, "--sync-ms", "200ms"), threshold, seed,
        announce=say), as_json=False)

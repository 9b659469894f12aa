"""``replicalab hlc ...``: hybrid logical clocks, trace alignment and its benchmark."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from replicalab.cli import hlc_query
from replicalab.cli.errors import fail
from replicalab.cli.output import TableData, say, show
from replicalab.cli.progress import progress_bar
from replicalab.history.rundir import make_run_dir, save_results
from replicalab.hlc.align import AlignError, Alignment, align, alignment_errors
from replicalab.hlc.bench import BenchConfig, run_bench
from replicalab.hlc.synth import SynthConfig, generate, spread_skews
from replicalab.hlc.trace import Event, LogError, read_log, write_log

hlc_app = typer.Typer(help="Hybrid logical clocks: align multi-node traces, reproduce seed 002.",
                      no_args_is_help=True)


def _read_logs(paths: list[Path]) -> dict[str, list[Event]]:
    logs: dict[str, list[Event]] = {}
    for path in paths:
        try:
            events = read_log(path)
        except LogError as e:
            fail(f"{e}; fix or remove that line")
        if not events:
            fail(f"{path}: no events; pass only non-empty trace logs")
        node = events[0].node
        if node in logs:
            fail(f"{path}: node {node!r} already came from another log; pass one log per node")
        logs[node] = events
    return logs


def _read_truth(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror}); pass the truth.json written by hlc synth")
    except json.JSONDecodeError as e:
        fail(f"{path}:{e.lineno}: not valid JSON ({e.msg}); pass the truth.json written by "
             "hlc synth")
    skews = data.get("skews_us") if isinstance(data, dict) else None
    if not isinstance(skews, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in skews.values()):
        fail(f"{path}: expected an object with \"skews_us\": {{node: integer µs}}")
    return skews  # type: ignore[return-value]


def _alignment_json(result: Alignment, truth: dict[str, int] | None) -> dict[str, Any]:
    out: dict[str, Any] = {**asdict(result), "inconsistent": result.inconsistent()}
    if truth is not None:
        offsets = {n: truth[result.driver] - truth[n] for n in result.nodes}
        out["true_offsets_us"] = offsets
        out["errors"] = alignment_errors(result, offsets)
    return out


@hlc_app.command("align")
def align_cmd(
    logs: Annotated[list[Path], typer.Argument(help="One JSONL trace log per node.",
                                               show_default=False)],
    truth: Annotated[Path | None, typer.Option(
        help="truth.json with the true clock skews (written by `hlc synth`): show errors.")
                     ] = None,
    driver: Annotated[str | None, typer.Option(
        help="Align against this node instead of the detected HLC driver.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Recover per-node clock offsets from HLC-stamped trace logs, with error bounds.

    Example: replicalab hlc align traces/n1.jsonl traces/n2.jsonl traces/n3.jsonl
    --truth traces/truth.json
    """
    by_node = _read_logs(logs)
    skews = _read_truth(truth) if truth is not None else None
    if skews is not None and (missing := sorted(set(by_node) - set(skews))):
        fail(f"{truth}: no skew for node(s) {', '.join(missing)}; pass the matching truth file")
    if driver is not None and driver not in by_node:
        fail(f"--driver {driver!r} is not one of the logs' nodes ({', '.join(sorted(by_node))})")
    try:
        result = align(by_node, driver)
    except AlignError as e:
        fail(f"{e}; the logs are not HLC-consistent")
    data = _alignment_json(result, skews)
    cols = ["node", "offset_us", "low_us", "high_us", "evidence", "events"]
    if skews is not None:
        cols += ["true_us", "error"]
    table = TableData(f"offsets against HLC driver {result.driver} (µs to add to each pt)",
                      cols, wrap=(), right=tuple(range(1, len(cols))))
    for node in sorted(result.nodes):
        n = result.nodes[node]
        row = [node, str(n.offset_us), "-" if n.low_us is None else str(n.low_us),
               "-" if n.high_us is None else str(n.high_us), str(n.evidence), str(n.events)]
        if skews is not None:
            err = data["errors"].get(node)
            row += [str(data["true_offsets_us"][node]),
                    "-" if err is None else f"{err * 100:.1f}%"]
        table.add(*row)
    if as_json:
        sys.stdout.write(json.dumps({**data, "tables": [table.to_json()]}, sort_keys=True)
                         + "\n")
        return
    show(table)
    say(f"messages {result.messages} (unmatched sends {result.unmatched_sends}, receives "
        f"{result.unmatched_recvs}); receives before their send: {result.violations_pt} by pt, "
        f"{result.violations_aligned} after alignment")
    if len(result.driver_candidates) > 1:
        say(f"note: {', '.join(result.driver_candidates)} could each drive HLC; offsets are "
            "ambiguous until their logs show a causal link")
    if bad := result.inconsistent():
        say(f"warning: bounds cross for {', '.join(bad)}")


def _parse_range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("..")
    try:
        pair = (int(lo), int(hi if sep else lo))
    except ValueError:
        fail(f"--latency {text!r}: expected MIN..MAX in ticks, e.g. 3..10")
    if not 0 <= pair[0] <= pair[1]:
        fail(f"--latency {text!r}: need 0 <= MIN <= MAX")
    return pair


@hlc_app.command("synth")
def synth_cmd(
    out: Annotated[Path, typer.Option(help="Directory that receives n1.jsonl ... and "
                                           "truth.json.")],
    nodes: Annotated[int, typer.Option(help="Number of nodes.")] = 5,
    skew: Annotated[int, typer.Option(help="Largest clock skew in ticks (1 tick = 1 µs).")
                    ] = 50,
    latency: Annotated[str, typer.Option(help="Message latency range MIN..MAX in ticks.")
                       ] = "3..10",
    p_event: Annotated[float, typer.Option(help="Chance of a local event per node per tick.")
                       ] = 0.4,
    p_message: Annotated[float, typer.Option(help="Chance of a send per node per tick.")
                         ] = 0.05,
    length: Annotated[int, typer.Option(help="Trace length in ticks.")] = 400,
    seed: Annotated[int, typer.Option(help="Seed of skews and events.")] = 1,
) -> None:
    """Write a synthetic multi-node HLC trace with known clock skews.

    Example: replicalab hlc synth --out traces --nodes 5 --skew 50 --latency 3..10
    """
    if nodes < 2:
        fail("--nodes must be at least 2")
    if skew < 0 or length < 1:
        fail("--skew must be >= 0 and --length >= 1")
    try:
        cfg = SynthConfig(spread_skews(nodes, skew, seed), _parse_range(latency), p_event,
                          p_message, length, seed)
    except ValueError as e:
        fail(f"{e}; fix the option")
    trace = generate(cfg)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for node, events in trace.logs.items():
            write_log(out / f"{node}.jsonl", events)
        (out / "truth.json").write_text(json.dumps(
            {"skews_us": trace.skews_us, "config": asdict(cfg)}, indent=1) + "\n")
    except OSError as e:
        fail(f"cannot write to {out}: {e.strerror}; pass --out with a writable directory")
    total = sum(len(v) for v in trace.logs.values())
    say(f"wrote {len(trace.logs)} logs ({total} events, {trace.messages_sent} messages sent, "
        f"{trace.messages_received} received) and truth.json to {out}")


@hlc_app.command("bench")
def bench_cmd(
    reps: Annotated[int, typer.Option(help="Repetitions (seeds) per point.")] = 100,
    nodes: Annotated[int, typer.Option(help="Nodes per trace.")] = 5,
    seed: Annotated[int, typer.Option(help="First seed.")] = 1,
    quick: Annotated[bool, typer.Option(
        help="A coarser grid (4 lengths, 6 latencies) for a fast look.")] = False,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")
                   ] = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Reproduce seed 002's trace-sync figures: error vs log length and vs latency.

    Example: replicalab hlc bench --reps 100 --out runs
    """
    try:
        cfg = BenchConfig(nodes=nodes, reps=reps, seed=seed)
        if quick:
            cfg = BenchConfig(nodes=nodes, reps=reps, seed=seed,
                              lengths_ticks=(25, 100, 400, 1600),
                              latencies_ticks=(1, 3, 10, 20, 50, 60))
        run_dir = make_run_dir(out, "hlc-bench", "synthetic")
    except ValueError as e:
        fail(f"{e}; fix the option")
    with progress_bar(f"hlc bench: {cfg.runs()} traces", enabled=not as_json) as tick:
        results = run_bench(cfg, tick)
    results["command"] = shlex.join(["replicalab", "hlc", "bench", *sys.argv[3:]])
    save_results(results, run_dir)
    from replicalab.report.hlc import render_hlc_bench_report

    report = render_hlc_bench_report(results, run_dir)
    if results["interrupted"]:
        fail(f"interrupted; the finished points are saved in {run_dir}", 130)
    tables = []
    for title, rows, cols in (
            ("error vs log length (median over seeds)", results["error_vs_length"],
             ("p_message", "length_ticks")),
            ("error vs latency (median over seeds)", results["error_vs_latency"],
             ("skew_ticks", "latency_ticks"))):
        table = TableData(title, [*cols, "median", "p25", "p75"], wrap=(),
                          right=(0, 1, 2, 3, 4))
        for r in rows:
            table.add(r[cols[0]], r[cols[1]], *("n/a" if r[k] is None else f"{r[k] * 100:.1f}%"
                                                for k in ("median", "p25", "p75")))
        tables.append(table)
    if as_json:
        sys.stdout.write(json.dumps({**results, "run_dir": str(run_dir), "report": str(report),
                                     "tables": [t.to_json() for t in tables]},
                                    sort_keys=True) + "\n")
        return
    show(tables)
    say(f"run directory: {run_dir}")
    say(f"report: {report}")


def register(app: typer.Typer) -> None:
    """Add ``replicalab hlc ...`` to the root app."""
    hlc_query.add_commands(hlc_app)
    app.add_typer(hlc_app, name="hlc")

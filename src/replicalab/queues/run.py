"""A queue run or comparison on disk: the run directory (``config.json``, ``queue.parquet``,
``results.json``; the CLI adds ``report.html``), written even when the run is cut short, and
the comparison of backends x strategies x consumer counts."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from replicalab.checkers.deliveries import check_deliveries
from replicalab.cluster.process import interrupts_deferred
from replicalab.errors import ParameterError
from replicalab.faults.schedule import Fault
from replicalab.history.rundir import Run as QueueRun
from replicalab.history.rundir import make_run_dir, save_results, slug
from replicalab.queues.backends import open_backends
from replicalab.queues.base import QueueError
from replicalab.queues.record import save_log
from replicalab.queues.runner import run_workload
from replicalab.queues.spec import QueueOutcome, QueueSpec
from replicalab.queues.strategies import CENTRAL
from replicalab.stores.base import StoreError, redact_url

SCHEMA_VERSION = 1
Progress = Callable[[float], None]


def preflight(spec: QueueSpec) -> None:
    """Raise ValueError (one line) for a spec that cannot run: bad options or URLs, a
    central store without conditional writes, a real server that does not answer."""
    spec.check()
    queue, store = open_backends(spec)
    if queue.runtime.virtual:
        return

    async def hello() -> None:
        try:
            client = await queue.connect()
            await client.close()
            await queue.depth()
            if store is not None:
                sc = await store.connect()
                await sc.close()
        finally:
            await queue.close()
            if store is not None:
                await store.close()

    try:
        queue.runtime.run(hello())
    except (QueueError, StoreError, OSError) as err:
        raise ValueError(f"cannot reach {redact_url(spec.queue)}"
                         f"{' or ' + redact_url(spec.central) if spec.central else ''}: "
                         f"{err}; start a server (replicalab cluster up redis --nodes 1 "
                         "--regions lan prints a URL)") from None


def results_of(spec: QueueSpec, o: QueueOutcome) -> dict[str, Any]:
    """Return the results document of one run: spec, backends, checker output, timing."""
    checked = check_deliveries(o.log.columns(), o.dead_letters, cut_short=o.interrupted)
    summary = {**checked["summary"], "duration_s": o.duration_ns / 1e9, "wall_s": o.wall_s,
               "clock": "virtual" if spec.queue.startswith("sim://") else "real"}
    notes = list(o.notes)
    if summary.get("effects_agree_with_log") is False:
        notes.append(f"the effect store and the consumers' own record disagree on "
                     f"{summary['effects_log_disagreements']:,} messages (listed under "
                     "checker.effects_log_disagreements); results are counted from the store")
    if o.interrupted:
        notes.append(f"PARTIAL: the run was cut short {o.duration_ns / 1e9:.1f} s in; every "
                     f"figure covers only what ran ({summary['not_reached']:,} acknowledged "
                     "messages not reached, none counted lost)")
    return {"kind": "queue", "schema_version": SCHEMA_VERSION, "spec": spec.to_json(),
            "queue": o.queue_info, "central": o.central_info, "effects": _effects(o),
            "summary": summary,
            "checker": checked, "dead_letters": o.dead_letters, "notes": notes}


def _effects(o: QueueOutcome) -> dict[str, Any] | None:
    """Return where the run's effects are: the store and the element of each message."""
    if o.effects_info is None:
        return None
    return {**o.effects_info, "element": f"{o.effects_domain}/<tag>/effects"}


def _save(run_dir: Path, spec: QueueSpec, o: QueueOutcome, results: dict[str, Any]) -> None:
    save_log(o.log, run_dir)
    config = {"schema_version": SCHEMA_VERSION, "kind": "queue", "spec": spec.to_json(),
              "queue": o.queue_info, "central": o.central_info, "effects": _effects(o)}
    (run_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_results(results, run_dir)


def run_queue(spec: QueueSpec, out: Path, progress: Progress | None = None) -> QueueRun:
    """Check ``spec``, run it into a new run directory under ``out`` and save everything;
    return the run (ValueError before anything is made for bad input)."""
    preflight(spec)
    run_dir = make_run_dir(out, "queue", spec.queue)
    o = run_workload(spec, progress)
    with interrupts_deferred() as late:  # a Ctrl-C now waits for the record to be saved
        results = results_of(spec, o)
        _save(run_dir, spec, o, results)
    return QueueRun(run_dir, results, o.interrupted or late[0])


def compare_queues(base: QueueSpec, queues: Sequence[str], strategies: Sequence[str],
                   consumers: Sequence[int], out: Path, progress: Progress | None = None
                   ) -> QueueRun:
    """Run every queue x strategy x consumer count with ``base``'s other settings; save
    each run's record under ``runs/`` and one results.json of all summaries."""
    def central_for(queue: str, strategy: str) -> str | None:
        # one --central serves the queues on its clock; sim:// queues fall back to
        # sim://simpledb when it is a real store, so sim and real backends compare in one go
        c = base.central
        if strategy not in CENTRAL or c is None:
            return None
        return c if queue.startswith("sim://") == c.startswith("sim://") else None

    def faults_for(strategy: str) -> tuple[Fault, ...]:
        # a central-store fault has nothing to act on under a strategy without the store
        return tuple(f for f in base.faults if f.store is None or strategy in CENTRAL)

    plan = [replace(base, queue=q, strategy=s, consumers=c, central=central_for(q, s),
                    faults=faults_for(s))
            for q in queues for s in strategies for c in consumers]
    if not plan:
        raise ParameterError("queues", "and {strategies} and {consumers} leave nothing to "
                                       "compare: give at least one of each",
                             {"strategies": "strategies", "consumers": "consumers"})
    for spec in plan:
        preflight(spec)
    run_dir = make_run_dir(out, "queue-compare", queues[0])
    rows: list[dict[str, Any]] = []
    interrupted = False
    for n, spec in enumerate(plan):
        def inner(f: float, n: int = n) -> None:
            if progress is not None:
                progress((n + min(f, 1.0)) / len(plan))

        o = run_workload(spec, inner)
        res = results_of(spec, o)
        sub = run_dir / "runs" / f"{n:02d}-{slug(spec.queue)}-{spec.strategy}-c{spec.consumers}"
        sub.mkdir(parents=True)
        _save(sub, spec, o, res)
        rows.append({"queue": spec.queue, "strategy": spec.strategy,
                     "consumers": spec.consumers, "summary": res["summary"],
                     "timeline": res["checker"]["timeline"],
                     "faults": res["checker"]["faults"],
                     "run_dir": str(sub.relative_to(run_dir))})
        if o.interrupted:
            interrupted = True
            break
    results = {"kind": "queue-compare", "schema_version": SCHEMA_VERSION,
               "spec": base.to_json(), "queues": list(queues), "strategies": list(strategies),
               "consumers": list(consumers), "runs": rows,
               "ratios": throughput_ratios(rows)}
    save_results(results, run_dir)
    return QueueRun(run_dir, results, interrupted)


def throughput_ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return each strategy's throughput as a ratio of ``none`` on the same queue and
    consumer count (rows without a ``none`` peer are left out)."""
    peer = {(r["queue"], r["consumers"]): r["summary"]["throughput_per_s"]
            for r in rows if r["strategy"] == "none"}
    out = []
    for r in rows:
        base = peer.get((r["queue"], r["consumers"]))
        if base:
            out.append({"queue": r["queue"], "strategy": r["strategy"],
                        "consumers": r["consumers"],
                        "ratio": r["summary"]["throughput_per_s"] / base})
    return out

"""The queue workload with consumer processes (``--processes``, real queues only): each reader
is a ``python -m replicalab.queues.consumer`` process of its own, so a crash fault is a
SIGKILL and a pause a SIGSTOP (then SIGCONT), as they would be in production. Producers run
here; each process streams its record to a file that is merged with the producers' when the
run ends (operations a killed process began and never finished become ``info``: killed).
Skews and central-store faults are handed to the consumer processes as a plan on the
machine's monotonic clock, which every process shares. The run ends when the producers are
done and the queue counts nothing visible and nothing in flight, or at ``max_duration_s``."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from replicalab.cluster import process
from replicalab.faults.schedule import Fault
from replicalab.queues.backends import open_backends
from replicalab.queues.base import Queue, QueueError
from replicalab.queues.effects import read_back
from replicalab.queues.nemesis import FaultPlan, record_fault_windows, windows
from replicalab.queues.producer import produce
from replicalab.queues.record import QueueLog, merge, read_jsonl
from replicalab.queues.spec import QueueOutcome, QueueSpec, consumer_of
from replicalab.queues.strategies import CENTRAL

POLL_S = 0.2  # how often the run looks at the queue's counts
READY_LIMIT_S = 60.0  # how long consumer processes may take to start (imports, connects)


def _threads(spec: QueueSpec) -> list[tuple[int, int]]:
    """Return (first consumer index, threads) of each reader process."""
    n = spec.n_readers()
    out, first = [], 0
    for r in range(n):
        k = spec.consumers // n + (r < spec.consumers % n)
        out.append((first, k))
        first += k
    return out


def _argv(spec: QueueSpec, claims: str, record: Path, first: int, threads: int,
          gen: int, go: Path) -> list[str]:
    argv = [sys.executable, "-m", "replicalab.queues.consumer", "--queue", spec.queue,
            "--strategy", spec.strategy, "--claims", claims, "--record", str(record),
            "--index", str(first), "--gen", str(gen), "--threads", str(threads),
            "--batch", str(spec.batch), "--visibility-s", repr(spec.visibility_s),
            "--process-ms", repr(spec.process_ms), "--process-sigma", repr(spec.process_sigma),
            "--slow-fraction", repr(spec.slow_fraction), "--slow-s", repr(spec.slow_s),
            "--empty-poll-ms", repr(spec.empty_poll_ms),
            "--max-duration-s", repr(spec.max_duration_s), "--seed", str(spec.seed)]
    if spec.central is not None:
        argv += ["--central", spec.central]
    return [*argv, "--go-file", str(go)]


def _process_plan(spec: QueueSpec, t0_ns: int, layout: list[tuple[int, int]]) -> FaultPlan:
    """Return the skews and store faults the consumer processes apply themselves, on the
    machine's clock: a fault on process r acts on each of its threads."""
    wins = []
    for w in windows([f for f in spec.faults if f.action in ("skew", "errors", "timeouts")],
                     t0_ns):
        if w.consumer is None:
            wins.append(w)
            continue
        first, threads = layout[w.consumer]
        wins += [type(w)(w.action, k, w.start_ns, w.end_ns, w.ms)
                 for k in range(first, first + threads)]
    return FaultPlan(wins)


def run_processes(spec: QueueSpec, progress: Callable[[float], None] | None = None
                  ) -> QueueOutcome:
    """Run ``spec`` with one process per reader; return the merged record."""
    queue, store = open_backends(spec)
    rt = queue.runtime
    log = QueueLog()
    token = f"r{time.time_ns() % 10**12:x}"
    claims = f"claims-{token}"
    tmp = Path(tempfile.mkdtemp(prefix="replicalab-queue-"))
    layout = _threads(spec)
    pids: dict[int, int] = {}
    records: list[Path] = []
    notes: list[str] = []
    dead: list[str] = []
    acked: set[str] = set()
    stopped: set[int] = set()  # pids SIGSTOPped now: continued whatever way the run ends
    t0 = rt.now_ns()
    end = [0]
    wall0 = time.monotonic()
    go = tmp / "go.json"  # written once every consumer is up: the fault plan, and "start"
    stopping = [False]

    def start(r: int, gen: int) -> None:
        first, threads = layout[r]
        rec = tmp / f"c{r}-g{gen}.jsonl"
        records.append(rec)
        pids[r] = process.start(_argv(spec, claims, rec, first, threads, gen, go),
                                tmp / f"c{r}-g{gen}.log", label=f"queue consumer {r}")

    def crash(r: int, for_s: float, gen: int) -> None:
        pid = pids.pop(r, None)
        if pid is None:
            return
        process.kill9(pid)  # as a machine that loses power: nothing is cleaned up
        stopped.discard(pid)
        row = log.invoke("crash", layout[r][0], rt.now_ns(),
                         note=f"consumer process {r} (pid {pid}) SIGKILLed")
        asyncio.get_running_loop().call_later(for_s, restart, r, gen + 1, row)

    def restart(r: int, gen: int, row: int) -> None:
        log.done(row, rt.now_ns())
        if not stopping[0]:
            start(r, gen)

    def pause(f: Fault, r: int) -> None:
        pid = pids.get(r)
        if pid is None or stopping[0]:
            return
        process.signal_group(pid, signal.SIGSTOP)
        stopped.add(pid)
        row = log.invoke("pause", layout[r][0], rt.now_ns(),
                         note=f"{f.label}: process {r} (pid {pid}) SIGSTOPped")
        asyncio.get_running_loop().call_later(f.for_s, resume, pid, row)

    def resume(pid: int, row: int) -> None:
        if pid in stopped:
            process.signal_group(pid, signal.SIGCONT)
            stopped.discard(pid)
        log.done(row, rt.now_ns())

    def on_ack(mid: str) -> None:
        acked.add(mid)

    async def main() -> None:
        nonlocal t0
        for r in range(len(layout)):
            start(r, 0)
        await _until_ready(records, pids)
        t0 = rt.now_ns()  # the faults' times count from here: start-up is not the run
        part = go.with_suffix(".part")
        part.write_text(_process_plan(spec, t0, layout).to_json())
        part.replace(go)
        loop = asyncio.get_running_loop()
        for f in spec.faults:
            if f.action == "crash":
                loop.call_later(f.at_s, crash, consumer_of(f), f.for_s, 0)
            elif f.action == "pause":
                loop.call_later(f.at_s, pause, f, consumer_of(f))
        record_fault_windows(rt, log, tuple(f for f in spec.faults if f.action != "pause"),
                             lambda r: layout[r][0])
        producers = [asyncio.ensure_future(produce(queue, spec, log, token, p, on_ack))
                     for p in range(spec.producers)]
        try:
            await _until_drained(spec, queue, producers, pids, tmp, dead, notes,
                                 lambda: rt.now_ns() - t0, progress)
        finally:
            stopping[0] = True
            for p in producers:
                p.cancel()
            for pid in list(stopped):  # nothing is left stopped
                process.signal_group(pid, signal.SIGCONT)
            stopped.clear()
            process.stop_many(list(pids.values()))  # SIGTERM: a clean stop, rows closed
            end[0] = rt.now_ns()
            log.close_open(rt.now_ns(), "run ended")
            with contextlib.suppress(Exception):
                await queue.close()
        # what a downstream observer sees: every message's effects, read back from the store
        try:
            tags = {t for r in records if r.exists()
                    for k, t in zip(*(read_jsonl(r)[c] for c in ("kind", "tag")), strict=True)
                    if k == "deliver"}
            tags |= {t for k, t in zip(log.cols["kind"], log.cols["tag"], strict=True)
                     if k == "send"}
            if await read_back(rt, store, claims, tags, log):
                notes.append("some effect lists could not be read back from the store: "
                             "those messages are counted from the consumers' record")
        finally:
            with contextlib.suppress(Exception):
                await store.close()

    interrupted = False
    try:
        rt.run(main())
    except KeyboardInterrupt:
        interrupted = True
        notes.append("interrupted by Ctrl-C: what was recorded is kept")
    merged = QueueLog()
    merged.cols = merge(log.columns(), *(read_jsonl(p) for p in records if p.exists()))
    if not notes:  # the consumer logs only matter when something went wrong
        shutil.rmtree(tmp, ignore_errors=True)
    return QueueOutcome(merged, dead, queue.info.to_json(),
                        store.info.to_json() if spec.strategy in CENTRAL else None,
                        (end[0] or rt.now_ns()) - t0, time.monotonic() - wall0, notes,
                        interrupted, store.info.to_json(), claims)


async def _until_ready(records: list[Path], pids: dict[int, int],
                       limit_s: float = READY_LIMIT_S) -> None:
    """Return once every consumer process is connected and waiting for the go (its record's
    ``.ready`` file), one of them has exited, or ``limit_s`` has passed."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if all(Path(f"{p}.ready").exists() for p in records):
            return
        if not all(process.alive(p) for p in pids.values()):
            return
        await asyncio.sleep(POLL_S / 4)


async def _until_drained(spec: QueueSpec, queue: Queue, producers: list[asyncio.Future[None]],
                         pids: dict[int, int], tmp: Path, dead: list[str], notes: list[str],
                         elapsed_ns: Callable[[], int],
                         progress: Callable[[float], None] | None) -> None:
    """Return once the producers are done and the queue is empty, every consumer process
    has exited, or ``max_duration_s`` has passed (noting why in ``notes``)."""
    while True:
        await asyncio.sleep(POLL_S)
        sent = all(p.done() for p in producers)
        try:
            dead[:] = [d.id for d in await queue.dead_letters()]
            visible, in_flight = await queue.depth()
        except QueueError:
            continue
        if progress is not None and sent:
            progress(1 - (visible + in_flight) / max(1, spec.messages))
        if sent and visible == 0 and in_flight == 0:
            return
        if pids and not any(process.alive(p) for p in pids.values()):
            notes.append("stopped: every consumer process exited; their logs: "
                         + ", ".join(str(p) for p in sorted(tmp.glob("*.log"))))
            return
        if elapsed_ns() >= spec.max_duration_s * 1e9:
            notes.append(f"stopped at the maximum duration, {spec.max_duration_s:g} s, with "
                         f"{visible + in_flight} messages in the queue")
            return

"""Run one load step on N workers: in this process, in local processes (spawn), or as Ray
actors across a Ray cluster's nodes, and merge what they return exactly.

All workers of a step get the same wall-clock start time a little in the future, so their
schedules overlap; each records its machine's clocks (see :class:`WorkerClock`). The merged
timeline maps each worker's monotonic times onto wall time with that worker's own
``wall - monotonic`` offset measured at its start: exact on one machine (one monotonic
clock), and across machines as good as their wall clocks' synchronisation (NTP), which is
why the clocks are kept in the results. Simulated stores run in virtual time per worker
process (each worker drives its own simulated store), so their timelines are not shifted.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from replicalab.cluster import process
from replicalab.errors import ParameterError
from replicalab.runtime.interrupts import STOP_WAIT_S, stop_handler
from replicalab.workloads.load import LoadSpec, WorkerResult, run_worker

START_LEAD_S = 1.0
"""Wall-clock lead given to workers before the common start (connections open meanwhile)."""
class StepInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a step: ``results`` holds what the workers recorded."""

    def __init__(self, results: list[WorkerResult]) -> None:
        super().__init__("interrupted")
        self.results = results


def _worker_main(conn: Connection, spec: LoadSpec, worker: int, workers: int,
                 start_at_wall_ns: int) -> None:
    """A spawned worker: run its share and send the WorkerResult back. The first SIGINT or
    SIGTERM (the terminal's Ctrl-C, or the parent passing one on) stops the run, which then
    returns what it recorded; later ones must not cut the sending short."""
    stopping = [False]
    once = stop_handler(stopping)
    signal.signal(signal.SIGINT, once)
    signal.signal(signal.SIGTERM, once)
    result = run_worker(spec, worker, workers, start_at_wall_ns)
    stopping[0] = True
    with contextlib.suppress(BrokenPipeError, OSError):
        conn.send(result)
    conn.close()


class RayMissing(ParameterError):
    """``ray`` was asked for but Ray is not installed (bad input naming ``ray``)."""


class Pool:
    """Where a step's workers run: ``inline`` (one worker, this process), ``process`` (N
    spawned local processes) or ``ray`` (N actors, spread one per node round robin)."""

    def __init__(self, workers: int = 1, ray_address: str | None = None,
                 ray_local_cpus: int = 2) -> None:
        if workers < 1:
            raise ParameterError("workers", f"{workers} must be at least 1")
        self.workers = workers
        self.ray_address = ray_address
        self.kind = "ray" if ray_address else ("process" if workers > 1 else "inline")
        self._actors: list[Any] = []
        self._ray: Any = None
        self._owns_ray = False
        self.nodes: list[str] = []
        if self.kind == "ray":
            self._start_ray(ray_local_cpus)

    def _start_ray(self, local_cpus: int) -> None:
        try:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        except ImportError:
            raise RayMissing("ray", "needs Ray: pip install 'replicalab[ray]' (or run without "
                                    "{ray} for local processes)", {"ray": "ray"}) from None
        self._ray = ray
        self._owns_ray = not ray.is_initialized()  # one found running is left running
        if self._owns_ray and self.ray_address == "local":
            ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        elif self._owns_ray:
            try:
                ray.init(address=self.ray_address, log_to_driver=False,
                         configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise ParameterError("ray", f"{self.ray_address}: cannot join the Ray "
                                            f"cluster ({err}); check the address or use "
                                            "{ray} local", {"ray": "ray"}) from None
        try:
            alive = [n for n in ray.nodes() if n.get("Alive")]
            self.nodes = [n["NodeID"] for n in alive]
            if self.workers == 1 and len(alive) > 1:
                self.workers = len(alive)  # one per node unless --workers says otherwise
            actor_cls = ray.remote(num_cpus=0)(_RayWorker)
            self._actors = [
                actor_cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                    self.nodes[i % len(self.nodes)], soft=False)).remote()
                for i in range(self.workers)]
        except BaseException:
            if self._owns_ray:
                ray.shutdown()
            raise

    def run_step(self, spec: LoadSpec) -> list[WorkerResult]:
        """Run ``spec`` split over the workers; return their results in worker order."""
        start = time.time_ns() + int(START_LEAD_S * 1e9) if self.workers > 1 else 0
        if self.kind == "inline":
            return [run_worker(spec, 0, 1, 0)]
        if self.kind == "process":
            return self._run_processes(spec, start)
        refs = [a.run.remote(spec, w, self.workers, start) for w, a in enumerate(self._actors)]
        return list(self._ray.get(refs))

    def _run_processes(self, spec: LoadSpec, start_at_wall_ns: int) -> list[WorkerResult]:
        """Run one step on spawned worker processes (owned by the process registry) and
        return their results. On Ctrl-C or SIGTERM the workers are told to stop, get
        :data:`STOP_WAIT_S` to send what they recorded, and :class:`StepInterrupted`
        carries it; a worker that dies without a result fails the step."""
        ctx = multiprocessing.get_context("spawn")
        procs: list[Any] = []
        conns: dict[Connection, int] = {}
        results: dict[int, WorkerResult] = {}
        try:
            for w in range(self.workers):
                mine, theirs = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_worker_main, name=f"replicalab-load-worker-{w}",
                                args=(theirs, spec, w, self.workers, start_at_wall_ns),
                                daemon=True)
                with process.signals_deferred():  # a Ctrl-C here must not lose the pid
                    p.start()
                    process.track(p.pid, f"load worker {w}")
                theirs.close()
                procs.append(p)
                conns[mine] = w
            try:
                self._collect(conns, results, None)
            except KeyboardInterrupt:
                # SIGTERM: a worker still importing dies quietly, a running one stops and
                # sends what it recorded (see _worker_main)
                for p in procs:
                    if p.is_alive():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(p.pid, signal.SIGTERM)
                with process.signals_held():
                    self._collect(conns, results, time.monotonic() + STOP_WAIT_S)
                raise StepInterrupted([results[w] for w in sorted(results)]) from None
            missing = [w for w in range(self.workers) if w not in results]
            if missing:
                raise RuntimeError(f"load worker(s) {missing} exited without a result "
                                   f"(exit codes {[procs[w].exitcode for w in missing]})")
            return [results[w] for w in range(self.workers)]
        finally:
            for c in conns:
                c.close()
            process.stop_many([p.pid for p in procs if p.pid], grace_s=1.0)
            for p in procs:
                p.join(0.1)

    @staticmethod
    def _collect(conns: dict[Connection, int], results: dict[int, WorkerResult],
                 deadline: float | None) -> None:
        """Receive results until every worker answered or hung up (exited without one), or
        ``deadline`` passes; waits in short slices so that Ctrl-C is acted on at once."""
        pending = {c: w for c, w in conns.items() if w not in results}
        while pending and (deadline is None or time.monotonic() < deadline):
            for c in wait(list(pending), timeout=0.1):
                w = pending.pop(c)
                with contextlib.suppress(EOFError, OSError):  # died without a result
                    results[w] = c.recv()

    def describe(self) -> dict[str, Any]:
        """Return where the workers ran (JSON-ready)."""
        return {"kind": self.kind, "workers": self.workers,
                "ray_address": self.ray_address, "ray_nodes": len(self.nodes)}

    def close(self) -> None:
        """Stop the processes or actors and shut Ray down (always call, e.g. in finally)."""
        if self._ray is not None:
            for a in self._actors:
                self._ray.kill(a)
            self._actors = []
            if self._owns_ray:
                self._ray.shutdown()
            self._ray = None

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _RayWorker:
    """The Ray actor: runs workers' shares on whichever node Ray placed it."""

    def run(self, spec: LoadSpec, worker: int, workers: int,
            start_at_wall_ns: int) -> WorkerResult:
        return run_worker(spec, worker, workers, start_at_wall_ns)


def shifts_ns(results: Sequence[WorkerResult]) -> list[int]:
    """Return, per worker, the shift (ns) that puts its times on the merged timeline: its
    wall-minus-monotonic offset relative to the first worker's (0 in virtual time)."""
    if not results or results[0].virtual:
        return [0] * len(results)
    first = results[0].clock
    # Processes of one machine share one monotonic clock: no shift (and no added noise).
    return [0 if r.clock.hostname == first.hostname else r.clock.offset_ns - first.offset_ns
            for r in results]

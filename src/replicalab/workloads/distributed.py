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

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from replicalab.workloads.load import LoadSpec, WorkerResult, run_worker

START_LEAD_S = 1.0
"""Wall-clock lead given to workers before the common start (connections open meanwhile)."""


class RayMissing(RuntimeError):
    """--ray was asked for but Ray is not installed."""


class Pool:
    """Where a step's workers run: ``inline`` (one worker, this process), ``process`` (N
    spawned local processes) or ``ray`` (N actors, spread one per node round robin)."""

    def __init__(self, workers: int = 1, ray_address: str | None = None,
                 ray_local_cpus: int = 2) -> None:
        if workers < 1:
            raise ValueError(f"--workers {workers} must be at least 1")
        self.workers = workers
        self.ray_address = ray_address
        self.kind = "ray" if ray_address else ("process" if workers > 1 else "inline")
        self._executor: ProcessPoolExecutor | None = None
        self._actors: list[Any] = []
        self._ray: Any = None
        self.nodes: list[str] = []
        if self.kind == "ray":
            self._start_ray(ray_local_cpus)
        elif self.kind == "process":
            self._executor = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"))

    def _start_ray(self, local_cpus: int) -> None:
        try:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        except ImportError:
            raise RayMissing("--ray needs Ray: pip install 'replicalab[ray]' (or run "
                             "without --ray for local processes)") from None
        self._ray = ray
        if self.ray_address == "local":
            ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        else:
            try:
                ray.init(address=self.ray_address, log_to_driver=False,
                         configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise ValueError(f"cannot join the Ray cluster at {self.ray_address} "
                                 f"({err}); check the address or use --ray local") from None
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
            ray.shutdown()
            raise

    def run_step(self, spec: LoadSpec) -> list[WorkerResult]:
        """Run ``spec`` split over the workers; return their results in worker order."""
        start = time.time_ns() + int(START_LEAD_S * 1e9) if self.workers > 1 else 0
        if self.kind == "inline":
            return [run_worker(spec, 0, 1, 0)]
        if self.kind == "process":
            assert self._executor is not None
            futures = [self._executor.submit(run_worker, spec, w, self.workers, start)
                       for w in range(self.workers)]
            return [f.result() for f in futures]
        refs = [a.run.remote(spec, w, self.workers, start) for w, a in enumerate(self._actors)]
        return list(self._ray.get(refs))

    def describe(self) -> dict[str, Any]:
        """Return where the workers ran (JSON-ready)."""
        return {"kind": self.kind, "workers": self.workers,
                "ray_address": self.ray_address, "ray_nodes": len(self.nodes)}

    def close(self) -> None:
        """Stop the processes or actors and shut Ray down (always call, e.g. in finally)."""
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
            self._executor = None
        if self._ray is not None:
            for a in self._actors:
                self._ray.kill(a)
            self._actors = []
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

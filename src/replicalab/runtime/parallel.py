"""Independent jobs on every core or on a Ray cluster: ``Workers.map`` runs a picklable
function over a list of argument tuples in this process, on N local processes (forked on
Linux, spawned elsewhere; each takes the next job as soon as it is free), or as Ray tasks,
and returns the results in job order.

What runs is simulation in virtual time, so where a job runs does not change its result:
the same jobs give the same results on one worker, on N, or on a Ray cluster. Ray is used
as ``replicalab load --ray`` uses it: ``local`` starts (and at the end stops) a Ray
instance on this machine, an address joins a running cluster, and a Ray already
initialised in this process (a notebook, a test session) is used as it is and left running.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from replicalab.errors import ParameterError
from replicalab.runtime.interrupts import STOP_WAIT_S
from replicalab.runtime.virtual import note_stop, stop_requested

Job = tuple[Any, ...]


class RayMissing(ParameterError):
    """``ray`` was asked for but Ray is not installed (bad input naming ``ray``)."""


class JobFailed(RuntimeError):
    """A job raised: the message names the job and carries the worker's traceback."""


# Fork where it is safe (Linux): a worker starts with the modules this process has loaded,
# in milliseconds, where a spawned one spends a second or two importing them again before
# its first job; jobs are pure simulation and do not share this process's threads or files.
_START_METHOD = ("fork" if sys.platform == "linux"
                 and "fork" in multiprocessing.get_all_start_methods() else "spawn")

def _serve(jobs: Connection, results: Connection) -> None:
    """A worker: run each (index, fn, args) it is sent and send back (index, state, value)
    until it is sent None: state "ok" with the result, "error" with the traceback, or
    "interrupted" (Ctrl-C reached the job before it could return).

    Ctrl-C (SIGINT) is noted, not raised (``runtime.virtual.note_stop``): a simulation
    stops at its next event and the job saves and returns what it did; the worker then
    takes no more jobs."""
    signal.signal(signal.SIGINT, note_stop)
    while not stop_requested():
        try:
            task = jobs.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if task is None:
            return
        index, fn, args = task
        try:
            out = (index, "ok", fn(*args))
        except KeyboardInterrupt:
            out = (index, "interrupted", None)
        except BaseException:  # any failure goes back to the parent, named
            out = (index, "error", traceback.format_exc())
        try:
            results.send(out)
        except (BrokenPipeError, OSError, KeyboardInterrupt):
            return


class Workers:
    """Where independent jobs run: ``inline`` (this process), ``process`` (N spawned local
    processes) or ``ray`` (tasks on a Ray cluster, one CPU each).

    ``on_start(pid, label)`` is called for each process started (e.g. to own it in the
    command's process registry, so that Ctrl-C leaves none behind).
    """

    def __init__(self, workers: int = 1, ray_address: str | None = None,
                 on_start: Callable[[int, str], None] | None = None,
                 ray_local_cpus: int | None = None) -> None:
        if workers < 1:
            raise ParameterError("workers", f"{workers} must be at least 1")
        self.workers = workers
        self.ray_address = ray_address
        self.kind = "ray" if ray_address else ("process" if workers > 1 else "inline")
        self.on_start = on_start
        self._ray: Any = None
        self._owns_ray = False
        self._procs: list[Any] = []
        self._to_worker: list[Connection] = []
        self._from_worker: dict[Connection, int] = {}
        self.ray_cpus = 0
        if self.kind == "ray":
            self._connect_ray(ray_local_cpus or os.cpu_count() or 1)

    def _connect_ray(self, local_cpus: int) -> None:
        try:
            import ray
        except ImportError:
            raise RayMissing("ray", "needs Ray: pip install 'replicalab[ray]' (or use "
                                    "{workers} for local processes)",
                             {"workers": "workers"}) from None
        self._ray = ray
        if not ray.is_initialized():
            if self.ray_address == "local":
                ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            else:
                try:
                    ray.init(address=self.ray_address, log_to_driver=False,
                             configure_logging=False)
                except (ConnectionError, RuntimeError, ValueError) as err:
                    raise ParameterError("ray", f"{self.ray_address}: cannot join the Ray "
                                                f"cluster ({err}); check the address or use "
                                                "{ray} local", {"ray": "ray"}) from None
            self._owns_ray = True
        self.ray_cpus = int(ray.cluster_resources().get("CPU", 0))

    def describe(self) -> dict[str, Any]:
        """Return where the jobs ran (JSON-ready)."""
        return {"kind": self.kind, "workers": self.workers, "ray_address": self.ray_address,
                "ray_cpus": self.ray_cpus}

    def map(self, fn: Callable[..., Any], jobs: Sequence[Job],
            done: Callable[[int, Any], None] | None = None) -> list[Any]:
        """Return ``[fn(*job) for job in jobs]``, run where this pool runs jobs; ``done(i,
        result)`` is called in this process as each job finishes (in any order). A job that
        raises stops the others and raises :class:`JobFailed` naming it."""
        if not jobs:
            return []
        if self.kind == "inline":
            out = []
            for i, args in enumerate(jobs):
                out.append(fn(*args))
                if done is not None:
                    done(i, out[-1])
            return out
        if self.kind == "ray":
            return self._map_ray(fn, jobs, done)
        return self._map_processes(fn, jobs, done)

    def start(self, jobs: int | None = None) -> None:
        """Start the worker processes now (at most ``jobs`` of them), before this process
        starts threads of its own (a progress bar): ``map`` starts them otherwise."""
        if self.kind != "process" or self._procs:
            return
        ctx = multiprocessing.get_context(_START_METHOD)
        for w in range(min(self.workers, jobs or self.workers)):
            jobs_r, jobs_w = ctx.Pipe(duplex=False)
            res_r, res_w = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_serve, args=(jobs_r, res_w), daemon=True,
                            name=f"replicalab-worker-{w}")
            p.start()
            if self.on_start is not None:
                self.on_start(p.pid, f"worker {w}")
            jobs_r.close()
            res_w.close()
            self._procs.append(p)
            self._to_worker.append(jobs_w)
            self._from_worker[res_r] = w

    def _map_processes(self, fn: Callable[..., Any], jobs: Sequence[Job],
                       done: Callable[[int, Any], None] | None) -> list[Any]:
        """Run the jobs on the worker processes, each sent the next job when it is free. On
        Ctrl-C (or SIGTERM made one) every worker gets SIGINT, so that a job in progress
        can stop and return what it did, and :data:`STOP_WAIT_S` to send it; then the
        interrupt goes on. The workers end with the jobs."""
        self.start(len(jobs))
        procs, to_worker, from_worker = self._procs, self._to_worker, self._from_worker
        busy: dict[int, int] = {}  # worker -> the job it runs
        results: dict[int, Any] = {}
        pending = list(range(len(jobs)))[::-1]  # popped from the end: job order

        def give(w: int) -> None:
            if pending:
                i = pending.pop()
                busy[w] = i
                to_worker[w].send((i, fn, jobs[i]))
            else:
                busy.pop(w, None)
                with contextlib.suppress(OSError, BrokenPipeError):
                    to_worker[w].send(None)

        def collect(timeout: float) -> None:
            for conn in wait([c for c, w in from_worker.items() if w in busy], timeout):
                w = from_worker[conn]
                try:
                    index, state, value = conn.recv()
                except (EOFError, OSError):
                    busy.pop(w, None)
                    raise JobFailed(f"worker {w} exited without a result (exit code "
                                    f"{procs[w].exitcode})") from None
                if state == "interrupted":
                    busy.pop(w, None)
                    raise KeyboardInterrupt
                if state == "error":
                    busy.pop(w, None)
                    raise JobFailed(f"job {index} failed in worker {w}:\n{value}")
                results[index] = value
                give(w)
                if done is not None:
                    done(index, value)

        try:
            try:
                for w in range(len(procs)):
                    give(w)
                while len(results) < len(jobs):
                    collect(0.2)
                return [results[i] for i in range(len(jobs))]
            except KeyboardInterrupt:
                pending.clear()
                for w in busy:
                    if procs[w].is_alive():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(procs[w].pid, signal.SIGINT)
                deadline = time.monotonic() + STOP_WAIT_S
                while busy and time.monotonic() < deadline:
                    with contextlib.suppress(KeyboardInterrupt, JobFailed):
                        collect(0.1)
                raise
        finally:
            self._stop_processes()

    def _stop_processes(self) -> None:
        for c in self._to_worker:
            with contextlib.suppress(OSError, BrokenPipeError):
                c.send(None)
            c.close()
        for c in self._from_worker:
            c.close()
        for p in self._procs:
            p.join(0.5)
            if p.is_alive():
                p.terminate()
                p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join(1.0)
        self._procs, self._to_worker, self._from_worker = [], [], {}

    def _map_ray(self, fn: Callable[..., Any], jobs: Sequence[Job],
                 done: Callable[[int, Any], None] | None) -> list[Any]:
        ray = self._ray
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        refs = [remote.remote(*args) for args in jobs]
        index = {ref.hex(): i for i, ref in enumerate(refs)}
        results: dict[int, Any] = {}
        waiting = list(refs)
        try:
            while waiting:
                ready, waiting = ray.wait(waiting, num_returns=1, timeout=None)
                for ref in ready:
                    i = index[ref.hex()]
                    try:
                        results[i] = ray.get(ref)
                    except ray.exceptions.RayTaskError as err:
                        raise JobFailed(f"job {i} failed on the Ray cluster:\n{err}") from None
                    if done is not None:
                        done(i, results[i])
        except BaseException:
            for ref in waiting:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise
        return [results[i] for i in range(len(jobs))]

    def close(self) -> None:
        """Stop worker processes still running and shut down a Ray instance this pool
        started or joined (one it found running in this process is left running)."""
        if self._procs:
            self._stop_processes()
        if self._ray is not None and self._owns_ray:
            self._ray.shutdown()
        self._ray = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

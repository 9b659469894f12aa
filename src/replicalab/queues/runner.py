"""Run a queue spec: the consumers as tasks of this process (``threads.py``) or, with
``--processes``, as processes of their own (``processes.py``)."""

from __future__ import annotations

from collections.abc import Callable

from replicalab.queues.spec import QueueOutcome, QueueSpec


def run_workload(spec: QueueSpec, progress: Callable[[float], None] | None = None
                 ) -> QueueOutcome:
    """Run ``spec`` to the end (every acknowledged message deleted or dead-lettered, or
    ``max_duration_s``) and return what it recorded; Ctrl-C keeps what was recorded."""
    spec.check()
    if spec.processes:
        from replicalab.queues.processes import run_processes

        return run_processes(spec, progress)
    from replicalab.queues.threads import run_threads

    return run_threads(spec, progress)

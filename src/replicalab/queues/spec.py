"""What a queue run is given (:class:`QueueSpec`) and what it leaves (:class:`QueueOutcome`).

The ``queue`` workload: producers send N tagged messages, C consumers receive them in
parallel, process each for a random time (some longer than the visibility timeout), commit a
result and delete the message, under one of the strategies of ``strategies.py``. Faults act
on consumers (crash, pause, clock skew) and on the central store (errors, timeouts); every
operation is recorded in a :class:`QueueLog`. ``runner.py`` runs a spec, in one process
(``threads.py``) or with a process per reader (``processes.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from replicalab.errors import ParameterError
from replicalab.faults.schedule import CONSUMER_ACTIONS, Fault
from replicalab.queues.record import QueueLog
from replicalab.queues.strategies import CENTRAL, STRATEGIES

DEFAULT_CENTRAL = "sim://simpledb"


@dataclass(frozen=True)
class QueueSpec:
    """One queue run: backend, strategy, load and processing-time distribution."""

    queue: str = "sim://sqs"
    consumers: int = 4
    strategy: str = "none"
    central: str | None = None
    messages: int = 1000
    producers: int = 2
    readers: int = 0  # 0: one reader per consumer (tag: one reader for all)
    batch: int = 10
    visibility_s: float = 30.0
    process_ms: float = 1000.0  # median processing time
    process_sigma: float = 0.5  # lognormal shape
    slow_fraction: float = 0.01  # share of processings that take slow_s
    slow_s: float = 45.0  # longer than the default visibility timeout
    empty_poll_ms: float = 200.0  # wait after an empty receive
    detect_ttl_s: float = 1.0  # central-detect: a reader re-reads the queue counts this often
    groups: int = 16  # FIFO queues: message groups
    max_duration_s: float = 3600.0
    seed: int = 1
    faults: tuple[Fault, ...] = ()
    processes: bool = False  # real queues: each reader a process of its own (SIGKILL crashes)

    def check(self) -> None:
        """Raise ParameterError (one line naming the parameter, as ``queue_run`` names it,
        and the fix) for an impossible run."""
        if self.consumers < 1:
            raise ParameterError("consumers", f"{self.consumers}: give at least 1 consumer")
        if self.messages < 1:
            raise ParameterError("messages", f"{self.messages}: send at least 1 message")
        if self.strategy not in STRATEGIES:
            raise ParameterError("strategy", f"{self.strategy!r}: use one of "
                                             f"{', '.join(STRATEGIES)}")
        if self.producers < 1:
            raise ParameterError("producers", f"{self.producers} must be at least 1")
        if self.batch < 1 or self.batch > 10:
            raise ParameterError("batch", f"{self.batch} must be between 1 and 10")
        if self.readers < 0 or self.readers > self.consumers:
            raise ParameterError("readers", f"{self.readers}: between 1 and {{consumers}} "
                                            f"({self.consumers}), or 0 for one per consumer",
                                 {"consumers": "consumers"})
        if not 0 < self.visibility_s <= 43_200:
            raise ValueError(f"visibility {self.visibility_s:g} s must be in (0, 43200]")
        if self.process_ms < 0 or self.process_sigma < 0 or self.slow_s < 0:
            raise ValueError("processing times must not be negative")
        if not 0 <= self.slow_fraction <= 1:
            raise ParameterError("slow_fraction", f"{self.slow_fraction:g} must be in [0, 1]")
        if self.max_duration_s <= 0:
            raise ParameterError("max_duration", "must be positive")
        if self.central is not None and self.strategy not in CENTRAL:
            raise ParameterError("central", f"is used by the central strategies only, not "
                                            f"{self.strategy!r}; drop it or pick {{strategy}} "
                                            "central", {"strategy": "strategy"})
        if self.processes and self.queue.startswith("sim://"):
            raise ParameterError("processes", "runs consumers as processes of their own "
                                              "against a real queue; sim://sqs lives in one "
                                              "process's virtual time: drop {processes} or "
                                              "give a redis:// or postgresql:// queue",
                                 {"processes": "processes"})
        for f in self.faults:
            self._check_fault(f)

    def _check_fault(self, f: Fault) -> None:
        targets, what = ((self.n_readers(), "consumer processes") if self.processes
                         else (self.consumers, "consumers"))
        if f.store is not None:
            if self.strategy not in CENTRAL:
                raise ParameterError("strategy", f"{self.strategy} uses no central store, "
                                                 f"which fault {f.label!r} acts on; pick "
                                                 "{strategy} central or drop the fault",
                                     {"strategy": "strategy"})
            return
        k = consumer_of(f)
        if f.action not in CONSUMER_ACTIONS or k is None:
            raise ValueError(f"fault {f.label!r}: queue runs take faults on a consumer (crash, "
                             "pause or skew consumer=K, e.g. at=10s pause consumer=1 for=30s) "
                             "or on the central store (errors or timeouts store=central)")
        if k >= targets:
            raise ValueError(f"fault {f.label!r}: there are {what} 0...{targets - 1}; "
                             "pick one of them")

    def n_readers(self) -> int:
        """Return how many readers the consumers form (tag: 1 unless told)."""
        if self.readers:
            return self.readers
        return 1 if self.strategy == "tag" else self.consumers

    def to_json(self) -> dict[str, Any]:
        """Return the spec as JSON-ready data (faults as their fields)."""
        d = asdict(self)
        d["faults"] = [f.to_json() for f in self.faults]
        return d


def consumer_of(f: Fault) -> int | None:
    """Return the consumer a queue fault acts on (``consumer=K``; a crash may say
    ``node=K``, as before consumers were targets of their own), None for others."""
    if f.consumer is not None:
        return f.consumer
    return f.node if f.action == "crash" and f.region is None else None


@dataclass
class QueueOutcome:
    """What a run leaves: the log (with the effects read back), the message ids
    dead-lettered, descriptions of the queue, the central store and the effect store,
    notes."""

    log: QueueLog
    dead_letters: list[str]
    queue_info: dict[str, Any]
    central_info: dict[str, Any] | None
    duration_ns: int
    wall_s: float
    notes: list[str]
    interrupted: bool = False
    effects_info: dict[str, Any] | None = None
    effects_domain: str = ""  # the effect lists are at <domain>/<tag>/effects

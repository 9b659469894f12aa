"""What a scorecard property is: one object that says how many runs it takes, runs them,
grades them into a cell and names the promise it is graded against. The registry
(``experiments/properties/__init__.py``) lists them in the chart's column order; the
scorecard, ``--only``, the progress bar and the chart find them by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicalab.cluster.kinds import Promise, StoreKind
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.promises import kind_promise

if TYPE_CHECKING:
    from replicalab.experiments.cells import Cell
    from replicalab.experiments.measure import Progress, Target


class NotMeasured(ValueError):
    """This property cannot be measured on this store; the message says why (a grey
    cell)."""


@dataclass
class Context:
    """What a property's measurement gets: the store (resolved once), the plan, where runs
    go, the started cluster (``target``: None for a property that runs its own clusters),
    the store's declared features, the region set its nodes sit on, ``shared``, runs
    one property leaves for another (geography reads latency's), and ``name``, the prefix of
    the clusters the scorecard starts (``<name>-<kind>``)."""

    subject: Subject
    plan: Plan
    seed: int
    regions: str
    out: Path  # where sub-runs go
    base: Path  # the scorecard's run directory (sub-runs are named relative to it)
    root: Path  # cluster state root
    step: Callable[[str], Progress]
    target: Target | None = None
    features: frozenset[str] = frozenset()
    rs_name: str | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    hosts: str | None = None  # the inventory the clusters run on (None: this machine)
    name: str = "scorecard"

    def progress(self, what: str) -> Progress:
        """Report the start of a phase named ``what`` (prefixed with the store)."""
        return self.step(f"{self.subject.label}: {what}")


@dataclass(frozen=True)
class Property:
    """One column of the chart. ``measure`` runs what it needs and returns its figures
    (raise :class:`NotMeasured` for a grey cell), ``grade`` turns them into a cell against
    the promise; ``steps(subject, plan, regions, asked)`` is its share of the progress bar
    (``asked``: every property of this scorecard, for runs they share); ``promise`` is what
    the store promises (default: the kind record's promise for this name, the simulator's
    rules for sim://). ``needs_cluster`` False: it starts clusters of its own and runs
    before the store's cluster is up (durability)."""

    name: str
    help: str
    measure: Callable[[Context], dict[str, Any]]
    grade: Callable[[Context, dict[str, Any], Promise], Cell]
    steps: Callable[[Subject, Plan, int, tuple[str, ...]], int]
    promise: Callable[[StoreKind | None], Promise] | None = None
    needs_cluster: bool = True

    def promise_for(self, kind: StoreKind | None) -> Promise:
        """Return what ``kind`` (None: a simulated store) promises for this property."""
        return self.promise(kind) if self.promise is not None else kind_promise(kind, self.name)

"""A probe's results as typed objects: what ``results.json`` holds, with attributes in
place of nested string keys (``run.results.latency["read/eventual"].p99_ms``).

Every figure keeps its unit in its name (``_ms``, ``_s``); fractions are 0..1. What a
workload adds beyond the typed parts stays reachable, unchanged, in :attr:`Results.raw`
(the dict ``results.json`` holds, which ``replicalab report`` re-checks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OpCounts:
    """Client operations of a run: ``reads`` and ``writes`` that succeeded (ok; a write
    counts conditional writes too), ``failed`` (certainly did not happen) and ``info``
    (outcome unknown: timeout, crash)."""

    reads: int
    writes: int
    failed: int
    info: int


@dataclass(frozen=True)
class TxnCounts:
    """Transactions of a transactional run by outcome: ``ok`` committed, ``fail`` aborted
    (certainly did not happen), ``info`` outcome unknown (timeout, crash)."""

    ok: int
    fail: int
    info: int


@dataclass(frozen=True)
class Isolation:
    """The isolation of a transactional run: ``requested`` (the store URL's ``isolation``,
    None without one), ``promised`` (what the store's kind promises for that URL, e.g.
    ``serializable``, ``none``) and its documentation ``source``."""

    requested: str | None
    promised: str
    source: str


@dataclass(frozen=True)
class LatencySummary:
    """Latency of one operation kind (``f/consistency``, e.g. ``read/eventual``) over its
    successful operations, from an HdrHistogram: ``count`` operations, mean, percentiles
    and max in milliseconds."""

    count: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float


@dataclass(frozen=True)
class FaultWindow:
    """One injected fault: its ``label`` (e.g. ``crash node=2``) and when it acted, in ms
    since the run started."""

    label: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class Availability:
    """How available the store was to its clients: ``overall`` the fraction (0..1) of
    client time answered (each operation stands for the time until its client's next one),
    ``overall_ops`` the fraction of operations answered, ``during_faults`` the fraction of
    client time answered while a fault acted (None without faults), over ``count``
    operations."""

    overall: float | None
    overall_ops: float | None
    during_faults: float | None
    count: int


@dataclass(frozen=True)
class Freshness:
    """Seed 003's Figure 2: per ``bucket_ms`` bucket of time since the write started
    (``t_ms``, the bucket's start in ms), the reads that returned the freshest value
    (``fresh``) of all reads (``total``), their fraction ``p`` (0..1) and its 95 % Wilson
    band ``lo``..``hi``."""

    bucket_ms: float
    t_ms: tuple[float, ...]
    fresh: tuple[int, ...]
    total: tuple[int, ...]
    p: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]

    def to_pandas(self) -> Any:
        """Return the curve as a pandas DataFrame, one row per bucket: ``t_ms``, ``fresh``,
        ``total``, ``p``, ``lo``, ``hi``."""
        import pandas as pd

        return pd.DataFrame({"t_ms": self.t_ms, "fresh": self.fresh, "total": self.total,
                             "p": self.p, "lo": self.lo, "hi": self.hi})


@dataclass(frozen=True)
class Periods:
    """Seed 003's Figure 3: per measurement period of ``period_s`` seconds (starting at
    ``start_s`` in the run), the first time (ms after the write) the freshness probability
    reaches 99 % and the last time it is below 100 % (None: no such time), with their
    medians (ms) and coefficients of variation across periods."""

    period_s: float
    start_s: tuple[float, ...]
    first_ge_99_ms: tuple[float | None, ...]
    last_lt_100_ms: tuple[float | None, ...]
    first_ge_99_median_ms: float | None
    last_lt_100_median_ms: float | None
    first_ge_99_cv: float | None
    last_lt_100_cv: float | None


@dataclass(frozen=True)
class Results:
    """The results of one probe run. ``consistency`` is the reads' and ``ops`` counts the
    operations, except in a transactional run (both None): its ``transactions`` are
    counted by outcome and its ``isolation`` is the one asked for and promised (both None
    in any other run). ``latency`` maps ``f/consistency`` to its summary;
    ``freshness`` and ``periods`` are set for the staleness workload (None otherwise);
    ``faults`` are the injected faults; ``availability`` how much of the client time was
    answered; ``partial`` says the run was cut short; ``raw`` is the whole results.json
    document (every workload-specific figure, as ``replicalab report`` re-checks it)."""

    workload: str
    store: str
    consistency: str | None
    seed: int
    duration_s: float
    ops: OpCounts | None
    latency: dict[str, LatencySummary]
    partial: bool
    notes: tuple[str, ...]
    faults: tuple[FaultWindow, ...]
    availability: Availability | None = None
    freshness: Freshness | None = None
    periods: Periods | None = None
    transactions: TxnCounts | None = None
    isolation: Isolation | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Results:
        """Return the typed results of a results.json document (ValueError if it is not a
        probe's)."""
        try:
            txn = doc.get("transactions")
            ops = None if txn is not None else OpCounts(
                **{k: int(doc["ops"][k]) for k in ("reads", "writes", "failed", "info")})
            iso = doc.get("isolation")
            latency = {name: LatencySummary(**{k: s[k] for k in (
                "count", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")})
                for name, s in doc.get("latency", {}).items()}
            fresh = doc.get("freshness")
            per = doc.get("periods")
            avail = doc.get("availability")
            return cls(
                workload=str(doc["workload"]), store=str(doc["store"]),
                consistency=None if txn is not None else str(doc["consistency"]),
                seed=int(doc["seed"]),
                duration_s=float(doc["duration_s"]), ops=ops, latency=latency,
                partial=bool(doc.get("partial", False)),
                notes=tuple(doc.get("notes") or ()),
                faults=tuple(FaultWindow(str(f["label"]), float(f["start_ms"]),
                                         float(f["end_ms"])) for f in doc.get("faults") or ()),
                availability=None if not isinstance(avail, Mapping) else Availability(
                    avail.get("overall"), avail.get("overall_ops"), avail.get("during_faults"),
                    int(avail.get("count", 0))),
                freshness=None if not isinstance(fresh, Mapping) else Freshness(
                    float(fresh["bucket_ms"]),
                    *(tuple(fresh[k]) for k in ("t_ms", "fresh", "total", "p", "lo", "hi"))),
                periods=None if not isinstance(per, Mapping) else Periods(
                    float(per["period_s"]), tuple(per["start_s"]),
                    tuple(per["first_ge_99_ms"]), tuple(per["last_lt_100_ms"]),
                    per["first_ge_99_median_ms"], per["last_lt_100_median_ms"],
                    per["first_ge_99_cv"], per["last_lt_100_cv"]),
                transactions=None if txn is None else TxnCounts(
                    int(txn["ok"]), int(txn["fail"]), int(txn["info"])),
                isolation=None if not isinstance(iso, Mapping) else Isolation(
                    iso.get("requested"), str(iso.get("promised", "none")),
                    str(iso.get("source", ""))),
                raw=dict(doc))
        except (KeyError, TypeError) as err:
            raise ValueError(f"not the results of a probe run (missing {err})") from None

    def latency_frame(self) -> Any:
        """Return the latency summary as a pandas DataFrame, one row per operation kind
        (index ``operation``), columns ``count``, ``mean_ms``, ``p50_ms``, ``p90_ms``,
        ``p99_ms``, ``p999_ms``, ``max_ms`` (milliseconds)."""
        import pandas as pd

        rows = {name: vars(s) for name, s in self.latency.items()}
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame.index.name = "operation"
        return frame

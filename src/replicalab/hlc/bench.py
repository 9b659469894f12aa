"""The seed's two trace-synchronisation experiments over synthetic traces (seed 002).

Figure 1: alignment error against log length for several message probabilities (skew 50 ticks,
latency 3–10 ticks, event chance 0.4 per tick).  Figure 2: error against message latency for
skews of 10, 20 and 50 ticks.  Every point is repeated over seeds; the error of one repetition
is the mean over non-driver nodes of ``|true − estimated| / true`` offset (the seed's
``1 − adjustment / skew``).  Pure computation: no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from replicalab.hlc.align import align, alignment_errors
from replicalab.hlc.synth import SynthConfig, generate, spread_skews

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class BenchConfig:
    """The grid of both experiments (times in ticks; one tick = 1 µs in the logs)."""

    nodes: int = 5
    reps: int = 100
    seed: int = 1
    p_event: float = 0.4
    # figure 1
    skew_ticks: int = 50
    latency_ticks: tuple[int, int] = (3, 10)
    p_messages: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1)
    lengths_ticks: tuple[int, ...] = (25, 50, 100, 200, 400, 800, 1600)
    # figure 2
    skews_ticks: tuple[int, ...] = (10, 20, 50)
    latencies_ticks: tuple[int, ...] = (1, 2, 3, 5, 8, 10, 15, 20, 30, 40, 50, 60)
    latency_length_ticks: int = 800
    latency_p_message: float = 0.05

    def __post_init__(self) -> None:
        if self.nodes < 2:
            raise ValueError("nodes must be >= 2")
        if self.reps < 1:
            raise ValueError("reps must be >= 1")

    def runs(self) -> int:
        """Return the number of synthetic traces both experiments generate."""
        return self.reps * (len(self.p_messages) * len(self.lengths_ticks)
                            + len(self.skews_ticks) * len(self.latencies_ticks))


@dataclass
class Point:
    """One grid point: the per-repetition errors and their summary."""

    params: dict[str, Any]
    errors: list[float] = field(default_factory=list)
    in_bounds: int = 0       # nodes whose true offset lay inside [low, high]
    nodes_checked: int = 0

    def summary(self, errors: bool = False) -> dict[str, Any]:
        """Return params with median, mean, p25, p75, min and max error over repetitions
        (``errors``: also every repetition's error, in repetition order)."""
        e = sorted(self.errors)
        in_bounds = self.in_bounds / self.nodes_checked if self.nodes_checked else None
        kept = {"errors": list(self.errors)} if errors else {}
        if not e:  # every lagging node had a true offset of 0: error undefined
            return {**self.params, "reps": 0, "median": None, "mean": None, "p25": None,
                    "p75": None, "min": None, "max": None, "truth_in_bounds": in_bounds,
                    **kept}
        q = statistics.quantiles(e, n=4, method="inclusive") if len(e) > 1 else [e[0]] * 3
        return {**self.params, "reps": len(e), "median": statistics.median(e),
                "mean": statistics.fmean(e), "p25": q[0], "p75": q[2], "min": e[0],
                "max": e[-1], "truth_in_bounds": in_bounds, **kept}


def trial_error(cfg: SynthConfig) -> tuple[float | None, int, int]:
    """Return (mean relative error over nodes or None, nodes whose truth lay in bounds, nodes)
    for one synthetic trace aligned against its HLC driver."""
    trace = generate(cfg)
    result = align(trace.logs)
    truth = trace.true_offsets_us(result.driver)
    errors = alignment_errors(result, truth)
    inside = sum(1 for n, off in result.nodes.items()
                 if (off.low_us is None or off.low_us <= truth[n])
                 and (off.high_us is None or truth[n] <= off.high_us))
    mean = statistics.fmean(errors.values()) if errors else None
    return mean, inside, len(result.nodes)


def _rep_seed(seed: int, rep: int) -> int:
    # common random numbers: repetition r uses the same skews and streams at every grid point
    return seed * 1_000_003 + rep


def _measure(point: Point, make: Callable[[int], SynthConfig], reps: int, seed: int,
             tick: Callable[[], None]) -> None:
    for rep in range(reps):
        err, inside, n = trial_error(make(_rep_seed(seed, rep)))
        if err is not None:
            point.errors.append(err)
        point.in_bounds += inside
        point.nodes_checked += n
        tick()


def run_bench(cfg: BenchConfig, progress: Callable[[float], None] = lambda _f: None,
              errors: bool = False) -> dict[str, Any]:
    """Return the results of both experiments (errors are fractions of the true offset;
    ``errors``: each point also keeps every repetition's, for a recording that a shorter
    run with the same seed can be compared with)."""
    total = cfg.runs()
    done = [0]

    def tick() -> None:
        done[0] += 1
        progress(done[0] / total)

    by_length: list[dict[str, Any]] = []
    by_latency: list[dict[str, Any]] = []
    interrupted = False
    try:
        for p in cfg.p_messages:
            for length in cfg.lengths_ticks:
                pt = Point({"p_message": p, "length_ticks": length})
                by_length.append(pt.params)  # replaced by the summary once measured
                _measure(pt, lambda s, p=p, length=length: SynthConfig(
                    spread_skews(cfg.nodes, cfg.skew_ticks, s), cfg.latency_ticks,
                    cfg.p_event, p, length, s), cfg.reps, cfg.seed, tick)
                by_length[-1] = pt.summary(errors)
        for skew in cfg.skews_ticks:
            for lat in cfg.latencies_ticks:
                pt = Point({"skew_ticks": skew, "latency_ticks": lat})
                by_latency.append(pt.params)
                _measure(pt, lambda s, skew=skew, lat=lat: SynthConfig(
                    spread_skews(cfg.nodes, skew, s), (lat, lat), cfg.p_event,
                    cfg.latency_p_message, cfg.latency_length_ticks, s), cfg.reps, cfg.seed,
                    tick)
                by_latency[-1] = pt.summary(errors)
    except KeyboardInterrupt:
        # keep every finished point; the one in progress is dropped
        interrupted = True
        by_length = [r for r in by_length if "median" in r]
        by_latency = [r for r in by_latency if "median" in r]
    return {"schema_version": SCHEMA_VERSION, "workload": "hlc-bench",
            "config": asdict(cfg), "interrupted": interrupted, "error_vs_length": by_length,
            "error_vs_latency": by_latency}


def series(rows: Sequence[Mapping[str, Any]], key: str, x: str
           ) -> dict[Any, list[Mapping[str, Any]]]:
    """Return ``rows`` grouped by ``key``, each group sorted by ``x``."""
    out: dict[Any, list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(r[key], []).append(r)
    return {k: sorted(v, key=lambda r: r[x]) for k, v in out.items()}

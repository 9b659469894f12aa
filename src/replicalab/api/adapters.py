"""What runs several probes, a model or a checker, from Python: :func:`compare` (the same probe on
several stores, side by side), :func:`scorecard` (seed 001's chart measured), :func:`model`
(a protocol's latency against offered load). Each is one thin adapter over the entry point
the command line uses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.api.runs import Run, probe


@dataclass
class Comparison:
    """The same probe on several stores: ``runs`` by store URL, in the order given."""

    runs: dict[str, Run]

    def latency_table(self) -> Any:
        """Return seed 001's latency table as a pandas DataFrame: one row per store and
        operation kind (``f/consistency``), with ``count`` and ``mean_ms``, ``p50_ms``,
        ``p99_ms``, ``p999_ms`` (milliseconds, successful operations)."""
        import pandas as pd

        frames = []
        for store, run in self.runs.items():
            f = run.results.latency_frame().reset_index()
            f.insert(0, "store", store)
            frames.append(f[["store", "operation", "count", "mean_ms", "p50_ms", "p99_ms",
                             "p999_ms"]])
        return pd.concat(frames, ignore_index=True)

    def freshness_figure(self) -> Any:
        """Return seed 003's freshness figure for every store side by side (one panel per
        store): probability of reading the freshest value against the time since the write
        started (ms), with its 95 % band. ValueError if a run has no freshness curve (its
        workload is not ``staleness``)."""
        from replicalab.report.side_by_side import freshness_panels

        curves = {}
        for store, run in self.runs.items():
            if run.results.freshness is None:
                raise ValueError(f"the {run.results.workload} run on {store} has no freshness "
                                 "curve; compare with workload='staleness'")
            curves[store] = run.results.raw["freshness"]
        return freshness_panels(curves)

    def _repr_html_(self) -> str:
        return "".join(f"<h4>{store}</h4>{run._repr_html_()}" for store, run in self.runs.items())


def compare(stores: Sequence[str], workload: str = "staleness", duration: str | float = "1m",
            **options: Any) -> Comparison:
    """Run the same probe (``workload``, ``duration`` and every other option of
    :func:`probe`, the same seed) on each store URL of ``stores``; return the
    :class:`Comparison` of their runs. The real-cluster comparison of ``replicalab compare``
    (it starts a cluster per kind) stays on the command line."""
    if not stores:
        raise ValueError("compare needs at least one store URL, e.g. ['sim://simpledb']")
    runs: dict[str, Run] = {}
    for store in stores:
        runs[store] = probe(store, workload, duration, **options)
        if runs[store].interrupted:  # Ctrl-C / the notebook's stop: no further store
            raise KeyboardInterrupt(f"interrupted; what was recorded is in {runs[store].path}")
    return Comparison(runs)


@dataclass
class ScorecardRun:
    """A scorecard: ``path`` (its run directory) and ``doc`` (its scorecard.json: stores,
    properties, plan, cells with value, grade, promise and evidence)."""

    path: Path
    doc: dict[str, Any] = field(repr=False)

    def cells(self) -> Any:
        """Return the cells as a pandas DataFrame: ``store``, ``prop``, ``grade`` (green,
        yellow, red, grey), ``value`` (text), ``promise``."""
        import pandas as pd

        return pd.DataFrame([{k: c[k] for k in ("store", "prop", "grade", "value", "promise")}
                             for c in self.doc["cells"]])


def scorecard(kinds: Sequence[str], regions: str = "dc3", quick: bool = True,
              only: Sequence[str] | None = None, out: str | Path = "runs",
              seed: int = 1, progress: Any = None, hosts: str | Path | None = None
              ) -> ScorecardRun:
    """Measure seed 001's chart for each store of ``kinds`` (cluster kinds, started and
    stopped here, or ``sim://`` URLs) and return the :class:`ScorecardRun`; ``only`` names
    properties (latency, durability, availability, consistency, transactionality,
    geography); ``hosts`` an inventory whose hosts the clusters run on. The same run as
    ``replicalab scorecard`` (:func:`~replicalab.api.comparing.scorecard_run`)."""
    from replicalab.api.comparing import scorecard_run

    done = scorecard_run(kinds, regions, quick, only, out, seed, progress, hosts)
    return ScorecardRun(done.run_dir, done.results)


def model(name: str, loads: Sequence[float] | None = None, points: int = 20,
          **params: Any) -> Any:
    """Return the analytic curve of protocol model ``name`` (paxos-lan, paxos-wan, epaxos,
    wpaxos, pigpaxos) with ``params`` (fields of its parameters class): a
    :class:`~replicalab.models.base.Curve` whose points give mean latency (ms) and the
    busiest node's utilisation at each offered load (requests/s), and
    ``max_throughput_rps``. Loads: ``loads``, else ``points`` spread to 98 % of the
    maximum throughput, as ``replicalab model`` spreads them."""
    from replicalab.models.registry import MODELS

    if name not in MODELS:
        raise ValueError(f"model {name!r}: use one of {', '.join(MODELS)}")
    spec = MODELS[name]
    try:
        p = spec.params_cls(**params)
    except TypeError as err:
        raise ValueError(f"model {name}: {err}") from None
    if loads is None:
        max_rps = spec.curve(p, [1.0]).max_throughput_rps
        if points < 2 or not 0 < max_rps < float("inf"):
            raise ValueError("give loads (requests/s), or points >= 2 for a model with a "
                             "finite maximum throughput")
        loads = [float(x) for x in np.linspace(0.05, 0.98, points) * max_rps]
    return spec.curve(p, list(loads))

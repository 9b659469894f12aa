"""Seed 003 §4 from Python: :func:`tradeoff` runs paced closed-loop clients over client
groups, read ratios and eventual against consistent reads, and renders the paper's Figures
7-12 (``replicalab load tradeoff`` is a shell over it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicalab.api.catalog import redact_url
from replicalab.api.errors import ParameterError
from replicalab.api.outcome import DONE, INTERRUPTED, STOPPED, Outcome, Table
from replicalab.api.progress import Progress, ticking
from replicalab.experiments.tradeoff import TradeoffPlan, run_tradeoff


@dataclass
class TradeoffRun:
    """A finished (or interrupted) tradeoff run: where it was saved, its report, its
    results (cells, points, observations) and why it stopped early, if it did."""

    run_dir: Path
    report: Path
    results: dict[str, Any] = field(repr=False)
    interrupted: bool = False
    error: str = ""

    @property
    def observations(self) -> list[dict[str, Any]]:
        """Return the paper's observations judged on this run (claim, holds, evidence)."""
        return list(self.results["observations"])

    def to_json(self) -> dict[str, Any]:
        """Return the results with where they were saved (JSON-ready)."""
        return {**self.results, "run_dir": str(self.run_dir), "report": str(self.report),
                "interrupted": self.interrupted}

    def outcome(self) -> Outcome:
        """Return the run as ``replicalab load tradeoff`` prints it: the paper's
        observations judged (claim, holds, evidence), the report, and how it ended."""
        t = Table(f"seed 003 §4 on {self.results['store']}",
                  ["observation", "holds", "evidence"], wrap=(0, 2))
        for o in self.observations:
            t.add(o["claim"], {True: "yes", False: "no", None: "n/a"}[o["holds"]],
                  o["evidence"])
        status, why = DONE, ""
        if self.interrupted:
            status, why = INTERRUPTED, (f"interrupted; the steps so far and their report are "
                                        f"in {self.run_dir}")
        elif self.error:
            status, why = STOPPED, (f"the run stopped early ({self.error}); what was done is "
                                    f"in {self.run_dir}")
        return Outcome({**self.results, "run_dir": str(self.run_dir),
                        "interrupted": self.interrupted}, None, self.report, [t],
                       status=status, why=why)


def _list(text: str | Sequence[Any], kind: type, name: str) -> list[Any]:
    """Return a comma-separated text (or a sequence) as a list of ``kind``."""
    if not isinstance(text, str):
        return [kind(x) for x in text]
    try:
        return [kind(x.strip()) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ParameterError(name, f"{text!r} must be a comma-separated list, e.g. "
                                   f"{'1,5,10' if kind is int else '0.99,0.75,0.5'}") from None


def tradeoff(store: str = "sim://simpledb",
             groups: str | Sequence[int] = (1, 5, 10, 15, 20, 25), clients: int = 100,
             client_rate: float = 1.0, read_ratios: str | Sequence[float] = (0.99, 0.75, 0.5),
             consistency: str | Sequence[str] = ("eventual", "consistent"), repeats: int = 3,
             step_duration: str | float = "30s", keyspace: int = 1,
             timeout_ms: float = 10_000.0, seed: int = 1, out: Path = Path("runs"),
             workers: int = 1, ray: str | None = None, progress: Progress = None
             ) -> TradeoffRun:
    """Run seed 003 §4's grid on ``store`` and return the :class:`TradeoffRun` (its run
    directory holds results.json, report.html and figures/*.png): per load, ``groups``
    client groups of ``clients`` clients each sending ``client_rate`` requests/s and
    waiting for each reply, for ``step_duration`` (text such as ``"30s"`` or seconds), at
    each of ``read_ratios`` with reads of each ``consistency`` (eventual, consistent or
    both; a list or comma-separated text), ``repeats`` times; the names are those of
    :func:`~replicalab.api.loading.load_run` and ``replicalab load tradeoff``. ``workers``
    local processes or a Ray cluster (``ray``: an address or "local") run the steps of a
    simulated store side by side, or a real store's client groups. ``progress`` as for
    :func:`~replicalab.api.runs.probe`. :class:`ParameterError` naming the parameter for
    bad input."""
    from replicalab.api.durations import seconds
    from replicalab.cluster import process
    from replicalab.report.tradeoff import render_tradeoff_report

    plan = TradeoffPlan(store, tuple(_list(groups, int, "groups")), clients, client_rate,
                        tuple(_list(read_ratios, float, "read_ratios")),
                        tuple(_list(consistency, str, "consistency")), repeats,
                        seconds(step_duration, "step_duration"), keyspace, timeout_ms, seed)
    from replicalab.workloads.distributed import RayMissing

    try:
        run = run_tradeoff(plan, out, workers, ray,
                           lambda: ticking(f"load tradeoff on {redact_url(store)}", progress),
                           on_start=process.track)
    except RayMissing as err:
        raise ParameterError(err.parameter, err.problem, err.mentions) from None
    report = render_tradeoff_report(run.results, run.run_dir)
    return TradeoffRun(run.run_dir, report, run.results, run.interrupted, run.error)

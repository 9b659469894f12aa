"""Probe runs from Python: :func:`probe` runs one (the same spec and the same runner as
``replicalab probe``), :func:`open_run` opens one saved by either, and :class:`Run` hands
over its config, typed results, history, figures and summary."""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replicalab.api.history import HistoryTable
from replicalab.api.progress import progress as progress_bar
from replicalab.api.request import COMMON_DEFAULTS, ProbeRequest
from replicalab.api.results import Results
from replicalab.api.summary import summary_rows, summary_title
from replicalab.history.rundir import load_results
from replicalab.stores.base import short_url
from replicalab.workloads.runner import ProbeSpec, recheck, run_probe


class Run:
    """One saved probe run.

    ``path`` is its directory; ``config`` the dict of its ``config.json`` (``spec``: what
    was run; ``store``: the store's declared features); ``spec`` that spec as a
    :class:`~replicalab.workloads.runner.ProbeSpec`; ``results`` the typed
    :class:`~replicalab.api.results.Results`; ``history`` the operations
    (:class:`~replicalab.api.history.HistoryTable`: ``.to_arrow()``, ``.to_pandas()``);
    ``interrupted`` / ``error`` say whether and why it stopped before its end.
    """

    def __init__(self, path: Path, results: dict[str, Any], config: dict[str, Any] | None = None,
                 interrupted: bool = False, error: str = "") -> None:
        self.path = Path(path)
        if config is None:
            try:
                config = json.loads((self.path / "config.json").read_text())
            except (OSError, ValueError) as err:
                raise ValueError(f"{self.path / 'config.json'} cannot be read ({err}); pass a "
                                 "probe run directory") from None
        self.config: dict[str, Any] = config
        # as results.json holds them (lists, not tuples; no NaN), whoever computed them
        self.results = Results.from_json(json.loads(json.dumps(results, allow_nan=False)))
        self.history = HistoryTable(self.path, config)
        self.interrupted = interrupted or bool(config.get("interrupted"))
        self.error = error or str(config.get("error") or "")
        self._figures: dict[str, Any] | None = None

    @property
    def spec(self) -> ProbeSpec:
        """Return what was run: store, workload, options (seconds), workload config."""
        return ProbeSpec.from_json(self.config["spec"])

    @property
    def figures(self) -> dict[str, Any]:
        """Return the run's figures as matplotlib Figures by name, the same as its report's
        (e.g. ``staleness``: freshness vs time since the write, seed 003 Figure 2;
        ``periods``: time to see freshness per period, Figure 3; ``latency``)."""
        if self._figures is None:
            from replicalab.report.probe import probe_page

            page = probe_page(self.results.raw)
            self._figures = {fig_id.removeprefix("fig-"): fig for fig_id, fig in page.figures}
        return self._figures

    def summary(self) -> list[tuple[str, str]]:
        """Return the (measure, value) rows ``replicalab probe`` prints for this run."""
        return summary_rows(self.results.raw)

    def report(self) -> Path:
        """Write the run's self-contained ``report.html`` (and PNG figures) again; return
        its path."""
        from replicalab.report import render_report

        return render_report(self.results.raw, self.path)

    def _repr_html_(self) -> str:
        """Return the summary table as HTML (what a notebook shows for a Run)."""
        rows = "".join(f"<tr><td>{html.escape(m)}</td><td style='text-align:right'>"
                       f"{html.escape(v)}</td></tr>" for m, v in self.summary())
        cut = (f"<p><b>stopped early:</b> {html.escape(self.error or 'interrupted')}</p>"
               if self.interrupted or self.error else "")
        return (f"<table><caption>{html.escape(summary_title(self.results.raw))}</caption>"
                f"<thead><tr><th>measure</th><th>value</th></tr></thead><tbody>{rows}"
                f"</tbody></table>{cut}<p><code>{html.escape(str(self.path))}</code></p>")

    def __repr__(self) -> str:
        r = self.results
        return (f"Run({str(self.path)!r}, {r.workload} on {r.store}, "
                f"{r.ops.reads:,} reads / {r.ops.writes:,} writes)")


def probe(store: str = "sim://simpledb", workload: str = "staleness",
          duration: str | float = "5m", *, consistency: str = "eventual", seed: int = 1,
          write_interval: str | float = "3s", read_rate: float = 50.0,
          period: str | float = "5m", out: str | Path = "runs",
          faults: Sequence[str] = (), cluster: str | None = None, prefix: str | None = None,
          keep: bool = False, progress: bool | None = None, **options: Any) -> Run:
    """Probe ``store`` with ``workload`` and return the saved :class:`Run`.

    Durations are text with a unit (``"1h"``, ``"500ms"``) or seconds as a number;
    ``read_rate`` is reads per second per reader; ``options`` are the workload's own
    options by their Python names (those of ``replicalab probe --help``: ``readers=4``,
    ``ops=200``); ``faults`` are fault texts (``"at=30s crash node=2 for=20s"``). The run
    directory is made under ``out``, exactly as ``replicalab probe --out`` makes it: the
    same options and seed give the same history and results.json. ``progress``: a bar in a
    notebook or on a terminal (None: when there is one). ValueError for bad input.
    """
    common = {**COMMON_DEFAULTS, "consistency": consistency, "duration": duration,
              "write_interval": write_interval, "read_rate": read_rate, "period": period}
    request = ProbeRequest(store, workload, seed, common, dict(options), prefix, keep,
                           list(faults), None, cluster)
    spec = request.spec()
    with progress_bar(f"{workload} on {short_url(spec.store)}", progress) as tick:
        # where a real store's keys go, before the first operation (as the command says)
        saved = run_probe(spec, Path(out), tick,
                          announce=lambda line: print(line, file=sys.stderr))
        if (saved.interrupted or saved.error) and hasattr(tick, "cut_short"):
            tick.cut_short("interrupted" if saved.interrupted else "stopped early")
    return Run(saved.run_dir, saved.results, interrupted=saved.interrupted,
               error=saved.error)


def open_run(path: str | Path, recheck_history: bool = False) -> Run:
    """Return the probe run saved in directory ``path`` (by ``replicalab probe`` or
    :func:`probe`): its results as saved, or with ``recheck_history`` re-checked from its
    history by the same function as ``replicalab report`` (which then saves them).
    ValueError (one line) for a directory that is not a probe run."""
    run_dir = Path(path)
    if not (run_dir / "history.parquet").is_file() or not (run_dir / "config.json").is_file():
        raise ValueError(f"{run_dir} is not a probe run directory (it needs history.parquet "
                         "and config.json); pass one such as runs/<UTC time>-staleness-sim-"
                         "simpledb")
    results = recheck(run_dir) if recheck_history else load_results(run_dir)
    if "workload" not in results:
        raise ValueError(f"{run_dir} is not a probe run (its results.json has no workload); "
                         "open_run reads probe runs")
    try:
        return Run(run_dir, results)
    except ValueError as err:
        if recheck_history:
            raise
        # e.g. a run interrupted before its checks ran: its history holds what they need
        raise ValueError(f"{run_dir}: its results.json is incomplete ({err}); "
                         "open_run(path, recheck_history=True) checks it from its history"
                         ) from None

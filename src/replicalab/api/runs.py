"""Probe runs from Python: :func:`probe` runs one (the same spec and the same runner as
``replicalab probe``), :func:`open_run` opens one saved by either, and :class:`Run` hands
over its config, typed results, history, figures and summary."""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from replicalab.api.history import HistoryTable
from replicalab.api.outcome import Table
from replicalab.api.progress import Progress, cut_short, ticking
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
                 interrupted: bool = False, error: str = "", keys: Any = None) -> None:
        self.path = Path(path)
        if config is None:
            try:
                config = json.loads((self.path / "config.json").read_text())
            except (OSError, ValueError) as err:
                raise ValueError(f"{self.path / 'config.json'} cannot be read ({err}); pass a "
                                 "probe run directory") from None
        self.config: dict[str, Any] = config
        self.checked = bool(results.get("checked", True))
        """False for a simulation interrupted before its checks (``check_interrupted``
        False): its history is saved, ``raw`` says how far it got, ``results`` is None."""
        # as results.json holds them (lists, not tuples; no NaN), whoever computed them
        self.raw: dict[str, Any] = json.loads(json.dumps(results, allow_nan=False))
        self.results = Results.from_json(self.raw) if self.checked else None
        self.history = HistoryTable(self.path, config)
        self.interrupted = interrupted or bool(config.get("interrupted"))
        self.error = error or str(config.get("error") or "")
        self.keys = keys
        """Where a real store's keys went (``KeyCleanup``: ``line()``, ``to_json()``), None
        for a simulation."""
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

            page = probe_page(self.raw)
            self._figures = {fig_id.removeprefix("fig-"): fig for fig_id, fig in page.figures}
        return self._figures

    def summary(self) -> list[tuple[str, str]]:
        """Return the (measure, value) rows ``replicalab probe`` prints for this run."""
        return summary_rows(self.raw)

    def table(self, title: str | None = None) -> Table:
        """Return the summary as the table ``replicalab probe`` prints (``title``: its
        caption, by default workload, store, consistency)."""
        t = Table(summary_title(self.raw) if title is None else title, ["measure", "value"],
                  right=(1,))
        for measure, value in self.summary():
            t.add(measure, value)
        return t

    def report(self) -> Path:
        """Write the run's self-contained ``report.html`` (and PNG figures) again; return
        its path."""
        from replicalab.report import render_report

        return render_report(self.raw, self.path)

    def to_json(self) -> dict[str, Any]:
        """Return results.json with ``run_dir`` and, on a real store, where its keys went
        (``keys``)."""
        return {**self.raw, "run_dir": str(self.path),
                "keys": self.keys.to_json() if self.keys is not None else None}

    def to_pandas(self) -> Any:
        """Return the history as a DataFrame (``history.to_pandas()``)."""
        return self.history.to_pandas()

    def outcome(self, title: str | None = None) -> Any:
        """Return the run as ``replicalab probe`` prints it (report written again): its
        summary table, where a real store's keys went, and how it ended."""
        from replicalab.api.outcome import DONE, INTERRUPTED, STOPPED, Outcome

        status, why = DONE, ""
        if self.interrupted:
            status, why = INTERRUPTED, (f"interrupted; the history so far and a partial "
                                        f"report are in {self.path}")
        elif self.error:
            status, why = STOPPED, (f"the run stopped early ({self.error}); what was "
                                    f"recorded is in {self.path}")
        return Outcome(self.to_json(), None, self.report(), [self.table(title)],
                       [self.keys.line()] if self.keys is not None else [], status, why)

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
        if r is None:
            return f"Run({str(self.path)!r}, not checked)"
        counted = (f"{r.ops.reads:,} reads / {r.ops.writes:,} writes" if r.ops is not None
                   else f"{r.transactions.ok:,} transactions committed"
                   if r.transactions is not None else "not counted")
        return f"Run({str(self.path)!r}, {r.workload} on {r.store}, {counted})"


def probe_request(store: str = "sim://simpledb", workload: str = "staleness",
                  duration: str | float = "5m", *, consistency: str = "eventual",
                  seed: int = 1, write_interval: str | float = "3s", read_rate: float = 50.0,
                  period: str | float = "5m", faults: Sequence[str] = (),
                  faults_file: str | Path | None = None, cluster: str | None = None,
                  prefix: str | None = None, keep: bool = False,
                  **options: Any) -> ProbeRequest:
    """Return the probe asked for (see :func:`probe` for the parameters), from which each
    of its runs (a batch's, with :func:`probe_batch`) is built."""
    common = {**COMMON_DEFAULTS, "consistency": consistency, "duration": duration,
              "write_interval": write_interval, "read_rate": read_rate, "period": period}
    return ProbeRequest(store, workload, seed, common, dict(options), prefix, keep,
                        list(faults), None if faults_file is None else Path(faults_file),
                        cluster)


def probe(store: str = "sim://simpledb", workload: str = "staleness",
          duration: str | float = "5m", *, consistency: str = "eventual", seed: int = 1,
          write_interval: str | float = "3s", read_rate: float = 50.0,
          period: str | float = "5m", out: str | Path = "runs",
          faults: Sequence[str] = (), faults_file: str | Path | None = None,
          cluster: str | None = None, prefix: str | None = None, keep: bool = False,
          progress: Progress = None, announce: Callable[[str], None] | None = None,
          check_interrupted: bool = True, **options: Any) -> Run:
    """Probe ``store`` with ``workload`` and return the saved :class:`Run`.

    Durations are text with a unit (``"1h"``, ``"500ms"``) or seconds as a number;
    ``read_rate`` is reads per second per reader; ``options`` are the workload's own
    options by their Python names (those of ``replicalab probe --help``: ``readers=4``,
    ``ops=200``); ``faults`` are fault texts (``"at=30s crash node=2 for=20s"``),
    ``faults_file`` a TOML file of them. The run directory is made under ``out``, exactly
    as ``replicalab probe --out`` makes it: the same options and seed give the same
    history and results.json. ``progress``: a bar in a notebook or on a terminal (None:
    when there is one), or a callable told (fraction, what). ``announce`` is told where a
    real store's keys go before the first operation (default: stderr).
    ``check_interrupted`` False: a run interrupted is saved unchecked at once, and a Ctrl-C
    during a finished run's checks abandons them (``Run.checked`` False; ``replicalab
    report`` checks it later). :class:`ParameterError` for bad input.
    """
    request = probe_request(store, workload, duration, consistency=consistency, seed=seed,
                            write_interval=write_interval, read_rate=read_rate,
                            period=period, faults=faults, faults_file=faults_file,
                            cluster=cluster, prefix=prefix, keep=keep, **options)
    spec = request.spec()
    # a real store named by scheme://host:port (redacted; the summary names the rest once)
    with ticking(f"{workload} on {short_url(spec.store)}", progress) as tick:
        saved = run_probe(spec, Path(out), tick,
                          announce=announce or (lambda line: print(line, file=sys.stderr)),
                          check_interrupted=check_interrupted)
        if saved.interrupted or saved.error:
            cut_short(tick, "interrupted" if saved.interrupted else "stopped early")
    return Run(saved.run_dir, saved.results, interrupted=saved.interrupted,
               error=saved.error, keys=saved.keys)


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


DEMO_STORE = "sim://simpledb"
DEMO_READS = ("eventual", "consistent")


def demo(duration: str | float = "2h", seed: int = 1, out: str | Path = "runs",
         progress: Progress = None, check_interrupted: bool = True) -> list[Run]:
    """Reproduce seed 003 §2.1.1 on the simulated SimpleDB: a staleness probe of
    ``duration`` (simulated) with eventual reads, then one with consistent reads; return
    their runs (only the first if it was interrupted). ``progress`` as for :func:`probe`
    (a callable is told the fraction of both runs)."""
    runs: list[Run] = []
    with ticking("demo: staleness probe, eventual and consistent reads", progress) as tick:
        for i, consistency in enumerate(DEMO_READS):
            def share(fraction: float, what: str | None = None, i: int = i,
                      consistency: str = consistency) -> None:
                if tick is not None:
                    tick((i + fraction) / len(DEMO_READS), what or f"{consistency} reads")

            runs.append(probe(DEMO_STORE, "staleness", duration, consistency=consistency,
                              seed=seed, out=out, progress=share,
                              check_interrupted=check_interrupted))
            if runs[-1].interrupted or not runs[-1].checked:
                cut_short(tick, "interrupted")
                break
    return runs

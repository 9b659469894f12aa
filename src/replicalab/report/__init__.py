"""Turn a checker's results into a self-contained HTML report and PNG figures.

``render_report(results, run_dir)`` writes ``run_dir/report.html`` (inline CSS, inline SVG
figures, the results as embedded JSON; opens offline) and ``run_dir/figures/*.png``.

``render_report`` is loaded on first use: the package's other pages (a model's, a
scorecard's) need not import the probe report's sections and figures (0.4 s of a
``replicalab model`` command).
"""

from __future__ import annotations

from typing import Any

__all__ = ["render_report"]


def __getattr__(name: str) -> Any:
    if name == "render_report":
        from replicalab.report.probe import render_report

        return render_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Turn a checker's results into a self-contained HTML report and PNG figures.

``render_report(results, run_dir)`` writes ``run_dir/report.html`` (inline CSS, inline SVG
figures, the results as embedded JSON; opens offline) and ``run_dir/figures/*.png``.
"""

from replicalab.report.probe import render_report

__all__ = ["render_report"]

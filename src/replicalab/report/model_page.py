"""The HTML report of a model run: parameters, latency-vs-throughput curves, tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from replicalab.models.base import Curve
from replicalab.report.model_plots import curves_figure
from replicalab.report.page import Page, esc, write_page


def render_model_report(results: Mapping[str, Any], run_dir: Path,
                        curves: Sequence[Curve] = (),
                        figures: Sequence[tuple[str, str, Figure]] = (),
                        kind: str = "model") -> Path:
    """Write ``run_dir/report.html`` and PNGs for a model run; return the HTML path.

    ``results`` holds ``model``, ``title``, ``params`` (name -> value with unit in the name),
    optional ``tables`` ([{caption, header, rows}]) and ``notes``; ``curves`` are drawn as
    latency vs throughput; ``figures`` are extra (id, caption, Figure) triples; ``kind``
    names the page ("model", "comparison").
    """
    page = Page()
    page.add(f'<h1>replicalab {esc(kind)} <span class="sub">· {esc(results["title"])}</span>'
             "</h1>")
    if notes := results.get("notes"):
        page.add('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    params = results.get("params", {})
    if params:
        page.table(["Parameter", "Value"], [[k, v] for k, v in params.items()],
                   caption="Parameters (units in the names: _ms milliseconds, _rps per second)")
    if curves:
        page.heading("Latency vs throughput")
        page.figure("fig-curves", "Mean latency against offered load; dotted lines mark each "
                    "curve's maximum throughput. Saturated loads are not drawn.",
                    curves_figure(curves, results["title"]))
        page.table(["Curve", "Max throughput (req/s)", "How it was found"],
                   [[c.label, f"{c.max_throughput_rps:,.0f}", _capacity_source(c)]
                    for c in curves],
                   caption="A model's maximum throughput is its formula; a twin's is measured "
                           "on its own runs: the highest offered load whose queues do not "
                           "grow")
    for fig_id, caption, fig in figures:
        page.figure(fig_id, caption, fig)
    for t in results.get("tables", []):
        page.table(t["header"], t["rows"], caption=t.get("caption", ""))
    return write_page(page, results, f"replicalab · {kind} · {results['title']}", run_dir)


def _capacity_source(c: Curve) -> str:
    """Return how ``c``'s maximum throughput was obtained, in a few words."""
    cap = c.extra.get("capacity")
    if not cap:
        return "model (closed form)"
    if len(cap["trials"]) == 1:
        return (f"twin, utilisation law on a pilot run: busiest node {cap['bottleneck']} "
                f"works {cap['work_ms']:.4f} ms per request")
    return (f"twin, measured: highest sustained load of {len(cap['trials'])} runs; "
            f"bottleneck {cap['bottleneck']}, its work {100 * cap['utilisation']:.0f} % of "
            "the run")

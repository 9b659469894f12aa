"""The HTML toolkit every report uses: escaping and number formats, ``Page`` (escaped
fragments plus the figures to save) and ``write_page`` (one self-contained report.html with
the results embedded, and PNG figures)."""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from matplotlib.figure import Figure

from replicalab import __version__

PNG_DPI = 120
# All-None metadata drops matplotlib's <metadata> block (dates, creator URL) from the SVG.
_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
# Inline SVGs share one document, so their ids (and references to them) get a per-figure prefix.
_SVG_ID = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')
def esc(value: object) -> str:
    """Return ``value`` as text safe to place in HTML content or attributes."""
    return html.escape(str(value))


def missing(x: float | None) -> bool:
    """Return True if ``x`` is no figure: None or NaN."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def pct(x: float | None, digits: int = 2) -> str:
    """Return fraction ``x`` (0..1) as a percentage string, or "n/a"."""
    return "n/a" if missing(x) else f"{x * 100:.{digits}f}%"


def num(x: float | None, digits: int = 1) -> str:
    """Return ``x`` with thousands separators and ``digits`` decimals, or "n/a"."""
    return "n/a" if missing(x) else f"{x:,.{digits}f}"


def _jsonable(obj: Any) -> Any:
    # Checkers may hand over numpy values or NaN; JSON.parse accepts neither.
    if hasattr(obj, "tolist"):
        obj = obj.tolist()
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def results_json(results: Mapping[str, Any]) -> str:
    """Return ``results`` as JSON safe inside a <script> element (no ``</`` or ``<!--``)."""
    text = json.dumps(_jsonable(results), ensure_ascii=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("<!--", "\\u003c!--")


def svg_markup(fig: Figure, id_prefix: str) -> str:
    """Return ``fig`` as an inline <svg> element (no XML prolog) with ids prefixed."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_SVG_METADATA)
    text = buf.getvalue()
    return _SVG_ID.sub(lambda m: f"{m[1]}{id_prefix}-{m[2]}", text[text.index("<svg") :])


class Page:
    """Accumulates escaped HTML fragments and the figures to save as PNG."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.figures: list[tuple[str, Figure]] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def heading(self, text: str, level: int = 2) -> None:
        self.add(f"<h{level}>{esc(text)}</h{level}>")

    def para(self, text: str, cls: str = "") -> None:
        self.add(f'<p class="{cls}">{esc(text)}</p>' if cls else f"<p>{esc(text)}</p>")

    def figure(self, fig_id: str, caption: str, fig: Figure) -> None:
        self.figures.append((fig_id, fig))
        self.add(
            f'<figure id="{fig_id}">{svg_markup(fig, fig_id)}'
            f"<figcaption>{esc(caption)}</figcaption></figure>"
        )

    def table(
        self,
        header: Sequence[str],
        rows: Iterable[Sequence[object]],
        caption: str = "",
        numeric_from: int = 1,
    ) -> None:
        def cells(row: Sequence[object], tag: str) -> str:
            return "".join(
                f'<{tag} class="num">{esc(c)}</{tag}>'
                if i >= numeric_from
                else f"<{tag}>{esc(c)}</{tag}>"
                for i, c in enumerate(row)
            )

        body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in rows)
        cap = f"<caption>{esc(caption)}</caption>" if caption else ""
        self.add(
            f'<div class="table-wrap"><table>{cap}<thead><tr>{cells(header, "th")}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )


def write_page(page: Page, results: Mapping[str, Any], title: str, run_dir: Path) -> Path:
    """Write ``page`` as ``run_dir/report.html`` (results embedded) and its figures as PNGs
    under ``run_dir/figures``; return the path of report.html."""
    run_dir = Path(run_dir)
    page.add(
        f"<footer>replicalab {esc(__version__)} · results schema version "
        f"{esc(results['schema_version'])} · the full results are embedded in this file as JSON "
        "(<code>script#results-data</code>).</footer>"
    )
    package = resources.files(__package__)
    text = Template(package.joinpath("template.html").read_text(encoding="utf-8")).substitute(
        title=esc(title),
        css=package.joinpath("report.css").read_text(encoding="utf-8"),
        body="\n".join(page.parts),
        results_json=results_json(results),
    )
    figures_dir = run_dir / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    for fig_id, fig in page.figures:
        fig.savefig(figures_dir / f"{fig_id.removeprefix('fig-')}.png", format="png", dpi=PNG_DPI)
    out = run_dir / "report.html"
    out.write_text(text, encoding="utf-8")
    return out

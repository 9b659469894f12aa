"""What a verb of the API returns when it has run: an :class:`Outcome` (its results as saved
in ``results.json``, where they are, its report, its tables, the lines worth saying, and
how it ended), with tables as data (:class:`Table`: ``to_json()``, ``to_pandas()``). The
command line prints exactly these; a notebook shows the tables as HTML."""

from __future__ import annotations

from dataclasses import field, replace
from pathlib import Path
from typing import Any

from replicalab.records import record

DONE, INTERRUPTED, STOPPED, FAILED = "done", "interrupted", "stopped", "failed"
INCONCLUSIVE = "inconclusive"
"""How a run ended: done; interrupted (Ctrl-C: what was recorded is saved); stopped early
by a problem (``why`` says which); failed, the run's own verdict (a model off its
tolerance, a lost write); inconclusive, a verdict the run's own noise could not bear."""


PIPED_PROSE = 80
"""Piped: a value longer than this (terminal cells) is prose, such as a counterexample
explained; the command line prints it whole on a line of its own under the table, which
would otherwise pad every row to its width (a register summary's rows were 400 columns
wide)."""


@record
class Table:
    """A table as data: ``caption``, ``header`` and ``rows`` of strings.

    ``wrap`` lists the columns whose cells are labels that may wrap at spaces on a narrow
    terminal (default: the first); every other cell is a value and is never broken.
    ``right`` lists right-justified columns (default: none).
    """

    caption: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    wrap: tuple[int, ...] = (0,)
    right: tuple[int, ...] = ()

    def add(self, *cells: Any) -> None:
        """Append a row (cells converted with ``str``)."""
        if len(cells) != len(self.header):
            raise ValueError(f"row of {len(cells)} cells for {len(self.header)} columns")
        self.rows.append([str(c) for c in cells])

    def to_json(self) -> dict[str, Any]:
        """Return {"caption", "header", "rows"}: what ``--json`` carries for this table."""
        return {"caption": self.caption, "header": list(self.header),
                "rows": [list(r) for r in self.rows]}

    @classmethod
    def from_json(cls, doc: dict[str, Any], wrap: tuple[int, ...] = (0,),
                  right: tuple[int, ...] = ()) -> Table:
        """Return the table of a ``{"caption", "header", "rows"}`` document."""
        return cls(str(doc.get("caption", "")), [str(h) for h in doc["header"]],
                   [[str(c) for c in r] for r in doc["rows"]], wrap, right)

    def prose_apart(self, limit: int = PIPED_PROSE) -> tuple[Table, list[str]]:
        """Return this table with its prose values (longer than ``limit`` terminal cells;
        not in label columns) replaced by "(below)", and the lines that print them whole
        under it: ``label: value``."""
        from rich.cells import cell_len

        moved: list[str] = []
        rows = []
        for r in self.rows:
            row = list(r)
            for i, c in enumerate(r):
                if i > 0 and i not in self.wrap and max(
                        (cell_len(line) for line in c.splitlines()), default=0) > limit:
                    label = r[0] if len(r) == 2 else f"{r[0]}, {self.header[i]}"
                    moved.append(f"{label}: {c}")
                    row[i] = "(below)"
            rows.append(row)
        return replace(self, rows=rows), moved

    def to_pandas(self) -> Any:
        """Return the table as a pandas DataFrame of text, its header the columns."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.header)

    def _repr_html_(self) -> str:
        import html  # a notebook's: the command line does not load it

        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                       for r in self.rows)
        return (f"<table><caption>{html.escape(self.caption)}</caption><thead><tr>{head}"
                f"</tr></thead><tbody>{body}</tbody></table>")


@record
class Outcome:
    """A verb's run, finished: ``results`` (what its ``results.json`` holds, or what it
    answered), ``run_dir`` and ``report`` (None when it made none), ``tables`` (what the
    command prints), ``remarks`` (lines to say after them), ``status`` (DONE,
    INTERRUPTED, STOPPED, FAILED) and ``why`` (one line when it is not DONE)."""

    results: dict[str, Any]
    run_dir: Path | None = None
    report: Path | None = None
    tables: list[Table] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)
    status: str = DONE
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the results with ``run_dir``, ``report`` (paths as text, where there are
        some) and ``tables`` ({"caption", "header", "rows"} each; results that hold tables
        of their own keep theirs): what ``--json`` prints."""
        out = dict(self.results)
        if self.run_dir is not None:
            out["run_dir"] = str(self.run_dir)
        if self.report is not None:
            out["report"] = str(self.report)
        if self.tables and "tables" not in out:
            out["tables"] = [t.to_json() for t in self.tables]
        return out

    def to_pandas(self, table: int = 0) -> Any:
        """Return table number ``table`` as a pandas DataFrame (see :meth:`Table.to_pandas`)."""
        return self.tables[table].to_pandas()

    def _repr_html_(self) -> str:
        import html

        lines = "".join(f"<p>{html.escape(line)}</p>" for line in self.remarks)
        where = f"<p><code>{html.escape(str(self.run_dir))}</code></p>" if self.run_dir else ""
        return "".join(t._repr_html_() for t in self.tables) + lines + where

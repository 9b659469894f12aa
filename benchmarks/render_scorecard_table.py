"""Re-render the documented scorecard chart from a run's ``scorecard.json``: one Markdown row
per store and property with the cell's grade and its value sentence, exactly as the run
saved them, so the chart in the docs is regenerated from data and never typed by hand.

    python benchmarks/render_scorecard_table.py runs/20261127T125544Z-scorecard-.../
    python benchmarks/render_scorecard_table.py docs/data/scorecard-2026-11-27.json \\
        --into docs/scorecard.md --into README.md       # rewrite the marked blocks
    python benchmarks/render_scorecard_table.py docs/data/scorecard-2026-11-27.json \\
        --check docs/scorecard.md                       # exit 1 if the doc differs

``--patch OTHER`` (repeatable): the cells of another run (a store's properties re-measured
after its first run failed) replace the main run's for the same store and property; each
such cell's property is marked with a dagger (†) in the table.

A document carries the table between ``<!-- scorecard-table: begin -->`` and
``<!-- scorecard-table: end -->``; ``--into`` replaces what is between them, ``--check``
says whether it already matches. Bad input: one line naming the fix, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

BEGIN = "<!-- scorecard-table: begin -->"
END = "<!-- scorecard-table: end -->"


def load_scorecard(path: Path) -> dict[str, Any]:
    """Return the scorecard saved at ``path`` (a run directory or a scorecard.json file);
    ValueError naming the fix if it is not one."""
    file = path / "scorecard.json" if path.is_dir() else path
    try:
        sc = json.loads(file.read_text())
    except FileNotFoundError:
        raise ValueError(f"{file} does not exist; pass a scorecard run directory or its "
                         "scorecard.json") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{file} is not valid JSON ({err}); pass a scorecard.json") from None
    if not isinstance(sc, dict) or not {"kinds", "properties", "cells"} <= set(sc):
        raise ValueError(f"{file} is not a scorecard.json (no kinds/properties/cells); pass "
                         "the one `replicalab scorecard` wrote")
    return sc


def _text(s: str) -> str:
    # a cell's sentence inside a Markdown table: no line breaks, no column separators
    return " ".join(s.split()).replace("|", "\\|")


def rows(sc: dict[str, Any], patches: tuple[dict[str, Any], ...] = ()
         ) -> list[tuple[str, str, str, str, bool]]:
    """Return (store, property, grade, value, patched) per cell in the chart's order: stores
    as ``kinds`` lists them, properties as ``properties`` does; a cell of a later run in
    ``patches`` replaces the main run's (patched True); a cell no run reached reads "not
    measured (run interrupted)"."""
    by = {(c["store"], c["prop"]): (c, False) for c in sc["cells"]}
    for other in patches:
        by.update({(c["store"], c["prop"]): (c, True) for c in other["cells"]})
    out = []
    for store in sc["kinds"]:
        for prop in sc["properties"]:
            c, patched = by.get((store, prop), (None, False))
            out.append((store, prop, c["grade"], c["value"], patched) if c else
                       (store, prop, "-", "not measured (run interrupted)", False))
    return out


def merged(sc: dict[str, Any], patches: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """Return ``sc`` with the cells of ``patches`` in place of its own for the same store
    and property (the chart the table shows, for the report's renderer)."""
    by = {(c["store"], c["prop"]): c for c in sc["cells"]}
    for other in patches:
        by.update({(c["store"], c["prop"]): c for c in other["cells"]})
    cells = [by[(k, p)] for k in sc["kinds"] for p in sc["properties"] if (k, p) in by]
    return {**sc, "cells": cells, "errors": {}}


def table(sc: dict[str, Any], patches: tuple[dict[str, Any], ...] = ()) -> str:
    """Return the Markdown table (store, property, grade, cell), the store named on its
    first row only, a re-measured cell's property marked †."""
    lines = ["| store | property | grade | cell |", "|---|---|---|---|"]
    last = None
    for store, prop, grade, value, patched in rows(sc, patches):
        name = f"`{store}`" if store != last else ""
        last = store
        lines.append(f"| {name} | {prop}{' †' if patched else ''} | {grade} | "
                     f"{_text(value)} |")
    return "\n".join(lines) + "\n"


def summary(sc: dict[str, Any]) -> str:
    """Return one line on what the run was: stores, regions, full or quick, seed, wall
    time (min s), interrupted or not."""
    plan = sc.get("plan", {})
    wall = float(sc.get("wall_s", 0.0))
    m, s = divmod(round(wall), 60)
    n = len(sc["kinds"])
    return (f"{n} store{'' if n == 1 else 's'} on {sc.get('regions', '?')}, "
            f"{'quick' if plan.get('quick') else 'full'} plan, seed {sc.get('seed', '?')}, "
            f"{len(sc['cells'])} cells in {m} min {s:02d} s"
            f"{' (interrupted)' if sc.get('interrupted') else ''}")


def replace_block(doc: str, block: str, where: str) -> str:
    """Return ``doc`` with the text between the begin and end markers replaced by
    ``block``; ValueError naming the fix if the markers are missing."""
    i, j = doc.find(BEGIN), doc.find(END)
    if i < 0 or j < i:
        raise ValueError(f"{where} has no '{BEGIN}' ... '{END}' block; add the two markers "
                         "where the table goes")
    return doc[:i + len(BEGIN)] + "\n" + block + doc[j:]


def main(argv: list[str] | None = None) -> int:
    """Print (or write into documents, or check) the table; return the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scorecard", type=Path, help="run directory or scorecard.json")
    ap.add_argument("--patch", type=Path, action="append", default=[],
                    help="a later run whose cells replace the main run's (repeatable)")
    ap.add_argument("--report", type=Path,
                    help="directory that receives the merged chart's report.html (and its "
                         "scorecard.json), drawn by replicalab's own renderer")
    ap.add_argument("--into", type=Path, action="append", default=[],
                    help="document whose marked block receives the table (repeatable)")
    ap.add_argument("--check", type=Path, action="append", default=[],
                    help="document whose marked block must equal the table (repeatable)")
    a = ap.parse_args(argv)
    try:
        sc = load_scorecard(a.scorecard)
        patches = tuple(load_scorecard(p) for p in a.patch)
        block = table(sc, patches)
        stale = []
        for doc in a.check:
            text = doc.read_text()
            if replace_block(text, block, str(doc)) != text:
                stale.append(str(doc))
        for doc in a.into:
            doc.write_text(replace_block(doc.read_text(), block, str(doc)))
        if a.report is not None:
            from replicalab.report.scorecard import render_scorecard

            both = merged(sc, patches)
            a.report.mkdir(parents=True, exist_ok=True)
            (a.report / "scorecard.json").write_text(json.dumps(both, indent=1) + "\n")
            render_scorecard(both, a.report)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if stale:
        print(f"differs from {a.scorecard}: {', '.join(stale)}; re-run with --into",
              file=sys.stderr)
        return 1
    if not a.into and not a.check and a.report is None:
        print(f"<!-- {summary(sc)} -->")
        for p, other in zip(a.patch, patches, strict=True):
            print(f"<!-- † {p.name}: {summary(other)} -->")
        print(block, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

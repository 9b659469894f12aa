"""benchmarks/render_scorecard_table.py: the documented chart comes from a scorecard.json,
later runs' cells replace the main run's and are marked, a document's marked block is
rewritten or checked, bad input is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from replicalab.experiments.cells import Cell

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "render_scorecard_table.py"


def _cell(store: str, prop: str, grade: str, value: str) -> dict[str, object]:
    # a whole cell as the scorecard saves it (the report's renderer reads every field)
    return Cell(store, prop, value, grade, "the promise", "https://example.org/doc").to_json()


def _save(path: Path, kinds: list[str], cells: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"kinds": kinds, "properties": ["latency", "availability"],
                                "regions": "dc3", "plan": {"quick": False}, "seed": 1,
                                "wall_s": 125.0, "cells": cells}))
    return path


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def test_table_from_data_with_patches_marked_and_docs_kept_in_step(tmp_path: Path):
    main = _save(tmp_path / "main.json", ["redis", "etcd"], [
        _cell("redis", "latency", "red", "reads 114 ms | writes 101 ms"),
        _cell("redis", "availability", "grey", "not measured: the run failed"),
        _cell("etcd", "latency", "yellow", "reads 185 ms\n  writes 188 ms")])
    patch = _save(tmp_path / "redis.json", ["redis"], [
        _cell("redis", "availability", "red", "eventual reads in US-E served 0%")])
    out = _run(main, "--patch", patch)
    assert out.returncode == 0, out.stderr
    rows = [r for r in out.stdout.splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert rows == [
        "| `redis` | latency | red | reads 114 ms \\| writes 101 ms |",
        "|  | availability † | red | eventual reads in US-E served 0% |",
        "| `etcd` | latency | yellow | reads 185 ms writes 188 ms |",
        "|  | availability | - | not measured (run interrupted) |"]
    assert "2 stores on dc3, full plan, seed 1, 3 cells in 2 min 05 s" in out.stdout

    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- scorecard-table: begin -->\nold\n"
                   "<!-- scorecard-table: end -->\nafter\n")
    assert _run(main, "--patch", patch, "--check", doc).returncode == 1  # stale
    assert _run(main, "--patch", patch, "--into", doc).returncode == 0
    text = doc.read_text()
    assert "old" not in text and text.startswith("before\n") and text.endswith("after\n")
    assert "availability † | red" in text
    assert _run(main, "--patch", patch, "--check", doc).returncode == 0  # in step now
    assert _run(main, "--check", doc).returncode == 1  # without the patch it differs

    report = tmp_path / "merged"
    assert _run(main, "--patch", patch, "--report", report).returncode == 0
    merged = json.loads((report / "scorecard.json").read_text())
    assert [c["grade"] for c in merged["cells"]] == ["red", "red", "yellow"]
    assert "eventual reads in US-E served 0%" in (report / "report.html").read_text()


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path):
    nodoc = tmp_path / "plain.md"
    nodoc.write_text("no markers here\n")
    main = _save(tmp_path / "main.json", ["redis"], [])
    (tmp_path / "junk.json").write_text("{")
    for args in ((tmp_path / "missing.json",), (tmp_path / "junk.json",),
                 (main, "--into", nodoc)):
        out = _run(*args)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")
        assert "Traceback" not in out.stderr
    assert nodoc.read_text() == "no markers here\n"  # nothing written on bad input

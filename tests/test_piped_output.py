"""Piped output keeps every line whole: each verb's summary, printed not on a terminal, is
grepped for every phrase its tables hold (caption, headers, cells: store URLs, verdicts
such as "NOT linearizable"), each of which must sit on one line, unbroken.

The tables are caught on their way to the one output layer (``cli/output.py``'s
``render``); each verb runs in this process, piped (not a terminal), as `... | cat` runs it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicalab.cli import output
from replicalab.cli.main import app
from replicalab.cli.output import TableData, render

LONG_URL = ("redis://127.0.0.1:40001?replicas=127.0.0.1:40002,127.0.0.1:40003&regions=dc3"
            "&node_regions=US-E,US-W,EU")


def phrases(t: TableData) -> list[str]:
    """Return what a reader may grep for in a table: caption, headers, every cell."""
    return [p for p in (t.caption, *t.header, *(c for r in t.rows for c in r))
            if p and "\n" not in p]


def broken(t: TableData, text: str) -> list[str]:
    """Return the phrases of ``t`` that are not whole on some line of ``text``."""
    lines = text.splitlines()
    return [p for p in phrases(t) if not any(p in line for line in lines)]


def test_a_caption_wider_than_its_table_stays_on_one_line():
    t = TableData(f"redis-dc3 (redis, dc3) — {LONG_URL}", ["node", "state"], wrap=(1,))
    t.add("n0", "primary, 2 replicas connected")
    t.add("n1", "replica, link up, 0 bytes behind")
    text = render(t, None)
    assert broken(t, text) == [], text
    assert text.splitlines()[0] == t.caption


def test_prose_in_a_summary_goes_under_the_table_not_into_its_width():
    """Issue 40: a register summary piped padded every row to 400 columns for the
    counterexample explained in one of them; the prose now follows the table, whole."""
    why = ("process 5 read 9.8 at 3,635.4 ms although the write of 11.6 by process 6 "
           "completed at 3,634.2 ms and no write of 9.8 can come after it " * 3).strip()
    t = TableData("register on sim://simpledb (eventual)", ["measure", "value"], right=(1,))
    t.add("linearizable (kv model)", "NO")
    t.add("why register/0-k0/v", why)
    t.add("operations checked", "319")
    text = render(t, None)
    assert broken(t, text) == [], text
    table = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) < 80, text
    assert f"why register/0-k0/v: {why}" in text.splitlines()


@pytest.fixture
def tables(monkeypatch: pytest.MonkeyPatch) -> list[tuple[TableData, str]]:
    seen: list[tuple[TableData, str]] = []

    def spy(t: TableData, width: int | None) -> str:
        text = real(t, width)
        seen.append((t, text))
        return text

    real = output.render
    monkeypatch.setattr(output, "render", spy)
    return seen


def run(*args: object, codes: tuple[int, ...] = (0,)) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code in codes, (args, res.exit_code, res.stderr)
    return res.stdout


def test_every_verbs_piped_summary_keeps_its_phrases_whole(tables, tmp_path: Path):
    out = tmp_path / "runs"
    printed = [
        run("probe", "--duration", "20s", "--out", out),
        run("probe", "--store", "sim://quorum?n=3&r=1&w=1", "--workload", "register",
            "--duration", "20s", "--out", out / "reg"),
    ]
    (reg,) = (out / "reg").iterdir()
    printed += [
        run("check", reg, codes=(0, 1)),
        run("report", reg),
        run("queue", "run", "--messages", "300", "--out", out / "q"),
        run("placement", "live", "--duration", "2s", "--objects", "6", "--out", out),
        run("load", "run", "--rate", "200", "--duration", "2s", "--out", out),
        run("model", "pbs", "--trials", "2000", "--out", out),
        run("model", "paxos-lan", "--out", out),
    ]
    assert len(tables) >= len(printed)
    for t, text in tables:
        assert broken(t, text) == [], (t.caption, text)
    whole = "\n".join(printed)
    assert "NOT linearizable" in whole  # the verdict someone greps for, whole
    for line in whole.splitlines():
        # no line ends inside a word that the next line finishes (a wrapped phrase)
        assert not re.search(r"[a-z]-$", line.rstrip()), line


@pytest.mark.integration
def test_cluster_status_piped_keeps_the_store_url_whole(redis_dc3, tables, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    c, root = redis_dc3
    monkeypatch.setenv("REPLICALAB_STATE_DIR", str(root))  # where the fixture's state is
    monkeypatch.chdir(tmp_path)
    text = run("cluster", "status", c.name)
    ((t, rendered),) = tables
    assert broken(t, rendered) == [], rendered
    assert any(c.url in line for line in text.splitlines()), text

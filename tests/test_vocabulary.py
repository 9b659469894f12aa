"""One vocabulary on the command line: ``--store`` is a URL (kinds go in ``--kind`` or
``--kinds``), durations take units (bare numbers and the old ``--x-ms`` options keep working,
with a note), ``--out`` everywhere, and placeholders in ``--help`` that read as words."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replicalab.cli.main import VERBS, app, load_verb


def commands() -> list[tuple[str, Any]]:
    """Return (path, click command) of every command and sub-command."""
    out = []

    def walk(path: str, cmd: Any) -> None:
        subs = getattr(cmd, "commands", {})
        if not subs:
            out.append((path, cmd))
        for name, sub in subs.items():
            walk(f"{path} {name}", sub)

    for name in dict.fromkeys(v.name for v in VERBS):
        walk(name, load_verb(name))
    return out


def test_placeholders_read_as_words_and_names_are_one_vocabulary():
    seen = commands()
    assert len(seen) > 40
    bad, stores, outputs = [], [], []
    for path, cmd in seen:
        for p in cmd.params:
            if p.hidden or getattr(p, "is_flag", False):
                continue
            shown = p.metavar or ""
            if not re.fullmatch(r"[A-Z][A-Z0-9_=]*|[a-z|]+", shown):
                bad.append(f"{path} {p.opts}: {shown!r}")
            if "--store" in p.opts and p.metavar not in ("URL", "DC=URL"):
                stores.append(path)
            if "--output" in p.opts:
                outputs.append(path)
    assert bad == [], bad
    assert stores == [], f"--store that is not a URL: {stores}"
    assert outputs == [], f"--output instead of --out: {outputs}"


def run(*args: object) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, res.stdout, res.stderr


def test_old_names_and_bare_numbers_keep_working_with_a_note(tmp_path: Path):
    code, _, err = run("placement", "live", "--store", "sim", "--think-ms", "5",
                       "--duration", "2", "--objects", "4", "--out", tmp_path)
    assert code == 0, err
    assert "note: --store sim is deprecated here; use --kind sim" in err
    assert "note: --think-ms is deprecated; use --think 5ms" in err
    assert "note: --duration 2: a number without a unit is read as 2s" in err
    code, _, err = run("placement", "live", "--kind", "sim", "--think", "5ms", "--duration",
                       "2s", "--objects", "4", "--out", tmp_path)
    assert code == 0 and "note:" not in err, err


@pytest.mark.parametrize(("args", "message"), [
    (["placement", "live", "--kind", "sim", "--store", "redis://127.0.0.1:1"], "not both"),
    (["placement", "live", "--think", "5ms", "--think-ms", "5"], "old name of --think"),
    (["load", "sla", "--ramp", "100:200:100"], "needs --sla-p99"),
    (["model", "pbs", "--apply-ms", "-1"], "must not be negative"),
])
def test_bad_vocabulary_is_one_line(args: list[str], message: str):
    code, _, err = run(*args)
    assert code == 2 and err.count("\n") == 1 and message in err, err
